"""A minimal safe reader of members inside a verified zip (wheel) or tar(.gz) distribution.

Only what a package source needs: look a member up by its exact, already validated name and
stream it under a size cap. Entries that are absolute, contain ``..``, are links, devices or
folders, or appear twice are never served. The full hostile-archive reader (limits profiles,
manifest matching) lives in ``fixture_store.readers.archives``; this one is kept small so it can be
swapped
for it.
"""

from __future__ import annotations

import io
import stat
import tarfile
import threading
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, BinaryIO

from fixture_store.errors import UsageError
from fixture_store.objects.trees import TreePathError, check_member_path

MAX_MEMBERS = 500_000
MAX_MEMBER_BYTES = 1 << 30


class UnsafeMemberError(UsageError):
    """A requested member is missing, ambiguous, a link, or larger than allowed."""


@dataclass(frozen=True)
class Entry:
    name: str
    size: int


@dataclass
class SafeArchive:
    """An index of the safe regular-file entries of one archive, opened once per thread."""

    path: Path
    entries: dict[str, Entry]
    refused: dict[str, str]
    label: str = ""
    _local: threading.local = field(default_factory=threading.local, repr=False)

    def names(self) -> Iterator[str]:
        return iter(self.entries)

    def open(self, name: str, expected_size: int) -> BinaryIO:
        """Stream of member ``name``; refuses anything but one regular file of that size."""
        if name in self.refused:
            raise UnsafeMemberError(f"{self.label}: member {name!r} {self.refused[name]}")
        entry = self.entries.get(name)
        if entry is None:
            raise UnsafeMemberError(f"{self.label} has no member {name!r}")
        if entry.size != expected_size or entry.size > MAX_MEMBER_BYTES:
            raise UnsafeMemberError(
                f"{self.label}: member {name!r} is {entry.size} bytes, the record expects "
                f"{expected_size}"
            )
        return self._open(name)

    def _open(self, name: str) -> BinaryIO:
        raise NotImplementedError


def _refuse_or_add(
    entries: dict[str, Entry], refused: dict[str, str], name: str, size: int, problem: str | None
) -> None:
    if name in entries or name in refused:
        entries.pop(name, None)
        refused[name] = "appears more than once in the archive"
        return
    if problem is None:
        try:
            check_member_path(name)
        except TreePathError as e:
            problem = f"has an unsafe path ({e.message})"
    if problem is not None:
        refused[name] = problem
    else:
        entries[name] = Entry(name, size)


@dataclass
class _Zip(SafeArchive):
    def _handle(self) -> zipfile.ZipFile:
        zf: zipfile.ZipFile | None = getattr(self._local, "zf", None)
        if zf is None:
            zf = zipfile.ZipFile(self.path)
            self._local.zf = zf
        return zf

    def _open(self, name: str) -> BinaryIO:
        try:
            stream = self._handle().open(name)
        except _DAMAGED as e:
            raise _damaged(self.label, name, e) from e
        return _Checked(stream, self.label, name)  # type: ignore[return-value]


# What zipfile and zlib raise for a member whose header, compressed bytes or CRC are damaged
# (or that needs a password, or a compression method this Python lacks).
_DAMAGED = (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError)


def _damaged(label: str, name: str, e: BaseException) -> UnsafeMemberError:
    return UnsafeMemberError(
        f"{label}: member {name!r} cannot be read: the archive is damaged ({e}); nothing "
        "from it was stored"
    )


class _Checked(io.RawIOBase):
    """A zip member's stream whose read errors say which archive and member are damaged."""

    def __init__(self, stream: IO[bytes], label: str, name: str) -> None:
        self._stream, self._label, self._name = stream, label, name

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        try:
            return self._stream.read(size)
        except _DAMAGED as e:
            raise _damaged(self._label, self._name, e) from e

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._stream.close()
        super().close()


@dataclass
class _Tar(SafeArchive):
    def _handle(self) -> tarfile.TarFile:
        tf: tarfile.TarFile | None = getattr(self._local, "tf", None)
        if tf is None:
            tf = tarfile.open(self.path, "r:*")  # noqa: SIM115 - one handle per thread, kept
            self._local.tf = tf
        return tf

    def _open(self, name: str) -> BinaryIO:
        stream = self._handle().extractfile(name)
        if stream is None:
            raise UnsafeMemberError(f"{self.label}: member {name!r} is not a regular file")
        return stream  # type: ignore[return-value]


def open_archive(path: Path, label: str | None = None) -> SafeArchive:
    """Index a zip or tar(.gz) archive; raise UsageError if it is neither or too large.

    ``label`` names the archive in errors (the store's object name means nothing to a reader).
    """
    label = label or path.name
    entries: dict[str, Entry] = {}
    refused: dict[str, str] = {}
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
            _check_count(label, len(infos))
            for info in infos:
                if info.is_dir():
                    continue
                mode = info.external_attr >> 16
                problem = None
                # Many writers leave the type bits at 0; only an explicit other type is refused.
                if stat.S_IFMT(mode) not in (0, stat.S_IFREG):
                    problem = "is not a regular file (link or special file)"
                _refuse_or_add(entries, refused, info.filename, info.file_size, problem)
        return _Zip(path, entries, refused, label)
    try:
        with tarfile.open(path, "r:*") as tf:
            count = 0
            for member in tf:
                count += 1
                _check_count(label, count)
                if member.isdir():
                    continue
                problem = None if member.isreg() else "is not a regular file (link or special file)"
                _refuse_or_add(entries, refused, member.name, member.size, problem)
    except tarfile.TarError as e:
        raise UsageError(f"{label} is neither a zip nor a tar archive: {e}") from e
    return _Tar(path, entries, refused, label)


def _check_count(label: str, count: int) -> None:
    if count > MAX_MEMBERS:
        raise UsageError(f"{label} has more than {MAX_MEMBERS} members; refusing to read it")
