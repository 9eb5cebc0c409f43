"""Benchmark: the fixture-store compare harness vs onnx's own backend test runner.

Both run the same onnx 1.22.0 node cases (from the installed onnx distribution) with ONNX Runtime
on the CPU provider, end to end, in one run side by side:

- fixture-store: ``compare(...)`` over the cases registered in a temporary project — verifies
  every file against its record, checks the trees out, and runs them in long-lived worker
  processes;
- onnx: ``onnx.backend.test.BackendTest`` with ``onnxruntime.backend``, run by unittest as its
  documentation shows (it parses the .pb files, prepares a session per case and compares), in
  one process.

The onnx runner uses one process, so the like-with-like rows give ``compare`` one worker; the
default rows give it its default (one worker per CPU, or ``--jobs``) and say so. "First run" is
a store whose verified-state cache and checkouts were deleted (every file is hashed); "warm"
repeats it with both in place. Every contender runs once untimed, then ``--repeat`` times
round-robin; the medians are reported, with the spread.

Usage: ``uv run python bench/compare_bench.py [--limit N] [--jobs J] [--repeat R] [--runtime ort]``
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shutil
import statistics
import sys
import tempfile
import time
import unittest
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import onnx
import onnx.backend.test

from fixture_store import ingest
from fixture_store import registry as registry_mod
from fixture_store.access import Fixtures
from fixture_store.objects.fsutil import remove_tree
from fixture_store.objects.store import Store
from fixture_store.parity.cases import compare
from fixture_store.parity.runtimes.run import default_jobs
from fixture_store.registry import LocalSource
from fixture_store.registry.files import write_family

NODE_DATA = Path(onnx.__file__).parent / "backend" / "test" / "data" / "node"


def node_cases(limit: int | None = None) -> list[str]:
    cases = sorted(p.name for p in NODE_DATA.iterdir() if (p / "model.onnx").is_file())
    return cases[:limit] if limit else cases


def build_project(root: Path, cases: list[str], family: str = "onnx-node") -> Store:
    """Copy ``cases`` into a project under ``root`` and register them (one family write)."""
    (root / "provenance").mkdir(parents=True, exist_ok=True)
    store = Store.at(root / "store").ensure()
    registry = registry_mod.load(root)
    records = []
    for case in cases:
        target = root / "cases" / case
        if not target.exists():
            shutil.copytree(NODE_DATA / case, target)
        tree = ingest.ingest_folder(store, target)
        records.append(
            ingest.build_record(
                f"{family}/{case}",
                "onnx-case",
                tree.digest,
                LocalSource(f"cases/{case}"),
                members=tree,
            )
        )
    write_family(registry, family, records)
    return store


def forget_verified(store: Store) -> None:
    """Make the next compare a first run: no verified-state cache, no checkouts."""
    for folder in (store.state_dir, store.root / "trees"):
        if folder.exists():
            remove_tree(folder)


def run_fixture_store(
    store: Store, root: Path, cases: list[str], runtime: str, jobs: int | None
) -> tuple[float, Counter[str]]:
    fixtures = Fixtures(store, registry_mod.load(root))
    start = time.perf_counter()
    report = compare(fixtures, [f"onnx-node/{c}" for c in cases], [runtime], jobs=jobs)
    elapsed = time.perf_counter() - start
    return elapsed, Counter(str(r.outcome) for r in report.results)


def run_onnx_runner(cases: list[str], runtime: str) -> tuple[float, Counter[str]]:
    if runtime == "ort":
        from onnxruntime import backend
    else:
        from onnx.reference import ReferenceEvaluator  # noqa: F401

        raise SystemExit("the onnx runner side of this benchmark uses onnxruntime.backend")
    start = time.perf_counter()
    test = onnx.backend.test.BackendTest(backend, __name__)
    pattern = "^(" + "|".join(re.escape(c) for c in cases) + ")_cpu$"
    test.include(pattern)
    suite = unittest.TestSuite()
    for case_class in test.test_cases.values():
        suite.addTests(unittest.defaultTestLoader.loadTestsFromTestCase(case_class))
    with contextlib.redirect_stderr(io.StringIO()):
        result = unittest.TextTestRunner(stream=io.StringIO(), verbosity=0).run(suite)
    elapsed = time.perf_counter() - start
    counts = Counter(
        {
            "run": result.testsRun,
            "failures": len(result.failures),
            "errors": len(result.errors),
            "skipped": len(result.skipped),
        }
    )
    return elapsed, counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="First N node cases only.")
    parser.add_argument(
        "--jobs", type=int, default=None, help="Worker processes of the default rows."
    )
    parser.add_argument("--repeat", type=int, default=3, help="Timed runs per contender (3).")
    parser.add_argument("--runtime", default="ort", choices=["ort"])
    args = parser.parse_args(argv)
    cases = node_cases(args.limit)
    jobs = args.jobs if args.jobs is not None else default_jobs()
    with tempfile.TemporaryDirectory(prefix="compare-bench-") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        store = build_project(root, cases)
        setup = time.perf_counter() - t0
        print(
            f"{len(cases)} onnx {onnx.__version__} node cases registered in {setup:.1f} s",
            file=sys.stderr,
        )

        def fs_run(workers: int, cold: bool) -> Callable[[], tuple[float, Counter[str]]]:
            def run() -> tuple[float, Counter[str]]:
                if cold:
                    forget_verified(store)
                return run_fixture_store(store, root, cases, args.runtime, workers)

            return run

        contenders: dict[str, Callable[[], tuple[float, Counter[str]]]] = {
            "onnx backend runner (1 process)": lambda: run_onnx_runner(cases, args.runtime),
            "fixture-store compare, 1 worker, first run": fs_run(1, True),
            "fixture-store compare, 1 worker, warm": fs_run(1, False),
            f"fixture-store compare, {jobs} workers, first run": fs_run(jobs, True),
            f"fixture-store compare, {jobs} workers, warm": fs_run(jobs, False),
        }
        times: dict[str, list[float]] = {name: [] for name in contenders}
        counts: dict[str, Counter[str]] = {}
        for run in contenders.values():
            run()  # one untimed run each: imports, page cache
        for i in range(args.repeat):
            for name, run in contenders.items():
                elapsed, counts[name] = run()
                times[name].append(elapsed)
                print(f"  run {i + 1}/{args.repeat} {name}: {elapsed:.2f} s", file=sys.stderr)
    print(
        f"cases: {len(cases)}  runtime: {args.runtime}  CPUs: {default_jobs()}  "
        f"medians of {args.repeat} runs, round-robin"
    )
    anchor = "onnx backend runner (1 process)"
    onnx_median = statistics.median(times[anchor])
    for name, secs in times.items():
        median = statistics.median(secs)
        ratio = "" if name == anchor else f"{onnx_median / median:5.2f}x the onnx runner"
        outcomes = dict(counts[name])
        print(
            f"{name:<44} {median:7.2f} s  ({min(secs):.2f}-{max(secs):.2f})  {ratio:<24} {outcomes}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
