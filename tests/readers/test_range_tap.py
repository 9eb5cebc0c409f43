"""Range digests taken from the bytes a store write hashes, chunk by chunk."""

from __future__ import annotations

import hashlib
import itertools
import os

import pytest

from fixture_store.errors import UnsafeArrayError
from fixture_store.readers.range_tap import RangeDigests
from fixture_store.readers.tensor_ranges import CHUNK_BYTES


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("piece", [4093, 65536, CHUNK_BYTES + 3, 3 * CHUNK_BYTES])
def test_digests_are_those_of_each_range_however_the_bytes_arrive(piece: int) -> None:
    data = os.urandom(2 * CHUNK_BYTES + 100)
    tap = RangeDigests("ckpt/big")
    whole = tap.add("w", 10, 1000, chunked=False)
    chunked = tap.add("c", 50, 2 * CHUNK_BYTES + 7, chunked=True)  # overlaps "w", spans 3 chunks
    for at in range(0, len(data), piece):
        tap.update(memoryview(data)[at : at + piece])
    out = tap.fill({"w": {"dtype": "u1"}, "c": {"dtype": "u1"}})
    assert whole == {"offset": 10, "length": 1000}
    assert chunked == {"offset": 50, "length": 2 * CHUNK_BYTES + 7, "chunk": CHUNK_BYTES}
    assert out["w"] == {"dtype": "u1", "sha256": _sha(data[10:1010])}  # the range is the caller's
    ends = [50, 50 + CHUNK_BYTES, 50 + 2 * CHUNK_BYTES, 57 + 2 * CHUNK_BYTES]
    assert out["c"]["chunks"] == [_sha(data[a:b]) for a, b in itertools.pairwise(ends)]


def test_bytes_that_end_before_a_range_are_refused() -> None:
    tap = RangeDigests("ckpt/big")
    tap.add("a", 0, 100, chunked=False)
    tap.update(b"x" * 99)
    with pytest.raises(UnsafeArrayError, match="ends at byte 99"):
        tap.fill({"a": {}})
