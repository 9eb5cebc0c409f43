"""The one path primitive (DESIGN 13): folders and files under a trusted directory, opened or
created component by component from its descriptor, never through a link.

Every file under the store, the registry, a folder remote, an extraction or a parity dump is
reached through a :class:`Folder`: an open directory descriptor. :meth:`Folder.root` opens the
trusted directory (the store root, ``provenance/``, a remote's folder, a dump folder: a path the
user chose, which may itself be a link and is followed once); below it each component is opened
relative to its parent's descriptor (``openat``) with ``O_NOFOLLOW``, so a symbolic link at any
level is refused, never followed, and a rename of a folder meanwhile cannot redirect what was
opened. A folder must be a folder and a file a regular file (checked with ``fstat`` on what was
opened, not on a name that may change): a FIFO, a device or a folder where a file belongs is
refused too. Files are opened for reading with ``O_NONBLOCK``, so a FIFO is refused instead of
hanging the reader, then made blocking again.

A refusal is raised as the caller's own error: each root carries a :data:`Refusal` (the store's
by default), so the registry refuses with a registry error and a remote with a remote error.
Missing entries are :class:`FileNotFoundError` (an ``OSError``), which callers handle as before.

A file is created as a temp file (``O_CREAT | O_EXCL``: never an existing name, never through a
link) in the folder it belongs to, written, fsynced, and renamed over its name relative to the
folder's descriptor (:meth:`Folder.write_atomically`, :meth:`Folder.replace`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import BinaryIO

from fixture_store.errors import FixtureStoreError, StoreError

# (path shown to the user, what was found there) -> the caller's error.
Refusal = Callable[[str, str], FixtureStoreError]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
FOLDER_FLAGS = os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC
READ_FLAGS = os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC
CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC


def describe(mode: int) -> str:
    """What a file of ``mode`` is, in the words of an error message."""
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a regular file" if stat.S_ISREG(mode) else "not a plain file"


def store_refusal(path: str, what: str) -> StoreError:
    """The store's refusal: it is plain folders and files, and never follows a link out."""
    if what == "a symbolic link":
        return StoreError(
            f"{path} is a symbolic link; the store must be plain folders and files, "
            "and it never follows a link out of itself",
            fix=f"remove the link {path} and run `fixture-store verify`",
        )
    return StoreError(
        f"{path} is {what}; the store must be plain folders and files",
        fix=f"move {path} out of the store and run `fixture-store verify`",
    )


