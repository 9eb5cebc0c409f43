"""Benchmark: ``fixture-store import`` of a SHA256SUMS listing against ``sha256sum --check``.

Run: uv run python bench/bench_import.py [--files 500] [--size-kib 256] [--repeat 3]
     uv run python bench/bench_import.py --lines 300000

``--lines N`` measures an import at scale instead: a listing of N ``sha256sum`` lines of files
that are all absent, ``fixture-store import --gaps --dry-run`` (every line parsed, every gap
record built and read back as the registry would read it), its wall and CPU time and its peak
memory (the child's maximum resident set).

``sha256sum --check`` is what a project runs today to trust a folder of reference files. The
import's check (the plan: every listed file hashed against the listing, nothing written) does
the same work and is compared with it; the full import (plan, then every file copied into the
store with SHA-256 and BLAKE3 checked again, then one registry transaction) is printed beside
it, as the cost of turning the listing into records. Medians of ``--repeat`` rounds after one
untimed round (page cache warm for every side alike).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from fixture_store import importers
from fixture_store import registry as registry_mod
from fixture_store.importers.plan import LocalOrigin
from fixture_store.importers.register import register
from fixture_store.objects.store import Store


def _files(data: Path, count: int, size: int) -> None:
    data.mkdir(parents=True)
    for i in range(count):
        (data / f"ref{i:05d}.bin").write_bytes(os.urandom(size))
    listing = subprocess.run(
        ["sha256sum", *sorted(p.name for p in data.iterdir())],
        cwd=data,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    (data / "SHA256SUMS").write_text(listing)


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def at_scale(lines: int) -> None:
    """One ``import --gaps --dry-run`` of ``lines`` absent files, in a child process."""
    import hashlib
    import resource
    import sys

    with tempfile.TemporaryDirectory(prefix="bench-import-scale-") as tmp:
        project = Path(tmp)
        (project / "provenance").mkdir()
        (project / "data").mkdir()
        with open(project / "data" / "SHA256SUMS", "w") as f:
            for i in range(lines):
                digest = hashlib.sha256(str(i).encode()).hexdigest()
                f.write(f"{digest}  sub{i % 100:03d}/ref{i:06d}.bin\n")
        command = [sys.executable, "-m", "fixture_store", "import", "data/SHA256SUMS"]
        command += ["--family", "big", "--gaps", "--dry-run"]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(
            command,
            cwd=project,
            check=True,
            capture_output=True,
            env={**os.environ, "FIXTURE_STORE_DIR": str(project / "store")},
        )
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(
        f"{lines} sha256sum lines, import --gaps --dry-run: {wall:.1f}s wall, {cpu:.1f}s CPU, "
        f"peak {after.ru_maxrss / 1024:.0f} MiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=500)
    parser.add_argument("--size-kib", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--lines", type=int, help="measure an import of N listed absent files")
    args = parser.parse_args()
    if args.lines:
        at_scale(args.lines)
        return
    with tempfile.TemporaryDirectory(prefix="bench-import-") as tmp:
        project = Path(tmp) / "project"
        (project / "provenance").mkdir(parents=True)
        data = project / "data"
        _files(data, args.files, args.size_kib * 1024)
        origin = LocalOrigin(project, data)
        manifest = str(data / "SHA256SUMS")

        def check_tool() -> None:
            subprocess.run(["sha256sum", "--check", "--quiet", "SHA256SUMS"], cwd=data, check=True)

        def plan() -> None:
            importers.plan_import(origin, manifest)

        def full() -> None:
            store_root = Path(tmp) / "store"
            shutil.rmtree(store_root, ignore_errors=True)
            (project / "provenance" / "bench.json").unlink(missing_ok=True)
            store = Store.at(store_root).ensure()
            planned = importers.plan_import(origin, manifest)
            register(store, registry_mod.load(project), planned, origin, family="bench")

        sides = {
            "sha256sum --check": check_tool,
            "import (check only)": plan,
            "import (full)": full,
        }
        for fn in sides.values():
            fn()  # untimed: imports, page cache
        medians = {
            name: statistics.median(_timed(fn) for _ in range(args.repeat))
            for name, fn in sides.items()
        }
    mib = args.files * args.size_kib / 1024
    print(f"{args.files} files, {mib:.0f} MiB, median of {args.repeat}")
    base = medians["sha256sum --check"]
    for name, seconds in medians.items():
        print(f"  {name:22s} {seconds:7.3f}s  {mib / seconds:7.0f} MiB/s  {base / seconds:5.2f}x")


if __name__ == "__main__":
    main()
