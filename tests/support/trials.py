"""Concurrency trials: writers racing ``gc --yes``, concurrent adds into one family, registry
writers killed mid-write (DESIGN decisions 4 and 10).

Every trial runs real processes (:mod:`tests.support.trial_child`) and tallies what the store
and the registry promise never happens: a record lost (a writer said yes, the record is not
there, or a concurrent writer's is gone), an object lost (a record whose object is missing or
damaged), a stray file (left in the store's ``tmp/`` or in ``provenance/``), a traceback, and an
exit other than the one expected. The tests run them with few rounds (more when slow-marked);
``bench/trials.py`` runs many and prints the table.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fixture_store import registry as registry_mod
from fixture_store.errors import RegistryError
from fixture_store.objects import digests, trees
from fixture_store.objects.digests import Digest
from fixture_store.objects.store import Store
from fixture_store.registry import Record, shards
from tests.support.records import local_record
from tests.support.regen_project import PYTHON, make_project

REPO = Path(__file__).resolve().parents[2]
MAX_NOTES = 12
# What provenance/ may hold besides family files: the registry's lock folder and a README.
_LOCK_FOLDER = ".locks"
_LOCK_FOLDER_FILES = {".gitignore", "registry.lock"}


@dataclass
class Tally:
    """What one trial kind saw over its rounds; every count but ``rounds`` must be zero."""

    kind: str
    rounds: int = 0
    records_lost: int = 0
    objects_lost: int = 0
    stray_files: int = 0
    tracebacks: int = 0
    unexpected_exits: int = 0
    seconds: float = 0.0
    # How hard the trial pressed: gc runs, how many of them found a writer in flight, kills
    # that landed in the middle of a write.
    pressure: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    COUNTS = ("records_lost", "objects_lost", "stray_files", "tracebacks", "unexpected_exits")

    @property
    def clean(self) -> bool:
        return all(getattr(self, c) == 0 for c in self.COUNTS)

    def note(self, text: str) -> None:
        if len(self.notes) < MAX_NOTES:
            self.notes.append(text[:2000])

    def row(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "rounds": self.rounds,
            **{c: getattr(self, c) for c in self.COUNTS},
            **self.pressure,
        }

    def __str__(self) -> str:
        counts = ", ".join(f"{c.replace('_', ' ')} {getattr(self, c)}" for c in self.COUNTS)
        pressed = "".join(f", {k.replace('_', ' ')} {v}" for k, v in self.pressure.items())
        head = f"{self.kind}: {self.rounds} rounds in {self.seconds:.1f} s{pressed}; {counts}"
        return "\n  ".join([head, *self.notes])


# -- processes ------------------------------------------------------------------------------------
def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.pop("FIXTURE_STORE_REGISTRY", None)
    return env


def _child(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.trial_child", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=REPO,
    )


def _run_steps(work: Path, steps: list[dict[str, Any]], tag: str) -> subprocess.Popen[str]:
    spec = work / f"steps-{tag}.json"
    spec.write_text(json.dumps(steps))
    return _child("steps", str(spec))


def _outcomes(
    proc: subprocess.Popen[str], tally: Tally, timeout: float = 900
) -> list[dict[str, Any]]:
    out, err = proc.communicate(timeout=timeout)
    if proc.returncode != 0 or "Traceback" in err:
        tally.tracebacks += "Traceback" in err
        tally.unexpected_exits += proc.returncode != 0
        tally.note(f"child exited {proc.returncode}: {err.strip()[-1500:]}")
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    for line in lines:
        if line.get("tb"):
            tally.tracebacks += 1
            tally.note(f"traceback in {' '.join(line['argv'][-6:])}: {line['tb'][-1500:]}")
    return lines


class GcLoop:
    """``gc --yes`` run again and again in a child process while the trial's writers work."""

    def __init__(self, store: Store, project: Path, work: Path) -> None:
        self.stop = work / "gc.stop"
        self.stop.unlink(missing_ok=True)
        self.proc = _child("gc-loop", str(store.root), str(project), str(self.stop))

    def finish(self, tally: Tally) -> None:
        self.stop.touch()
        lines = _outcomes(self.proc, tally, timeout=120)
        summary: dict[str, Any] = lines[-1] if lines else {"runs": 0, "waited": 0, "bad": []}
        for bad in summary["bad"]:
            if bad.get("tb"):
                tally.tracebacks += 1
            tally.unexpected_exits += 1
            tally.note(f"gc exited {bad['exit']}: {(bad['tb'] or bad['stderr'])[-800:]}")
        tally.pressure["gc_runs"] = summary["runs"]
        tally.pressure["gc_waited_for_a_writer"] = summary["waited"]
        if not summary["runs"]:
            tally.unexpected_exits += 1
            tally.note("gc never ran")


