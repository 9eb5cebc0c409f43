"""Publishing: checked, durable temp files renamed into ``objects/`` under their shard's lock,
an object already there kept only once it is proved to hold the same bytes, and the renames
made durable (see :mod:`fixture_store.objects.store`)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Protocol

from fixture_store.objects import anchored, digests, fsutil
from fixture_store.objects.digests import Digest
from fixture_store.objects.hashcopy import Stored, _intact_size, _make_read_only
from fixture_store.objects.layout import COPY_PREFIX, SHARD_LEN

# An object already present of at least this size is proved by the verified-state cache where it
# can be; a smaller one is hashed. Measured on a busy 2-core machine: reading one row of a cache
# of 20,000 costs 0.6 ms and saving a proof 3 ms, hashing 1 MiB about 2 ms.
PROVE_BY_CACHE_MIN = 1 << 20


class PublishingStore(Protocol):
    """What publishing needs of a store (:class:`fixture_store.objects.store.Store`): its
    folders and temp folders opened through the path primitive, its shard locks, and its
    verified-state cache."""

    @property
    def state_dir(self) -> Path: ...

    def folder(self, *parts: str, create: bool = False) -> anchored.Folder: ...

    def lock(self, digest: Digest) -> contextlib.AbstractContextManager[None]: ...

    def _temps(self, where: Path) -> contextlib.AbstractContextManager[anchored.Folder]: ...


def commit_many(
    store: PublishingStore,
    items: Iterable[tuple[Path, Stored]],
    *,
    replace: bool,
    batch: fsutil.SyncBatch | None = None,
) -> None:
    """Rename complete, durable temp files into place, one lock per shard, and make the
    renames durable: with a ``batch`` that syncs whole filesystems, one sync after all the
    renames; otherwise one folder fsync per shard, shards in parallel so that their fsyncs
    share journal commits."""
    shards: dict[str, list[tuple[Path, Stored]]] = {}
    for tmp, stored in items:
        shards.setdefault(stored.digest.hex[:2], []).append((tmp, stored))
    if not shards:
        return
    if batch is not None and batch.syncs_filesystem(len(shards)):
        for entries in shards.values():
            _commit_shard(store, entries, replace, sync=False)
        batch.sync_all()
        return
    if len(shards) == 1:
        created = [_commit_shard(store, entries, replace) for entries in shards.values()]
    else:
        from concurrent.futures import ThreadPoolExecutor  # only when pooling: start-up

        with ThreadPoolExecutor(max_workers=min(fsutil.FSYNC_WORKERS, len(shards))) as pool:
            created = list(pool.map(lambda e: _commit_shard(store, e, replace), shards.values()))
    if any(created):
        with store.folder("objects", "sha256") as objects:
            objects.fsync()


def _commit_shard(
    store: PublishingStore, entries: list[tuple[Path, Stored]], replace: bool, *, sync: bool = True
) -> bool:
    """Commit one shard's objects; True if the shard folder had to be created. Without
    ``sync`` the caller makes the renames durable. Every rename is made between descriptors
    of folders opened through the path primitive: a link at ``tmp/``, a writer folder,
    ``objects/``, ``sha256/`` or the shard is refused, never written through.

    An object already there is kept only once it is proved to hold these bytes (see
    :func:`_holds`); a damaged one is replaced by them, atomically, under the shard lock."""
    created = False
    hexes = entries[0][1].digest.hex[:SHARD_LEN]
    with contextlib.ExitStack() as stack, store.lock(entries[0][1].digest):
        objects = stack.enter_context(store.folder("objects", "sha256"))
        shard = stack.enter_context(_or_none(objects.find(hexes)))
        temps: dict[Path, anchored.Folder] = {}
        renamed = False
        proofs: list[tuple[str, os.stat_result, str | None]] = []
        for tmp, stored in entries:
            name = stored.digest.hex[SHARD_LEN:]
            if tmp.parent not in temps:
                temps[tmp.parent] = stack.enter_context(store._temps(tmp.parent))
            if not replace and shard is not None and _holds(store, shard, name, stored):
                temps[tmp.parent].unlink(tmp.name)
                continue  # another writer got there first: one copy of each object
            if shard is None:
                shard = stack.enter_context(objects.folder(hexes, create=True))
                created = True
            if not tmp.name.startswith(COPY_PREFIX):  # a copy was made read-only already
                _make_read_only(temps[tmp.parent], tmp.name)
            temps[tmp.parent].replace(tmp.name, shard, name)
            renamed = True
            if stored.digest.size >= PROVE_BY_CACHE_MIN:
                proofs.append((stored.digest.hex, shard.lstat(name), stored.blake3))
        if renamed and sync and shard is not None:
            shard.fsync()
    if proofs:  # what was hashed on the way in is proved: the next verify reads no byte of it
        from fixture_store.objects import statecache  # sqlite3: only a write pays for it

        statecache.remember_published(store.state_dir, proofs)
    return created


def _holds(store: PublishingStore, shard: anchored.Folder, name: str, stored: Stored) -> bool:
    """Whether the object ``name`` of ``shard`` holds the bytes of ``stored``: a regular
    file of their size, proved by the verified-state cache (its stat is the one an earlier
    run hashed and found to match, the warm verify's rule, one row read by its key) or else
    hashed here. An object is never trusted because it exists: a damaged one would stay,
    and the next verify would blame the record that was just written for it."""
    from fixture_store.objects import statecache  # sqlite3: only a write pays for it

    if not _intact_size(shard, name, stored.digest):
        return False
    # A small object is hashed: cheaper than asking the cache (see PROVE_BY_CACHE_MIN).
    by_cache = stored.digest.size >= PROVE_BY_CACHE_MIN
    fd = shard.open_fd(name)
    try:
        st = os.fstat(fd)
        hexdigest = stored.digest.hex
        if by_cache and statecache.proves(store.state_dir, hexdigest, st, stored.blake3):
            return True
        with open(fd, "rb", buffering=0, closefd=False) as f:
            intact = digests.of_stream(f) == stored.digest
    finally:
        os.close(fd)
    if intact and by_cache:
        statecache.remember_one(store.state_dir, hexdigest, st)
    return intact


@contextlib.contextmanager
def _or_none(folder: anchored.Folder | None) -> Iterator[anchored.Folder | None]:
    """A folder that may be missing, closed at the end of the block if it is not."""
    try:
        yield folder
    finally:
        if folder is not None:
            folder.close()
