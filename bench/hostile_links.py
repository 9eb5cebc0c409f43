"""The links report: rounds of planted symbolic links, FIFOs and folders under every root
fixture-store writes or reads below, each round running the real command. The rounds of a
surface go through its places and kinds of plant in a random order (ten rounds cover all of
them) and the new object's bytes are random.

Not a timed benchmark: it prints, per surface, the rounds run and what must never happen; every
count must be zero, and the exit status says whether they all were:

- objects lost: after the round the planted thing is removed (and what it displaced put back),
  then ``verify --full`` must pass;
- bytes outside: a file created, changed or removed in the victim folder, which is outside every
  root and which every planted link points into;
- tracebacks, hangs (a round that does not end within ``--timeout`` seconds) and exits other
  than the surface's expected ones (a refusal, or the failing parity check for a dump, or the
  work done where the mechanism replaces a link by a file of its own).

Surfaces and their places (the tests of each case are in ``tests/objects/test_anchored.py``,
``tests/remotes/test_folder.py``, ``tests/parity/test_assertion.py``,
``tests/registry/test_shards.py``):

- ``store``: ``tmp/``, ``objects/``, the new object's shard folder and name; ``add``;
- ``dump``: ``<dump>/<family>``, ``<dump>/<family>/<stem>.{candidate,reference}.npz``;
  ``assert_parity(..., dump=DIR)`` with a failing candidate;
- ``remote push`` / ``remote pull`` / ``remote fetch``: a folder remote's ``tmp/``, ``objects/``,
  the object's shard folder and key;
- ``registry``: a sharded family's folder and one of its shards, an unsharded family's file;
  ``add``;
- ``tree checkout``: ``trees/``, the checkout folder, a member of it; ``Fixtures.tree``.

    uv run python -m bench.hostile_links                  # 20 rounds of each surface
    uv run python -m bench.hostile_links --rounds 100 --json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np
from click.testing import CliRunner

from fixture_store import ingest
from fixture_store import registry as registry_mod
from fixture_store.access import Fixtures
from fixture_store.cli import main as cli
from fixture_store.errors import FixtureStoreError
from fixture_store.objects import digests
from fixture_store.objects.store import Store
from fixture_store.parity.assertion import ParityError, assert_parity
from fixture_store.registry import shards
from tests.support.cli import add_file_and_case
from tests.support.records import local_record

COUNTS = ("objects_lost", "bytes_outside", "tracebacks", "hangs", "unexpected_exits")
VICTIM = {"notes.txt": b"the victim's notes\n", "keys/id_key": b"do not touch\n"}
PARITY = "equimo/dinov2_reference.npz"
BIG = 60  # records of the sharded family (shards above 4 KiB while the report runs)
MAX_NOTES = 12
FAILED = "parity failed"  # the outcome of a dump round whose (failing) check ran to its end


class Hang(Exception):
    """A round ran past its timeout."""


@dataclass
class Round:
    """The folders of one round: a project with ``fam/a``, ``fam/case``, a sharded ``big`` and
    an array reference registered, its store, a folder remote, a dump folder and the victim."""

    root: Path
    new: bytes = b""

    @property
    def project(self) -> Path:
        return self.root / "project"

    @property
    def store(self) -> Store:
        return Store.at(self.root / "store")

    @property
    def remote(self) -> Path:
        return self.root / "remote"

    @property
    def dump(self) -> Path:
        return self.root / "dump"

    @property
    def victim(self) -> Path:
        return self.root / "victim"

    def object_key(self) -> str:
        """The new object's path below a store or a folder remote."""
        hexa = digests.of_bytes(self.new).hex
        return f"objects/sha256/{hexa[:2]}/{hexa[2:]}"


# -- running a command: an exit code, or "traceback" / "hang" -----------------------------------
def _cli(*args: str) -> int | str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=True)
    if isinstance(result.exception, Hang):
        return "hang"
    if "Traceback" in result.output + result.stderr or not isinstance(
        result.exception, SystemExit | None
    ):
        return "traceback"
    return result.exit_code


def _library(call: Callable[[], object]) -> int | str:
    try:
        call()
    except Hang:
        return "hang"
    except ParityError:
        return FAILED
    except FixtureStoreError as exc:
        return exc.exit_code
    except Exception:
        return "traceback"
    return 0


@contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    def ring(_signum: int, _frame: FrameType | None) -> None:
        raise Hang

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# -- surfaces: the places to plant at, the command, the outcomes expected -----------------------
Command = Callable[[Round, str], "int | str"]


def _remote_verb(verb: str) -> Command:
    return lambda r, _place: _cli(verb, "--all", "--remote", str(r.remote))


def _add(_r: Round, place: str) -> int | str:
    family = "big" if place.startswith("shard") else "fam"
    return _cli("add", "data/new.bin", "--name", f"{family}/new", "--kind", "fixture")


def _dump(r: Round, _place: str) -> int | str:
    fixtures = Fixtures(r.store, registry_mod.load(r.project))
    bad = {k: v + np.float32(1) for k, v in fixtures.arrays(PARITY).items()}
    return _library(lambda: assert_parity(PARITY, bad, fixtures=fixtures, dump=r.dump))


def _tree(r: Round, _place: str) -> int | str:
    return _library(lambda: Fixtures(r.store, registry_mod.load(r.project)).tree("fam/case"))


def _key_places(root: Path, r: Round) -> dict[str, Path]:
    key = r.object_key()
    return {"tmp/": root / "tmp", "objects/": root / "objects",
            "shard folder": root / key.rsplit("/", 1)[0], "object": root / key}  # fmt: skip


def _dump_places(r: Round) -> dict[str, Path]:
    family = r.dump / "equimo"
    return {"<family>": family,
            "candidate file": family / "dinov2_reference.candidate.npz",
            "reference file": family / "dinov2_reference.reference.npz"}  # fmt: skip


def _registry_places(r: Round) -> dict[str, Path]:
    provenance = r.project / "provenance"
    return {"shard folder": provenance / "big",
            "shard file": provenance / "big" / f"{shards.shard_of('big/new')}.json",
            "family file": provenance / "fam.json"}  # fmt: skip


def _tree_places(r: Round) -> dict[str, Path]:
    trees = r.root / "store" / "trees"
    key = registry_mod.load(r.project).families["fam"].records["fam/case"].object.hex
    return {"trees/": trees, "checkout": trees / key, "member": trees / key / "model.onnx"}


@dataclass(frozen=True)
class Surface:
    places: Callable[[Round], dict[str, Path]]
    run: Command
    # The right outcomes: a refusal (1: failed, 2: usage), the failing parity check of a dump,
    # or 0 where the command does its work without the planted thing (it replaces a planted
    # link by a file of its own, or never needs that place: a push writes its temp file beside
    # the object, a fetch falls back to the pinned source).
    expected: frozenset[int | str]
    new_where: str = "project"  # the new bytes: only in the project, also stored, also pushed
    tree: bool = False  # the tree is checked out once before the plant


SURFACES: dict[str, Surface] = {
    "store (add)": Surface(lambda r: _key_places(r.root / "store", r), _add,
                           frozenset({0, 1, 2})),
    "dump (assert_parity)": Surface(_dump_places, _dump, frozenset({FAILED, 2})),
    "remote push": Surface(lambda r: _key_places(r.remote, r), _remote_verb("push"),
                           frozenset({0, 1, 2}), new_where="store"),
    "remote pull": Surface(lambda r: _key_places(r.remote, r), _remote_verb("pull"),
                           frozenset({0, 1, 2}), new_where="remote"),
    "remote fetch": Surface(lambda r: _key_places(r.remote, r), _remote_verb("fetch"),
                            frozenset({0, 1, 2}), new_where="remote"),
    "registry (add)": Surface(_registry_places, _add, frozenset({1, 2})),
    "tree checkout": Surface(_tree_places, _tree, frozenset({0, 1, 2}), tree=True),
}  # fmt: skip
KINDS = ("link to a folder", "link to a file", "fifo", "folder")
FOLDERS = {"tmp/", "objects/", "shard folder", "<family>", "trees/", "checkout"}


