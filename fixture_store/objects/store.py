"""The content-addressed object store (DESIGN decision 4).

Layout under the store root::

    objects/sha256/ab/cdef...   read-only objects, named by the hex of their SHA-256
    tmp/                        temp files of writes in progress (same filesystem: rename is atomic)
    tmp/writer-<pid>-<rand>/    the temp files of one process holding the writer lock
    locks/ab.lock               one lock per shard, held only around the check-and-rename
    locks/gc.lock               the writer lock: shared by writers, exclusive for gc
    state/                      caches that may be deleted at any time (verified-state cache)
    trees/, extracted/, envs/   checkouts, extractions and pinned environments, made on demand

The store is plain folders (DESIGN 11). Its root may be a symbolic link the user chose: it is
resolved once, when the handle is made (:meth:`Store.at`). Below the root every folder and file
the code writes, renames, deletes or opens is reached through the one path primitive
(:mod:`fixture_store.objects.anchored`, DESIGN 13): component by component from the root's
descriptor, never through a link, so a link is refused with an error naming it, never followed;
an object file that is a link is not an object (:meth:`Store.has`, verify and gc never trust
one), and deletion never descends through a link.

A write hashes the bytes while copying them into ``tmp/``, fsyncs, checks the digest against the
expected one and only then renames the file into ``objects/``: a crash at any instant leaves at
most an orphan temp file, never a partial object. Many writes share their syncs through a
:class:`Staging` (``write_files``, pull): every file is checked as it is staged, and a batch is
made durable at once before any of it is renamed.

Locks: writers and gc (DESIGN decision 10). An object is garbage once no record references it,
so between an object landing and its record landing a writer's object looks like garbage. A
command that publishes objects for records (add, fetch, regenerate, rehash) therefore holds
``locks/gc.lock`` *shared* (:meth:`Store.writing`) from before its first temp file until its
record is written, and puts its temp files in its own ``tmp/writer-*`` folder; ``gc --yes``
holds it *exclusively* (:meth:`Store.collecting`): it waits for the writers in flight, no writer
starts until it is done, and it reads the registry only once it holds the lock. So while gc
runs no writer is alive, and every ``writer-*`` folder in ``tmp/`` is a dead writer's, whatever
its age; loose temp entries of callers that hold no lock (a library writing through the store
directly, archive extraction) are still judged by age. One flock per command, not per object;
the kernel releases it when its holder dies. Order: the writer lock, then the registry lock,
then a shard lock.
"""

from __future__ import annotations

import contextlib
import errno
import io
import itertools
import os
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from fixture_store.errors import StoreError
from fixture_store.objects import anchored, fsutil, publishing, writer_lock
from fixture_store.objects.digests import HEX_LEN, Digest, Tap
from fixture_store.objects.hashcopy import (
    Stored,
    _check,
    _copy_hashing,
    _hash_copy,
    _intact_size,
    _open_source,
    io_error,
)
from fixture_store.objects.layout import (
    COPY_PREFIX,
    ENV_VAR,
    FOLDERS,
    HEX_DIGITS,
    READ_ONLY,
    SHARD_LEN,
    WRITER_LOCK,
    WRITER_PREFIX,
    default_root,
)
from fixture_store.objects.object_files import ObjectFiles
from fixture_store.objects.publishing import PROVE_BY_CACHE_MIN
from fixture_store.objects.staging import Staged, Staging
from fixture_store.objects.writer_lock import STALE_TMP_SECONDS, holding_writer_lock

# What callers import from here, wherever it lives now.
__all__ = [
    "ENV_VAR",
    "KERNEL_COPY_MIN",
    "PROVE_BY_CACHE_MIN",
    "READ_ONLY",
    "SHARD_LEN",
    "STALE_TMP_SECONDS",
    "WRITER_LOCK",
    "WRITER_PREFIX",
    "ObjectFiles",
    "Staged",
    "Staging",
    "Store",
    "Stored",
    "default_root",
    "holding_writer_lock",
    "io_error",
]

