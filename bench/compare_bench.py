"""Benchmark: the fixture-store compare harness vs onnx's own backend test runner.

Both run the same onnx 1.22.0 node cases (from the installed onnx distribution) with ONNX Runtime
on the CPU provider, end to end, in one run side by side:

- fixture-store: ``compare(...)`` over the cases registered in a temporary project — verifies
  every file against its record, checks the trees out, and runs them in long-lived worker
  processes (one per CPU);
- onnx: ``onnx.backend.test.BackendTest`` with ``onnxruntime.backend``, run by unittest as its
  documentation shows (it parses the .pb files, prepares a session per case and compares).

Usage: ``uv run python bench/compare_bench.py [--limit N] [--jobs J] [--runtime ort]``
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shutil
import sys
import tempfile
import time
import unittest
from collections import Counter
from pathlib import Path

import onnx
import onnx.backend.test

from fixture_store import ingest
from fixture_store import registry as registry_mod
from fixture_store.access import Fixtures
from fixture_store.objects.store import Store
from fixture_store.parity.cases import compare
from fixture_store.registry import LocalSource
from fixture_store.registry.files import write_family

NODE_DATA = Path(onnx.__file__).parent / "backend" / "test" / "data" / "node"


def node_cases(limit: int | None = None) -> list[str]:
    cases = sorted(p.name for p in NODE_DATA.iterdir() if (p / "model.onnx").is_file())
    return cases[:limit] if limit else cases


def build_project(root: Path, cases: list[str], family: str = "onnx-node") -> Fixtures:
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
    return Fixtures(store, registry_mod.load(root))


def run_fixture_store(
    fixtures: Fixtures, cases: list[str], runtime: str, jobs: int | None
) -> tuple[float, Counter[str]]:
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
    parser.add_argument("--jobs", type=int, default=None, help="Worker processes.")
    parser.add_argument("--runtime", default="ort", choices=["ort"])
    args = parser.parse_args(argv)
    cases = node_cases(args.limit)
    with tempfile.TemporaryDirectory(prefix="compare-bench-") as tmp:
        t0 = time.perf_counter()
        fixtures = build_project(Path(tmp), cases)
        setup = time.perf_counter() - t0
        print(
            f"{len(cases)} onnx {onnx.__version__} node cases registered in {setup:.1f} s",
            file=sys.stderr,
        )
        onnx_time, onnx_counts = run_onnx_runner(cases, args.runtime)
        cold_time, cold_counts = run_fixture_store(fixtures, cases, args.runtime, args.jobs)
        warm_time, _ = run_fixture_store(fixtures, cases, args.runtime, args.jobs)
    jobs = args.jobs if args.jobs is not None else os.cpu_count()
    print(f"cases: {len(cases)}  runtime: {args.runtime}  fixture-store workers: {jobs}")
    print(f"onnx backend runner (onnxruntime.backend):  {onnx_time:7.2f} s  {dict(onnx_counts)}")
    print(f"fixture-store compare, first run (hashes):  {cold_time:7.2f} s  {dict(cold_counts)}")
    print(f"fixture-store compare, verified cache warm: {warm_time:7.2f} s")
    print(
        f"speed-up vs the onnx runner: {onnx_time / cold_time:.2f}x (first run), "
        f"{onnx_time / warm_time:.2f}x (warm)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