# -- one round ------------------------------------------------------------------------------------
@contextmanager
def _inside(r: Round) -> Iterator[None]:
    """The project as the working folder, its store as the store, no user configuration."""
    saved = {k: os.environ.get(k) for k in ("FIXTURE_STORE_DIR", "FIXTURE_STORE_CONFIG")}
    os.environ["FIXTURE_STORE_DIR"] = str(r.root / "store")
    os.environ["FIXTURE_STORE_CONFIG"] = str(r.root / "user.toml")
    cwd = Path.cwd()
    (r.project / "provenance").mkdir(parents=True, exist_ok=True)
    os.chdir(r.project)
    try:
        yield
    finally:
        os.chdir(cwd)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _prepare(r: Round, surface: Surface, rng: random.Random) -> None:
    """The project, its store and remote as the surface's round starts from (see :class:`Round`)."""
    for name, data in VICTIM.items():
        (r.victim / name).parent.mkdir(parents=True, exist_ok=True)
        (r.victim / name).write_bytes(data)
    add_file_and_case(r.project)
    store = r.store.ensure()
    path = r.project / "dinov2_reference.npz"
    np.savez(path, cls_token=np.ones((1, 8), np.float32), patch=np.zeros((2, 4), np.float32))
    ingest.add(store, registry_mod.load(r.project), path, name=PARITY, kind="array")
    big = [local_record(f"big/r{i:03d}", i) for i in range(BIG)]
    for i in range(BIG):
        store.put_bytes(f"bytes {i}".encode())
    registry_mod.write_family(registry_mod.load(r.project), "big", big)
    assert (r.project / "provenance" / "big").is_dir(), "the family big is not sharded"
    r.new = rng.randbytes(rng.randint(1, 4096))
    (r.project / "data" / "new.bin").write_bytes(r.new)
    if surface.new_where in ("store", "remote"):
        _expect(_cli("add", "data/new.bin", "--name", "fam/new", "--kind", "fixture"), 0)
    _expect(_cli("push", "--all", "--remote", str(r.remote)), 0)
    if surface.new_where == "remote":
        obj = r.store.object_path(digests.of_bytes(r.new))
        obj.parent.chmod(0o755)
        obj.unlink()
    if surface.tree:
        Fixtures(r.store, registry_mod.load(r.project)).tree("fam/case")


def _expect(outcome: int | str, want: int) -> None:
    if outcome != want:
        raise RuntimeError(f"the round's preparation failed: {outcome}")


def _plant(path: Path, kind: str, victim: Path) -> None:
    """``kind`` at ``path``; what was there is moved aside to ``<path>.aside``."""
    if path.exists() or path.is_symlink():
        path.rename(path.with_name(path.name + ".aside"))
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "link to a folder":
        path.symlink_to(victim / "keys", target_is_directory=True)
    elif kind == "link to a file":
        path.symlink_to(victim / "notes.txt")
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()


def _unplant(path: Path, kind: str) -> None:
    """Remove what was planted (if still there) and put back what it displaced."""
    if path.is_symlink():
        path.unlink()
    elif kind == "fifo" and path.exists() and not path.is_file():
        with contextlib.suppress(OSError):  # a reader blocked on its open (a thread) sees its end
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        path.unlink()
    elif kind == "folder" and path.is_dir():
        shutil.rmtree(path)
    aside = path.with_name(path.name + ".aside")
    if aside.exists() or aside.is_symlink():
        if path.is_dir() and aside.is_dir():  # made again by the command: merge, theirs first
            _merge(aside, path)
        elif not path.exists():
            aside.rename(path)
        else:
            shutil.rmtree(aside) if aside.is_dir() else aside.unlink()


def _merge(source: Path, target: Path) -> None:
    for entry in source.iterdir():
        there = target / entry.name
        if entry.is_dir() and not entry.is_symlink() and there.is_dir():
            _merge(entry, there)
        elif not there.exists():
            entry.rename(there)
    _rmtree(source)


def _snapshot(folder: Path) -> dict[str, bytes | str]:
    found: dict[str, bytes | str] = {}
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder).as_posix()
        found[rel] = "link" if p.is_symlink() else "folder" if p.is_dir() else p.read_bytes()
    return found


@dataclass
class Tally:
    """What one surface saw over its rounds; every count but ``rounds`` must be zero."""

    surface: str
    rounds: int = 0
    objects_lost: int = 0
    bytes_outside: int = 0
    tracebacks: int = 0
    hangs: int = 0
    unexpected_exits: int = 0
    refused: int = 0  # how hard it pressed: rounds the command refused (the others did the work)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return all(getattr(self, c) == 0 for c in COUNTS)

    def row(self) -> dict[str, Any]:
        counts = {c: getattr(self, c) for c in COUNTS}
        return {"surface": self.surface, "rounds": self.rounds, **counts, "refused": self.refused,
                "seconds": round(self.seconds, 1)}  # fmt: skip


