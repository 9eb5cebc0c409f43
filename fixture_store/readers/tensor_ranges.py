"""Byte ranges and digests of the arrays of a large reference, for verified partial fetch.

A safetensors, NPY or NPZ file of at least :data:`MIN_BYTES`, whose arrays hold at least
:data:`MIN_MEAN_BYTES` each on average (:func:`wants_ranges`), gets, in the entries of its record's
``arrays`` manifest, where an array's bytes are in the file (``offset`` from the start of the
file, and ``length``) and digests of exactly those bytes, beside the record's whole-object
digest:

- a tensor of a safetensors file, and a member of an NPZ stored uncompressed: the ``sha256`` of
  the range (:mod:`fixture_store.readers.array_ranges` finds an NPZ member's range);
- the one array of an NPY: the sha256 of each fixed ``chunk`` of the range in order (``chunks``,
  :data:`CHUNK_BYTES` each, the last shorter), so a range of rows is fetched and verified by the
  chunks that cover it (:func:`plan_read`) and never needs the whole array.

A reader that wants one array (or rows of it) then fetches that range and verifies it alone
(:mod:`fixture_store.sources.ranges`); everything that reads the whole object still verifies the
whole object's digest.

The ranges are computed from the checked headers when the record is made (:func:`range_entry`,
called where the manifest is built for ``add``, ``import`` and ``regenerate``), and checked
against the object by verification (:func:`check_recorded`): each recorded range against the one
the headers give on every content check, and each digest against the object's bytes under
``verify --full``, so a recorded digest can never disagree with the whole object silently.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from fixture_store.errors import UnsafeArrayError, UsageError
from fixture_store.readers.pinned import SLICE, PinnedFile
from fixture_store.readers.safetensors import Header

# Files smaller than this are fetched whole: a range request saves little below it.
MIN_BYTES = 1024 * 1024
# Nor are ranges recorded for a file whose arrays are this small on average: a ranged entry
# costs about 190 bytes of registry more than a plain one (an offset, a length, a 64-hex
# digest), measured by ``bench.parity_many_bench``; a port's reference files of thousands of
# small arrays (7,488 arrays in 7 files: 1.07 MB of ranges) would be mostly ranges, while at
# 64 KiB per array the ranges are under 0.3% of the bytes they address.
MIN_MEAN_BYTES = 64 * 1024


def wants_ranges(size: int, arrays: int) -> bool:
    """Whether a file of ``size`` bytes holding ``arrays`` arrays gets their ranges: at least
    :data:`MIN_BYTES`, and at least :data:`MIN_MEAN_BYTES` per array."""
    return size >= MIN_BYTES and size >= MIN_MEAN_BYTES * max(arrays, 1)


# An NPY's array is hashed in chunks of this many bytes: a 2 GiB array is 512 digests in its
# record, and a range of rows costs at most 4 MiB more than its own bytes on either side.
CHUNK_BYTES = 4 * 1024 * 1024
RANGE_KEYS = ("offset", "length", "sha256")
_FIX = "re-record the reference (fixture-store add FILE --name NAME --replace) from its source"


class Pending(Protocol):
    """Where the digests of ranges are left to be taken later, in the read that stores the
    bytes (:class:`fixture_store.readers.range_tap.RangeDigests`)."""

    def add(self, name: str, offset: int, length: int, *, chunked: bool) -> dict[str, Any]: ...


def tensor_digest(file: PinnedFile, offset: int, length: int) -> str:
    """The sha256 hex of ``length`` bytes at ``offset`` of a pinned file, read in slices."""
    h = hashlib.sha256()
    done = 0
    while done < length:
        chunk = os.pread(file.file.fileno(), min(SLICE, length - done), offset + done)
        if not chunk:
            raise UnsafeArrayError(
                file.artifact, "tensor-range", f"the file ends at byte {offset + done}", fix=_FIX
            )
        h.update(chunk)
        done += len(chunk)
    file.check()
    return h.hexdigest()


def chunk_spans(offset: int, length: int, chunk: int) -> list[tuple[int, int]]:
    """The (offset, length) of each chunk of ``length`` bytes at ``offset``, in order."""
    return [(offset + s, min(chunk, length - s)) for s in range(0, length, chunk)]


def range_entry(file: PinnedFile, offset: int, length: int, *, chunked: bool) -> dict[str, Any]:
    """The manifest keys of an array whose bytes are ``length`` at ``offset`` of ``file``: its
    range and the sha256 of it, or (``chunked``) of each :data:`CHUNK_BYTES` chunk of it."""
    entry: dict[str, Any] = {"offset": offset, "length": length}
    if not chunked:
        return {**entry, "sha256": tensor_digest(file, offset, length)}
    spans = chunk_spans(offset, length, CHUNK_BYTES)
    return {**entry, "chunk": CHUNK_BYTES, "chunks": [tensor_digest(file, *s) for s in spans]}


def ranged_manifest(
    header: Header, file: PinnedFile, pending: Pending | None = None
) -> dict[str, dict[str, Any]]:
    """The ``arrays`` manifest of a checked safetensors file: name -> dtype, shape, and, for a
    file of at least :data:`MIN_BYTES`, the tensor's offset, length and sha256 (left to
    ``pending`` when given: taken in the read that stores the file, see :mod:`.range_tap`)."""
    manifest = header.manifest()
    if not wants_ranges(file.size, len(header.tensors)):
        return manifest
    for name, (offset, length) in _header_ranges(header).items():
        manifest[name].update(
            range_entry(file, offset, length, chunked=False)
            if pending is None
            else pending.add(name, offset, length, chunked=False)
        )
    return manifest


def header_entry(header: Header, file: PinnedFile) -> dict[str, Any] | None:
    """A ranged safetensors file's ``header`` of its record: the length of the bytes before its
    data section and their sha256 (``None`` for a file below :data:`MIN_BYTES`, whose tensors
    carry no ranges). A range is served only once those bytes place it."""
    if file.size < MIN_BYTES:
        return None
    return {"length": header.data_offset, "sha256": tensor_digest(file, 0, header.data_offset)}


def check_header(
    header: Header, recorded: Mapping[str, Any] | None, file: PinnedFile, *, artifact: str
) -> None:
    """The record's ``header`` is the object's: its length, and the sha256 of those bytes."""
    if recorded is None:
        return
    if int(recorded["length"]) != header.data_offset:
        raise UnsafeArrayError(
            artifact,
            "tensor-range",
            f"the record's header is {recorded['length']} bytes; the object's is "
            f"{header.data_offset}",
            fix=_FIX,
        )
    if tensor_digest(file, 0, header.data_offset) != recorded["sha256"]:
        raise UnsafeArrayError(
            artifact,
            "tensor-digest",
            f"the sha256 of the object's {header.data_offset}-byte header is not the record's "
            f"header.sha256 {recorded['sha256']}",
            fix=_FIX,
        )


def header_ranges(header: Header) -> dict[str, tuple[int, int]]:
    """Where each tensor's bytes are in the file, as the header gives them."""
    return _header_ranges(header)


