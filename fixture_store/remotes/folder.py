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
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from fixture_store.objects import anchored, digests
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

    def _root(self, *, create: bool = False) -> anchored.Folder:
        """The remote's folder, trusted as the user named it; every folder and file below it is
        reached through the path primitive (DESIGN 13), never through a link."""
        return anchored.Folder.root(self.root, create=create, refuse=self._refusal)

    def _refusal(self, path: str, what: str) -> RemoteError:
        return RemoteError(
            f"remote {self.label}: {path} is {what}; a folder remote holds plain folders and "
            "files, and fixture-store never reads or writes through a link there",
            fix=f"remove {path} from the remote folder, then run the command again",
        )

    def _shard(self, digest: Digest, *, create: bool = False) -> anchored.Folder | None:
        """The digest's shard folder (``objects/sha256/ab``); ``None`` if it does not exist."""
        with self._root(create=create) as root:
            if create:
                return root.folder(*_SHARD_PARTS, digest.hex[:2], create=True)
            return root.find(*_SHARD_PARTS, digest.hex[:2])

    def stat(self, digest: Digest) -> RemoteObject | None:
        try:
            shard = self._shard(digest)
            if shard is None:
                return None
            with shard:
                st = shard.lstat(digest.hex[2:])
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as e:
            raise self._error(e, f"cannot read {self.path(digest)}") from e
        if not stat.S_ISREG(st.st_mode):  # a link or a folder is not an object
            return None
        return RemoteObject(st.st_size)

    def upload(self, path: Path, digest: Digest) -> bool:
        if self.stat(digest) is not None:
            # One lstat, where a copy would cost a temp file and an fsync before the link found
            # the name taken: a folder already holding most objects is then checked, not copied.
            return False
        return self.put((*_SHARD_PARTS, digest.hex[:2]), digest.hex[2:], path, digest)

    def put(self, parts: tuple[str, ...], name: str, path: Path, digest: Digest) -> bool:
        """Copy the file at ``path`` (whose bytes are ``digest``) to ``<root>/<parts>/<name>``,
        write-once: False if a file is there already (an object, a pack, a pack index)."""
        with contextlib.ExitStack() as stack:
            try:
                root = stack.enter_context(self._root(create=True))
                temps = stack.enter_context(root.folder(TEMPS, create=True))
                shard = stack.enter_context(root.folder(*parts, create=True))
                fd, tmp_name = temps.create_temp(TEMP_PREFIX)
            except OSError as e:
                raise self._error(e, f"cannot write in {self.root}") from e
            stack.callback(temps.unlink, tmp_name)
            return self._publish(path, digest, fd, temp=(temps, tmp_name), shard=(shard, name))

    def _publish(
        self,
        path: Path,
        digest: Digest,
        fd: int,
        *,
        temp: tuple[anchored.Folder, str],
        shard: tuple[anchored.Folder, str],
    ) -> bool:
        """Copy the store's object into the temp file, check what was written, and link it to
        its final name (write-once); the caller removes the temp file."""
        temps, tmp_name = temp
        shard_folder, name = shard
        final = shard_folder.child(name)
        try:
            with os.fdopen(fd, "wb") as out, open(path, "rb") as src:
                written = _copy_hashing(src, out)
                out.flush()
                os.fsync(out.fileno())
                if written != digest:
                    raise RemoteError(
                        f"the store's object {digest} changed while it was pushed to "
                        f"{self.label} (read {written}); nothing was written",
                        fix="fixture-store verify --full, then push again",
                    )
                os.fchmod(out.fileno(), READ_ONLY)
            try:
                temps.link(tmp_name, shard_folder, name)  # fails if the name exists: write-once
            except FileExistsError:
                return False  # an object is there already: write-once holds
            shard_folder.fsync()
            return True
        except OSError as e:
            raise self._error(e, f"cannot write {final}") from e

    def open(self, digest: Digest) -> BinaryIO:
        try:
            shard = self._shard(digest)
            if shard is None:
                raise FileNotFoundError(errno.ENOENT, "no shard folder", str(self.path(digest)))
            with shard:
                if stat.S_ISLNK(shard.lstat(digest.hex[2:]).st_mode):
                    raise MissingRemoteObject(
                        f"{self.label}: {self.path(digest)} is a link, not an object"
                    )
                return shard.open(digest.hex[2:])  # a FIFO or a folder there is refused
        except (FileNotFoundError, NotADirectoryError) as e:
            if not os.path.isdir(self.root):  # not an empty remote: no remote at all
                raise RemoteError(
                    f"remote {self.label}: the folder {self.root} does not exist",
                    fix="check the remote's path or URL (fixture-store remote list); a push "
                    "creates the folder",
                ) from e
            raise MissingRemoteObject(f"{self.label} does not hold {digest}") from e
        except OSError as e:
            raise self._error(e, f"cannot read {self.path(digest)}") from e

    def files(self, *parts: str, folders: bool = False) -> dict[str, int]:
        """The regular files directly in ``<root>/<parts>`` and their sizes (none if there is no
        such folder; with ``folders``, its folders instead); links there are neither."""
        return {name: st.st_size for name, st in self.entries(*parts, folders=folders).items()}

    def entries(self, *parts: str, folders: bool = False) -> dict[str, os.stat_result]:
        """:meth:`files`, each with its ``lstat``."""
        try:
            with self._root() as root:
                found = root.find(*parts)
                if found is None:
                    return {}
                with found:
                    return {
                        entry.name: entry.stat(follow_symlinks=False)
                        for entry in found.scandir()
                        if (entry.is_dir if folders else entry.is_file)(follow_symlinks=False)
                    }
        except (FileNotFoundError, NotADirectoryError):
            return {}
        except OSError as e:
            raise self._error(e, f"cannot list {self.root.joinpath(*parts)}") from e

    def remove(self, parts: tuple[str, ...], name: str) -> None:
        """Remove the file ``<root>/<parts>/<name>`` (gc of the remote); gone already is fine."""
        try:
            with self._root() as root:
                found = root.find(*parts)
                if found is None:
                    return
                with found:
                    found.unlink(name)
        except (FileNotFoundError, NotADirectoryError):
            return
        except OSError as e:
            raise self._error(e, f"cannot remove {self.root.joinpath(*parts, name)}") from e

    def replace(self, parts: tuple[str, ...], name: str, data: bytes) -> None:
        """Replace (or create) the file ``<root>/<parts>/<name>`` with ``data`` at once: a temp
        file beside it, fsynced, renamed over it (the list of pack indexes a mirror reads)."""
        try:
            with self._root(create=True) as root, root.folder(*parts, create=True) as folder:
                folder.write_atomically(name, data, temp=f".{name}.")
        except OSError as e:
            raise self._error(e, f"cannot write {self.root.joinpath(*parts, name)}") from e

    def read_range(self, parts: tuple[str, ...], name: str, start: int, length: int) -> BinaryIO:
        """Bytes ``start`` to ``start + length`` of ``<root>/<parts>/<name>``, read with
        ``pread`` as they are asked for; :class:`MissingRemoteObject` if the file is not there."""
        where = self.root.joinpath(*parts, name)
        try:
            with self._root() as root:
                found = root.find(*parts)
                if found is None:
                    raise FileNotFoundError(errno.ENOENT, "no such folder", str(where))
                with found:
                    fd = found.open_fd(name)  # a link, a FIFO or a folder there is refused
        except (FileNotFoundError, NotADirectoryError) as e:
            raise MissingRemoteObject(f"{self.label} does not hold {where}") from e
        except OSError as e:
            raise self._error(e, f"cannot read {where}") from e
        return _Range(fd, start, length)  # type: ignore[return-value]

    def _error(self, e: OSError, what: str) -> RemoteError:
        if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            return RemoteError(
                f"remote {self.label}: {what}: {e.strerror}",
                fix="check that the folder is mounted and writable by you",
            )
        if e.errno in (errno.ESTALE, errno.EIO, errno.ETIMEDOUT):
            return TransientRemoteError(f"remote {self.label}: {what}: {e.strerror}")
        return RemoteError(f"remote {self.label}: {what}: {e.strerror or e}")


# Where a push copies an object before it links it to its name (a cut push leaves the temp file
# there: a remote's gc removes it).
TEMPS, TEMP_PREFIX = "tmp", "push-"
# Where the objects are, below the remote's folder (see ``object_key``).
_SHARD_PARTS = ("objects", "sha256")


def _copy_hashing(src: BinaryIO, out: BinaryIO) -> Digest:
    hasher = digests.Hasher()
    while chunk := src.read(digests.CHUNK):
        hasher.update(chunk)
        out.write(chunk)
    return hasher.digest()


class _Range:
    """``length`` bytes of an open file from ``start``, read with ``pread`` (no shared offset:
    ranges of one file may be read at once); it owns the descriptor."""

    def __init__(self, fd: int, start: int, length: int) -> None:
        self.fd, self.pos, self.end = fd, start, start + length

    def read(self, n: int = -1) -> bytes:
        want = self.end - self.pos if n is None or n < 0 else min(n, self.end - self.pos)
        if want <= 0:
            return b""
        data = os.pread(self.fd, want, self.pos)
        self.pos += len(data)
        return data

    read1 = read

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
