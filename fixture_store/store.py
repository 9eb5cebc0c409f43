"""The content-addressed object store (DESIGN decision 4).

Layout under the store root::

    objects/sha256/ab/cdef...   read-only objects, named by the hex of their SHA-256
    tmp/                        temp files of writes in progress (same filesystem: rename is atomic)
    locks/ab.lock               one lock per shard, held only around the check-and-rename
    state/                      caches that may be deleted at any time (verified-state cache)

A write hashes the bytes while copying them into ``tmp/``, fsyncs, checks the digest against the
expected one and only then renames the file into ``objects/``: a crash at any instant leaves at
most an orphan temp file, never a partial object.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import platformdirs
from filelock import FileLock

from fixture_store import digests, fsutil
from fixture_store.digests import Digest
from fixture_store.errors import IntegrityError, StoreError

ENV_VAR = "FIXTURE_STORE_DIR"
READ_ONLY = stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH
# Concurrent fsyncs share journal commits, so many small writes finish sooner in parallel.
WRITE_WORKERS = 8
# A temp entry untouched this long belongs to a writer that died, not to one still writing.
STALE_TMP_SECONDS = 3600.0


@dataclass(frozen=True, slots=True)
class Stored:
    """An object now in the store: its identity and the BLAKE3 of the same checked bytes."""

    digest: Digest
    blake3: str


def default_root(flag: str | os.PathLike[str] | None = None) -> Path:
    """Where the store lives: the flag, then ``$FIXTURE_STORE_DIR``, then a per-user cache dir."""
    if flag:
        return Path(flag).expanduser()
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_cache_dir("fixture-store", appauthor=False))


@dataclass(frozen=True)
class Store:
    """A handle on a store root. Cheap to create; all state is on disk."""

    root: Path

    @classmethod
    def at(cls, root: str | os.PathLike[str] | None = None) -> Store:
        return cls(default_root(root).absolute())

    # -- layout ---------------------------------------------------------------------------------
    @property
    def objects_dir(self) -> Path:
        return self.root / "objects" / "sha256"

    @property
    def tmp_dir(self) -> Path:
        return self.root / "tmp"

    @property
    def state_dir(self) -> Path:
        return self.root / "state"

    def object_path(self, digest: Digest | str) -> Path:
        hexpart = digest.hex if isinstance(digest, Digest) else digest
        return self.objects_dir / hexpart[:2] / hexpart[2:]

    def ensure(self) -> Store:
        try:
            for d in (self.objects_dir, self.tmp_dir, self.root / "locks", self.state_dir):
                d.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(
                f"cannot create the store at {self.root}: {e.strerror}",
                fix=f"choose a writable location with --store or ${ENV_VAR}",
            ) from e
        return self

    @contextlib.contextmanager
    def lock(self, digest: Digest) -> Iterator[None]:
        """Cross-process lock for one object's shard (flock: released if the holder dies)."""
        with FileLock(str(self.root / "locks" / f"{digest.hex[:2]}.lock")):
            yield

    # -- reading --------------------------------------------------------------------------------
    def has(self, digest: Digest) -> bool:
        """Whether an object file exists with the right size. Presence is not verification."""
        try:
            return self.object_path(digest).stat().st_size == digest.size
        except FileNotFoundError:
            return False

    def iter_objects(self) -> Iterator[tuple[str, Path]]:
        """Every object file as (hex, path); stray names are skipped, never trusted."""
        if not self.objects_dir.is_dir():
            return
        for shard in sorted(self.objects_dir.iterdir()):
            if len(shard.name) != 2 or not shard.is_dir():
                continue
            for obj in sorted(shard.iterdir()):
                hexpart = shard.name + obj.name
                if len(hexpart) == 64 and all(c in "0123456789abcdef" for c in hexpart):
                    yield hexpart, obj

    # -- writing --------------------------------------------------------------------------------
    def put_stream(
        self, stream: BinaryIO, expected: Digest | None = None, *, replace: bool = False
    ) -> Digest:
        """Copy a stream into the store, hashing as it goes.

        With ``expected`` the bytes must match it (digest and size) or nothing is stored and
        :class:`IntegrityError` is raised. The stream is read at most ``expected.size + 1`` bytes.
        An object already present is kept (one copy of each object) unless ``replace`` is set,
        which repairs a damaged object with these freshly checked bytes.
        """
        return self.write_stream(stream, expected, replace=replace).digest

    def write_stream(
        self, stream: BinaryIO, expected: Digest | None = None, *, replace: bool = False
    ) -> Stored:
        """:meth:`put_stream` that also returns the BLAKE3 of the bytes, hashed in the same pass."""
        self.ensure()
        tmp, stored = self._write_temp(stream, expected)
        try:
            self._commit_many([(tmp, stored.digest)], replace=replace)
            return stored
        except OSError as e:
            raise _io_error(e, self.root) from e
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    def _write_temp(self, stream: BinaryIO, expected: Digest | None) -> tuple[Path, Stored]:
        """Copy into a fsynced temp file and check the digest; nothing is visible yet."""
        fd, tmp_name = tempfile.mkstemp(dir=self.tmp_dir, prefix="put-")
        tmp = Path(tmp_name)
        try:
            hasher = digests.Hasher(with_blake3=True)
            limit = None if expected is None else expected.size + 1
            view = digests.read_buffer()
            with os.fdopen(fd, "wb", buffering=0) as out:
                while True:
                    want = len(view) if limit is None else min(len(view), limit - hasher.size)
                    if want <= 0:
                        break
                    n = stream.readinto(view[:want])  # type: ignore[attr-defined]
                    if not n:
                        break
                    chunk = view[:n]
                    hasher.update(chunk)
                    out.write(chunk)
                os.fsync(out.fileno())
            actual = hasher.digest()
            if expected is not None and actual != expected:
                raise IntegrityError(
                    f"bytes do not match the expected digest: expected {expected}, "
                    f"got {actual}{' or more' if actual.size > expected.size else ''}; "
                    "nothing was stored"
                )
            b3 = hasher.blake3_hex()
            assert b3 is not None
            return tmp, Stored(actual, b3)
        except BaseException as e:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            if isinstance(e, OSError):
                raise _io_error(e, self.root) from e
            raise

    def put_file(
        self, path: str | os.PathLike[str], expected: Digest | None = None, *, replace: bool = False
    ) -> Digest:
        """Copy a file into the store (see :meth:`put_stream`)."""
        return self.write_file(path, expected, replace=replace).digest

    def write_file(
        self, path: str | os.PathLike[str], expected: Digest | None = None, *, replace: bool = False
    ) -> Stored:
        with _open_source(path) as f:
            return self.write_stream(f, expected, replace=replace)

    def write_files(
        self, paths: Sequence[str | os.PathLike[str]], *, workers: int = WRITE_WORKERS
    ) -> list[Stored]:
        """Put many files, in the order given. The same guarantees as :meth:`put_file`, cheaper:

        each object is still written to a temp file, fsynced, checked and renamed, but the
        writes run in parallel (their fsyncs share journal commits), each shard's lock is taken
        once for all its renames, and each shard folder is fsynced once after them.
        """
        self.ensure()
        paths = list(paths)

        def one(path: str | os.PathLike[str]) -> tuple[Path, Stored]:
            with _open_source(path) as f:
                return self._write_temp(f, None)

        written: list[tuple[Path, Stored]] = []
        try:
            if workers <= 1 or len(paths) < 2:
                written.extend(one(p) for p in paths)
            else:
                with ThreadPoolExecutor(max_workers=workers) as pool:
                    futures = [pool.submit(one, p) for p in paths]
                    failure: BaseException | None = None
                    for fut in futures:
                        try:
                            written.append(fut.result())
                        except BaseException as e:  # keep collecting so every temp is cleaned
                            failure = failure or e
                    if failure is not None:
                        raise failure
            self._commit_many([(tmp, st.digest) for tmp, st in written], replace=False)
            return [st for _, st in written]
        except OSError as e:
            raise _io_error(e, self.root) from e
        finally:
            for tmp, _ in written:
                with contextlib.suppress(FileNotFoundError):
                    tmp.unlink()

    def put_bytes(
        self, data: bytes, expected: Digest | None = None, *, replace: bool = False
    ) -> Digest:
        return self.put_stream(io.BytesIO(data), expected, replace=replace)

    def _commit_many(self, items: Iterable[tuple[Path, Digest]], *, replace: bool) -> None:
        """Rename complete, fsynced temp files into place: per shard, one lock, the renames and
        one folder fsync. Shards run in parallel, so their folder fsyncs share journal commits."""
        shards: dict[str, list[tuple[Path, Digest]]] = {}
        for tmp, digest in items:
            shards.setdefault(digest.hex[:2], []).append((tmp, digest))
        if not shards:
            return
        if len(shards) == 1:
            created = [self._commit_shard(entries, replace) for entries in shards.values()]
        else:
            with ThreadPoolExecutor(max_workers=min(WRITE_WORKERS, len(shards))) as pool:
                created = list(pool.map(lambda e: self._commit_shard(e, replace),
                                        shards.values()))
        if any(created):
            fsutil.fsync_dir(self.objects_dir)

    def _commit_shard(self, entries: list[tuple[Path, Digest]], replace: bool) -> bool:
        """Commit one shard's objects; True if the shard folder had to be created."""
        created = False
        with self.lock(entries[0][1]):
            renamed = False
            for tmp, digest in entries:
                final = self.object_path(digest)
                if not replace and _intact_size(final, digest):
                    continue  # another writer got there first: one copy of each object
                if not final.parent.is_dir():
                    final.parent.mkdir(parents=True, exist_ok=True)
                    created = True
                os.chmod(tmp, READ_ONLY)
                os.replace(tmp, final)
                renamed = True
            if renamed:
                fsutil.fsync_dir(self.object_path(entries[0][1]).parent)
        return created

    def remove(self, digest: Digest | str) -> None:
        path = self.object_path(digest)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()

    def clean_tmp(self, older_than: float = STALE_TMP_SECONDS) -> int:
        """Remove temp files left by writers that died. Returns how many were removed.

        Only entries untouched for ``older_than`` seconds go: a live writer's temp file or
        staging folder (another process sharing the store) is still being written.
        """
        if not self.tmp_dir.is_dir():
            return 0
        count = 0
        cutoff = time.time() - older_than
        for p in self.tmp_dir.iterdir():
            try:
                if _newest_mtime(p) > cutoff:
                    continue
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p)
                else:
                    p.unlink()
                count += 1
            except FileNotFoundError:
                continue
        return count


def _newest_mtime(path: Path) -> float:
    newest = path.lstat().st_mtime
    if path.is_dir() and not path.is_symlink():
        for dirpath, dirnames, filenames in os.walk(path):
            for name in [*dirnames, *filenames]:
                with contextlib.suppress(FileNotFoundError):
                    newest = max(newest, os.lstat(os.path.join(dirpath, name)).st_mtime)
    return newest


def _open_source(path: str | os.PathLike[str]) -> BinaryIO:
    """Open a file to ingest; a file that cannot be read is the caller's error, not the store's."""
    try:
        return open(path, "rb", buffering=0)
    except OSError as e:
        raise StoreError(f"cannot read {os.fspath(path)}: {e.strerror}") from e


def _intact_size(path: Path, digest: Digest) -> bool:
    try:
        return path.stat().st_size == digest.size
    except FileNotFoundError:
        return False


def _io_error(e: OSError, root: Path) -> StoreError:
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
    return StoreError(f"I/O error in the store {root}: {e}")
