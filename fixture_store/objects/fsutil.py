"""Small filesystem steps shared by the store, extraction and tree checkouts."""

from __future__ import annotations

import contextlib
import errno
import functools
import io
import os
import stat
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

from fixture_store.errors import StoreError
from fixture_store.objects import anchored

# Concurrent fsyncs share journal commits, so many small ones finish sooner in parallel.
FSYNC_WORKERS = 8
# A filesystem sync costs about what a few fsyncs cost, so below this many files fsync each.
SYNCFS_MIN = 16
# Errors that mean "this kernel or filesystem pair cannot copy in-kernel": fall back to read/write.
_NO_KERNEL_COPY = {
    errno.EXDEV,
    errno.ENOSYS,
    errno.EINVAL,
    errno.EOPNOTSUPP,
    errno.ENOTSUP,
    errno.EBADF,
    errno.EPERM,
}


def fsync_path(path: Path) -> None:
    """Make a file's bytes, or the renames and creates inside a folder, durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def flocked(
    path: Path,
    *,
    shared: bool = False,
    on_wait: Callable[[], None] | None = None,
    folder: anchored.Folder | None = None,
) -> Iterator[None]:
    """Hold a lock on ``path`` (created if needed) for the block: exclusive, or ``shared`` with
    other shared holders. ``flock``, which the kernel releases if the holder dies, so a killed
    writer never leaves a stuck lock. The lock belongs to the open file, so two blocks in one
    process exclude each other as two processes do. ``on_wait`` is called once if the lock is
    not free at once, before waiting for it. With ``folder`` (the lock's folder, opened through
    :mod:`anchored`), the lock file is opened from its descriptor.
    A plain open and flock: a lock library's per-call bookkeeping cost more than the renames it
    guarded when a batch commits 256 shards."""
    try:
        import fcntl
    except ImportError:  # not POSIX: one holder at a time, shared or not
        from filelock import FileLock, Timeout

        lock = FileLock(str(path))
        try:
            lock.acquire(timeout=0)
        except Timeout:
            if on_wait is not None:
                on_wait()
            lock.acquire()
        try:
            yield
        finally:
            lock.release()
        return
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:  # a lock file that is a link would create or lock what it points to
        if folder is None:
            fd = os.open(path, flags, 0o644)
        else:  # opened from the folder's descriptor: no link above it is followed either
            fd = os.open(path.name, flags, 0o644, dir_fd=folder.fd)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise (folder.refuse if folder else anchored.store_refusal)(
                os.fspath(path), "a symbolic link"
            ) from e
        raise
    try:
        mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait is not None:
                on_wait()
            fcntl.flock(fd, mode)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def remove_tree(path: Path) -> None:
    """Remove a folder even though its files and folders are read-only (as store content is).

    Never descends through a link (DESIGN 11): a ``path`` that is a link loses only the link,
    a link inside is unlinked, never followed, and only real folders and files are made
    writable (``chmod`` would follow a link and change what it points to).
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(path)
        return

    def make_writable(_func: object, p: str, _exc: object) -> None:
        for folder, mode in ((os.path.dirname(p), 0o755), (p, 0o644)):
            with contextlib.suppress(OSError):
                if not stat.S_ISLNK(os.lstat(folder).st_mode):
                    os.chmod(folder, mode)
        with contextlib.suppress(OSError):
            os.unlink(p)

    import shutil  # with bz2 and lzma: only a removal pays for it, never a warm verify

    shutil.rmtree(path, onerror=make_writable)


def link_refused(path: str | os.PathLike[str]) -> StoreError:
    """The error for a link found where the store keeps a folder or an object."""
    return anchored.store_refusal(os.fspath(path), "a symbolic link")


def plain_folder(root: Path, *parts: str, create: bool = False) -> bool:
    """Whether ``root/parts`` exists, after checking that it and every folder between it and
    ``root`` is a plain folder: each is opened from its parent's descriptor without following a
    link (:class:`anchored.Folder`), so a symbolic link is refused (a :class:`StoreError`
    naming it), never followed. ``root`` itself is trusted: the store root may be a link the
    user chose, resolved once (see ``Store.at``). With ``create``, missing folders are made
    (``root`` too)."""
    try:
        with anchored.opened(root, *parts, create=create):
            return True
    except FileNotFoundError:
        return False


def kernel_copy(source: BinaryIO, out_fd: int, limit: int | None, min_size: int) -> bool:
    """Copy a regular file of at least ``min_size`` bytes, opened unbuffered, into ``out_fd``
    inside the kernel (``copy_file_range``), at most ``limit`` bytes from its current position.

    Returns False, with nothing written and both positions unchanged, when the source is not
    such a file or this kernel and filesystem pair cannot copy in-kernel: the caller copies
    through user space instead.
    """
    copy = getattr(os, "copy_file_range", None)
    # Only an unbuffered file: a buffered one may have read ahead of its logical position.
    if copy is None or not isinstance(source, io.FileIO):
        return False
    src_fd = source.fileno()
    st = os.fstat(src_fd)
    if not stat.S_ISREG(st.st_mode) or st.st_size < min_size:
        return False
    start = os.lseek(src_fd, 0, os.SEEK_CUR)
    total = 0
    try:
        while limit is None or total < limit:
            want = 1 << 30 if limit is None else min(1 << 30, limit - total)
            n = copy(src_fd, out_fd, want)
            if n == 0:
                break
            total += n
    except OSError as e:
        if e.errno not in _NO_KERNEL_COPY:
            raise
        os.lseek(src_fd, start, os.SEEK_SET)
        os.ftruncate(out_fd, 0)
        os.lseek(out_fd, 0, os.SEEK_SET)
        return False
    return True


@functools.cache
def _load_syncfs() -> Callable[[int], int] | None:
    """Linux's syncfs from the C library the interpreter already runs on; None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        fn = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int]
    fn.restype = ctypes.c_int
    syncfs: Callable[[int], int] = fn
    return syncfs


class SyncBatch:
    """Makes a batch of freshly written files durable with one filesystem sync (Linux
    ``syncfs``) where that is cheaper than an fsync per file.

    Open it before writing the batch: ``syncfs`` reports write-back errors that happened on the
    filesystem since this descriptor was opened, so an I/O error during the batch is not missed.
    Elsewhere, or for a few files, each file is fsynced (in parallel: concurrent fsyncs share
    journal commits).
    """

    def __init__(self, anchor: Path) -> None:
        self._syncfs = _load_syncfs()
        self._fd = os.open(anchor, os.O_RDONLY) if self._syncfs is not None else None

    def __enter__(self) -> SyncBatch:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def syncs_filesystem(self, count: int) -> bool:
        """Whether settling ``count`` paths takes one filesystem sync (see :meth:`sync_all`)."""
        return self._fd is not None and count >= SYNCFS_MIN

    def sync_all(self) -> None:
        """One filesystem sync: every write, create and rename on it so far is durable."""
        assert self._syncfs is not None, "check syncs_filesystem first"
        assert self._fd is not None, "check syncs_filesystem first"
        if self._syncfs(self._fd) != 0:
            import ctypes

            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))

    def settle(self, paths: Sequence[Path]) -> None:
        """Make these files' bytes durable."""
        if self.syncs_filesystem(len(paths)):
            self.sync_all()
        elif len(paths) <= 1:
            for p in paths:
                fsync_path(p)
        else:
            # Imported here, as in store and verify: concurrent.futures (and the logging it
            # loads) would cost the start-up of every command, most of which never pool.
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=FSYNC_WORKERS) as pool:
                list(pool.map(fsync_path, paths))
