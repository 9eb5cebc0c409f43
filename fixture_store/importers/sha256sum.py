"""Checksum lists: the output of ``sha256sum``, ``shasum``, ``sha512sum``, ``md5sum`` and
``sha1sum``, the lines their ``--check`` reads.

``HEX  name`` (text mode) or ``HEX *name`` (binary mode: the same bytes on POSIX); a line that
starts with a backslash has an escaped name (``\\\\`` a backslash, ``\\n`` a newline, ``\\r`` a
carriage return); ``ALG (name) = HEX`` is the ``--tag`` form (``SHA256``, ``MD5``, ...). The
algorithm of a bare line is told by its length, as each tool writes one algorithm: 64 hex
SHA-256, 128 SHA-512, 40 SHA-1, 32 MD5. md5 and sha1 are weak: they check the bytes that are
there, beside the SHA-256 recorded from them (see :data:`.entry.WEAK`). Lines starting with
``#`` are comments. shasum's universal-newline (``^``) and bits (``U``) modes hash other bytes
than the file's, and are refused. A leading ``./`` (``find . -exec sha256sum``) is dropped.

Lines are read one at a time (:func:`iter_entries`): a listing of 300,000 files is never
held as a list of lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from fixture_store.importers.entry import (
    ExpectedDigest,
    ManifestEntry,
    ManifestError,
    refuse_duplicates,
)

FORMAT = "sha256sum"
_LINE = re.compile(r"(?P<esc>\\?)(?P<hex>[0-9A-Fa-f]+) (?P<mode>[ *^U])(?P<name>.+)")
_TAG = re.compile(
    r"(?P<esc>\\?)(?P<alg>SHA256|SHA512|SHA384|SHA1|MD5) \((?P<name>.+)\) = (?P<hex>[0-9A-Fa-f]+)"
)
_BY_LENGTH = {64: "sha256", 128: "sha512", 96: "sha384", 40: "sha1", 32: "md5"}
_UNESCAPE = {"\\\\": "\\", "\\n": "\n", "\\r": "\r"}
_FIX = "regenerate it: sha256sum FILE... > SHA256SUMS (or shasum -a 256 FILE...)"


def parse(text: str, shown: str) -> tuple[ManifestEntry, ...]:
    return refuse_duplicates(iter_entries(text, shown))


def iter_entries(text: str, shown: str) -> Iterator[ManifestEntry]:
    """Each line's entry, in order, read as the text is walked."""
    for number, raw in enumerate(_lines(text), start=1):
        line = raw.removesuffix("\r")
        if not line.strip() or line.startswith("#"):
            continue
        where = f"{shown} line {number}"
        name, algorithm, hexpart = _split(line, where)
        digest = ExpectedDigest.parse(algorithm, hexpart, where)
        while name.startswith("./"):
            name = name[2:]
        yield ManifestEntry(name, (digest,), where)


def _lines(text: str) -> Iterator[str]:
    start = 0
    while start <= len(text):
        end = text.find("\n", start)
        if end < 0:
            yield text[start:]
            return
        yield text[start:end]
        start = end + 1


def looks_like(text: str, _shown: str) -> bool:
    seen = False
    for raw in _lines(text):
        if not raw.strip() or raw.startswith("#"):
            continue
        line = raw.removesuffix("\r")
        if not (_LINE.fullmatch(line) or _TAG.fullmatch(line)):
            return False
        seen = True
    return seen


def _split(line: str, where: str) -> tuple[str, str, str]:
    match = _TAG.fullmatch(line) or _LINE.fullmatch(line)
    if match is None:
        raise ManifestError(where, "not a 'HEX  name' or 'SHA256 (name) = HEX' line", fix=_FIX)
    groups = match.groupdict()
    mode = groups.get("mode")
    if mode in ("^", "U"):
        raise ManifestError(
            where,
            f"shasum's {'universal-newline' if mode == '^' else 'bits'} mode ({mode!r}) hashes "
            "other bytes than the file's",
            fix="shasum -a 256 FILE... (binary or text mode)",
        )
    hexpart = match["hex"]
    algorithm = groups.get("alg") or _BY_LENGTH.get(len(hexpart), "sha256")
    name = match["name"]
    if match["esc"]:
        name = re.sub(r"\\[\\nr]", lambda m: _UNESCAPE[m[0]], name)
    return name, algorithm.lower(), hexpart
