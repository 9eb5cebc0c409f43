"""Copying bytes into a temp file of the store while hashing them (SHA-256 and BLAKE3 of the
very bytes that will be published), the check of what was copied against the digest expected,
and the store's errors for what goes wrong on the way."""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from fixture_store.errors import IntegrityError, StoreError
from fixture_store.objects import anchored, digests
from fixture_store.objects.digests import Digest
from fixture_store.objects.layout import ENV_VAR, READ_ONLY


@dataclass(frozen=True, slots=True)
class Stored:
    """An object now in the store: its identity and the BLAKE3 of the same checked bytes."""

    digest: Digest
    blake3: str


def _check(stored: Stored, expected: Digest | None, what: str) -> None:
    if expected is not None and stored.digest != expected:
        actual = stored.digest
        raise IntegrityError(
            f"{what} do not match the expected digest: expected {expected}, "
            f"got {actual}{' or more' if actual.size > expected.size else ''}; "
            "nothing was stored"
        )


def _copy_hashing(
    source: BinaryIO, out: BinaryIO, limit: int | None, tap: digests.Tap | None = None
) -> Stored:
    """Read ``source`` (at most ``limit`` bytes), hashing SHA-256 and BLAKE3 while writing;
    ``tap`` is given each chunk written too."""
    hasher = digests.Hasher(with_blake3=True)
    view = digests.read_buffer()
    while True:
        want = len(view) if limit is None else min(len(view), limit - hasher.size)
        if want <= 0:
            break
        n = source.readinto(view[:want])  # type: ignore[attr-defined]
        if not n:
            break
        chunk = view[:n]
        hasher.update(chunk)
        if tap is not None:
            tap(chunk)
        out.write(chunk)
    b3 = hasher.blake3_hex()
    assert b3 is not None
    return Stored(hasher.digest(), b3)


def _hash_copy(tmp: Path, sync_fd: int | None, size: int, tap: digests.Tap | None = None) -> Stored:
    """Hash the bytes a kernel copy or a link put in ``tmp`` (the bytes that will be published,
    not the source, which could change meanwhile); SHA-256 and BLAKE3 run on two threads, and
    the fsync of ``sync_fd`` on a third, since all three wait on different things. A file of
    ``size`` under one chunk is read whole and hashed from memory. This is the one read of the
    published bytes: ``tap`` is given every chunk of it, in order (range digests ride on it)."""
    data = digests.read_small(tmp) if size < digests.CHUNK else None
    if data is not None:
        if sync_fd is not None:
            os.fsync(sync_fd)
        if tap is not None:
            tap(memoryview(data))
        return Stored(digests.of_bytes(data), digests.blake3_of_bytes(data))
    if sync_fd is None:
        digest, b3 = digests.of_file_both(tmp, tap=tap)
        return Stored(digest, b3)
    from concurrent.futures import ThreadPoolExecutor  # only when pooling: start-up

    with ThreadPoolExecutor(max_workers=1) as pool:
        synced = pool.submit(os.fsync, sync_fd)
        digest, b3 = digests.of_file_both(tmp, tap=tap)
        synced.result()
    return Stored(digest, b3)


def _open_source(path: str | os.PathLike[str]) -> BinaryIO:
    """Open a file to ingest; a file that cannot be read is the caller's error, not the store's."""
    try:
        return open(path, "rb", buffering=0)
    except OSError as e:
        raise StoreError(f"cannot read {os.fspath(path)}: {e.strerror}") from e


def _intact_size(shard: anchored.Folder, name: str, digest: Digest) -> bool:
    """Whether the entry ``name`` of a shard folder is a regular file of the digest's size (a
    link is not an object)."""
    try:
        st = shard.lstat(name)
    except (FileNotFoundError, NotADirectoryError):
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size == digest.size


def _make_read_only(folder: anchored.Folder, name: str) -> None:
    """Make a temp file read-only before it is published (its descriptor, not its name: a link
    put there meanwhile is refused, never followed)."""
    fd = folder.open_fd(name)
    try:
        os.fchmod(fd, READ_ONLY)
    finally:
        os.close(fd)


def io_error(e: OSError, root: Path) -> StoreError:
    """The store error for an OS error while writing under ``root``: full disk, no permission."""
    if e.errno == errno.ENOSPC:
        return StoreError(
            f"no space left on the device holding the store {root}; nothing was stored",
            fix=f"free space, or point --store / ${ENV_VAR} at a larger disk",
        )
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return StoreError(
            f"the store {root} is not writable: {e.strerror}",
            fix=f"choose a writable location with --store or ${ENV_VAR}",
        )
    # A failed rename names its temp file first, and that is gone by now: name what is in the way.
    where = e.filename2 or e.filename or root
    return StoreError(
        f"I/O error in the store {root}: {e}",
        fix=f"check {where}: the store holds only files fixture-store wrote",
    )
