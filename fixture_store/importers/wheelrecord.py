"""A wheel's ``RECORD``: the manifest every wheel and every installed distribution carries.

Each row is ``path,hash,size`` (CSV); the hash is ``sha256=`` and the digest in URL-safe
base64 without padding (PEP 376, PEP 427), read here as hex. Paths are relative to the folder
holding the ``.dist-info`` folder (the wheel's root, site-packages once installed), so that
folder is the default root of the files. A row without a hash lists no digest (bytecode an
installer compiled, a file written at install): it is not an entry, and it is reported as
unverified, with its line (:func:`hashless`); ``RECORD``'s own row is the one row left out.
A row whose path leaves the root (``../../bin/tool``, a script an installer wrote) is refused
like any path that leaves a manifest's root.
"""

from __future__ import annotations

import base64
import binascii
import csv
from pathlib import PurePosixPath

from fixture_store.importers.entry import (
    ExpectedDigest,
    ManifestEntry,
    ManifestError,
    refuse_duplicates,
)
from fixture_store.importers.plan import Unverified

FORMAT = "record"
NAME = "RECORD"
DIST_INFO = ".dist-info"
_FIX = "a RECORD row is path,sha256=<urlsafe base64>,size; reinstall the distribution to rewrite it"


def parse(text: str, shown: str) -> tuple[ManifestEntry, ...]:
    return refuse_duplicates([e for e in rows(text, shown) if e is not None])


def hashless(text: str, shown: str) -> tuple[Unverified, ...]:
    """Every row without a hash but RECORD's own, as a file found and not imported."""
    out = []
    reader = csv.reader(text.splitlines())
    for number, row in enumerate(reader, start=1):
        if len(row) != 3 or row[1]:  # noqa: PLR2004 - path, hash, size (a bad row: parse says)
            continue
        path = PurePosixPath(row[0])
        if path.name == NAME and path.parent.name.endswith(DIST_INFO):
            continue
        where = f"{shown} line {number}"
        out.append(Unverified(row[0], where, "RECORD states no hash for it: nothing to check"))
    return tuple(out)


def looks_like(_text: str, shown: str) -> bool:
    return PurePosixPath(shown.replace("\\", "/")).name == NAME


def default_root(manifest: str) -> str | None:
    """The folder a RECORD's paths are relative to: the one holding its ``.dist-info``."""
    path = PurePosixPath(manifest)
    if path.name == NAME and path.parent.name.endswith(DIST_INFO):
        root = str(path.parent.parent)
        return "" if root == "." else root
    return None


def rows(text: str, shown: str) -> list[ManifestEntry | None]:
    """Every row as an entry (``None``: a row without a hash), in order."""
    out: list[ManifestEntry | None] = []
    reader = csv.reader(text.splitlines())
    for number, row in enumerate(reader, start=1):
        if not row:
            continue
        out.append(row_entry(row, f"{shown} line {number}"))
    return out


def row_entry(row: list[str], where: str) -> ManifestEntry | None:
    if len(row) != 3:  # noqa: PLR2004 - path, hash, size
        raise ManifestError(where, f"expected 3 fields (path,hash,size), got {len(row)}", fix=_FIX)
    path, hashed, size_text = row
    if not hashed:
        return None
    algorithm, eq, encoded = hashed.partition("=")
    if not eq:
        raise ManifestError(where, f"{hashed!r} is not ALGORITHM=DIGEST", fix=_FIX)
    try:
        padded = encoded + "=" * (-len(encoded) % 4)
        raw = base64.b64decode(padded, altchars=b"-_", validate=True)
    except (binascii.Error, ValueError) as e:
        raise ManifestError(where, f"{path}: the digest is not URL-safe base64: {e}") from e
    digest = ExpectedDigest.parse(algorithm, raw.hex(), f"{where} ({path})")
    try:
        size = int(size_text) if size_text else None
    except ValueError:
        raise ManifestError(
            where, f"{path}: size {size_text!r} is not a number", fix=_FIX
        ) from None
    if size is not None and size < 0:
        raise ManifestError(where, f"{path}: size {size} is negative", fix=_FIX)
    return ManifestEntry(path, (digest,), where, size=size)
