"""How many times ``add`` reads a large file, against what a user would otherwise run.

    uv run python -m bench.add_passes [--size-mib 1024] [--formats plain,safetensors,npy,npz]

For each format (random bytes, a safetensors file of 16 float32 tensors, one float32 NPY, an
NPZ of two float32 members written by ``numpy.savez``) a file of ``--size-mib`` is written in a
temp folder and added to a fresh store three ways: ``add`` (copied), ``add --link``, and, as
the user would otherwise do it, ``sha256sum FILE`` then ``cp FILE STORE``. Each row is one child
process: its wall time and the bytes it read per byte of the file (``rchar`` of
``/proc/self/io`` of the child: every ``read``, ``pread``, ``readinto`` and ``copy_file_range``,
page cache or not; the page cache cannot be dropped here, so bytes read is the measure of
passes). The temp folder is removed.

A safetensors, NPY or NPZ file of 1 MiB or more records the digests of its array ranges too
(``fixture_store/readers/tensor_ranges.py``); those are hashed in the one read of the stored
copy that proves its SHA-256 and BLAKE3, so they cost no pass of their own.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench import harness

FORMATS = ("plain", "safetensors", "npy", "npz")
_FILES = {"plain": "blob.bin", "safetensors": "m.safetensors", "npy": "a.npy", "npz": "b.npz"}


def write_file(fmt: str, path: Path, size: int) -> None:
    """A file of about ``size`` bytes in ``fmt``, written without holding it all in memory."""
    if fmt == "safetensors":
        from bench.safetensors import write_file as write_safetensors

        write_safetensors(path, size)
    elif fmt == "npy":
        rows = size // (4 * 4096)
        arr = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(rows, 4096))
        for at in range(0, rows, 4096):
            arr[at : at + 4096] = np.random.default_rng(at).random((min(4096, rows - at), 4096))
        arr.flush()
        del arr
    elif fmt == "npz":
        rows = size // 2 // (4 * 4096) - 64  # 1 MiB under: the zip within the 1GiB profile
        half = np.random.default_rng(0).random((rows, 4096), dtype=np.float32)
        np.savez(path, a=half, b=half[::-1])
    else:
        with open(path, "wb") as f:
            for _ in range(0, size, 1 << 24):
                f.write(os.urandom(min(1 << 24, size)))


def _rchar() -> int:
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("rchar:"))


def child(how: str, path: str, work: str) -> None:
    """One measured operation (``how``: ``add``, ``add --link``, or ``sha256sum`` then ``cp``);
    prints ``{"seconds", "read"}``."""
    from fixture_store import ingest
    from fixture_store import registry as registry_mod
    from fixture_store.objects.store import Store

    project, store = Path(path).parent, Store.at(work)
    registry = registry_mod.load(project)
    before, start = _rchar(), time.perf_counter()
    if how == "user":  # a reaped child's rchar is added to its parent's: ours counts both
        for cmd in (["sha256sum", path], ["cp", path, work]):
            subprocess.run(cmd, check=True, capture_output=True)
    else:
        extra = {"profile": "1GiB"}
        link = how == "link"
        ingest.add(store, registry, path, name="big/one", kind="checkpoint", extra=extra, link=link)
    read = _rchar() - before
    print(json.dumps({"seconds": time.perf_counter() - start, "read": read}))


def _run(how: str, path: Path, work: Path) -> tuple[float, int]:
    cmd = [sys.executable, "-m", "bench.add_passes", "child", how, str(path), str(work)]
    done = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{how} of {path} failed:\n{done.stderr}")
    doc = json.loads(done.stdout.strip().splitlines()[-1])
    return float(doc["seconds"]), int(doc["read"])


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["child"]:
        child(*args[1:])
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--formats", default=",".join(FORMATS))
    ns = ap.parse_args(args)
    print(f"{'format':12} {'how':26} {'MiB':>6} {'read/byte':>9} {'seconds':>8}")
    with tempfile.TemporaryDirectory(prefix="fs-add-passes-") as tmp:
        for fmt in ns.formats.split(","):
            folder = Path(tmp) / fmt
            path = harness.project(folder / "proj") / _FILES[fmt]
            write_file(fmt, path, ns.size_mib << 20)
            size = path.stat().st_size
            for how, label in (("copy", "add"), ("link", "add --link"), ("user", "sha256sum + cp")):
                work = folder / f"store-{how}"
                work.mkdir()
                seconds, read = _run(how, path, work)
                print(f"{fmt:12} {label:26} {size >> 20:>6} {read / size:>9.2f} {seconds:>8.2f}")
                shutil.rmtree(work)


if __name__ == "__main__":
    main()
