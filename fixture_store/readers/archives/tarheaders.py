"""Tar headers read alike by every tar reader, or refused.

tarfile, GNU tar and bsdtar resolve some headers differently: which of two extended headers names
a member, whether a global header's path or size applies, whether the prefix field is part of the
name outside POSIX ustar headers, whether a malformed pax record or number field is an error. The
differential tests (``tests/readers/archives/test_differential.py``) found each of these; such
headers are refused, so that every reader extracts the same members. :func:`logging_tarinfo`
records every header block tarfile parses, :func:`check_headers` judges a member's chain.
"""

from __future__ import annotations

import re
import tarfile
from collections.abc import Mapping
from typing import Any, NamedTuple, Self

from fixture_store.readers.archives._common import fail

_POSIX_MAGIC = b"ustar\0"
_NAME_FIELD = 100
_EXTENDED = (tarfile.XHDTYPE, tarfile.SOLARIS_XHDTYPE, tarfile.GNUTYPE_LONGNAME)
_GLOBAL_KEYS = ("path", "linkpath", "size")
_OCTAL_FIELD = frozenset(b" \0" + b"01234567")
_BASE256_NEGATIVE = 0xFF  # the first byte of a negative base-256 number
_NUMBER_FIELDS = (
    ("mode", 100, 108),
    ("uid", 108, 116),
    ("gid", 116, 124),
    ("size", 124, 136),
    ("mtime", 136, 148),
    ("devmajor", 329, 337),
    ("devminor", 337, 345),
)
_DEVICE_FIELDS = 329  # devmajor and devminor, parsed by GNU tar only for devices
_OCTAL_NUMBER = re.compile(rb" *[0-7]*[ \0]*")
_BASE256_FIRST = (0x80, 0xFF, 0)  # base-256 markers (and an empty field): not checked as octal


class Header(NamedTuple):
    """One header block as stored: its type, the name in its own fields, what is wrong with it."""

    type: bytes
    name: str
    problem: tuple[str, str] | None


def _number_problem(buf: bytes) -> tuple[str, str] | None:
    """Whether a number field is one that tarfile reads but bsdtar or GNU tar refuses."""
    for field, span in (("checksum", buf[148:156]), ("mode", buf[100:108])):
        if not _OCTAL_FIELD.issuperset(span):
            return "corrupt", f"has a {field} field that is not an octal number"
    for field, start, end in _NUMBER_FIELDS:
        span = buf[start:end]
        # bsdtar: octal digits, then only padding (tarfile stops at the first NUL).
        if span[0] not in _BASE256_FIRST and not _OCTAL_NUMBER.fullmatch(span):
            return "corrupt", f"has a {field} field that is not a number"
        if start < _DEVICE_FIELDS and not span.strip(b" "):
            return "corrupt", f"has a blank {field} field"  # GNU tar refuses it, tarfile reads 0
        if span[0] == _BASE256_NEGATIVE and field in ("uid", "gid", "size"):
            return "corrupt", f"has a negative {field} field"  # GNU tar refuses it
    return None


def _header_problem(buf: bytes, info: tarfile.TarInfo) -> tuple[str, str] | None:
    problem = _number_problem(buf)
    if problem is not None:
        return problem
    if buf[257:263] != _POSIX_MAGIC and info.type not in tarfile.GNU_TYPES:
        # tarfile reads bytes 345-499 as a name prefix; bsdtar reads GNU times and a real size.
        if buf[345]:
            return "name-mismatch", "has a prefix field but is not a POSIX ustar header"
        if any(buf[346:500]):
            return "corrupt", "has GNU time, sparse or size fields on a plain member"
    return None


_PAX_RECORD = re.compile(rb"([0-9]+) [^=]+=")


def _pax_problem(payload: bytes) -> tuple[str, str] | None:
    """Whether pax records are malformed: tarfile stops reading them where GNU tar refuses."""
    at = 0
    while at < len(payload):
        if payload[at] == 0:  # both stop at NUL padding
            return None if not payload[at:].strip(b"\0") else ("corrupt", "holds bytes after NULs")
        match = _PAX_RECORD.match(payload, at)
        end = at + int(match.group(1)) if match else at
        if (
            match is None
            or end > len(payload)
            or end < match.end()
            or payload[end - 1 : end] != b"\n"
        ):
            return "corrupt", "holds a malformed pax record"
        at = end
    return None


class _Replay:
    """A file that returns ``head`` before reading on from ``inner`` (tarfile's own reads)."""

    def __init__(self, head: bytes, inner: Any) -> None:
        self._head, self._inner = head, inner

    def read(self, n: int) -> bytes:
        data, self._head = self._head[:n], self._head[n:]
        return data + self._inner.read(n - len(data)) if len(data) < n else data

    def tell(self) -> int:
        return int(self._inner.tell()) - len(self._head)


def logging_tarinfo(log: list[Header]) -> type[tarfile.TarInfo]:
    """A TarInfo class that logs every header block tarfile parses, in order.

    Pax payloads are read (and replayed to tarfile) to check their records.
    """

    class _Logged(tarfile.TarInfo):
        @classmethod
        def frombuf(cls, buf: bytes | bytearray, encoding: str, errors: str) -> Self:
            obj = super().frombuf(buf, encoding, errors)
            log.append(Header(obj.type, obj.name, _header_problem(bytes(buf), obj)))
            return obj

        def _proc_pax(self, tarfile: tarfile.TarFile) -> tarfile.TarInfo:
            inner = tarfile.fileobj
            payload = inner.read(self._block(self.size))  # type: ignore[attr-defined]
            log.append(Header(b"", "", _pax_problem(payload[: self.size])))
            tarfile.fileobj = _Replay(payload, inner)  # type: ignore[assignment]
            try:
                return super()._proc_pax(tarfile)  # type: ignore[misc, no-any-return]
            finally:
                tarfile.fileobj = inner

    return _Logged


def check_headers(
    artifact: str, info: tarfile.TarInfo, chain: list[Header], global_pax: Mapping[str, str]
) -> None:
    """Refuse a member whose headers (``chain``, its own last) tar readers resolve differently."""
    name = info.name
    for header in chain:
        if header.problem is not None:
            rule, what = header.problem
            raise fail(artifact, rule, f"member {name!r}: a header block {what}")
    extended = [h for h in chain[:-1] if h.type in _EXTENDED]
    if len(extended) > 1:
        raise fail(
            artifact,
            "name-mismatch",
            f"member {name!r} has {len(extended)} extended headers; tar readers disagree on "
            "which one applies",
        )
    keys = sorted(k for k in global_pax if k in _GLOBAL_KEYS or k.startswith("GNU.sparse."))
    if keys:
        raise fail(
            artifact,
            "name-mismatch",
            f"a global pax header sets {keys}; tar readers disagree on whether it applies",
        )
    if any(k.startswith("GNU.sparse.") for k in info.pax_headers):
        raise fail(artifact, "sparse", f"member {name!r} is a sparse file")
    stored = chain[-1].name
    if stored.rstrip("/") == name.rstrip("/"):
        return
    # A long name needs the extended header, and the header's own name is a shortened fallback
    # (each writer shortens differently); a name that fits must be the same in both places.
    if name.isascii() and len(name.encode()) <= _NAME_FIELD:
        raise fail(
            artifact,
            "name-mismatch",
            f"member header names {stored!r}, its extended header {name!r}",
        )
    if stored.startswith("/") or ".." in stored.split("/"):
        raise fail(
            artifact,
            "name-mismatch",
            f"member {name[:64]!r}...: the header's fallback name {stored!r} escapes the folder",
        )
