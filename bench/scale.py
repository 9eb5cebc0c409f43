"""Benchmark: how the warm paths cost as a project grows, per record, at 10^3, 10^4 and 10^5.

    uv run python -m bench.scale [--sizes 1000,10000,100000] [--members 2] [--repeat 3]

For each size a synthetic project is built straight through the library (no ``add``): one
family ``syn`` of tree records, each with ``--members`` small member objects of its own plus its
manifest, so the top size holds ``size * (members + 1)`` objects. The family is written by
``registry.write_family``, so a family past the limit is sharded as fixture-store shards it.
A folder remote holds all of them but the last 1% (hard links, so building it is cheap).
Then, each timed ``--repeat`` times (median, in this process, imports excluded):

- ``parse``: ``registry.load`` of the project without the parsed-registry cache (every record
  parsed and checked, as ``verify --full`` loads it);
- ``load``: ``registry.load`` of the project as every command loads it, its parsed-registry cache
  warm (the files read, hashed and decoded; each record is built, without checking it again,
  when it is first used);
- ``load+r``: the same and every record built, what a command that walks them all pays;
- ``write1``: ``registry.write_family`` of the family with one record added (what ``add``
  writes once it has loaded the registry), the registry files put back between runs;
- ``verify``: a warm verify of every record as the command runs it (``snapshot.verify_project``:
  a cold one runs first, untimed, to fill the verified-state cache and save the snapshot);
- ``verify$``: the same as a whole ``fixture-store verify`` process, start to exit (what a person
  runs: a line per family); ``verify$j``: with ``--json``, whose output is every result;
- ``parse+v``: the same warm verify without a snapshot: the registry parsed and validated, then
  ``verify_names`` against the verified-state cache, its Verifier opened inside the timing;
- ``floor``: one ``os.lstat`` per object, the least any warm verify must do;
- ``fetch``: ``fetch_names`` offline when everything is present (planning and presence checks);
- ``push``: ``sync.plan`` and ``sync.push`` to the folder remote missing 1% of the objects;
- ``pull``: ``sync.plan`` and ``sync.pull`` into the store missing 1% of the objects;
- ``gc``: ``gc.sweep`` dry run (every object referenced);
- ``collect``: ``pytest --collect-only`` in a child over one test parametrized by the plugin
  over the family, less the same child collecting one plain test (pytest's start-up);
- ``pytest``: the same for one test that ``@pytest.mark.parametrize`` parametrizes over the
  same names from a list in the test file (what a user would otherwise write): the cost of
  pytest's items, which the plugin cannot go below;
- ``collect2``: the plugin's test under pytest-xdist with two workers (``-n 2``), less the same
  over the plain test (xdist's start-up: two workers): ``--collect-only`` turns xdist off, so
  the run deselects every test (``--deselect``) and the workers collect all of them, in
  parallel, while the controller collects nothing;
- ``pytest2``: the same for the test ``@pytest.mark.parametrize`` parametrizes: what xdist
  costs pytest's own items, with no plugin (two workers each collecting everything).

The children run side by side (each repeat runs each once) and their CPU time (user and
system, workers included) is taken as well as their wall time.

The rows with a target (at the top size) say whether it is met: ``load`` under 1 s,
``verify$`` within 1.3x ``floor``, ``collect`` within 1.3x ``pytest`` in CPU time (on a loaded
machine a child's wall time is mostly its wait), ``collect2`` no slower than ``collect`` in
wall time (two workers do twice one process's work by design, on two cores).

The table prints each median and its cost per record in microseconds; the last columns give
the per-record cost at the top size over the one at the smallest (the target is at most 2).
Below it, the registry's layout at each size: how many files, and the largest.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from fixture_store import gc, registry, snapshot
from fixture_store.fetch import fetch_names
from fixture_store.objects import digests, trees
from fixture_store.objects.store import Store
from fixture_store.registry.records import Kind
from fixture_store.remotes import sync
from fixture_store.remotes.folder import FolderRemote
from fixture_store.verify import verify_names

FAMILY = "syn"
TREE_MEDIA_TYPE = "application/vnd.fixture-store.tree+json"
TEST_FILE = f"""
import pytest

@pytest.mark.fixture_store(family={FAMILY!r})
def test_case(artifact):
    pass