def _header_ranges(header: Header) -> dict[str, tuple[int, int]]:
    return {n: (header.data_offset + i.begin, i.nbytes) for n, i in header.tensors.items()}


def check_ranges(
    header: Header,
    manifest: Mapping[str, Mapping[str, Any]],
    file: PinnedFile,
    *,
    artifact: str,
    full: bool,
) -> None:
    """:func:`check_recorded` of a safetensors file, against the ranges its header gives.
    (Names, dtypes and shapes are :func:`~fixture_store.readers.safetensors.check_manifest`'s.)"""
    check_recorded(_header_ranges(header), manifest, file, artifact=artifact, full=full)


def check_recorded(
    found: Mapping[str, tuple[int, int] | None],
    manifest: Mapping[str, Mapping[str, Any]],
    file: PinnedFile,
    *,
    artifact: str,
    full: bool,
) -> None:
    """Each manifest entry's range is the one the object's headers give its array (``found``:
    name -> (offset, length), or None where the array's bytes are no plain range of the
    object); under ``full``, its digests are those of the object's bytes there. A name the
    object does not have is the manifest check's to refuse."""
    for name in sorted(manifest):
        spec = manifest[name]
        if "offset" not in spec or name not in found:
            continue
        where = found[name]
        if where is None:
            raise UnsafeArrayError(
                artifact,
                "tensor-range",
                f"tensor {name!r}: the manifest records a byte range, but the array's bytes are "
                "no plain range of the object (a compressed NPZ member, Fortran order, or empty)",
                fix=_FIX,
            )
        if (spec["offset"], spec["length"]) != where:
            raise UnsafeArrayError(
                artifact,
                "tensor-range",
                f"tensor {name!r}: the manifest's range is {spec['length']} bytes at "
                f"{spec['offset']}; the header's is {where[1]} bytes at {where[0]}",
                fix=_FIX,
            )
        if full:
            _check_digests(name, spec, file, artifact)