class Folder:
    """An open directory, reached without following a link below its trusted root. Close it
    (or use it as a context manager); sub-folders and files are opened relative to it."""

    __slots__ = ("fd", "path", "refuse")

    def __init__(self, fd: int, path: str, refuse: Refusal) -> None:
        self.fd = fd
        self.path = path
        self.refuse = refuse

    @classmethod
    def root(
        cls, path: str | os.PathLike[str], *, create: bool = False, refuse: Refusal = store_refusal
    ) -> Folder:
        """The trusted directory at ``path`` (followed if it is a link: the user chose it); with
        ``create``, made first if missing. :class:`FileNotFoundError` if it does not exist."""
        shown = os.fspath(path)
        if create:
            os.makedirs(shown, exist_ok=True)
        try:
            fd = os.open(shown, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
        except NotADirectoryError:
            raise refuse(shown, "not a folder") from None  # a file: no descriptor to refuse by
        return cls(fd, shown, refuse)

    def __enter__(self) -> Folder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def child(self, name: str) -> str:
        """The path of an entry, for messages."""
        return os.path.join(self.path, name)

    # -- folders ----------------------------------------------------------------------------
    def folder(self, *parts: str, create: bool = False, mode: int = 0o777) -> Folder:
        """The folder ``parts`` below this one, each component opened without following a link
        and checked to be a folder; with ``create``, missing ones are made. Missing (without
        ``create``): :class:`FileNotFoundError`. The caller closes what it gets."""
        current = self
        try:
            for part in parts:
                _check_name(part)
                nxt = current._open_folder(part, create, mode)
                if current is not self:
                    current.close()
                current = nxt
        except BaseException:
            if current is not self:
                current.close()
            raise
        if current is self:  # no parts: a second descriptor on the same folder
            return Folder(os.dup(self.fd), self.path, self.refuse)
        return current

    def find(self, *parts: str) -> Folder | None:
        """:meth:`folder`, or ``None`` when a component is missing."""
        try:
            return self.folder(*parts)
        except FileNotFoundError:
            return None

    def _open_folder(self, name: str, create: bool, mode: int) -> Folder:
        shown = self.child(name)
        for _ in range(2):
            try:
                fd = os.open(name, FOLDER_FLAGS, dir_fd=self.fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):  # made meanwhile: opened next round
                    os.mkdir(name, mode, dir_fd=self.fd)
                continue
            except OSError as e:
                if e.errno in (errno.ENOTDIR, errno.ELOOP):
                    raise self.refuse(shown, self._what(name, "a folder")) from None
                raise
            return Folder(fd, shown, self.refuse)
        fd = os.open(name, FOLDER_FLAGS, dir_fd=self.fd)  # FileNotFoundError: removed meanwhile
        return Folder(fd, shown, self.refuse)

    def _what(self, name: str, wanted: str) -> str:
        """What ``name`` is, said against what was ``wanted`` there (a link is a link)."""
        try:
            what = describe(os.lstat(name, dir_fd=self.fd).st_mode)
        except OSError:
            what = "gone"
        return what if what == "a symbolic link" else f"{what}, not {wanted}"

    def mkdir(self, name: str, mode: int = 0o777) -> None:
        """Make the folder ``name`` here (:class:`FileExistsError` if something is there)."""
        _check_name(name)
        with _named(self.child(name)):
            os.mkdir(name, mode, dir_fd=self.fd)

    def scandir(self) -> Iterator[os.DirEntry[str]]:
        """This folder's entries (their ``path`` is relative to nothing: use ``name``)."""
        with os.scandir(self.fd) as it:
            yield from it

    def names(self) -> list[str]:
        return os.listdir(self.fd)

    def fsync(self) -> None:
        """Make the creates, renames and removals in this folder durable."""
        os.fsync(self.fd)

    # -- files ------------------------------------------------------------------------------
    def lstat(self, name: str) -> os.stat_result:
        """The entry ``name`` itself (a link is reported as a link, never followed)."""
        _check_name(name)
        with _named(self.child(name)):
            return os.lstat(name, dir_fd=self.fd)

    def regular_size(self, name: str) -> int | None:
        """The size of ``name`` if it is a regular file; ``None`` if it is missing, and the
        refusal if it is anything else (a link, a folder, a FIFO)."""
        try:
            st = self.lstat(name)
        except FileNotFoundError:
            return None
        if not stat.S_ISREG(st.st_mode):
            what = describe(st.st_mode)
            if not stat.S_ISLNK(st.st_mode):
                what = f"{what}, not a regular file"
            raise self.refuse(self.child(name), what)
        return st.st_size

    def open_fd(self, name: str) -> int:
        """A blocking read descriptor on the regular file ``name``: a link, a FIFO (opened
        without waiting for a writer), a device or a folder there is refused."""
        _check_name(name)
        try:
            fd = os.open(name, READ_FLAGS, dir_fd=self.fd)
        except OSError as e:
            if e.errno == errno.ELOOP or (e.errno == errno.EMLINK and _NOFOLLOW):
                raise self.refuse(self.child(name), "a symbolic link") from None
            e.filename = self.child(name)
            raise
        try:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                raise self.refuse(self.child(name), f"{describe(mode)}, not a regular file")
            if _NONBLOCK:
                os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def open(self, name: str) -> BinaryIO:
        """The regular file ``name``, open for reading, unbuffered (see :meth:`open_fd`)."""
        return open(self.open_fd(name), "rb", buffering=0)

    def read_bytes(self, name: str) -> bytes:
        with self.open(name) as f:
            return f.read()

    def create(self, name: str, mode: int = 0o644) -> int:
        """A write descriptor on a new file ``name`` (never an existing name, never a link)."""
        _check_name(name)
        with _named(self.child(name)):
            return os.open(name, CREATE_FLAGS, mode, dir_fd=self.fd)

    def append(self, name: str, data: bytes, mode: int = 0o644) -> None:
        """Append ``data`` to the regular file ``name`` here in one write (created if missing;
        a link or anything but a regular file there is refused, never written through)."""
        _check_name(name)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW | _CLOEXEC | _NONBLOCK
        try:
            fd = os.open(name, flags, mode, dir_fd=self.fd)
        except OSError as e:
            if e.errno == errno.ELOOP or (e.errno == errno.EMLINK and _NOFOLLOW):
                raise self.refuse(self.child(name), "a symbolic link") from None
            raise
        try:
            st_mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(st_mode):
                raise self.refuse(self.child(name), f"{describe(st_mode)}, not a regular file")
            os.write(fd, data)
        finally:
            os.close(fd)

    def create_temp(self, prefix: str, suffix: str = "", mode: int = 0o600) -> tuple[int, str]:
        """A new file with a fresh random name here: its write descriptor and its name."""
        for _ in range(100):
            name = f"{prefix}{os.urandom(6).hex()}{suffix}"
            try:
                return self.create(name, mode), name
            except FileExistsError:
                continue
        raise FileExistsError(errno.EEXIST, "no free temp name", self.child(prefix))

    def mkdtemp(self, prefix: str) -> tuple[Folder, str]:
        """A new folder with a fresh random name here, opened; and its name."""
        for _ in range(100):
            name = f"{prefix}{os.urandom(6).hex()}"
            try:
                self.mkdir(name, 0o700)
            except FileExistsError:
                continue
            return self.folder(name), name
        raise FileExistsError(errno.EEXIST, "no free temp name", self.child(prefix))

    @contextlib.contextmanager
    def writing(self, name: str, *, mode: int = 0o644, temp: str = "") -> Iterator[BinaryIO]:
        """A new file for the block that replaces (or creates) the file ``name`` here when the
        block ends without an error: a temp file beside it (named ``temp`` + random), written,
        fsynced, renamed over the name, the folder fsynced. A reader sees the old file or the
        new one, never a torn one; a failed block leaves nothing behind."""
        _check_name(name)
        fd, tmp = self.create_temp(temp or f".{name}.", ".tmp", mode)
        try:
            with open(fd, "w+b", closefd=True) as out:
                yield out
                out.flush()
                os.fchmod(out.fileno(), mode)  # whatever the umask made of it
                os.fsync(out.fileno())
            try:
                self.replace(tmp, self, name)
            except IsADirectoryError:  # a folder where this file belongs: refused, not replaced
                raise self.refuse(self.child(name), "a folder") from None
            self.fsync()
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=self.fd)

    def write_atomically(
        self, name: str, chunks: Iterable[bytes] | bytes, *, mode: int = 0o644, temp: str = ""
    ) -> None:
        """Replace (or create) the file ``name`` here with these bytes (see :meth:`writing`)."""
        with self.writing(name, mode=mode, temp=temp) as out:
            for chunk in [chunks] if isinstance(chunks, bytes) else chunks:
                out.write(chunk)

    def replace(self, name: str, to: Folder, new_name: str) -> None:
        """Rename the entry ``name`` here over ``new_name`` in ``to`` (atomic; what was at the
        new name, a link included, is replaced, never followed)."""
        _check_name(name)
        _check_name(new_name)
        with _named(self.child(name), to.child(new_name)):
            os.replace(name, new_name, src_dir_fd=self.fd, dst_dir_fd=to.fd)

    def link(self, name: str, to: Folder, new_name: str) -> None:
        """A hard link of ``name`` here as ``new_name`` in ``to``; :class:`FileExistsError` if
        that name is taken (write-once)."""
        _check_name(name)
        _check_name(new_name)
        with _named(self.child(name), to.child(new_name)):
            os.link(name, new_name, src_dir_fd=self.fd, dst_dir_fd=to.fd, follow_symlinks=False)

    def unlink(self, name: str) -> None:
        """Remove the entry ``name`` (a link loses only the link); missing is not an error."""
        _check_name(name)
        with contextlib.suppress(FileNotFoundError), _named(self.child(name)):
            os.unlink(name, dir_fd=self.fd)

    def rmdir(self, name: str) -> None:
        _check_name(name)
        with _named(self.child(name)):
            os.rmdir(name, dir_fd=self.fd)

    def remove_tree(self, name: str) -> None:
        """Remove the entry ``name`` and, if it is a real folder, everything in it, made
        writable first (store content is read-only); a link loses only the link, and nothing is
        followed at any depth. Missing is not an error."""
        _check_name(name)
        try:
            st = os.lstat(name, dir_fd=self.fd)
        except FileNotFoundError:
            return
        if not stat.S_ISDIR(st.st_mode):
            self.unlink(name)
            return
        try:
            sub = self.folder(name)
        except FixtureStoreError:  # replaced by a link or a file meanwhile: remove the entry
            self.unlink(name)
            return
        except FileNotFoundError:
            return
        with sub:
            os.fchmod(sub.fd, 0o700)
            for entry in list(sub.scandir()):
                sub.remove_tree(entry.name)
        with contextlib.suppress(FileNotFoundError):
            self.rmdir(name)


@contextlib.contextmanager
def _named(path: str, path2: str | None = None) -> Iterator[None]:
    """An OS error of the block names full paths (a call relative to a descriptor names only
    the entry), so the caller's message says where to look."""
    try:
        yield
    except OSError as e:
        e.filename = path
        if path2 is not None:
            e.filename2 = path2
        raise


def _check_name(name: str) -> None:
    """One component: never empty, ``.``, ``..`` or holding a separator or NUL (which would
    walk more than one step, or none)."""
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise ValueError(f"not one path component: {name!r}")


@contextlib.contextmanager
def opened(
    root: str | os.PathLike[str],
    *parts: str,
    create: bool = False,
    refuse: Refusal = store_refusal,
) -> Iterator[Folder]:
    """The folder ``root/parts`` for the block: ``root`` trusted, each part never a link."""
    with Folder.root(root, create=create, refuse=refuse) as base:
        if not parts:
            yield base
            return
        with base.folder(*parts, create=create) as folder:
            yield folder