# -- checks ---------------------------------------------------------------------------------------
def strays(store: Store, project: Path) -> list[str]:
    """Files nobody owns any more: anything in the store's tmp/, and anything in provenance/
    that is neither a family file, the README nor the registry's lock folder."""
    found = [str(p) for p in store.tmp_dir.iterdir()] if store.tmp_dir.is_dir() else []
    for p in (project / "provenance").iterdir():
        if p.name == _LOCK_FOLDER and p.is_dir():
            found += [str(q) for q in p.iterdir() if q.name not in _LOCK_FOLDER_FILES]
        elif p.is_dir() and shards.head_of(p).is_file():  # a sharded family's shards
            found += [str(q) for q in p.iterdir() if not _is_shard_file(q)]
        elif not (p.suffix == ".json" and not p.name.startswith(".")) and p.name != "README.md":
            found.append(str(p))
    return found


def _is_shard_file(path: Path) -> bool:
    return path.suffix == ".json" and shards.is_shard_name(path.stem)


def count_strays(tally: Tally, store: Store, project: Path, *, remove: bool = False) -> None:
    """Count the stray files; with ``remove``, delete them, so the next count is of new ones."""
    left = strays(store, project)
    tally.stray_files += len(left)
    if left:
        tally.note(f"stray files: {left[:5]}")
    for p in map(Path, left) if remove else ():
        shutil.rmtree(p) if p.is_dir() else p.unlink()


def object_intact(store: Store, digest: Digest) -> bool:
    path = store.object_path(digest)
    try:
        return digests.of_file(path) == digest
    except FileNotFoundError:
        return False


def check_records(
    tally: Tally, store: Store, project: Path, expected: dict[str, Digest]
) -> registry_mod.Registry:
    """Every expected record is there with its digest, and every object of every record is
    in the store, intact."""
    registry = registry_mod.load(project)
    present = {r.name: r for r in registry.records()}
    for name, digest in expected.items():
        record = present.get(name)
        if record is None or record.digest != digest:
            tally.records_lost += 1
            tally.note(f"record lost: {name} ({'absent' if record is None else record.digest})")
    for record in present.values():
        for ref in record.objects():
            if not object_intact(store, ref.digest):
                tally.objects_lost += 1
                tally.note(f"object lost: {record.name} {ref.member or ''} {ref.digest}")
    return registry


def _expect_exit(tally: Tally, line: dict[str, Any], codes: Iterable[int] = (0,)) -> bool:
    if line["exit"] in tuple(codes):
        return True
    tally.unexpected_exits += 1
    tally.note(f"exit {line['exit']} from {' '.join(line['argv'][4:])}: {line['stderr'][-800:]}")
    return False


# -- setups ---------------------------------------------------------------------------------------
def _fresh(work: Path) -> tuple[Store, Path]:
    if work.exists():
        shutil.rmtree(work)
    project = work / "project"
    (project / "provenance").mkdir(parents=True)
    (project / "data").mkdir()
    return Store.at(work / "store").ensure(), project


def _cli(store: Store, project: Path, *args: str) -> dict[str, Any]:
    return {"cli": ["--store", str(store.root), "--registry", str(project), *args]}