def _check_digests(name: str, spec: Mapping[str, Any], file: PinnedFile, artifact: str) -> None:
    offset, length = int(spec["offset"]), int(spec["length"])
    if "sha256" in spec:
        if tensor_digest(file, offset, length) != spec["sha256"]:
            raise UnsafeArrayError(
                artifact,
                "tensor-digest",
                f"tensor {name!r}: the sha256 of its bytes in the object is not the manifest's "
                f"{spec['sha256']}",
                fix=_FIX,
            )
        return
    spans = chunk_spans(offset, length, int(spec["chunk"]))
    for i, ((at, size), want) in enumerate(zip(spans, spec["chunks"], strict=True)):
        if tensor_digest(file, at, size) != want:
            raise UnsafeArrayError(
                artifact,
                "tensor-digest",
                f"tensor {name!r} chunk {i} of {len(spans)} ({size} bytes at {at}): the sha256 "
                f"of its bytes in the object is not the manifest's {want}",
                fix=_FIX,
            )


# -- reading by range: which bytes to fetch, and the digests that must hold -----------------
@dataclass(frozen=True)
class Piece:
    """One recorded digest a fetched range must satisfy: ``length`` bytes at ``start`` of the
    fetched bytes; ``what`` names the tensor (and chunk) for an error."""

    what: str
    start: int
    length: int
    sha256: str


@dataclass(frozen=True)
class Plan:
    """Fetch ``length`` bytes at ``offset`` of the object, verify each piece, keep
    ``[begin, end)`` of them: exactly the bytes asked for."""

    offset: int
    length: int
    pieces: tuple[Piece, ...]
    begin: int
    end: int


def plan_read(spec: Mapping[str, Any], key: str, first: int, stop: int) -> Plan:
    """The fetch that covers bytes ``[first, stop)`` of an array's range (``first < stop``):
    the whole range for a single digest, the chunks that cover them for chunk digests."""
    offset, length = int(spec["offset"]), int(spec["length"])
    if "sha256" in spec:
        piece = Piece(f"tensor {key!r}", 0, length, str(spec["sha256"]))
        return Plan(offset, length, (piece,), first, stop)
    chunk, digests = int(spec["chunk"]), spec["chunks"]
    lo, hi = first // chunk, -(-stop // chunk)
    pieces = tuple(
        Piece(
            f"tensor {key!r} chunk {i} of {len(digests)}",
            i * chunk - lo * chunk,
            min(chunk, length - i * chunk),
            str(digests[i]),
        )
        for i in range(lo, hi)
    )
    fetched = sum(p.length for p in pieces)
    return Plan(offset + lo * chunk, fetched, pieces, first - lo * chunk, stop - lo * chunk)


def row_span(
    artifact: str, key: str, shape: tuple[int, ...], itemsize: int, rows: tuple[int, int] | None
) -> tuple[int, int, tuple[int, ...]]:
    """Bytes ``[first, stop)`` of a C-order array that hold ``rows`` (``[start, stop)`` of its
    first axis; all of it for None), and the shape they make."""
    if rows is None:
        return 0, itemsize * math.prod(shape), shape
    start, end = rows
    if not shape or not 0 <= start <= end <= shape[0]:
        have = f"{shape[0]} rows" if shape else "no rows (a 0-d array)"
        raise UsageError(
            f"{artifact}: tensor {key!r} has {have}; rows [{start}, {end}) are not within it",
            fix="ask for rows START:STOP with 0 <= START <= STOP <= the first dimension",
        )
    row = itemsize * math.prod(shape[1:])
    return start * row, end * row, (end - start, *shape[1:])


__all__ = [
    "CHUNK_BYTES",
    "MIN_BYTES",
    "MIN_MEAN_BYTES",
    "RANGE_KEYS",
    "Pending",
    "Plan",
    "check_header",
    "check_ranges",
    "check_recorded",
    "chunk_spans",
    "header_entry",
    "header_ranges",
    "plan_read",
    "range_entry",
    "ranged_manifest",
    "row_span",
    "tensor_digest",
    "wants_ranges",
]
