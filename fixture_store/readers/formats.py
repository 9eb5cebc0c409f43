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

Sniffed = Literal["npy", "zip", "tar.lz4", "tar.zst", "tar", "unknown"]
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
    if head.startswith(TAR_MAGIC, TAR_MAGIC_OFFSET):
        return "tar"
    return "unknown"


def sniff(path: str | os.PathLike[str]) -> Sniffed:
    """The format of the file at ``path`` by its leading bytes: npy, zip (which an NPZ is),
    tar.lz4, tar.zst, tar, or unknown."""
    # os-level: a warm verify sniffs every plain object, and this is 2 us where open() is 8.
    # A store object reaches here only after verification's lstat found a regular file; a file
    # being added may be the user's link to it.
    fd = os.open(path, os.O_RDONLY)
    try:
        return sniff_bytes(os.read(fd, HEAD_BYTES))
    finally:
        os.close(fd)


__all__ = [
    "HEAD_BYTES",
    "LZ4_MAGIC",
    "NPY_MAGIC",
    "TAR_MAGIC",
    "TAR_MAGIC_OFFSET",
    "ZIP_END_MAGIC",
    "ZIP_LOCAL_MAGIC",
    "ZSTD_MAGIC",
    "Sniffed",
    "sniff",
    "sniff_bytes",
]
