"""Benchmark: the checked archive and tensor readers vs what a user would otherwise call.

Side by side in one run, on the same bytes:

- extraction of a ``.tar.zst``: ``archives.extract`` (streamed, every member checked against the
  manifest and hashed, staged, fsynced, renamed) vs ``zstandard`` + ``tarfile.extractall`` with
  the ``data`` filter (the standard library's own safety filter, no manifest, no hashing);
- a ``.tar.lz4`` scan: ``archives.scan`` (hash only) vs ``tarfile`` reading every member;
- NPY: ``arrays.read_npy`` (header checked, memory-mapped) vs ``numpy.load`` (full read) and
  ``numpy.load(mmap_mode="r")``;
- NPZ: ``arrays.read_npz`` with a manifest vs ``numpy.load`` reading every array.

Usage: ``uv run python bench/hostile_bench.py [--mib 64] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lz4.frame
import numpy as np
import zstandard

from fixture_store.objects import digests
from fixture_store.objects.store import Store
from fixture_store.readers import archives
from fixture_store.readers import npy as arrays

Pair = tuple[float, float]


def medians(repeat: int, ours: Callable[[], object], theirs: Callable[[], object]) -> Pair:
    """Median seconds of ``ours`` and ``theirs``: one untimed run each (imports, page cache),
    then ``repeat`` timed runs alternating between them, so both are measured warm."""
    ours()
    theirs()
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeat):
        for fn, out in ((ours, times[0]), (theirs, times[1])):
            start = time.perf_counter()
            fn()
            out.append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1])


def row(what: str, pair: Pair, other: str) -> None:
    ours, theirs = pair
    print(
        f"{what:<34} fixture-store {ours * 1000:9.1f} ms   {other:<28} {theirs * 1000:9.1f} ms"
        f"   time ratio {ours / theirs:5.2f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=64, help="payload size in MiB")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        # Half random (incompressible), half structured: like weights next to small metadata.
        n_files = 64
        size = args.mib * (1 << 20) // n_files
        members = {}
        for i in range(n_files):
            data = rng.bytes(size) if i % 2 else np.arange(size // 4, dtype=np.float32).tobytes()
            members[f"layer{i // 8}/part{i}.bin"] = data
        manifest = {k: digests.of_bytes(v) for k, v in members.items()}
        zst = tmp / "a.tar.zst"
        archives.write_tar(members, zst, "zstd")
        lz4_path = tmp / "a.tar.lz4"
        archives.write_tar(members, lz4_path, "lz4")
        print(
            f"payload {args.mib} MiB in {n_files} members; medians of {args.repeat} runs "
            "each, after one untimed run, alternating; time ratio = fixture-store / other"
        )

        def ours_extract() -> None:
            store = Store.at(tmp / "store")
            shutil.rmtree(store.root, ignore_errors=True)
            archives.extract(store, zst, manifest)

        def tarfile_extract() -> None:
            out = tmp / "plain"
            shutil.rmtree(out, ignore_errors=True)
            with open(zst, "rb") as f:
                reader = zstandard.ZstdDecompressor().stream_reader(f)
                with tarfile.open(fileobj=reader, mode="r|") as tf:
                    tf.extractall(out, filter="data")

        row(
            "extract .tar.zst",
            medians(args.repeat, ours_extract, tarfile_extract),
            "tarfile extractall(data)",
        )

        def tarfile_read() -> None:
            with lz4.frame.open(lz4_path) as f, tarfile.open(fileobj=f, mode="r|") as tf:
                for info in tf:
                    r = tf.extractfile(info)
                    if r is not None:
                        while r.read(1 << 20):
                            pass

        row(
            "scan .tar.lz4 (read all members)",
            medians(args.repeat, lambda: archives.scan(lz4_path, manifest=manifest), tarfile_read),
            "tarfile read",
        )

        arr = rng.standard_normal((args.mib * (1 << 20) // 8 // 1024, 1024))
        npy = tmp / "a.npy"
        np.save(npy, arr)
        row(
            "read .npy (then sum)",
            medians(args.repeat, lambda: arrays.read_npy(npy).sum(), lambda: np.load(npy).sum()),
            "numpy.load",
        )
        row(
            "open .npy (header only, mmap)",
            medians(args.repeat, lambda: arrays.read_npy(npy), lambda: np.load(npy, mmap_mode="r")),
            "numpy.load(mmap_mode=r)",
        )

        npz = tmp / "a.npz"
        parts: dict[str, Any] = {f"t{i}": arr[i::8] for i in range(8)}
        np.savez(npz, **parts)
        spec = {k: {"dtype": "float64", "shape": list(v.shape)} for k, v in parts.items()}

        def numpy_npz() -> None:
            with np.load(npz) as z:
                for k in z.files:
                    z[k]

        row(
            "read .npz (8 arrays)",
            medians(args.repeat, lambda: arrays.read_npz(npz, manifest=spec), numpy_npz),
            "numpy.load",
        )


if __name__ == "__main__":
    main()
