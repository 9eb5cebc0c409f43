"""The :class:`Verifier`: checks the objects of one store against their expected digests,
through the verified-state cache (a warm object costs one ``lstat``) or by hashing them."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field

from fixture_store.objects import digests
from fixture_store.objects.digests import Algorithm, Digest
from fixture_store.objects.publishing import PROVE_BY_CACHE_MIN
from fixture_store.objects.statecache import VerifiedCache
from fixture_store.objects.store import Store
from fixture_store.registry import Record
from fixture_store.verifying.hashing import Hashed, HashJob, hash_path
from fixture_store.verifying.records import assemble
from fixture_store.verifying.results import ObjectCheck, ObjectKey, Result, Status, object_key


def _not_an_object(path: str, mode: int) -> ObjectCheck:
    """The check of an object entry that is not a regular file: never read, never trusted."""
    what = "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file"
    return ObjectCheck(
        Status.MISMATCH,
        note=f"the object file {path} is {what}, not an object; the store must be plain "
        "folders and files",
        fix=f"remove {'the link ' if stat.S_ISLNK(mode) else ''}{path}",
    )


_CACHED = ObjectCheck(Status.VERIFIED, cached=True)  # the cache vouches for it: nothing hashed
_MISSING = ObjectCheck(Status.MISSING)


@dataclass
class Verifier:
    """Verifies objects of one store, sharing a verified-state cache across a run.

    ``algorithm`` AUTO re-verifies with the record's BLAKE3 where it has one (SHA-256 and BLAKE3
    sit side by side in the reviewed record), SHA256 always hashes the identity. With
    ``record_blake3`` every object is hashed with SHA-256 and BLAKE3 in one pass, and the BLAKE3
    of each object whose SHA-256 matched is kept in ``seen_blake3`` (hex -> BLAKE3).
    """

    store: Store
    full: bool = False
    cache: VerifiedCache = field(default=None)  # type: ignore[assignment]
    algorithm: Algorithm = Algorithm.AUTO
    record_blake3: bool = False
    seen_blake3: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.cache is None:
            self.cache = VerifiedCache.open(self.store.state_dir)
        if self.record_blake3:
            self.full, self.algorithm = True, Algorithm.SHA256
        self._objects = str(self.store.objects_dir)
        self._root = str(self.store.root)
        self._folders_checked = False

    def _path(self, hexpart: str) -> str:
        # String joins: this runs once per object on the warm path, where Path objects dominate.
        return f"{self._objects}/{hexpart[:2]}/{hexpart[2:]}"

    def quick(self, expected: Digest) -> tuple[ObjectCheck | None, os.stat_result | None]:
        """The stat-only part for one object: missing, or verified by the cache (the check), or
        ``None`` and the stat taken, to hash it."""
        key = object_key(expected, None)
        checks: dict[ObjectKey, ObjectCheck] = {}
        left = self.sweep({key: (expected, None)}, checks)
        return (None, left[0][1]) if left else (checks[key], None)

    def sweep(
        self,
        expected_of: Mapping[ObjectKey, tuple[Digest, str | None]],
        checks: dict[ObjectKey, ObjectCheck],
    ) -> list[tuple[ObjectKey, os.stat_result]]:
        """:meth:`quick` over many objects, settling into ``checks`` the missing ones and those
        the cache vouches for; returns the others, to hash. A tight loop: on a warm run this is
        the whole verification, one lstat and one cache lookup per object.

        The cache vouches only for what it saw: the record's size, and the proof this check
        would use (the record's BLAKE3, or SHA-256). ``lstat`` costs what ``stat`` costs and
        tells a link apart: an object file that is not a regular file is never read. The store's
        object folders (``objects/sha256`` and its shards) are checked once per verifier, from
        one listing: a link there is refused (:class:`StoreError`), not followed.
        """
        if not self._folders_checked:
            self.store.shards()
            self._folders_checked = True
        lstat, path_of, is_regular = os.lstat, self._path, stat.S_ISREG
        sha256_rows, blake3_rows = self.cache.rows()
        by_sha256, by_blake3 = sha256_rows.get, blake3_rows.get
        use_cache, auto = not self.full, self.algorithm is Algorithm.AUTO
        to_hash: list[tuple[ObjectKey, os.stat_result]] = []
        for key in expected_of:
            hexpart, size, blake3 = key
            path = path_of(hexpart)
            try:
                st = lstat(path)
            except FileNotFoundError:
                checks[key] = _MISSING
                continue
            # A row matches only the record's size and the proof this check would use; the
            # same inode, mtime and ctime mean the file is the one that was hashed.
            if use_cache and (
                by_blake3(hexpart) == (blake3, st.st_ino, size, st.st_mtime_ns, st.st_ctime_ns)
                if auto and blake3 is not None
                else by_sha256(hexpart) == (st.st_ino, size, st.st_mtime_ns, st.st_ctime_ns)
            ):
                checks[key] = _CACHED  # only a regular file's stat is ever remembered
            elif not is_regular(st.st_mode):
                checks[key] = _not_an_object(path, st.st_mode)
            elif use_cache and size >= PROVE_BY_CACHE_MIN and self._proved_since(key, st):
                checks[key] = _CACHED
            else:
                to_hash.append((key, st))
        return to_hash

    def _proved_since(self, key: ObjectKey, st: os.stat_result) -> bool:
        """Whether the cache file, read again, proves a large object this verifier's rows did
        not: one written since they were loaded (by the store, as it published what it had
        hashed on the way in: a fetch's download, an ``add`` in another process). One row read
        by its key, for an object whose read would cost far more."""
        from fixture_store.objects import statecache

        hexpart, size, blake3 = key
        sha256_row, blake3_row = statecache.rows_of(self.store.state_dir, hexpart)
        seen = (st.st_ino, size, st.st_mtime_ns, st.st_ctime_ns)
        # The sweep's rule: the record's BLAKE3 when it has one and it is asked for, else SHA-256.
        by_blake3 = self.algorithm is Algorithm.AUTO and blake3 is not None
        if (blake3_row != (blake3, *seen)) if by_blake3 else (sha256_row != seen):
            return False
        self.cache.remember(hexpart, st, blake3 if by_blake3 else None)
        return True

    def job(self, expected: Digest, recorded: str | None, size: int) -> HashJob:
        """:func:`hash_path`'s arguments for an object whose file has ``size`` bytes."""
        use_blake3 = self.algorithm is Algorithm.AUTO and recorded is not None
        small = size < digests.CHUNK
        return self._root, expected.hex, use_blake3, self.record_blake3, small

    def judge(
        self, expected: Digest, recorded: str | None, st: os.stat_result, hashed: Hashed
    ) -> ObjectCheck:
        """Turn what a worker read into a check, and keep the cache in step."""
        if hashed.missing:
            return ObjectCheck(Status.MISSING)
        actual = hashed.sha256
        if actual is None:  # BLAKE3 re-verification
            return self._judge_blake3(expected, recorded, st, hashed)
        if actual != expected:
            self.cache.forget(expected.hex)
            return ObjectCheck(Status.MISMATCH, actual, actual.size)
        self.cache.remember(expected.hex, st)
        if hashed.blake3 is not None:  # hashed in the same pass: the file's own BLAKE3, seen
            self.cache.remember(expected.hex, st, hashed.blake3)
            self.seen_blake3[expected.hex] = hashed.blake3
        return ObjectCheck(Status.VERIFIED, actual, actual.size, blake3=hashed.blake3)

    def _judge_blake3(
        self, expected: Digest, recorded: str | None, st: os.stat_result, hashed: Hashed
    ) -> ObjectCheck:
        """:meth:`judge` for bytes hashed with the record's BLAKE3 only."""
        if recorded is not None and hashed.size == expected.size and hashed.blake3 == recorded:
            # Remember the stat taken before hashing (a write during hashing changes it),
            # proved by the record's BLAKE3: it vouches for no other check.
            self.cache.remember(expected.hex, st, recorded)
            return ObjectCheck(Status.VERIFIED, expected, hashed.size)
        # Failures only: name the actual identity.
        actual = _hash_quiet(self.store, expected.hex)
        if actual is None:
            return ObjectCheck(Status.MISSING)
        self.cache.forget(expected.hex)
        if actual == expected:
            return ObjectCheck(
                Status.MISMATCH,
                actual,
                hashed.size + actual.size,
                note=(
                    f"the record's BLAKE3 {recorded} is wrong: the bytes match the recorded "
                    f"SHA-256 {expected} but their BLAKE3 is {hashed.blake3}"
                ),
            )
        return ObjectCheck(Status.MISMATCH, actual, hashed.size + actual.size)

    def lacks(self, expected: Digest) -> bool:
        """Whether the object is missing or damaged: what a fetch or pull must bring (a verified
        object is never fetched again)."""
        return self.check_object(expected).status is not Status.VERIFIED

    def check_object(self, expected: Digest, blake3: str | None = None) -> ObjectCheck:
        quick, st = self.quick(expected)
        if quick is not None:
            return quick
        assert st is not None
        return self.judge(expected, blake3, st, hash_path(*self.job(expected, blake3, st.st_size)))

    def verify(self, record: Record) -> Result:
        return assemble(record, self.store, self.check_object, full=self.full)

    def verify_cached(self, record: Record) -> Result | None:
        """:meth:`verify`, if no object of ``record`` needs hashing (each is missing or the
        verified-state cache vouches for it, one ``lstat`` each); ``None`` if one does: what a
        warm check answers before any work worth a thread is planned."""

        def check(expected: Digest, _recorded: str | None = None) -> ObjectCheck:
            found, _ = self.quick(expected)
            if found is None:
                raise _NeedsHashing
            return found

        try:
            return assemble(record, self.store, check, full=self.full)
        except _NeedsHashing:
            return None


class _NeedsHashing(Exception):
    """An object :meth:`Verifier.verify_cached` cannot settle without reading it."""


def _hash_quiet(store: Store, hexpart: str) -> Digest | None:
    try:
        with store.open_object(hexpart) as f:
            return digests.of_file(f.fileno())
    except FileNotFoundError:
        return None
