"""Object formats by their leading bytes, never by a file name (store objects have none).

The magic numbers of every format a content reader knows, in a module that imports nothing, so
that telling a plain object from an archive or an array costs one short read and no import of
numpy, lz4 or zstandard.
"""

from __future__ import annotations

import os
from typing import Literal

NPY_MAGIC = b"\x93NUMPY"
# A member's local header and the end-of-central-directory record (an empty zip is only that).
ZIP_LOCAL_MAGIC = b"PK\x03\x04"
ZIP_END_MAGIC = b"PK\x05\x06"
# The first bytes of every lz4 and zstd frame.
LZ4_MAGIC = b"\x04\x22\x4d\x18"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# A POSIX (ustar or PAX) tar header carries this magic at this offset.
TAR_MAGIC = b"ustar"
TAR_MAGIC_OFFSET = 257
HEAD_BYTES = TAR_MAGIC_OFFSET + len(TAR_MAGIC)
# A safetensors file has no magic: an 8-byte little-endian header length, then a JSON object.
# Only a length the format's own reference reader would take (it refuses headers over 100 MB;
# so the top bytes are zero, which no tar name, zip, lz4 or zstd frame begins with) followed by
# ``{`` counts, and the fixed magic numbers are tried first.
SAFETENSORS_PREFIX = 8
SAFETENSORS_MAX_HEADER = 100_000_000
SAFETENSORS_MIN_HEADER = len(b"{}")

Sniffed = Literal["npy", "zip", "tar.lz4", "tar.zst", "safetensors", "tar", "unknown"]
# lz4 and zstd frames are read as compressed tar streams: the only ones the readers know.
_PREFIXES: tuple[tuple[tuple[bytes, ...], Sniffed], ...] = (
    ((NPY_MAGIC,), "npy"),
    ((ZIP_LOCAL_MAGIC, ZIP_END_MAGIC), "zip"),
    ((LZ4_MAGIC,), "tar.lz4"),
    ((ZSTD_MAGIC,), "tar.zst"),
)


def sniff_bytes(head: bytes) -> Sniffed:
    """The format that ``head`` (at least :data:`HEAD_BYTES` of a file, or all of it) begins."""
    for magics, fmt in _PREFIXES:
        if head.startswith(magics):
            return fmt
    # Before tar: a safetensors header may hold the text "ustar" at offset 257.
    if is_safetensors(head):
        return "safetensors"
    if head.startswith(TAR_MAGIC, TAR_MAGIC_OFFSET):
        return "tar"
    return "unknown"


def is_safetensors(head: bytes) -> bool:
    """Whether ``head`` begins a safetensors file: a plausible header length, then ``{``."""
    if len(head) <= SAFETENSORS_PREFIX or head[SAFETENSORS_PREFIX] != ord("{"):
        return False
    length = int.from_bytes(head[:SAFETENSORS_PREFIX], "little")
    return SAFETENSORS_MIN_HEADER <= length <= SAFETENSORS_MAX_HEADER


def sniff(source: str | os.PathLike[str] | int) -> Sniffed:
    """The format of a file by its leading bytes: npy, zip (which an NPZ is), tar.lz4,
    tar.zst, safetensors, tar, or unknown. ``source`` is a path (the user's file) or a
    descriptor its caller opened (a store object, opened through the path primitive:
    :class:`fixture_store.objects.store.ObjectFiles`), read from its start and left open."""
    if isinstance(source, int):
        return sniff_bytes(os.pread(source, HEAD_BYTES, 0))
    # os-level: this is 2 us where open() is 8.
    fd = os.open(source, os.O_RDONLY)
    try:
        return sniff_bytes(os.read(fd, HEAD_BYTES))
    finally:
        os.close(fd)


__all__ = [
    "HEAD_BYTES",
    "LZ4_MAGIC",
    "NPY_MAGIC",
    "SAFETENSORS_MAX_HEADER",
    "SAFETENSORS_PREFIX",
    "TAR_MAGIC",
    "TAR_MAGIC_OFFSET",
    "ZIP_END_MAGIC",
    "ZIP_LOCAL_MAGIC",
    "ZSTD_MAGIC",
    "Sniffed",
    "is_safetensors",
    "sniff",
    "sniff_bytes",
]
