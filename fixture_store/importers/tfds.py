"""tensorflow-datasets checksum files: a dataset's ``checksums.tsv`` and the older
``url_checksums/NAME.tsv`` (``.txt``), one download per line::

    URL<TAB>SIZE<TAB>SHA256[<TAB>FILENAME]

as ``tfds.core.download.checksums`` reads them (``#`` lines and blank lines skipped). Each
line is the file ``FILENAME`` (without it, the last segment of the URL's path), its SHA-256 and
size, and the URL it is downloaded from, which becomes the record's ``url`` source when it is
https: absent files (a checksum file lists downloads, not files beside it) are gaps that
``fetch`` fills.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import PurePosixPath
from urllib.parse import unquote, urlsplit

from fixture_store.importers.entry import (
    ExpectedDigest,
    ManifestEntry,
    ManifestError,
    refuse_duplicates,
)

FORMAT = "tfds"
_FIX = "a TFDS checksum line is URL<TAB>SIZE<TAB>SHA256[<TAB>FILENAME]"
_LINE = re.compile(r"[a-z][a-z0-9+.-]*://\S+\t\d+\t[0-9A-Fa-f]{64}(\t[^\t]+)?")


def parse(text: str, shown: str) -> tuple[ManifestEntry, ...]:
    return refuse_duplicates(_entries(text, shown))


def looks_like(text: str, _shown: str) -> bool:
    lines = (ln.rstrip("\r") for ln in text.split("\n"))
    seen = False
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if _LINE.fullmatch(line) is None:
            return False
        seen = True
    return seen


def _entries(text: str, shown: str) -> Iterator[ManifestEntry]:
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip("\r")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"{shown} line {number}"
        fields = line.split("\t")
        if len(fields) not in (3, 4):
            raise ManifestError(
                where, f"expected 3 or 4 tab-separated fields, got {len(fields)}", fix=_FIX
            )
        url, size, checksum = fields[:3]
        if not size.isdigit():
            raise ManifestError(where, f"size {size!r} is not a byte count", fix=_FIX)
        name = fields[3] if len(fields) == 4 else _basename(url, where)  # noqa: PLR2004
        digest = ExpectedDigest.parse("sha256", checksum, where)
        yield ManifestEntry(name, (digest,), where, size=int(size), url=url)


def _basename(url: str, where: str) -> str:
    name = PurePosixPath(unquote(urlsplit(url).path)).name
    if not name:
        raise ManifestError(where, "the URL names no file and the line gives no FILENAME", fix=_FIX)
    return name
