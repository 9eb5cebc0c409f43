"""``sha256sum`` and ``shasum -a 256`` output, the lines ``sha256sum --check`` reads.

``HEX  name`` (text mode) or ``HEX *name`` (binary mode: the same bytes on POSIX); a line that
starts with a backslash has an escaped name (``\\\\`` a backslash, ``\\n`` a newline, ``\\r`` a
carriage return); ``SHA256 (name) = HEX`` is the ``--tag`` form. Lines starting with ``#`` are
comments, as ``--check`` skips them. shasum's universal-newline (``^``) and bits (``U``) modes
hash other bytes than the file's, and are refused. A leading ``./`` (``find . -exec sha256sum``)
is dropped.
"""

from __future__ import annotations

import re

from fixture_store.importers.entry import (
    ExpectedDigest,
    ManifestEntry,
    ManifestError,
    refuse_duplicates,
)

FORMAT = "sha256sum"
_LINE = re.compile(r"(?P<esc>\\?)(?P<hex>[0-9A-Fa-f]+) (?P<mode>[ *^U])(?P<name>.+)")
_TAG = re.compile(r"(?P<esc>\\?)SHA256 \((?P<name>.+)\) = (?P<hex>[0-9A-Fa-f]+)")
_UNESCAPE = {"\\\\": "\\", "\\n": "\n", "\\r": "\r"}
_FIX = "regenerate it: sha256sum FILE... > SHA256SUMS (or shasum -a 256 FILE...)"


def parse(text: str, shown: str) -> tuple[ManifestEntry, ...]:
    entries = []
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.removesuffix("\r")
        if not line.strip() or line.startswith("#"):
            continue
        where = f"{shown} line {number}"
        name, hexpart = _split(line, where)
        digest = ExpectedDigest.parse("sha256", hexpart, where)
        while name.startswith("./"):
            name = name[2:]
        entries.append(ManifestEntry(name, (digest,), where))
    return refuse_duplicates(entries)


def looks_like(text: str, _shown: str) -> bool:
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    return bool(lines) and all(_LINE.fullmatch(ln) or _TAG.fullmatch(ln) for ln in lines)


def _split(line: str, where: str) -> tuple[str, str]:
    match = _TAG.fullmatch(line) or _LINE.fullmatch(line)
    if match is None:
        raise ManifestError(where, "not a 'HEX  name' or 'SHA256 (name) = HEX' line", fix=_FIX)
    mode = match.groupdict().get("mode")
    if mode in ("^", "U"):
        raise ManifestError(
            where,
            f"shasum's {'universal-newline' if mode == '^' else 'bits'} mode ({mode!r}) hashes "
            "other bytes than the file's",
            fix="shasum -a 256 FILE... (binary or text mode)",
        )
    name = match["name"]
    if match["esc"]:
        name = re.sub(r"\\[\\nr]", lambda m: _UNESCAPE[m[0]], name)
    return name, match["hex"]
