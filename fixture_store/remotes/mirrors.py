"""The remotes a fetch tries, in order, before a record's pinned source: each record's missing
objects from the first remote that has them all, from its packs or its own keys, verified as
:func:`~fixture_store.remotes.sync.pull_object` verifies every object."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from fixture_store.errors import FixtureStoreError
from fixture_store.objects.digests import Digest
from fixture_store.objects.store import Staged, Staging, Store
from fixture_store.registry import Record
from fixture_store.remotes import packed as packed_part
from fixture_store.remotes import packs
from fixture_store.remotes.base import MissingRemoteObject, Remote, Retry, TransientRemoteError
from fixture_store.remotes.sync import DEFAULT_JOBS, pull_one
from fixture_store.sources.transfer import DownloadPolicy

# A mirror is a shortcut: it gives up sooner than a push or a pull, so the pinned source is
# reached quickly when the mirror is down.
MIRROR_RETRY = Retry(attempts=2, backoff=0.25, total=30.0)


@dataclass
class Mirrors:
    """The remotes a fetch tries, in order, before a record's pinned source.

    A remote that fails with a transient error (unreachable, 5xx after retries) is not tried
    again in the same run; one that lacks an object is, for the next record.
    """

    store: Store
    remotes: Sequence[Remote]
    retry: Retry = MIRROR_RETRY
    down: dict[str, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _indexes: dict[str, packs.PackIndex] = field(default_factory=dict)

    def pull(
        self,
        record: Record,
        needs: Callable[[Digest], bool],
        count: Callable[[int], None],
    ) -> tuple[Remote | None, list[str], list[str]]:
        """Pull the record's missing objects from the first remote that has them all; returns
        it (or ``None``), what the others answered, and of that what was not a plain miss (a
        remote lacking an object is a cache's normal answer; a failure is worth a warning)."""
        tried: list[str] = []
        failed: list[str] = []
        for remote in self.remotes:
            with self._lock:
                down = self.down.get(remote.label)
            if down is not None:
                failed.append(f"{remote.label}: skipped, failed earlier in this run: {down}")
                tried.append(failed[-1])
                continue
            try:
                with self.store.staging(replace=True) as staging:
                    wanted = [r.digest for r in record.objects() if needs(r.digest)]
                    packed = self._from_packs(staging, remote, wanted)
                    for digest in wanted:
                        got = packed.get(digest.hex)
                        staged = (
                            got
                            if isinstance(got, Staged)
                            else pull_one(
                                staging, remote, digest, retry=self.retry, rate=None, from_packs=got
                            )
                        )
                        staging.publish([staged])
                        count(digest.size)
            except TransientRemoteError as e:
                with self._lock:
                    self.down[remote.label] = e.message
                failed.append(e.message)
            except MissingRemoteObject as e:
                tried.append(e.message)
                continue
            except FixtureStoreError as e:
                failed.append(e.message)
            except Exception as e:  # a mirror is a shortcut: any failure of it
                # (a bug, a file system error) leaves the record's pinned source to try
                failed.append(f"remote {remote.label}: {type(e).__name__}: {e}")
            else:
                return remote, tried, failed
            tried.append(failed[-1])
        return None, tried, failed

    def _from_packs(
        self, staging: Staging, remote: Remote, wanted: Sequence[Digest]
    ) -> dict[str, packs.Got]:
        """The wanted objects a pack index of ``remote`` places, staged from their packs (the
        remote's indexes are read once a run)."""
        with self._lock:
            index = self._indexes.get(remote.label)
        if index is None:
            index = packed_part.index_of(remote, self.retry, DEFAULT_JOBS)
            with self._lock:
                self._indexes[remote.label] = index
        rate = DownloadPolicy.from_env()
        objects = {d.hex: d for d in wanted}
        return packed_part.pull(
            None, staging, remote, objects, retry=self.retry, rate=rate, jobs=1, index=index
        )
