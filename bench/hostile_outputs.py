"""The outputs report: every option that writes a file at a path the user names, aimed at the
store (DESIGN 18; issue 34, class 1).

Not a timed benchmark. Each surface (``fetch --tensor --output``, ``fetch --report``,
``attest -o``, ``report --html``) is run with its path planted, in turn: a symbolic link to a
store object, a hard link to one, the object's own path, a new file inside the store, and a
path through a folder link into the store. It counts what must never happen: a store object
whose bytes changed or that no longer verifies (``objects lost``), a file created inside the
store (``store writes``), a traceback, and an exit other than the one expected (0 where the
link is replaced beside the store, 2 where the path is inside it).

    uv run python -m bench.hostile_outputs
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from click.testing import CliRunner

from fixture_store.cli import main as cli

COUNTS = ("objects lost", "store writes", "tracebacks", "other exits")
# Where a round plants the output path, and the exit that is the right answer to it.
PLACEMENTS: dict[str, int] = {
    "symlink to an object": 0,  # replaced beside the store: the link, never the object
    "hard link to an object": 0,
    "the object itself": 2,
    "new file in the store": 2,
    "through a folder link": 2,
}


@dataclass(frozen=True)
class Project:
    root: Path
    store: Path
    obj: Path  # the store object of fam/a
    key: Path  # a private key for attest
    outputs: Path  # outputs to attest


def _key(folder: Path) -> Path:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    key = folder / "key.pem"
    key.write_bytes(
        ed25519.Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key.chmod(0o600)
    return key


def _run(project: Project, args: list[str]) -> tuple[int, str, BaseException | None]:
    env = {"FIXTURE_STORE_DIR": str(project.store), "COLUMNS": "200",
           "FIXTURE_STORE_CONFIG": str(project.root.parent / "user.toml")}  # fmt: skip
    cwd = Path.cwd()
    os.chdir(project.root)
    try:
        result = CliRunner().invoke(cli, args, env=env, catch_exceptions=True)
    finally:
        os.chdir(cwd)
    return result.exit_code, result.stdout + result.stderr, result.exception


@contextmanager
def _project() -> Iterator[Project]:
    top = Path(tempfile.mkdtemp(prefix="fixture-store-outputs-"))
    try:
        root, store = top / "project", top / "store"
        (root / "provenance").mkdir(parents=True)
        array = np.arange(12, dtype=np.float32).reshape(3, 4)
        np.savez(root / "a.npz", w=array)
        np.savez(root / "outputs.npz", w=array)
        project = Project(root, store, Path(), _key(top), root / "outputs.npz")
        code, _, _ = _run(project, ["add", "a.npz", "--name", "fam/a", "--kind", "fixture"])
        assert code == 0, "the project's one record is added"
        code, out, _ = _run(project, ["path", "fam/a"])
        yield Project(root, store, Path(out.strip()), project.key, project.outputs)
    finally:
        for path in top.rglob("*"):  # store objects are read-only
            if not path.is_symlink():
                path.chmod(0o700 if path.is_dir() else 0o600)
        shutil.rmtree(top, ignore_errors=True)


# A surface: the project and the path to write -> the command; whether it writes a folder.
SURFACES: dict[str, tuple[Callable[[Project, Path], list[str]], bool]] = {
    "fetch --tensor --output": (
        lambda _p, t: ["fetch", "fam/a", "--tensor", "w", "--output", str(t)],
        False,
    ),
    "fetch --report": (lambda _p, t: ["fetch", "fam/a", "--report", str(t)], False),
    "attest -o": (
        lambda p, t: ["attest", "fam/a", str(p.outputs), "--key", str(p.key), "-o", str(t)],
        False,
    ),
    "report --html DIR": (lambda _p, t: ["report", "--html", str(t)], True),
}


def _plant(project: Project, placement: str, folder: bool) -> Path | None:
    """The path a round gives the option (``None``: the placement does not apply)."""
    out = project.root / "out"
    if placement in ("symlink to an object", "hard link to an object"):
        if folder:  # a folder output is never a link to an object's file
            return None
        if placement.startswith("symlink"):
            out.symlink_to(project.obj)
        else:
            os.link(project.obj, out)
        return out
    if placement == "the object itself":
        return project.obj.parent if folder else project.obj
    if placement == "new file in the store":
        return project.store / "objects" / "planted"
    (project.root / "through").symlink_to(project.obj.parent)
    return project.root / "through" / "planted"


def _store_files(store: Path) -> set[Path]:
    return {p for p in store.rglob("*") if not p.is_dir()}


def _round(surface: str, placement: str) -> Counter[str] | None:
    command, folder = SURFACES[surface]
    found: Counter[str] = Counter()
    with _project() as project:
        target = _plant(project, placement, folder)
        if target is None:
            return None
        before, data = _store_files(project.store), project.obj.read_bytes()
        code, output, error = _run(project, command(project, target))
        found["objects lost"] += project.obj.read_bytes() != data
        found["objects lost"] += _run(project, ["verify", "--full"])[0] != 0
        state = project.store / "state"  # the verified-state cache: the store's own writes
        found["store writes"] += len(
            {p for p in _store_files(project.store) - before if state not in p.parents}
        )
        found["tracebacks"] += "Traceback" in output or not isinstance(error, SystemExit | None)
        found["other exits"] += code != PLACEMENTS[placement]
    return found


def run(rounds: int = 1) -> dict[str, tuple[int, Counter[str]]]:
    """Every surface under every placement that applies to it, ``rounds`` times: the rounds
    run and what they saw (the :data:`COUNTS`), per surface."""
    totals: dict[str, tuple[int, Counter[str]]] = {}
    for surface in SURFACES:
        total: Counter[str] = Counter({c: 0 for c in COUNTS})
        n = 0
        for _ in range(rounds):
            for placement in PLACEMENTS:
                found = _round(surface, placement)
                if found is not None:
                    total += found
                    n += 1
        totals[surface] = (n, total)
    return totals


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=1, help="rounds per placement (1)")
    args = parser.parse_args(argv)
    totals = run(args.rounds)
    width = max(map(len, totals))
    print(f"{'surface':<{width}}  rounds  " + "  ".join(COUNTS))
    for name, (n, total) in totals.items():
        print(f"{name:<{width}}  {n:>6}  " + "  ".join(f"{total[c]:>{len(c)}}" for c in COUNTS))
    bad = sum(total[c] for _, total in totals.values() for c in COUNTS)
    print("faults: " + ("none" if not bad else f"{bad} (must be 0)"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
