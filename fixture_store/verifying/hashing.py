"""Hashing objects for verification: one object (:func:`hash_path`), and many, inline or in a
thread or process pool (:func:`_hashing`), sized by :func:`_pool_size`."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from fixture_store.objects import digests
from fixture_store.objects.digests import Digest
from fixture_store.objects.store import ObjectFiles
from fixture_store.verifying.results import ObjectKey


@dataclass(frozen=True, slots=True)
class Hashed:
    """What a hashing worker read: plain data, so it crosses process boundaries."""

    sha256: Digest | None
    blake3: str | None
    size: int
    missing: bool = False


def hash_path(
    root: str,
    hexpart: str,
    use_blake3: bool,
    want_blake3: bool,
    small: bool = False,
    *,
    read_ahead: bool = True,
    files: ObjectFiles | None = None,
) -> Hashed:
    """Hash the object ``hexpart`` of the store at ``root``: BLAKE3 alone (fast
    re-verification), SHA-256, or both in one pass.

    The object is opened through the path primitive (:class:`ObjectFiles`, the run's own when
    given, else one for this job): a link, a FIFO or a folder at its name or at its shard's is
    the store's refusal, never followed, never waited on, even if it was planted after the
    sweep looked. A file known to be ``small`` (under one read chunk) is read whole with one
    read and hashed from memory: 8.6 us a file instead of 14 us through the streaming path,
    which matters for a corpus of thousands of 4 KiB members. A module-level function so that a
    process pool can run it as well as a thread pool.
    """
    own = files is None
    opened = ObjectFiles(Path(root)) if files is None else files
    try:
        fd = opened.open_fd(hexpart)
    except FileNotFoundError:
        return Hashed(None, None, 0, missing=True)
    finally:
        if own:
            opened.close()
    try:
        return _hash_fd(fd, use_blake3, want_blake3, small, read_ahead)
    finally:
        os.close(fd)


def _hash_fd(fd: int, use_blake3: bool, want_blake3: bool, small: bool, read_ahead: bool) -> Hashed:
    data = digests.read_small_fd(fd) if small else None
    if data is not None:
        b3 = digests.blake3_of_bytes(data) if use_blake3 or want_blake3 else None
        return Hashed(None if use_blake3 else digests.of_bytes(data), b3, len(data))
    if small:  # larger than it was: hash it all, from the start
        os.lseek(fd, 0, os.SEEK_SET)
    if use_blake3:
        b3, size = digests.blake3_of_file(fd, read_ahead=read_ahead)
        return Hashed(None, b3, size)
    if want_blake3:
        d, b3 = digests.of_file_both(fd, read_ahead=read_ahead)
        return Hashed(d, b3, d.size)
    d = digests.of_file(fd)
    return Hashed(d, None, d.size)


# hash_path's arguments: store root, object hex, BLAKE3 alone, BLAKE3 beside, small.
HashJob = tuple[str, str, bool, bool, bool]
# Below this average size per object, hashing inline beats a thread or process pool: per-object
# Python overhead holds the GIL longer than the hash of a few KiB (see bench "small").
SMALL_OBJECT = 64 << 10


def _pool_size(to_hash: list[tuple[ObjectKey, os.stat_result]], workers: int | None) -> int:
    """How many hashing workers: the CPUs (or ``workers``), one for tiny objects, where a pool
    costs more than it saves (measured), and never more than there are objects."""
    if not to_hash:
        return 1
    if workers is None and sum(st.st_size for _, st in to_hash) < len(to_hash) * SMALL_OBJECT:
        return 1
    return max(1, min(workers or os.cpu_count() or 1, len(to_hash)))


@contextlib.contextmanager
def _hashing(jobs: list[HashJob], pool_size: int, executor: str) -> Iterator[Iterable[Hashed]]:
    """What hashing ``jobs`` reads, in their order: inline, or in a thread or process pool.
    The pools' modules are imported here: they would cost every verify's start-up, and a warm
    verify never pools."""
    if pool_size == 1:
        with ObjectFiles(Path(jobs[0][0]) if jobs else Path()) as files:
            yield (hash_path(*job, files=files) for job in jobs)
    elif executor == "process":
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # spawn, not fork: forking a process that runs threads (JAX, BLAKE3) can deadlock.
        spawn = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=pool_size, mp_context=spawn) as ppool:
            chunk = max(1, min(64, len(jobs) // (pool_size * 8)))
            yield ppool.map(_hash_job, jobs, chunksize=chunk)
    else:
        from concurrent.futures import ThreadPoolExecutor

        local, opened = threading.local(), list[ObjectFiles]()

        def job(job: HashJob) -> Hashed:  # each thread opens the object folders once
            files = getattr(local, "files", None)
            if files is None:
                files = local.files = ObjectFiles(Path(job[0]))
                opened.append(files)
            return hash_path(*job, read_ahead=False, files=files)

        try:
            with ThreadPoolExecutor(max_workers=pool_size) as tpool:
                yield tpool.map(job, jobs)
        finally:
            for files in opened:
                files.close()


def _largest_first(item: tuple[ObjectKey, os.stat_result]) -> int:
    return -item[1].st_size


def _hash_job(job: HashJob) -> Hashed:
    return hash_path(*job, read_ahead=False)  # the pool already keeps the cores busy
