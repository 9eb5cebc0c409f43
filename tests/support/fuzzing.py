"""Fuzz targets for the archive, NPY and safetensors readers, and a time-bounded mutation runner.

A target passes when the reader returns or raises one of the library's own typed errors
(:class:`~fixture_store.errors.FixtureStoreError`); anything else is a finding. The hypothesis
tests in ``test_fuzz.py`` drive the targets in CI; ``python -m tests.support.fuzzing SECONDS``
runs a
longer random campaign and prints the iteration counts.
"""

from __future__ import annotations

import contextlib
import io
import random
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from fixture_store import limits
from fixture_store.errors import FixtureStoreError
from fixture_store.objects import digests
from fixture_store.objects.store import Store
from fixture_store.readers import archives, safetensors
from fixture_store.readers import npy as arrays
from tests.support.hostile import compress, manifest, regular_tar, zip_bytes

# Tight limits keep each iteration small: a mutated size field cannot make it allocate much.
FUZZ_LIMITS = limits.tighten(
    limits.DEFAULT,
    archive_bytes=1 << 20,
    member_bytes=1 << 20,
    expanded_bytes=4 << 20,
    member_count=64,
    tensor_bytes=1 << 20,
    total_array_bytes=4 << 20,
    tensor_header_bytes=4096,
)
_MEMBERS = {"a/x.bin": bytes(range(256)) * 3, "b.txt": b"hello\n", "c": b""}
SEED_MANIFEST = manifest(_MEMBERS)


def _npy_seed(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def _npz_seed() -> bytes:
    buf = io.BytesIO()
    np.savez(buf, x=np.arange(6, dtype=np.float32).reshape(2, 3), y=np.array([True, False]))
    return buf.getvalue()


def _safetensors_seeds() -> list[bytes]:
    from tests.support.safetensors_corpus import entry, st_bytes

    return [
        st_bytes(
            {
                "__metadata__": {"format": "pt"},
                "w": entry("F32", [2, 3], 0, 24),
                "b": entry("BF16", [2], 24, 28),
                "e": entry("I8", [0], 28, 28),
            },
            bytes(range(28)),
        ),
        st_bytes({"s": entry("BOOL", [], 2, 3), "u": entry("U16", [1], 0, 2)}, b"\1\2\1"),
    ]


def seeds() -> dict[str, list[bytes]]:
    tar = regular_tar(_MEMBERS)
    return {
        "npy": [
            _npy_seed(np.arange(10, dtype="<i4")),
            _npy_seed(np.asfortranarray(np.ones((3, 2), ">f8"))),
            _npy_seed(np.array(["ab", "c"])),
        ],
        "tar": [tar],
        "tar.lz4": [compress(tar, "tar.lz4")],
        "tar.zst": [compress(tar, "tar.zst")],
        "zip": [zip_bytes(_MEMBERS), zip_bytes(_MEMBERS, method=zipfile.ZIP_DEFLATED), _npz_seed()],
        "safetensors": _safetensors_seeds(),
    }


_INTERESTING = [
    b"\x00",
    b"\xff",
    b"\x7f",
    b"\x80",
    b"\xff\xff\xff\xff",
    b"\x00\x00\x00\x80",
    b"/",
    b"..",
    b"\\",
    b"\x93NUMPY",
    b"PK\x03\x04",
    b"PK\x05\x06",
    b"(",
    b"{",
]


def mutate(data: bytes, rng: random.Random, rounds: int = 4) -> bytes:
    """A few random edits: flips, overwrites with boundary values, inserts, cuts, repeats."""
    buf = bytearray(data)
    for _ in range(rng.randint(1, rounds)):
        op = rng.randrange(6)
        at = rng.randrange(len(buf) + 1)
        if op == 0 and buf:
            i = min(at, len(buf) - 1)
            buf[i] ^= 1 << rng.randrange(8)
        elif op == 1:
            piece = rng.choice(_INTERESTING)
            buf[at : at + len(piece)] = piece
        elif op == 2:
            buf[at:at] = rng.randbytes(rng.randint(1, 16))
        elif op == 3:
            del buf[at:]
        elif op == 4 and buf:
            end = min(len(buf), at + rng.randint(1, 64))
            buf[at:at] = buf[at:end]
        else:
            del buf[at : at + rng.randint(1, 32)]
    return bytes(buf)


def target_npy(data: bytes) -> None:
    with contextlib.suppress(FixtureStoreError):
        arrays.read_npy(io.BytesIO(data), FUZZ_LIMITS)


def target_safetensors(data: bytes, folder: Path) -> None:
    """Refused with a typed error, or every tensor reads within the file's bytes."""
    path = folder / "fuzz.safetensors"
    path.write_bytes(data)
    with contextlib.suppress(FixtureStoreError):
        tensors = safetensors.open_tensors(path, FUZZ_LIMITS)
        for name in tensors:
            tensors[name].tobytes()


def target_archive(data: bytes, fmt: str, folder: Path) -> None:
    suffix = {"tar": ".tar", "tar.lz4": ".tar.lz4", "tar.zst": ".tar.zst", "zip": ".zip"}[fmt]
    path = folder / f"fuzz{suffix}"
    path.write_bytes(data)
    with contextlib.suppress(FixtureStoreError):
        archives.scan(path, FUZZ_LIMITS)
    if fmt == "zip":
        with contextlib.suppress(FixtureStoreError):
            arrays.read_npz(path, FUZZ_LIMITS)
    # Extraction of the same bytes: refused, or complete and checkable; never staging left over.
    store = Store.at(folder / "store")
    try:
        archives.extract(store, path, SEED_MANIFEST, FUZZ_LIMITS)
    except FixtureStoreError:
        pass
    else:
        archives.check_extraction(store, path, SEED_MANIFEST, archive_digest=digests.of_file(path))
    leftovers = list(store.tmp_dir.iterdir()) if store.tmp_dir.exists() else []
    assert not leftovers, f"extraction left {leftovers} behind"


def targets(folder: Path) -> dict[str, Callable[[bytes], None]]:
    out: dict[str, Callable[[bytes], None]] = {
        "npy": target_npy,
        "safetensors": lambda data: target_safetensors(data, folder),
    }
    for fmt in ("tar", "tar.lz4", "tar.zst", "zip"):
        out[fmt] = lambda data, fmt=fmt: target_archive(data, fmt, folder)  # type: ignore[misc]
    return out


def campaign(seconds: float, seed: int = 0) -> dict[str, int]:
    """Mutate seeds for ``seconds`` split across targets; return iterations per target."""
    rng = random.Random(seed)
    counts: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        run = targets(Path(tmp))
        corpus = seeds()
        per_target = seconds / len(run)
        for name, fn in run.items():
            n = 0
            deadline = time.monotonic() + per_target
            while time.monotonic() < deadline:
                fn(mutate(rng.choice(corpus[name]), rng))
                n += 1
            counts[name] = n
    return counts


if __name__ == "__main__":
    total = float(sys.argv[1]) if len(sys.argv) > 1 else 60.0
    result = campaign(total, int(sys.argv[2]) if len(sys.argv) > 2 else 0)
    print(result, "total", sum(result.values()))