"""
STEPS = (
    *("parse", "load", "load+r", "write1", "verify", "verify$", "verify$j", "parse+v", "floor"),
    *("fetch", "push", "pull", "gc", "collect", "pytest", "collect2", "pytest2"),
)
# Each target: what it says, whether a row of medians meets it, and what was measured.
Target = tuple[str, Callable[[dict[str, float]], bool], Callable[[dict[str, float]], str]]
TARGETS: dict[str, Target] = {
    "load": ("< 1 s", lambda r: r["load"] < 1.0, lambda r: f"{r['load']:.3f} s"),
    # the whole process against one lstat per object in one loop, measured side by side
    "verify$": (
        "<= 1.3x floor",
        lambda r: r["verify$"] <= 1.3 * r["floor"],
        lambda r: (
            f"{r['verify$']:.3f} s against {r['floor']:.3f} s, {r['verify$'] / r['floor']:.2f}x"
        ),
    ),
    # CPU time, side by side: the wall time of a child on a loaded machine is mostly its wait
    "collect": (
        "<= 1.3x pytest (CPU)",
        lambda r: r["collect cpu"] <= 1.3 * r["pytest cpu"],
        lambda r: (
            f"{r['collect cpu']:.3f} s against {r['pytest cpu']:.3f} s, "
            f"{r['collect cpu'] / r['pytest cpu']:.2f}x"
        ),
    ),
    # wall time: two workers on two cores do twice the CPU work of one process by design
    "collect2": (
        "<= collect (wall)",
        lambda r: r["collect2"] <= r["collect"],
        lambda r: (
            f"{r['collect2']:.3f} s against {r['collect']:.3f} s "
            f"(CPU {r['collect2 cpu']:.3f} s, both workers and the controller); "
            f"parametrize {r['pytest2']:.3f} s under -n 2 against {r['pytest']:.3f} s"
        ),
    ),
}


def _put(store: Store, data: bytes) -> digests.Digest:
    """Write ``data`` as an object, straight to its path (no fsync: a bench store)."""
    digest = digests.of_bytes(data)
    path = store.object_path(digest)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return digest


def build(work: Path, size: int, members: int) -> tuple[Path, Store, FolderRemote]:
    """The project, its store (everything present) and a folder remote missing the last 1%."""
    project, store = work / "project", Store(work / "store")
    (project / "provenance").mkdir(parents=True)
    (project / "tests").mkdir()
    (project / "tests" / "test_syn.py").write_text(TEST_FILE)
    (project / "tests" / "test_plain.py").write_text("def test_plain():\n    pass\n")
    names = [f"{FAMILY}/case_{i:06d}" for i in range(size)]
    (project / "tests" / "test_parametrized.py").write_text(
        f"import pytest\n\n@pytest.mark.parametrize('name', {names!r})\n"
        "def test_case(name):\n    pass\n"
    )
    store.ensure()
    records: dict[str, object] = {}
    every: list[digests.Digest] = []
    for i in range(size):
        tree = trees.Tree(
            {f"part_{j}.bin": _put(store, f"{i}:{j}\n".encode()) for j in range(members)}
        )
        manifest = _put(store, tree.canonical_bytes())
        every.extend((*tree.members.values(), manifest))
        records[f"{FAMILY}/case_{i:06d}"] = {
            "kind": Kind.TREE.value,
            "digest": manifest.text,
            "size": manifest.size,
            "media_type": TREE_MEDIA_TYPE,
            "members": trees.to_json(tree),
            "source": {"type": "local", "path": f"data/case_{i:06d}"},
        }
    parsed = [registry.parse_record(name, raw, file="<bench>") for name, raw in records.items()]
    registry.write_family(registry.load(project), FAMILY, parsed)
    remote = FolderRemote("bench", work / "remote")
    for digest in every[: len(every) - len(every) // 100]:
        target = remote.path(digest)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.link(store.object_path(digest), target)
    return project, store, remote


def timed(fn: Callable[[], object], repeat: int) -> float:
    seconds = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def timed_after(setup: Callable[[], object], fn: Callable[[], object], repeat: int) -> float:
    """The median of ``fn``, each run after an untimed ``setup``."""
    seconds = []
    for _ in range(repeat):
        setup()
        start = time.perf_counter()
        fn()
        seconds.append(time.perf_counter() - start)
    setup()
    return statistics.median(seconds)


def _write_one(reg: registry.Registry) -> Callable[[], object]:
    """``write_family`` of the family with one record more, as ``add`` writes it."""
    first = next(iter(reg.families[FAMILY].records.values()))
    extra = registry.parse_record(f"{FAMILY}/extra", first.to_json(), file="<bench>")
    records = [*reg.families[FAMILY].records.values(), extra]
    return lambda: registry.write_family(reg, FAMILY, records)


def _restorer(project: Path, saved: Path) -> Callable[[], None]:
    """Put the registry files back as they were saved (the lock folder aside)."""
    shutil.copytree(project / "provenance", saved, ignore=shutil.ignore_patterns(".locks"))

    def restore() -> None:
        for path in (project / "provenance").iterdir():
            if path.name != ".locks":
                shutil.rmtree(path) if path.is_dir() else path.unlink()
        shutil.copytree(saved, project / "provenance", dirs_exist_ok=True)

    return restore


def layout(project: Path) -> tuple[int, int]:
    """How many registry files the project has, and the size of the largest."""
    sizes = [p.stat().st_size for p in (project / "provenance").rglob("*.json")]
    return len(sizes), max(sizes)


def _warm_verify(store: Store, project: Path) -> None:
    reg = registry.load(project)
    results = verify_names(store, reg, reg.names())
    assert all(r.ok for r in results), next(r for r in results if not r.ok)


def _snapshot_verify(store: Store, project: Path) -> None:
    results = snapshot.verify_project(store, lambda: registry.load(project), project)
    assert all(r.ok for r in results), next(r for r in results if not r.ok)


def _floor(paths: list[str]) -> None:
    lstat = os.lstat
    for path in paths:
        lstat(path)


def _verify_process(project: Path, store: Store, *options: str) -> None:
    """A whole ``fixture-store verify`` process in the project."""
    env = {**os.environ, "FIXTURE_STORE_DIR": str(store.root)}
    out = subprocess.run(
        [sys.executable, "-m", "fixture_store.cli", "verify", *options],
        cwd=project,
        env=env,
        capture_output=True,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"verify failed:\n{out.stderr.decode()[-2000:]}")


def _collect(project: Path, store: Store, expect: str, *args: str) -> float:
    """A ``pytest`` child with ``args`` in the project (``expect`` in its output); returns its
    CPU time (user and system, its own workers included), what a loaded machine distorts
    least."""
    env = {**os.environ, "FIXTURE_STORE_DIR": str(store.root)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if expect not in out.stdout:
        raise SystemExit(f"collection failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _children(project: Path, store: Store, size: int, repeat: int) -> dict[str, float]:
    """The rows of the pytest children, each less its start-up (the same child over one plain
    test: pytest's, and under xdist the workers' too), side by side: each repeat runs every
    child once, so a change in the machine's load touches them alike. Wall time in the rows,
    CPU time under ``<row> cpu``."""
    collected = f"{size} test{'s' if size > 1 else ''} collected"
    only = ("--collect-only",)
    # --collect-only turns xdist off (one process), so under -n 2 the workers collect everything
    # and deselect it all (--deselect: one prefix test per item, where -k matches keywords): the
    # controller, which collects nothing, has no test to run
    xdist = ("no tests ran", "-p", "xdist", "-n", "2")
    syn, plain, par = "tests/test_syn.py", "tests/test_plain.py", "tests/test_parametrized.py"
    children = {
        "collect": (collected, *only, syn),
        "pytest": (collected, *only, par),
        "collect2": (*xdist, "--deselect", syn, syn),
        "pytest2": (*xdist, "--deselect", par, par),
        "start-up": ("1 test collected", *only, plain),
        "start-up2": (*xdist, "--deselect", plain, plain),  # xdist's own: two workers started
    }
    wall: dict[str, list[float]] = {row: [] for row in children}
    cpu: dict[str, list[float]] = {row: [] for row in children}
    for _ in range(repeat):
        for row, (expect, *args) in children.items():
            start = time.perf_counter()
            cpu[row].append(_collect(project, store, expect, *args))
            wall[row].append(time.perf_counter() - start)
    out = {}
    for row, start_up in (
        ("collect", "start-up"),
        ("pytest", "start-up"),
        ("collect2", "start-up2"),
        ("pytest2", "start-up2"),
    ):
        out[row] = statistics.median(wall[row]) - statistics.median(wall[start_up])
        out[f"{row} cpu"] = statistics.median(cpu[row]) - statistics.median(cpu[start_up])
    return out


def measure(work: Path, size: int, members: int, repeat: int) -> dict[str, float]:
    start = time.perf_counter()
    # This process and the pytest children keep their caches (schema passes) in the bench store
    os.environ["FIXTURE_STORE_DIR"] = str(work / "store")
    project, store, remote = build(work, size, members)
    print(f"  built {size:,} records in {time.perf_counter() - start:.1f}s", file=sys.stderr)
    reg = registry.load(project)
    names = reg.names()
    _snapshot_verify(store, project)  # cold: fills the verified-state cache, saves a snapshot
    plan = sync.plan(reg, names)
    paths = [str(store.object_path(d)) for d in plan.objects.values()]
    step = max(1, len(plan.objects) // 100)
    missing = sorted(plan.objects.values(), key=lambda d: d.hex)[::step]

    def pull() -> None:
        for digest in missing:
            store.object_path(digest).unlink()
        report = sync.pull(store, reg, remote, sync.plan(reg, names))
        assert all(r.ok for r in report.results)

    def push() -> None:
        report = sync.push(store, reg, remote, sync.plan(reg, names))
        assert all(r.ok for r in report.results)

    restore = _restorer(project, work / "provenance.saved")
    files, largest = layout(project)
    out = {
        "parse": timed(lambda: registry.load(project, cached=False), repeat),
        "load": timed(lambda: registry.load(project), repeat),
        "load+r": timed(lambda: list(registry.load(project).records()), repeat),
        "write1": timed_after(restore, _write_one(reg), repeat),
        "verify": timed(lambda: _snapshot_verify(store, project), repeat),
        "verify$": timed(lambda: _verify_process(project, store), repeat),
        "verify$j": timed(lambda: _verify_process(project, store, "--json"), repeat),
        "parse+v": timed(lambda: _warm_verify(store, project), repeat),
        "floor": timed(lambda: _floor(paths), repeat),
        "fetch": timed(lambda: fetch_names(store, reg, names, offline=True), repeat),
        "push": timed(push, repeat),
        "pull": timed(pull, repeat),
        "gc": timed(lambda: gc.sweep(store, reg, delete=False), repeat),
    }
    out.update(_children(project, store, size, repeat))
    out["files"], out["largest"] = files, largest
    shutil.rmtree(work)
    return out


def table(rows: dict[int, dict[str, float]]) -> str:
    sizes = sorted(rows)
    head = f"{'step':<8}" + "".join(f"{f'{n:,} s':>12}{'us/rec':>9}" for n in sizes)
    lines = [head + f"{'growth':>8}", "-" * (len(head) + 8)]
    for step in STEPS:
        line = f"{step:<8}"
        for n in sizes:
            line += f"{rows[n][step]:>12.3f}{rows[n][step] / n * 1e6:>9.1f}"
        first, last = sizes[0], sizes[-1]
        growth = (rows[last][step] / last) / (rows[first][step] / first)
        lines.append(line + f"{growth:>7.2f}x")
    lines.append("")
    top = rows[sizes[-1]]
    for step, (target, met, measured) in TARGETS.items():
        verdict = "met" if met(top) else "NOT met"
        lines.append(f"target at {sizes[-1]:,}: {step} {target}: {measured(top)}, {verdict}")
    for n in sizes:
        row = rows[n]
        lines.append(
            f"collect CPU at {n:,}: the plugin {row['collect cpu']:.3f} s, parametrize "
            f"{row['pytest cpu']:.3f} s ({row['collect cpu'] / row['pytest cpu']:.2f}x), "
            f"-n 2 {row['collect2 cpu']:.3f} s, parametrize -n 2 {row['pytest2 cpu']:.3f} s "
            "(pytest's start-up taken off each)"
        )
    lines.append("")
    for n in sizes:
        files, largest = int(rows[n]["files"]), rows[n]["largest"] / 1024
        lines.append(f"registry at {n:,}: {files:,} file(s), the largest {largest:,.0f} KiB")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--members", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the medians as JSON too")
    args = parser.parse_args(argv)
    rows: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="fixture-store-scale-") as tmp:
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")  # the snapshots stay in here
        for size in (int(s) for s in args.sizes.split(",")):
            print(f"size {size:,}: {size * (args.members + 1):,} objects", file=sys.stderr)
            rows[size] = measure(Path(tmp) / str(size), size, args.members, args.repeat)
    print(table(rows))
    if args.json:
        print(json.dumps({str(n): r for n, r in rows.items()}, indent=2))


if __name__ == "__main__":
    main()
