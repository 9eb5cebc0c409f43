"""The packed part of push, pull and fetch: which of their objects go through packs.

Push and pull (``sync``) hand every object of their plan here first: what a pack index of the
remote places is present (push) or staged from its pack (pull, fetch's mirrors); what is
under the remote's pack threshold and verifies in the store is sent in packs (push). The
rest goes one object per key, as before packs. An https mirror is read only: pull and fetch
read the packs it serves through the list of indexes push writes (see ``packs``); a Hub remote
has no packs, and everything goes one per key.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from fixture_store.errors import FixtureStoreError
from fixture_store.objects.digests import Digest
from fixture_store.objects.store import Staging, Store
from fixture_store.remotes import packs
from fixture_store.remotes.base import Remote, RemoteError, Retry
from fixture_store.remotes.keys import RangeReads, keys_of
from fixture_store.sources.transfer import Deadline, DownloadPolicy, deadline_in
from fixture_store.verify import Status, Verifier


def statuses(store: Store, objects: Sequence[Digest], jobs: int) -> dict[str, Status]:
    """Each object's status in the store (hex → status), checked over a pool of threads."""
    verifier = Verifier(store)
    workers = max(1, min(jobs, len(objects), (os.cpu_count() or 1) * 8))
    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            found = pool.map(lambda d: verifier.check_object(d).status, objects)
            return {d.hex: status for d, status in zip(objects, found, strict=True)}
    finally:
        verifier.cache.flush()


def push(
    store: Store,
    remote: Remote,
    objects: Mapping[str, Digest],
    *,
    packing: packs.Packing,
    retry: Retry,
    jobs: int,
) -> dict[str, packs.Sent]:
    """What the remote's pack indexes hold already (False: present), and the objects under
    the threshold that verify in the store, sent in packs (True, or the error)."""
    keys = keys_of(remote)
    if keys is None or not objects:
        return {}
    index = packs.load_index(keys, retry, jobs, retry.deadline(0, DownloadPolicy.from_env()))
    if index.unlisted is not None:  # what the remote holds in packs is not known: not sent
        return {h: index.unlisted for h, d in objects.items() if packing.packs(d)}
    done: dict[str, packs.Sent] = {h: False for h, d in objects.items() if index.slot(d)}
    small = [d for h, d in objects.items() if h not in done and packing.packs(d)]
    found = statuses(store, small, jobs)
    small = [d for d in small if found[d.hex] is Status.VERIFIED]
    sent = packs.push_packed(store, keys, small, packing=packing, retry=retry, jobs=jobs)
    wrote = any(got is True for got in sent.values())
    try:  # the list an https mirror of the remote reads its packs by: new, or never written
        lacks = functools.partial(packs.lacks_list, keys)
        if wrote or (index.slots and retry.run(lacks, deadline=retry.deadline())):
            packs.refresh_list(keys, retry)
    except FixtureStoreError as e:
        listed = RemoteError(
            f"{e.message} (the list of pack indexes, {packs.LIST_KEY}, was not written: an "
            "https mirror of the remote does not see the packs it misses)",
            fix="push again",
        )
        sent = {h: listed if got is True else got for h, got in sent.items()}
    return done | sent


def readable_of(remote: Remote) -> RangeReads | None:
    """How the packs of ``remote`` are read: its named files (a folder, S3), an https mirror's
    GETs, or ``None`` (a kind without packs)."""
    from fixture_store.remotes.https import HttpsRemote, MirrorReads

    if isinstance(remote, HttpsRemote):
        return MirrorReads(remote)
    return keys_of(remote)


def pull(
    store: Store | None,
    staging: Staging,
    remote: Remote,
    objects: Mapping[str, Digest],
    *,
    retry: Retry,
    rate: DownloadPolicy,
    jobs: int,
    index: packs.PackIndex | None = None,
) -> dict[str, packs.Got]:
    """The objects a pack index of the remote places (and that do not verify in ``store``,
    if given), staged from their packs, each checked on its own; for those placed nowhere,
    what to say if the remote lacks them at their own key too (see
    :meth:`~fixture_store.remotes.packs.PackIndex.missing`). ``index``: the remote's, read
    before (else it is read now)."""
    keys = readable_of(remote)
    if keys is None or not objects:
        return {}
    started = time.monotonic()
    if index is None:
        index = packs.load_index(keys, retry, jobs, retry.deadline(0, rate))
    placed = {h: (slot, d) for h, d in objects.items() if (slot := index.slot(d))}
    if store is not None:
        found = statuses(store, [d for _, d in placed.values()], jobs)
        placed = {h: v for h, v in placed.items() if found[h] is not Status.VERIFIED}
    overall = _since(started, retry.deadline(sum(d.size for _, d in placed.values()), rate))
    got = packs.pull_packed(
        staging, keys, placed, retry=retry, rate=rate, jobs=jobs, deadline=overall
    )
    for h, d in objects.items():
        if h not in placed and (missing := index.missing(remote.label, d)) is not None:
            got[h] = missing
    return got


def _since(started: float, deadline: Deadline) -> Deadline:
    """``deadline``'s time counted from ``started`` (a monotonic instant) rather than now: the
    packed part's transfers share one deadline, as an object's attempts do."""
    return deadline_in(deadline.seconds - (time.monotonic() - started))


def index_of(remote: Remote, retry: Retry, jobs: int) -> packs.PackIndex:
    """The remote's pack indexes (none for a kind without packs), read by ``retry``'s
    deadline and the download policy's."""
    keys = readable_of(remote)
    if keys is None:
        return packs.PackIndex()
    return packs.load_index(keys, retry, jobs, retry.deadline(0, DownloadPolicy.from_env()))
