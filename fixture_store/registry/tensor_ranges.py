"""The optional byte range and digests of one entry of a record's ``arrays`` manifest.

A large safetensors, NPY or NPZ reference records, per array, where its bytes are in the object
(``offset``, ``length``) and either their sha256 (a tensor of safetensors, a stored member of an
NPZ) or the sha256 of each fixed ``chunk`` of them in order (``chunks``: the one array of an NPY,
so a range of rows is fetched and verified by the chunks that cover it); see
:mod:`fixture_store.readers.tensor_ranges`. All keys of a kind together, or none.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from fixture_store.registry.where import Where

PLAIN_KEYS = frozenset({"dtype", "shape"})
RANGED_KEYS = PLAIN_KEYS | {"offset", "length", "sha256"}
CHUNKED_KEYS = PLAIN_KEYS | {"offset", "length", "chunk", "chunks"}
_HEX64 = re.compile(r"[0-9a-f]{64}")
_SHAPES = (
    "{dtype, shape}, {dtype, shape, offset, length, sha256} or "
    "{dtype, shape, offset, length, chunk, chunks}"
)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_hex(value: object) -> bool:
    return isinstance(value, str) and _HEX64.fullmatch(value) is not None


def check_entry_keys(spec: Mapping[str, Any], name: str, where: Where) -> None:
    """An entry is exactly {dtype, shape}; or that with a range of non-negative integers and a
    lowercase sha256 hex; or with a range, a positive chunk size and one sha256 hex per chunk
    (as many as chunks of that size cover the range)."""
    if set(spec) not in (PLAIN_KEYS, RANGED_KEYS, CHUNKED_KEYS):
        raise where.fail(f"arrays.{name}", f"must be exactly {_SHAPES}")
    if set(spec) == PLAIN_KEYS:
        return
    for key in ("offset", "length"):
        if not _is_count(spec[key]):
            raise where.fail(f"arrays.{name}.{key}", "must be a non-negative integer")
    if "sha256" in spec:
        if not _is_hex(spec["sha256"]):
            raise where.fail(f"arrays.{name}.sha256", "must be 64 lowercase hex digits")
        return
    chunk, chunks = spec["chunk"], spec["chunks"]
    if not _is_count(chunk) or chunk == 0:
        raise where.fail(f"arrays.{name}.chunk", "must be a positive integer (bytes per chunk)")
    if not isinstance(chunks, list | tuple) or not all(_is_hex(c) for c in chunks):
        raise where.fail(f"arrays.{name}.chunks", "must be a list of 64-lowercase-hex digests")
    want = -(-spec["length"] // chunk)
    if len(chunks) != want:
        raise where.fail(
            f"arrays.{name}.chunks",
            f"lists {len(chunks)} digests; {spec['length']} bytes in chunks of {chunk} are {want}",
        )
