"""Per-tensor byte ranges and digests of a large safetensors reference, for verified partial fetch.

A safetensors file of at least :data:`MIN_BYTES` gets, in each entry of its record's ``arrays``
manifest, where the tensor's bytes are in the file (``offset`` from the start of the file, and
``length``) and the sha256 of exactly those bytes, beside the record's whole-object digest. A
reader that wants one tensor can then fetch the header and that range and verify them alone
(:mod:`fixture_store.partial`); everything that reads the whole object still verifies the whole
object's digest.

The ranges are computed from the checked header when the record is made (:func:`ranged_manifest`,
called where the manifest is built for ``add``, ``import`` and ``regenerate``), and checked
against the object by verification (:func:`check_ranges`): the range of each tensor against its
header on every content check, and each tensor's digest against the object's bytes under
``verify --full``, so a per-tensor digest can never disagree with the whole object silently.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from typing import Any

from fixture_store.errors import UnsafeArrayError
from fixture_store.readers.pinned import SLICE, PinnedFile
from fixture_store.readers.safetensors import Header

# Files smaller than this are fetched whole: a range request saves little below it.
MIN_BYTES = 1024 * 1024
RANGE_KEYS = ("offset", "length", "sha256")
_FIX = "re-record the reference (fixture-store add FILE --name NAME --replace) from its source"


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


def ranged_manifest(header: Header, file: PinnedFile) -> dict[str, dict[str, Any]]:
    """The ``arrays`` manifest of a checked safetensors file: name -> dtype, shape, and, for a
    file of at least :data:`MIN_BYTES`, the tensor's offset, length and sha256."""
    manifest = header.manifest()
    if file.size < MIN_BYTES:
        return manifest
    for name, info in header.tensors.items():
        offset = header.data_offset + info.begin
        manifest[name].update(
            offset=offset, length=info.nbytes, sha256=tensor_digest(file, offset, info.nbytes)
        )
    return manifest


def check_ranges(
    header: Header,
    manifest: Mapping[str, Mapping[str, Any]],
    file: PinnedFile,
    *,
    artifact: str,
    full: bool,
) -> None:
    """Each manifest entry's range is its tensor's in the header; under ``full``, its sha256 is
    that of the object's bytes there. (Names, dtypes and shapes are
    :func:`~fixture_store.readers.safetensors.check_manifest`'s.)"""
    for name in sorted(manifest):
        spec, info = manifest[name], header.tensors.get(name)
        if "offset" not in spec or info is None:
            continue
        offset = header.data_offset + info.begin
        if (spec["offset"], spec["length"]) != (offset, info.nbytes):
            raise UnsafeArrayError(
                artifact,
                "tensor-range",
                f"tensor {name!r}: the manifest's range is {spec['length']} bytes at "
                f"{spec['offset']}; the header's is {info.nbytes} bytes at {offset}",
                fix=_FIX,
            )
        if full and tensor_digest(file, offset, info.nbytes) != spec["sha256"]:
            raise UnsafeArrayError(
                artifact,
                "tensor-digest",
                f"tensor {name!r}: the sha256 of its bytes in the object is not the manifest's "
                f"{spec['sha256']}",
                fix=_FIX,
            )


__all__ = ["MIN_BYTES", "RANGE_KEYS", "check_ranges", "ranged_manifest", "tensor_digest"]
