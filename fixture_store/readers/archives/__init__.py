"""Streaming archive reader and extraction under a limits profile (DESIGN decision 6).

``.tar``, ``.tar.lz4`` and ``.tar.zst`` are read as one forward stream: the compressed bytes are
decoded in bounded slices (:mod:`.decode`), every decoded byte (tar headers included) is counted
against the profile, and the tar layer is walked in stream mode (:mod:`.tar`), so nothing is ever
seeked or buffered whole. ``.zip``/``.npz`` are read through their central directory after
checking that the container is exactly what it claims (:mod:`.zip`). Tar headers that tar readers
resolve differently (:mod:`.tarheaders`) and zip records that disagree with the central directory
(:mod:`.zipheaders`) are refused: what is accepted, ``zstd -dc``, ``lz4 -dc``, GNU tar, bsdtar and
``unzip`` read the same way.

Each member must be a regular file with a safe relative path that the manifest lists, with the
manifest's size and digest (:func:`scan`). :func:`extract` writes a checked archive into the
store (:mod:`.extract`); :func:`write_tar` writes byte-reproducible tars (:mod:`.write`).
"""

from __future__ import annotations

from fixture_store.readers.archives._common import RATIO_FLOOR, Format
from fixture_store.readers.archives._members import ManifestLike, MemberSink
from fixture_store.readers.archives.extract import (
    MEMBERS,
    SENTINEL,
    SENTINEL_FORMAT,
    check_extraction,
    extract,
    extraction_path,
)
from fixture_store.readers.archives.scan import detect_format, scan
from fixture_store.readers.archives.write import Compression, MemberSource, write_tar
from fixture_store.readers.archives.zip import open_zip, read_zip_member
from fixture_store.readers.formats import (
    LZ4_MAGIC,
    TAR_MAGIC,
    TAR_MAGIC_OFFSET,
    ZIP_END_MAGIC,
    ZIP_LOCAL_MAGIC,
    ZSTD_MAGIC,
)

__all__ = [
    "LZ4_MAGIC",
    "MEMBERS",
    "RATIO_FLOOR",
    "SENTINEL",
    "SENTINEL_FORMAT",
    "TAR_MAGIC",
    "TAR_MAGIC_OFFSET",
    "ZIP_END_MAGIC",
    "ZIP_LOCAL_MAGIC",
    "ZSTD_MAGIC",
    "Compression",
    "Format",
    "ManifestLike",
    "MemberSink",
    "MemberSource",
    "check_extraction",
    "detect_format",
    "extract",
    "extraction_path",
    "open_zip",
    "read_zip_member",
    "scan",
    "write_tar",
]
