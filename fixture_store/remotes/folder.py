"""The shared-folder remote: a path or ``file://`` URL (an NFS mount, a team drive), laid out as
``<root>/objects/sha256/ab/<62 hex>`` with the store's own atomicity rules.

An upload copies the object into ``<root>/tmp/``, hashing the bytes as it writes them, fsyncs,
and only then links the temp file to its final name: ``link`` fails if the name exists, so an
object is written once and never replaced, and a reader never sees a partial object whatever
crashes when. Several processes on several machines may push and pull at once.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from fixture_store.objects import digests, fsutil
from fixture_store.objects.digests import Digest
from fixture_store.objects.store import READ_ONLY
from fixture_store.remotes.base import (
    MissingRemoteObject,
    RemoteError,
    RemoteObject,
    TransientRemoteError,
    object_key,
)


@dataclass(frozen=True)
class FolderRemote:
    """A remote in a folder of the file system."""

    name: str
    root: Path

    @property
    def label(self) -> str:
        return f"{self.name} ({self.root})" if self.name != str(self.root) else str(self.root)

    @property
    def writable(self) -> bool:
        return True

    def path(self, digest: Digest) -> Path:
        return self.root / object_key(digest)

    def stat(self, digest: Digest) -> RemoteObject | None:
        try:
            st = os.lstat(self.path(digest))
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as e:
            raise self._error(e, f"cannot read {self.path(digest)}") from e
        if not stat.S_ISREG(st.st_mode):  # a link or a folder is not an object
            return None
        return RemoteObject(st.st_size)

    def upload(self, path: Path, digest: Digest) -> bool:
        final = self.path(digest)
        if self.stat(digest) is not None:
            # One lstat, where a copy would cost a temp file and an fsync before the link found
            # the name taken: a folder already holding most objects is then checked, not copied.
            return False
        try:
            tmp_dir = self.root / "tmp"
            tmp_dir.mkdir(parents=True, exist_ok=True)
            final.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp_name = tempfile.mkstemp(dir=tmp_dir, prefix="push-")
        except OSError as e:
            raise self._error(e, f"cannot write in {self.root}") from e
        try:
            with os.fdopen(fd, "wb") as out, open(path, "rb") as src:
                written = _copy_hashing(src, out)
                out.flush()
                os.fsync(out.fileno())
            if written != digest:
                raise RemoteError(
                    f"the store's object {digest} changed while it was pushed to {self.label} "
                    f"(read {written}); nothing was written",
                    fix="fixture-store verify --full, then push again",
                )
            os.chmod(tmp_name, READ_ONLY)
            try:
                os.link(tmp_name, final)  # fails if the name exists: write-once
            except FileExistsError:
                return False  # an object is there already: write-once holds
            fsutil.fsync_path(final.parent)
            return True
        except OSError as e:
            raise self._error(e, f"cannot write {final}") from e
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp_name)

    def open(self, digest: Digest) -> BinaryIO:
        try:
            fd = os.open(self.path(digest), os.O_RDONLY | os.O_NOFOLLOW)
        except (FileNotFoundError, NotADirectoryError) as e:
            raise MissingRemoteObject(f"{self.label} does not hold {digest}") from e
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise MissingRemoteObject(
                    f"{self.label}: {self.path(digest)} is a link, not an object"
                ) from e
            raise self._error(e, f"cannot read {self.path(digest)}") from e
        return open(fd, "rb", buffering=0)

    def _error(self, e: OSError, what: str) -> RemoteError:
        if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            return RemoteError(
                f"remote {self.label}: {what}: {e.strerror}",
                fix="check that the folder is mounted and writable by you",
            )
        if e.errno in (errno.ESTALE, errno.EIO, errno.ETIMEDOUT):
            return TransientRemoteError(f"remote {self.label}: {what}: {e.strerror}")
        return RemoteError(f"remote {self.label}: {what}: {e.strerror or e}")


def _copy_hashing(src: BinaryIO, out: BinaryIO) -> Digest:
    hasher = digests.Hasher()
    while chunk := src.read(digests.CHUNK):
        hasher.update(chunk)
        out.write(chunk)
    return hasher.digest()