def one_round(
    work: Path, name: str, rng: random.Random, tally: Tally, *, seed: int, timeout: float
) -> None:
    """Prepare, plant the next of the surface's places and kinds (in a random order that goes
    through all of them), run the surface's command, count, clean up."""
    surface = SURFACES[name]
    r = Round(work)
    with _inside(r):
        _prepare(r, surface, rng)
        places = surface.places(r)
        combos = [(p, k) for p in sorted(places) for k in KINDS if p not in FOLDERS or "link" in k]
        random.Random(f"{seed}:{name}").shuffle(combos)  # every one within as many rounds
        place, kind = combos[tally.rounds % len(combos)]
        path = places[place]
        before = _snapshot(r.victim)
        _plant(path, kind, r.victim)
        with _deadline(timeout):
            try:
                outcome = surface.run(r, place)
            except Hang:
                outcome = "hang"
        _unplant(path, kind)
        changed = _differences(before, _snapshot(r.victim))
        if surface.new_where == "remote":  # the object the round pulls was not in the store
            _cli("pull", "--all", "--remote", str(r.remote))
        verified = _cli("verify", "--full")
    what = f"{place}: {kind}"
    tally.rounds += 1
    tally.bytes_outside += changed
    tally.objects_lost += verified != 0
    tally.tracebacks += outcome == "traceback"
    tally.hangs += outcome == "hang"
    tally.refused += outcome in (1, 2)
    tally.unexpected_exits += outcome not in surface.expected and outcome not in (
        "traceback",
        "hang",
    )
    if changed or verified != 0 or outcome not in surface.expected:
        note = f"{what}: outcome {outcome}, victim entries changed {changed}, verify {verified}"
        if len(tally.notes) < MAX_NOTES:
            tally.notes.append(note)


def _differences(before: dict[str, bytes | str], after: dict[str, bytes | str]) -> int:
    return sum(before.get(k) != after.get(k) for k in before.keys() | after.keys())


def run(names: list[str], rounds: int, *, seed: int = 22, timeout: float = 20.0) -> list[Tally]:
    """``rounds`` rounds of each surface in ``names``, each in a fresh temporary folder."""
    rng = random.Random(seed)
    saved = shards.SHARD_ABOVE
    shards.SHARD_ABOVE = 4096  # a family of a few dozen records is sharded
    tallies = []
    try:
        for name in names:
            tally = Tally(name)
            started = time.perf_counter()
            for _ in range(rounds):
                work = Path(tempfile.mkdtemp(prefix="fixture-store-links-"))
                try:
                    one_round(work, name, rng, tally, seed=seed, timeout=timeout)
                finally:
                    _rmtree(work)
            tally.seconds = time.perf_counter() - started
            tallies.append(tally)
    finally:
        shards.SHARD_ABOVE = saved
    return tallies


def _rmtree(root: Path) -> None:
    for folder, dirs, _files in os.walk(root):
        for d in dirs:
            p = Path(folder) / d
            if not p.is_symlink():
                p.chmod(0o755)
    shutil.rmtree(root, ignore_errors=True)


def table(tallies: list[Tally]) -> str:
    heads = ["surface", "rounds", *(c.replace("_", " ") for c in COUNTS), "refused", "seconds"]
    rows = [[str(v) for v in t.row().values()] for t in tallies]
    widths = [max(len(r[i]) for r in [heads, *rows]) for i in range(len(heads))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in [heads, *rows]]
    for t in tallies:
        lines += [f"  {t.surface}: {n}" for n in t.notes]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("surfaces", nargs="*", metavar="SURFACE", help=", ".join(SURFACES))
    parser.add_argument("--rounds", type=int, default=20, help="rounds per surface (default 20)")
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds before a hang")
    parser.add_argument("--json", action="store_true", help="print one JSON line per surface")
    args = parser.parse_args(argv)
    names = args.surfaces or list(SURFACES)
    unknown = sorted(set(names) - set(SURFACES))
    if unknown:
        parser.error(f"unknown surface {unknown[0]!r}; one of {', '.join(SURFACES)}")
    tallies = run(names, args.rounds, seed=args.seed, timeout=args.timeout)
    if args.json:
        for t in tallies:
            print(json.dumps({**t.row(), "notes": t.notes}))
    else:
        print(table(tallies))
    return 0 if all(t.clean for t in tallies) else 1


if __name__ == "__main__":
    sys.exit(main())