def _old(path: Path) -> None:
    """Give a file the mtime of long ago: a hard link to it carries that mtime into tmp/."""
    old = time.time() - 3 * 3600
    os.utime(path, (old, old))


def _payload(round_: int, salt: str, size: int = 64 << 10) -> bytes:
    seed = f"{salt}-{round_}-{random.random()}".encode()
    return (seed * (size // len(seed) + 1))[:size]


def _source(
    project: Path, name: str, round_: int, *, folder: bool, old: bool
) -> tuple[Path, Digest]:
    """A file (or a folder of three files) with bytes no other round has."""
    path = project / "data" / name
    if folder:
        path.mkdir()
        for k in range(3):
            member = path / f"m{k}.bin"
            member.write_bytes(_payload(round_, f"{name}-{k}", 8 << 10))
            if old:
                _old(member)
        return path, trees.hash_folder(path)[0].digest
    path.write_bytes(_payload(round_, name))
    if old:
        _old(path)
    return path, digests.of_file(path)


# -- trials ---------------------------------------------------------------------------------------
def gc_against_add(work: Path, rounds: int, *, link: bool = False) -> Tally:
    """One writer adds a new file (every fourth round a folder) per round, with ``--link`` its
    files aged like old checkouts, while ``gc --yes`` runs over and over."""
    tally = Tally("gc vs add --link" if link else "gc vs add")
    started = time.perf_counter()
    store, project = _fresh(work)
    expected: dict[str, Digest] = {}
    steps = []
    for r in range(rounds):
        folder = r % 4 == 3
        path, digest = _source(project, f"r{r}", r, folder=folder, old=link)
        name = f"fam/r{r}"
        expected[name] = digest
        args = ["add", str(path), "--name", name, "--kind", "tree" if folder else "fixture"]
        steps.append(_cli(store, project, *args, *(["--link"] if link else [])))
    gc = GcLoop(store, project, work)
    lines = _outcomes(_run_steps(work, steps, "add"), tally)
    gc.finish(tally)
    for line in lines:
        _expect_exit(tally, line)
    tally.rounds = len(lines)
    check_records(tally, store, project, expected)
    count_strays(tally, store, project)
    tally.seconds = time.perf_counter() - started
    return tally


def gc_against_fetch(work: Path, rounds: int) -> Tally:
    """Records with local sources (files, every fourth a folder) are registered first, their
    objects absent; one fetch per round publishes them while ``gc --yes`` runs."""
    tally = Tally("gc vs fetch")
    started = time.perf_counter()
    store, project = _fresh(work)
    expected: dict[str, Digest] = {}
    raw: dict[str, Any] = {}
    for r in range(rounds):
        folder = r % 4 == 3
        path, digest = _source(project, f"f{r}", r, folder=folder, old=True)
        name = f"fetched/f{r}"
        expected[name] = digest
        rel = path.relative_to(project).as_posix()
        entry: dict[str, Any] = {
            "kind": "tree" if folder else "fixture",
            "source": {"type": "local", "path": rel},
            "digest": digest.text,
            "size": digest.size,
        }
        if folder:
            tree = trees.hash_folder(path)[0]
            entry["members"] = {m: {"digest": d.text, "size": d.size} for m, d in tree}
        raw[name] = entry
    doc = {"format_version": 1, "records": raw}
    (project / "provenance" / "fetched.json").write_text(registry_mod.dumps(doc))
    registry_mod.load(project)  # a trial of a registry that does not load would prove nothing
    steps = [_cli(store, project, "fetch", name) for name in expected]
    gc = GcLoop(store, project, work)
    lines = _outcomes(_run_steps(work, steps, "fetch"), tally)
    gc.finish(tally)
    for line in lines:
        _expect_exit(tally, line)
    tally.rounds = len(lines)
    check_records(tally, store, project, expected)
    for name, digest in expected.items():
        if not object_intact(store, digest):
            tally.note(f"fetched object missing: {name}")
    count_strays(tally, store, project)
    tally.seconds = time.perf_counter() - started
    return tally


def gc_against_regenerate(work: Path, rounds: int, *, budget: float | None = None) -> Tally:
    """The toy stage's scale moves a little each round (within tolerance), so every
    ``regenerate --accept`` publishes a new case and rewrites its record, while ``gc --yes``
    collects the case it replaced. With ``budget`` seconds, as many rounds as fit."""
    from fixture_store.regenerate import regenerate

    tally = Tally("gc vs regenerate --accept")
    started = time.perf_counter()
    if work.exists():
        shutil.rmtree(work)
    project = make_project(work / "project")
    store = Store.at(work / "store").ensure()
    regenerate(project, store, "toy", scratch=work / "scratch-0", accept=True, python=PYTHON)
    params = project / "params.yaml"
    gc = GcLoop(store, project, work)
    lines: list[dict[str, Any]] = []
    chunk = 5 if budget is not None else rounds
    while len(lines) < rounds:
        if budget is not None and time.perf_counter() - started > budget:
            break
        steps = []
        for r in range(len(lines) + 1, min(rounds, len(lines) + chunk) + 1):
            doc = yaml.safe_load(params.read_text())
            doc["regenerate"]["toy"]["args"]["scale"] = 1 + r * 1e-6
            steps.append({"write": [str(params), yaml.safe_dump(doc, sort_keys=True)]})
            steps.append(
                _cli(
                    store,
                    project,
                    "regenerate",
                    "toy",
                    "--accept",
                    "--json",
                    "--python",
                    PYTHON,
                    "--scratch",
                    str(work / f"scratch-{r}"),
                )
            )
        lines += _outcomes(_run_steps(work, steps, f"regen-{len(lines)}"), tally)
    gc.finish(tally)
    last: Path | None = None  # the candidates of the last round that rewrote toy/case
    for r, line in enumerate(lines, start=1):
        _expect_exit(tally, line)
        try:
            accepted = json.loads(line["stdout"])["accepted"]
        except (json.JSONDecodeError, KeyError):
            accepted = []
        if "toy/case" in accepted:
            last = work / f"scratch-{r}" / "candidates"
        elif line["exit"] == 0:
            tally.records_lost += 1
            tally.note(f"round {r}: toy/case not accepted: {accepted}")
    tally.rounds = len(lines)
    expected = {}
    if last is not None:
        expected = {
            "toy/case": trees.hash_folder(last / "case")[0].digest,
            "toy/values.npy": digests.of_file(last / "values.npy"),
        }
    check_records(tally, store, project, expected)
    count_strays(tally, store, project)
    tally.seconds = time.perf_counter() - started
    return tally


def concurrent_adds(work: Path, rounds: int, writers: int = 8) -> Tally:
    """``writers`` processes add a different name into one family at the same moment, every
    round; all of their records must survive."""
    tally = Tally(f"{writers} concurrent adds")
    started = time.perf_counter()
    store, project = _fresh(work)
    expected: dict[str, Digest] = {}
    plans: list[list[dict[str, Any]]] = [[] for _ in range(writers)]
    for r in range(rounds):
        for w in range(writers):
            path, digest = _source(project, f"c{r}-{w}", r, folder=False, old=False)
            name = f"fam/c{r}-{w}"
            expected[name] = digest
            plans[w].append({"barrier": [str(work / "barriers" / str(r)), writers]})
            plans[w].append(
                _cli(store, project, "add", str(path), "--name", name, "--kind", "fixture")
            )
    procs = [_run_steps(work, plan, f"w{w}") for w, plan in enumerate(plans)]
    for proc in procs:
        for line in _outcomes(proc, tally):
            _expect_exit(tally, line)
    tally.rounds = rounds
    check_records(tally, store, project, expected)
    count_strays(tally, store, project)
    tally.seconds = time.perf_counter() - started
    return tally


def same_name(work: Path, rounds: int, *, same_bytes: bool) -> Tally:
    """Two processes add one name at the same moment. With other bytes exactly one wins and
    the other is refused (exit 2, naming the record and --replace); with the same file both
    succeed and the record is there once."""
    tally = Tally("2 adds of one name, " + ("same bytes" if same_bytes else "other bytes"))
    started = time.perf_counter()
    store, project = _fresh(work)
    plans: list[list[dict[str, Any]]] = [[], []]
    digests_of: dict[str, list[Digest]] = {}
    for r in range(rounds):
        name = f"fam/s{r}"
        digests_of[name] = []
        for w in range(2):
            if same_bytes and w == 1:
                # The same registration: the same file (another path is another source).
                path, digest = project / "data" / f"s{r}-0", digests_of[name][0]
            else:
                path, digest = _source(project, f"s{r}-{w}", r, folder=False, old=False)
            digests_of[name].append(digest)
            plans[w].append({"barrier": [str(work / "barriers" / str(r)), 2]})
            plans[w].append(
                _cli(store, project, "add", str(path), "--name", name, "--kind", "fixture")
            )
    procs = [_run_steps(work, plan, f"w{w}") for w, plan in enumerate(plans)]
    results = [_outcomes(p, tally) for p in procs]
    registry = registry_mod.load(project)
    for r, (a, b) in enumerate(zip(*results, strict=True)):
        name = f"fam/s{r}"
        exits = [a["exit"], b["exit"]]
        record = registry.families["fam"].records.get(name) if "fam" in registry.families else None
        if same_bytes:
            for line in (a, b):
                _expect_exit(tally, line)
            if record is None or record.digest != digests_of[name][0]:
                tally.records_lost += 1
                tally.note(f"{name}: record {record.digest if record else 'absent'}")
            continue
        if exits == [0, 0]:
            tally.records_lost += 1  # both were told "added": one of them was silently lost
            tally.note(f"{name}: both adds exited 0")
            continue
        if sorted(exits) != [0, 2]:
            tally.unexpected_exits += 1
            tally.note(f"{name}: exits {exits}: {a['stderr'][-400:]} {b['stderr'][-400:]}")
            continue
        loser = a if a["exit"] == 2 else b
        if name not in loser["stderr"] or "--replace" not in loser["stderr"]:
            tally.unexpected_exits += 1
            tally.note(f"{name}: the refusal does not name it and --replace: {loser['stderr']}")
        winner = digests_of[name][exits.index(0)]
        if record is None or record.digest != winner:
            tally.records_lost += 1
            tally.note(f"{name}: the winner's record is not the one registered")
    tally.rounds = rounds
    check_records(tally, store, project, {})
    count_strays(tally, store, project)
    tally.seconds = time.perf_counter() - started
    return tally


# -- killed registry writers --------------------------------------------------------------------
SIGKILL_FAMILY = "fam"
_TEMP = re.compile(r"\..+\.tmp")  # a registry writer's temp file
SIGKILL_RECORDS = 240  # the document cycles through 1..240 records (~80 KB at most)


def sigkill_record(family: str, i: int, count: int) -> Record:
    """Record ``i`` of the killed writer's documents (a few hundred bytes each)."""
    return local_record(
        f"{family}/r{i:04d}",
        data=f"record {i}".encode(),
        path=f"data/r{i}.bin",
        description=f"record {i} of {count}: " + "padding " * 30,
    )


def _valid_document(text: str, family: str) -> int | None:
    """How many records the document holds, if it is one a writer could have written
    complete (``records 0..k-1`` in the stable format); None for anything else."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        return None
    names = sorted(doc.get("records", {}))
    k = len(names)
    recs = [sigkill_record(family, i, SIGKILL_RECORDS) for i in range(k)]
    full = {"format_version": 1, "records": {r.name: r.to_json() for r in recs}}
    return k if registry_mod.dumps(full) == text else None


def _valid_shards(project: Path, family: str) -> int | None:
    """How many records the sharded family holds, if every one is a record some writer wrote
    (``record 0``, in every state, among them) and the family loads with none invalid; None
    for anything else. Shards are replaced one by one, so a kill may leave any mix of the old
    and the new records, but never a torn or foreign one."""
    try:
        fam = registry_mod.load(project).families.get(family)
    except RegistryError:
        return None
    if fam is None or not fam.sharded or fam.invalid:
        return None
    records = (sigkill_record(family, i, SIGKILL_RECORDS) for i in range(SIGKILL_RECORDS))
    every = {r.name: r for r in records}
    if f"{family}/r0000" not in fam.records:
        return None
    if any(every.get(name) != record for name, record in fam.records.items()):
        return None
    return len(fam.records)


def _mid_write(folder: Path) -> bool:
    return folder.is_dir() and any(_TEMP.fullmatch(p.name) for p in folder.iterdir())


def sigkill_registry_writes(work: Path, rounds: int, *, sharded: bool = False) -> Tally:
    """A child rewrites a family file in a loop and is killed at a random moment; the file is
    then always a complete document, the next writer is not blocked, and once it has written,
    nothing of the killed one is left in provenance/. ``sharded``: the family is sharded from
    the start, and after a kill every record it holds is one a writer wrote."""
    tally = Tally(f"SIGKILL during {'sharded ' if sharded else ''}registry writes")
    started = time.perf_counter()
    store, project = _fresh(work)
    family = SIGKILL_FAMILY
    path = project / "provenance" / f"{family}.json"

    def write(k: int) -> None:
        records = [sigkill_record(family, i, SIGKILL_RECORDS) for i in range(k)]
        registry_mod.write_family(registry_mod.load(project), family, records)

    limit = shards.SHARD_ABOVE
    shards.SHARD_ABOVE = 0 if sharded else limit  # a sharded family stays sharded
    try:
        write(1)
    finally:
        shards.SHARD_ABOVE = limit
    rng = random.Random(os.getpid())
    for r in range(rounds):
        mode = "tight" if r % 2 else "load"
        proc = _child("write-loop", str(project), family, str(SIGKILL_RECORDS), mode)
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            tally.unexpected_exits += 1
            tally.note(f"writer did not start: {proc.communicate()[1][-800:]}")
            continue
        time.sleep(rng.uniform(0.0, 0.3))
        proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
        tally.rounds += 1
        mid_write = _mid_write(path.parent) or _mid_write(shards.folder(path))
        tally.pressure["kills_mid_write"] = tally.pressure.get("kills_mid_write", 0) + mid_write
        if "Traceback" in err:
            tally.tracebacks += 1
            tally.note(err[-800:])
        k = _valid_shards(project, family) if sharded else _valid_document(path.read_text(), family)
        if k is None:
            tally.records_lost += 1
            tally.note(f"round {tally.rounds}: {path.name} is not a complete document")
            write(1)
        elif k >= SIGKILL_RECORDS:
            write(1)  # start the cycle again, so documents stay small
        else:
            write(k + 1)  # the next writer takes the lock the dead one held, and writes
        count_strays(tally, store, project, remove=True)
    tally.seconds = time.perf_counter() - started
    return tally


# -- all of them ----------------------------------------------------------------------------------
Trial = Callable[[Path, int], Tally]

TRIALS: dict[str, Trial] = {
    "gc-add": gc_against_add,
    "gc-add-link": lambda w, n: gc_against_add(w, n, link=True),
    "gc-fetch": gc_against_fetch,
    "gc-regenerate": gc_against_regenerate,
    "concurrent-adds": concurrent_adds,
    "same-name-other-bytes": lambda w, n: same_name(w, n, same_bytes=False),
    "same-name-same-bytes": lambda w, n: same_name(w, n, same_bytes=True),
    "sigkill-registry": sigkill_registry_writes,
    "sigkill-sharded": lambda w, n: sigkill_registry_writes(w, n, sharded=True),
}