# From this size a file is copied by the kernel (copy_file_range: no trip through user space;
# 1 GiB in 0.26-0.5 s here) and then hashed from the copy while the fsync runs: `add` of 1 GiB
# went from 1.77 s to 1.33 s with the page cache warm.
KERNEL_COPY_MIN = 4 << 20
# A hard link is impossible here (another filesystem, or none supported): copy instead.
_NO_LINK = {errno.EXDEV, errno.EPERM, errno.EMLINK, errno.EOPNOTSUPP, errno.ENOTSUP}
_link_names = itertools.count()


@dataclass(frozen=True)
class Store:
    """A handle on a store root. Cheap to create; all state is on disk."""

    root: Path

    @classmethod
    def at(cls, root: str | os.PathLike[str] | None = None) -> Store:
        """The store at ``root`` (see :func:`default_root`), its links resolved once: everything
        below it must then be plain folders."""
        return cls(default_root(root).resolve())

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
        return self.objects_dir / hexpart[:SHARD_LEN] / hexpart[SHARD_LEN:]

    def plain(self, *parts: str, create: bool = False) -> bool:
        """Whether the store folder ``root/parts`` exists; it and every folder above it (below
        the root) must be a plain folder, or :class:`StoreError` names the link. With
        ``create``, missing folders are made. One ``lstat`` per folder: callers check once per
        command, never per object (see :func:`fsutil.plain_folder`)."""
        return fsutil.plain_folder(self.root, *parts, create=create)

    def folder(self, *parts: str, create: bool = False) -> anchored.Folder:
        """The store folder ``root/parts``, opened through the path primitive (no link below the
        root is followed); :class:`FileNotFoundError` if missing and not ``create``. The caller
        closes it."""
        with anchored.Folder.root(self.root, create=create) as root:
            return root.folder(*parts, create=create)

    def folder_of(self, path: Path, *, create: bool = False) -> anchored.Folder:
        """:meth:`folder` for a folder of the store given by its path (a temp folder)."""
        return self.folder(*path.relative_to(self.root).parts, create=create)

    @contextlib.contextmanager
    def _temps(self, where: Path) -> Iterator[anchored.Folder]:
        """The temp folder ``where``, opened through the path primitive: this process's writer
        folder stays open while its :meth:`writing` block runs (one open for all its writes),
        any other is opened for the block."""
        held = writer_lock.held_temps(self.root, where)
        if held is not None:
            yield held
            return
        with self.folder_of(where) as temps:
            yield temps

    def check_plain(self) -> None:
        """Refuse the store if any of its folders that exist (``objects/sha256`` and its shards,
        ``tmp/``, ``locks/``, ``state/``, ``trees/``, ``extracted/``, ``envs/``) is a link."""
        for parts in FOLDERS:
            self.plain(*parts)
        self.shards()

    def shards(self) -> list[str]:
        """The shard folders of ``objects/sha256`` (two hex characters), from one listing; a
        shard that is a link or not a folder is refused. Stray names are skipped."""
        if not self.plain("objects", "sha256"):
            return []
        found = []
        with os.scandir(self.objects_dir) as it:
            for entry in it:
                if len(entry.name) != SHARD_LEN or not all(c in HEX_DIGITS for c in entry.name):
                    continue
                if not entry.is_dir(follow_symlinks=False):  # a link, or not a folder
                    fsutil.plain_folder(self.objects_dir, entry.name)  # raises, naming it
                found.append(entry.name)
        return sorted(found)

    def ensure(self) -> Store:
        try:
            for parts in (("objects", "sha256"), ("tmp",), ("locks",), ("state",)):
                self.plain(*parts, create=True)
        except OSError as e:
            raise StoreError(
                f"cannot create the store at {self.root}: {e.strerror}",
                fix=f"choose a writable location with --store or ${ENV_VAR}",
            ) from e
        return self

    @contextlib.contextmanager
    def lock(self, digest: Digest) -> Iterator[None]:
        """Cross-process lock for one object's shard (flock: released if the holder dies)."""
        with (
            self.folder("locks", create=True) as locks,
            fsutil.flocked(Path(locks.child(f"{digest.hex[:2]}.lock")), folder=locks),
        ):
            yield

    def writing(self) -> contextlib.AbstractContextManager[None]:
        """Hold the writer lock shared for the block (see the module docstring): gc collects
        nothing while the block runs, so objects written here are safe until their records
        land. Temp files of the block's writes go in this process's ``tmp/writer-*`` folder.
        Re-entrant, and shared by the threads of a process: the lock is taken once, when the
        first block starts, and released when the last one ends. Waits while gc runs."""
        return writer_lock.hold_shared(self)

    def collecting(
        self, on_wait: Callable[[], None] | None = None
    ) -> contextlib.AbstractContextManager[None]:
        """Hold the writer lock exclusively for the block: no writer is publishing while it runs
        (see the module docstring). Waits for the writers in flight, calling ``on_wait`` first
        if there are any."""
        return writer_lock.hold_exclusive(self, on_wait)

    def temp_folder(self) -> Path:
        """Where a write puts its temp files: this process's writer folder while this thread
        holds :meth:`writing`, else ``tmp/``."""
        return writer_lock.temp_folder(self)

    # -- reading --------------------------------------------------------------------------------
    def has(self, digest: Digest) -> bool:
        """Whether an object file exists with the right size. Presence is not verification,
        and a link is not an object file."""
        try:
            with self.folder("objects", "sha256", digest.hex[:SHARD_LEN]) as shard:
                return _intact_size(shard, digest.hex[SHARD_LEN:], digest)
        except FileNotFoundError:
            return False

    def object_files(self) -> ObjectFiles:
        """The object files, opened through the path primitive; close it when done."""
        return ObjectFiles(self.root)

    def open_object(self, digest: Digest | str) -> BinaryIO:
        """The object file of ``digest``, open for reading (unbuffered): opened component by
        component through the path primitive, so a link, a FIFO or a folder at the object's
        name or at its shard folder is refused (:class:`StoreError`, naming it and the fix),
        never followed, never waited on. :class:`FileNotFoundError` if it is missing."""
        with self.object_files() as files:
            return files.open(digest.hex if isinstance(digest, Digest) else digest)

    def iter_objects(self) -> Iterator[tuple[str, Path]]:
        """Every object entry as (hex, path), links included (see :meth:`object_entries`)."""
        for hexpart, entry in self.object_entries():
            yield hexpart, Path(entry.path)

    def object_entries(self) -> Iterator[tuple[str, os.DirEntry[str]]]:
        """Every object entry as (hex, directory entry), from one listing per shard: the entry's
        type comes with the listing, so a caller tells a link (never an object) apart without a
        stat. Stray names are skipped, never trusted; a shard that is a link is refused (see
        :meth:`shards`)."""
        for shard in self.shards():
            with os.scandir(self.objects_dir / shard) as it:
                entries = sorted(it, key=lambda e: e.name)
            for entry in entries:
                hexpart = shard + entry.name
                if len(hexpart) == HEX_LEN and all(c in HEX_DIGITS for c in hexpart):
                    yield hexpart, entry

    # -- writing --------------------------------------------------------------------------------
    def write_stream(
        self, stream: BinaryIO, expected: Digest | None = None, *, replace: bool = False
    ) -> Stored:
        """Copy a stream into the store, hashing SHA-256 and BLAKE3 as it goes.

        With ``expected`` the bytes must match it (digest and size) or nothing is stored and
        :class:`IntegrityError` is raised. The stream is read at most ``expected.size + 1`` bytes.
        An object already present is kept (one copy of each object) unless ``replace`` is set,
        which repairs a damaged object with these freshly checked bytes.
        """
        self.ensure()
        return self._publish(*self._write_temp(stream, expected), replace=replace)

    def _publish(self, tmp: Path, stored: Stored, *, replace: bool) -> Stored:
        """Rename one checked, durable temp file into place (see :meth:`_commit_many`)."""
        try:
            self._commit_many([(tmp, stored)], replace=replace)
            return stored
        except BaseException as e:
            self._unlink_temp(tmp)
            if isinstance(e, OSError):
                raise io_error(e, self.root) from e
            raise

    def _write_temp(
        self,
        source: BinaryIO,
        expected: Digest | None,
        *,
        sync: bool = True,
        folder: Path | None = None,
        tap: Tap | None = None,
    ) -> tuple[Path, Stored]:
        """Copy into a temp file in ``folder`` (default: :meth:`temp_folder`) and check the
        digest; nothing is visible yet. ``tap`` sees every byte hashed, once (see _hash_copy).

        With ``sync`` the temp file is fsynced here; without, the caller settles a whole batch
        (see :class:`fsutil.SyncBatch`) before anything is renamed into place.
        """
        where = folder or self.temp_folder()
        with self._temps(where) as temps:  # never through a link: see anchored
            fd, name = temps.create_temp(COPY_PREFIX)
        tmp = where / name
        with self._removed_on_error(tmp):
            limit = None if expected is None else expected.size + 1
            with os.fdopen(fd, "wb", buffering=0) as out:
                if fsutil.kernel_copy(source, out.fileno(), limit, KERNEL_COPY_MIN):
                    stored = _hash_copy(tmp, out.fileno() if sync else None, KERNEL_COPY_MIN, tap)
                else:
                    stored = _copy_hashing(source, out, limit, tap)
                    if sync:
                        os.fsync(out.fileno())
                os.fchmod(out.fileno(), READ_ONLY)  # read-only before it is published
            _check(stored, expected, "bytes")
        return tmp, stored

    @contextlib.contextmanager
    def _removed_on_error(self, tmp: Path) -> Iterator[None]:
        """Remove the temp entry ``tmp`` if the block fails in any way (an interrupt too), so a
        failed write leaves nothing behind; an OS error becomes the store's error."""
        try:
            yield
        except BaseException as e:
            self._unlink_temp(tmp)  # for a link, only the extra name: the file is untouched
            if isinstance(e, OSError):
                raise io_error(e, self.root) from e
            raise

    def _unlink_temp(self, tmp: Path) -> None:
        """Remove a temp entry of this store (from its folder's descriptor: never through a
        link); already gone, or its folder gone, is not an error."""
        with contextlib.suppress(FileNotFoundError), self._temps(tmp.parent) as temps:
            temps.unlink(tmp.name)

    def write_file(
        self,
        path: str | os.PathLike[str],
        expected: Digest | None = None,
        *,
        replace: bool = False,
        link: bool = False,
    ) -> Stored:
        """Copy a file into the store (see :meth:`write_stream`). With ``link`` the file is
        hard-linked into the store instead of copied, where it can be (see :meth:`_link_temp`)."""
        self.ensure()
        linked = self._link_temp(path, expected, sync=True) if link else None
        if linked is None:
            with _open_source(path) as f:
                return self.write_stream(f, expected, replace=replace)
        return self._publish(*linked, replace=replace)

    def _link_temp(
        self,
        path: str | os.PathLike[str],
        expected: Digest | None,
        *,
        sync: bool,
        folder: Path | None = None,
        tap: Tap | None = None,
    ) -> tuple[Path, Stored] | None:
        """Hard-link a file of ours into ``tmp/`` and hash it there; ``None`` when it cannot be
        linked (another filesystem, a file owned by someone else, no hard links), so the caller
        copies it.

        A link costs one directory entry instead of a create and a copy of the bytes. The file
        and the object then share their bytes: the commit makes both read-only, and an edit in
        place changes the object too, which verify reports as a mismatch (its ctime moves, so
        the verified-state cache never vouches for it).
        """
        real = os.fspath(path)
        try:
            st = os.lstat(real)
            if stat.S_ISLNK(st.st_mode):  # link() would link the symlink, not its target
                real = os.path.realpath(real)
                st = os.stat(real)
        except OSError as e:
            raise StoreError(f"cannot read {os.fspath(path)}: {e.strerror}") from e
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            return None
        where = folder or self.temp_folder()
        tmp = where / f"link-{os.getpid()}-{next(_link_names)}-{os.urandom(4).hex()}"
        try:
            with self._temps(where) as temps:  # the new name never through a link
                os.link(real, tmp.name, dst_dir_fd=temps.fd)
        except OSError as e:
            if e.errno in _NO_LINK:
                return None
            raise io_error(e, self.root) from e
        with self._removed_on_error(tmp):
            fd = os.open(tmp, os.O_RDONLY)
            try:
                stored = _hash_copy(tmp, fd if sync else None, st.st_size, tap)
            finally:
                os.close(fd)
            _check(stored, expected, f"the bytes of {os.fspath(path)}")
        return tmp, stored

    def write_files(
        self,
        paths: Sequence[str | os.PathLike[str]],
        *,
        link: bool = False,
        taps: Sequence[Tap | None] = (),
    ) -> list[Stored]:
        """Put many files, in the order given. The same guarantees as :meth:`write_file`, cheaper:
        one :meth:`staging` batch (see :class:`Staging`). The copies run one after another:
        parallel creates in one folder contend for its lock (measured slower with 2 and 4
        threads than with one), and a large file is already hashed on two threads. With
        ``link`` each file is hard-linked where it can be (see :meth:`_link_temp`) and copied
        where it cannot. ``taps[i]``, where given, sees the bytes of ``paths[i]`` as hashed.
        """
        with self.staging() as staging:
            tapped = itertools.zip_longest(paths, taps[: len(paths)])
            written = [staging.file(path, link=link, tap=tap) for path, tap in tapped]
            staging.publish(written)
        return [staged.stored for staged in written]

    @contextlib.contextmanager
    def staging(self, *, replace: bool = False) -> Iterator[Staging]:
        """A :class:`Staging` for the block: checked temp files now, published in batches.
        Whatever it staged and did not publish is removed when the block ends, however it ends.
        """
        self.ensure()
        try:
            batch = fsutil.SyncBatch(self.tmp_dir)
        except OSError as e:
            raise io_error(e, self.root) from e
        with batch:
            staging = Staging(self, batch, self.temp_folder(), replace=replace)
            try:
                yield staging
            finally:
                staging.discard()

    def put_bytes(
        self, data: bytes, expected: Digest | None = None, *, replace: bool = False
    ) -> Digest:
        """Bytes in memory into the store (see :meth:`write_stream`); returns their digest."""
        return self.write_stream(io.BytesIO(data), expected, replace=replace).digest

    def _commit_many(
        self,
        items: Iterable[tuple[Path, Stored]],
        *,
        replace: bool,
        batch: fsutil.SyncBatch | None = None,
    ) -> None:
        """Rename complete, durable temp files into place, one lock per shard, and make the
        renames durable: with a ``batch`` that syncs whole filesystems, one sync after all the
        renames; otherwise one folder fsync per shard, shards in parallel so that their fsyncs
        share journal commits."""
        publishing.commit_many(self, items, replace=replace, batch=batch)

    def remove(self, digest: Digest | str) -> None:
        """Remove an object entry (a link loses only the link); a shard that is a link is
        refused, never descended into."""
        path = self.object_path(digest)
        try:
            with self.folder("objects", "sha256", path.parent.name) as shard:
                os.unlink(path.name, dir_fd=shard.fd)
        except FileNotFoundError:
            pass
        except IsADirectoryError as e:  # not something this store wrote: never deleted
            raise StoreError(
                f"{path} is a folder where an object belongs; fixture-store did not make it "
                "and does not delete it",
                fix=f"look at {path} and remove it yourself, then rerun the command",
            ) from e

    def clean_tmp(self, older_than: float = STALE_TMP_SECONDS) -> int:
        """Remove temp files left by writers that died. Returns how many entries were removed.

        Runs holding the writer lock exclusively (see :meth:`collecting`), so no writer that
        holds the lock is alive: each ``writer-*`` folder is a dead writer's and goes, however
        fresh. A loose entry (a caller that held no lock) goes only when untouched for
        ``older_than`` seconds: it may still be being written.
        """
        return writer_lock.clean_tmp(self, older_than)
