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
from types import MappingProxyType
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


# -- a safetensors record's header and the layout of its ranges ------------------------------
# A safetensors record whose tensors carry ranges also carries its header: the ``length`` of the
# bytes before the data section (the 8-byte length and the JSON header) and their ``sha256``.
# A range is served only after those bytes, fetched and verified by that digest, place the
# tensor exactly there (:mod:`fixture_store.remotes.ranges`); when the record is read, its
# ranges must already tile the data section after the header, in order, without overlap.
HEADER_KEYS = frozenset({"length", "sha256"})
_SAFETENSORS_PREFIX = 8  # the header's own length, before its JSON
_RERECORD = "re-record it from its source (fixture-store add FILE --name NAME --replace)"


def parse_header(raw: Any, where: Where) -> Mapping[str, Any]:
    """A record's ``header``: exactly {length, sha256}, a length of more than the 8 bytes
    that give it and the sha256 of those bytes."""
    if not isinstance(raw, Mapping) or set(raw) != HEADER_KEYS:
        raise where.fail("header", "must be exactly {length, sha256}")
    if not _is_count(raw["length"]) or raw["length"] <= _SAFETENSORS_PREFIX:
        raise where.fail("header.length", "must be an integer above 8 (its length and its JSON)")
    if not _is_hex(raw["sha256"]):
        raise where.fail("header.sha256", "must be 64 lowercase hex digits")
    return MappingProxyType({"length": raw["length"], "sha256": raw["sha256"]})


def check_layout(
    arrays: Mapping[str, Any] | None,
    header: Mapping[str, Any] | None,
    size: int | None,
    *,
    safetensors: bool,
    where: Where,
) -> None:
    """The ranges of a record's tensors against its header, when the record is read: a
    safetensors record whose tensors carry ranges carries its header, every tensor carries
    one, and sorted by offset they tile the data section (from the header's end to the
    object's) exactly, without overlap or gap. ``header`` belongs to nothing else."""
    ranged = {n: s for n, s in (arrays or {}).items() if "offset" in s}
    if not safetensors or not ranged:
        if header is not None:
            raise where.fail(
                "header",
                "only a safetensors record whose tensors carry byte ranges records its header",
                fix="remove it",
            )
        return
    if header is None:
        raise where.fail(
            "header",
            "missing: a safetensors record whose tensors carry byte ranges records its header's "
            "length and sha256, which place each range before it is served",
            fix=_RERECORD,
        )
    bare = sorted(set(arrays or {}) - set(ranged))
    if bare:
        raise where.fail(f"arrays.{bare[0]}", "carries no byte range while the others do")
    at = int(header["length"])
    for name, spec in sorted(ranged.items(), key=lambda kv: (kv[1]["offset"], kv[1]["length"])):
        if spec["offset"] != at:
            how = "overlaps what is before it" if spec["offset"] < at else "leaves a gap"
            raise where.fail(
                f"arrays.{name}.offset",
                f"is {spec['offset']}; the tensors' ranges tile the data section in order from "
                f"the end of the {header['length']}-byte header, so it must be {at} (it {how})",
                fix=_RERECORD,
            )
        at += spec["length"]
    if size is not None and at != size:
        raise where.fail(
            "arrays",
            f"the tensors' ranges end at byte {at}; the object has {size} bytes",
            fix=_RERECORD,
        )
