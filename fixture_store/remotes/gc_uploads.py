"""What a remote's gc does with the multipart uploads cut pushes left open (S3): those
initiated ``--min-age`` ago or more are aborted, younger ones left (a push sending its parts
now must keep its upload). See :mod:`~fixture_store.remotes.uploads`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from fixture_store.errors import FixtureStoreError
from fixture_store.remotes.base import Retry
from fixture_store.remotes.keys import Keys
from fixture_store.remotes.uploads import Upload


def stale(
    keys: Keys, old: Callable[[Upload], bool], retry: Retry, jobs: int
) -> tuple[tuple[Upload, ...], int]:
    """The uploads of the remote old enough to abort, each with the bytes of its parts (one
    ListParts each), and how many younger ones are left."""
    found = retry.run(keys.uploads)
    going = [u for u in found if old(u)]

    def sized(upload: Upload) -> Upload:
        return dataclasses.replace(upload, size=retry.run(lambda: keys.upload_size(upload)))

    with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(going)))) as pool:
        going = list(pool.map(sized, going))
    return tuple(sorted(going, key=lambda u: (u.key, u.upload_id))), len(found) - len(going)


def label(upload: Upload) -> str:
    """How a report names the upload: its key and id."""
    return f"{upload.key} (upload {upload.upload_id})"


def abort_all(
    keys: Keys,
    uploads: Sequence[Upload],
    *,
    retry: Retry,
    jobs: int,
    on_key: Callable[[str], None] | None = None,
) -> tuple[list[str], dict[str, FixtureStoreError]]:
    """Abort every one of ``uploads``: the ones aborted, and the ones that could not be."""

    def one(upload: Upload) -> FixtureStoreError | None:
        try:
            retry.run(lambda: keys.abort(upload))
        except FixtureStoreError as e:
            return e
        return None

    aborted: list[str] = []
    failed: dict[str, FixtureStoreError] = {}
    with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(uploads)))) as pool:
        for upload, error in zip(uploads, pool.map(one, uploads), strict=True):
            if error is None:
                aborted.append(label(upload))
            else:
                failed[label(upload)] = error
            if on_key is not None:
                on_key(label(upload))
    return aborted, failed
