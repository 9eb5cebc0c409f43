"""Benchmark: rows of a large NPY (by the chunks that cover them) and one member of a large NPZ,
by range, against fetching the whole file.

Run: uv run python bench/partial_rows.py [--size-mib 1024] [--repeat 1]

An NPY of ``--size-mib`` MiB of float32 in rows of 64 KiB (16,384 columns; the file is sparse on
disk: zeros but for the rows read), and an NPZ (``numpy.savez``, members stored) of a 16 MiB
float32 member beside zero filler members of the same total size. Their records are made as
``add`` makes them (whole-object digest; the NPY's 4 MiB chunk digests, the NPZ members' ranges
and digests) under the ``1GiB`` limits profile, with ``url`` sources on the loopback HTTPS server
of :mod:`bench.partial_fetch` (it honours ``Range``). Each round, from an empty store:

- ``rows``: ``Fixtures.tensor(name, "big", rows=(1000, 1256))``: 256 rows, 16 MiB, whose
  covering chunks (5 of 4 MiB: the rows do not start on a chunk) are one range request, each
  verified against its digest, nothing stored;
- ``member``: ``Fixtures.tensor(name, "target")`` of the NPZ: one range, its sha256;
- ``whole``: ``fetch_names`` of the record (the whole file, verified by its digest, stored), then
  the same read from the store.

Medians of ``--repeat`` rounds after one untimed round; the bytes the server sent per side.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.partial_fetch import serve, url_project
from fixture_store.access import Fixtures
from fixture_store.fetch import fetch_names
from fixture_store.objects.store import Store
from fixture_store.registry import Kind
from fixture_store.registry import load as load_registry

MiB = 1024 * 1024
COLUMNS = 16384  # float32: rows of 64 KiB
ROWS = (1000, 1256)  # 16 MiB of rows
TARGET = (64, 65536)  # the NPZ member read: float32, 16 MiB


def write_npy(path: Path, size_mib: int) -> np.ndarray[Any, Any]:
    """The sparse NPY; returns the rows read."""
    n = size_mib * MiB // (4 * COLUMNS)
    rows = np.random.default_rng(0).standard_normal((ROWS[1] - ROWS[0], COLUMNS), np.float32)
    with path.open("wb") as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": "<f4", "fortran_order": False, "shape": (n, COLUMNS)}
        )
        start = f.tell()
        f.seek(start + ROWS[0] * 4 * COLUMNS)
        f.write(rows.tobytes())
        f.truncate(start + n * 4 * COLUMNS)
    return rows


def write_npz(path: Path, size_mib: int) -> np.ndarray[Any, Any]:
    """The NPZ: filler members of at most 256 MiB of zeros, then the target, within
    ``size_mib`` MiB headers included (the ``1GiB`` profile's archive bound); returns it."""
    target = np.random.default_rng(1).standard_normal(TARGET, np.float32)
    filler = size_mib * MiB - target.nbytes - MiB  # room for the zip's and NPY headers
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        i = 0
        while filler > 0:
            rows = min(filler, 256 * MiB) // (4 * COLUMNS)
            with zf.open(f"filler{i}.npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.zeros((rows, COLUMNS), np.float32))
            filler -= rows * 4 * COLUMNS
            i += 1
        with zf.open("target.npy", "w", force_zip64=True) as f:
            np.lib.format.write_array(f, target)
    return target


def project(root: Path, file: Path, url: str, name: str) -> float:
    """A registry whose one record is ``file`` behind ``url``, made as ``add`` makes it; the
    seconds describing it took (its chunk or member digests)."""
    return url_project(root, file, url, name, kind=Kind.ARRAY, array_name="big")


Read = Callable[[Fixtures], np.ndarray[Any, Any]]


def round_(
    root: Path, sent: list[int], name: str, *, read: Read, want: np.ndarray[Any, Any]
) -> dict[str, tuple[float, int]]:
    out: dict[str, tuple[float, int]] = {}
    for side in ("range", "whole"):
        store_dir = root.parent / "store"
        shutil.rmtree(store_dir, ignore_errors=True)
        sent.clear()
        started = time.perf_counter()
        store, registry = Store.at(store_dir), load_registry(root)
        if side == "whole":
            report = fetch_names(store, registry, [name])
            assert report.results[0].ok, report.results[0].message
        got = read(Fixtures(store, registry))
        out[side] = (time.perf_counter() - started, sum(sent))
        assert np.array_equal(got, want), side
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024, help="file size in MiB (1024)")
    parser.add_argument("--repeat", type=int, default=1, help="timed rounds (1)")
    parser.add_argument("--only", choices=["npy", "npz"], help="one of the two files")
    args = parser.parse_args(argv)
    cases: list[tuple[str, str, Callable[[Path, int], np.ndarray[Any, Any]], Read]] = [
        ("npy", "rows", write_npy, lambda f: f.tensor("ref/big.npy", "big", rows=ROWS)),
        ("npz", "member", write_npz, lambda f: f.tensor("ref/big.npz", "target")),
    ]
    for kind, what, write, read in cases:
        if args.only not in (None, kind):
            continue
        work = Path(tempfile.mkdtemp(prefix=f"bench-partial-{kind}-"))
        try:
            file = work / f"big.{kind}"
            want = write(file, args.size_mib)
            server, url, sent = serve(file, work)
            record_s = project(work / "p", file, url, f"ref/big.{kind}")
            rounds = [
                round_(work / "p", sent, f"ref/big.{kind}", read=read, want=want)
                for _ in range(args.repeat + 1)
            ][1:]
            server.shutdown()
            _print(kind, what, args.size_mib, record_s, rounds)
        finally:
            shutil.rmtree(work, ignore_errors=True)


def _print(
    kind: str, what: str, size_mib: int, record_s: float, rounds: list[dict[str, tuple[float, int]]]
) -> None:
    def med(side: str, i: int) -> float:
        return statistics.median(r[side][i] for r in rounds)

    asked = "256 rows (16 MiB) of float32" if kind == "npy" else "one 16 MiB float32 member"
    print(f"{kind}: {size_mib} MiB, {asked}; loopback HTTPS")
    print(
        f"  describing it (its {'chunk' if kind == 'npy' else 'member'} digests): {record_s:.2f} s"
    )
    for side, text in (
        ("range", f"Fixtures.tensor {what} by range (verified, nothing stored)"),
        ("whole", "fetch the whole file (verified, stored), then the same read"),
    ):
        print(f"  {side:<5}  {med(side, 0):7.3f} s  {int(med(side, 1)):>13,} bytes  {text}")
    speedup, share = med("whole", 0) / med("range", 0), med("whole", 1) / med("range", 1)
    print(f"  speed-up {speedup:.1f}x, bytes moved 1/{share:.0f}")


if __name__ == "__main__":
    main()
