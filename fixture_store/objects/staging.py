"""Staging: checked temp files written now, published into the store later, a batch at a time
(see :class:`Staging`)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol

from fixture_store.objects import fsutil
from fixture_store.objects.digests import Digest, Tap
from fixture_store.objects.hashcopy import Stored, _open_source, io_error


class StagingStore(Protocol):
    """What a :class:`Staging` needs of its store (:class:`fixture_store.objects.store.Store`):
    its temp-file writes, its commit and its root."""

    @property
    def root(self) -> Path: ...

    def _write_temp(
        self,
        source: BinaryIO,
        expected: Digest | None,
        *,
        sync: bool = True,
        folder: Path | None = None,
        tap: Tap | None = None,
    ) -> tuple[Path, Stored]: ...

    def _link_temp(
        self,
        path: str | os.PathLike[str],
        expected: Digest | None,
        *,
        sync: bool,
        folder: Path | None = None,
        tap: Tap | None = None,
    ) -> tuple[Path, Stored] | None: ...

    def _commit_many(
        self,
        items: Iterable[tuple[Path, Stored]],
        *,
        replace: bool,
        batch: fsutil.SyncBatch | None = None,
    ) -> None: ...

    def _unlink_temp(self, tmp: Path) -> None: ...


@dataclass(frozen=True, slots=True)
class Staged:
    """Checked bytes in a temp file of the store, not visible yet (see :class:`Staging`)."""

    tmp: Path
    stored: Stored


class Staging:
    """Writes checked temp files now and publishes them later, a batch at a time.

    Each staged file is hashed while it is copied and checked against its expected digest, as a
    single put is, but not synced: :meth:`publish` makes a whole batch durable with one
    filesystem sync (or an fsync each for a few files, see :class:`fsutil.SyncBatch`), then
    renames it into place, one lock per shard, and makes the renames durable together. Small
    objects are bound by creates and syncs, not by hashing, so this is what makes many of them
    cheap. Until its batch is published a staged file is invisible: a crash at any instant
    leaves at most orphan temp files (in the writer folder that was current when the staging
    opened), never a partial object, and every object published before it stays.

    Staging from several threads at once is safe; open it with :meth:`Store.staging`.
    """

    def __init__(
        self, store: StagingStore, batch: fsutil.SyncBatch, folder: Path, *, replace: bool
    ) -> None:
        self.store = store
        self._batch = batch
        self._folder = folder
        self._replace = replace
        self._pending: set[Path] = set()
        self._lock = threading.Lock()

    def stream(
        self, source: BinaryIO, expected: Digest | None = None, *, tap: Tap | None = None
    ) -> Staged:
        """Stage a stream (see :meth:`Store.write_stream`: read at most ``expected.size + 1``
        bytes, :class:`IntegrityError` and nothing staged unless they match); ``tap`` sees the
        bytes as they are hashed."""
        try:
            tmp, stored = self.store._write_temp(
                source, expected, sync=False, folder=self._folder, tap=tap
            )
        except OSError as e:  # the temp file could not even be created
            raise io_error(e, self.store.root) from e
        return self._keep(tmp, stored)

    def file(
        self,
        path: str | os.PathLike[str],
        expected: Digest | None = None,
        *,
        link: bool = False,
        tap: Tap | None = None,
    ) -> Staged:
        """Stage a file (see :meth:`Store.write_file`), hard-linked where ``link`` allows;
        ``tap`` sees its bytes as they are hashed."""
        if link:
            linked = self.store._link_temp(path, expected, sync=False, folder=self._folder, tap=tap)
            if linked is not None:
                return self._keep(*linked)
        with _open_source(path) as f:
            return self.stream(f, expected, tap=tap)

    def publish(self, staged: Sequence[Staged]) -> None:
        """Make these staged files durable, then visible. Their temp files are gone afterwards,
        published or not; on an error the store's error is raised and those not yet renamed are
        not published (an object already renamed is complete and stays)."""
        try:
            self._batch.settle([s.tmp for s in staged])
            self.store._commit_many(
                [(s.tmp, s.stored) for s in staged], replace=self._replace, batch=self._batch
            )
        except BaseException as e:
            self._remove(s.tmp for s in staged)
            if isinstance(e, OSError):
                raise io_error(e, self.store.root) from e
            raise
        with self._lock:  # renamed into place, or removed as a copy already present
            self._pending.difference_update(s.tmp for s in staged)

    def discard(self) -> None:
        """Remove every staged file not published yet."""
        with self._lock:
            pending = list(self._pending)
        self._remove(pending)

    def _keep(self, tmp: Path, stored: Stored) -> Staged:
        with self._lock:
            self._pending.add(tmp)
        return Staged(tmp, stored)

    def _remove(self, temps: Iterable[Path]) -> None:
        for tmp in temps:
            self.store._unlink_temp(tmp)
            with self._lock:
                self._pending.discard(tmp)
