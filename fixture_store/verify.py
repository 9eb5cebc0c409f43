"""Verification, the one door: a record is valid, its object is present, digest and size match.

Nothing without a record is trusted; every refusal is a typed error (see errors.py) naming the
artifact, expected vs actual digest, and the command that fixes it.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from fixture_store.errors import (
    ArtifactError,
    DigestMismatchError,
    GapError,
    InvalidRecordError,
    MissingObjectError,
    RegistryError,
    UnknownArtifactError,
    UnsafeContentError,
)
from fixture_store.objects import digests
from fixture_store.objects.digests import Algorithm, Digest
from fixture_store.objects.gcpause import cyclic_gc_paused
from fixture_store.objects.statecache import VerifiedCache
from fixture_store.objects.store import ObjectFiles, Store
from fixture_store.readers import content
from fixture_store.registry import GeneratorSource, Record, Registry


class Status(StrEnum):
    VERIFIED = "verified"
    MISSING = "missing"
    MISMATCH = "mismatch"
    INVALID_RECORD = "invalid-record"
    GAP = "gap"
    UNSAFE = "unsafe"
    UNKNOWN = "unknown"


_ERRORS: dict[Status, type[ArtifactError]] = {
    Status.MISSING: MissingObjectError,
    Status.MISMATCH: DigestMismatchError,
    Status.INVALID_RECORD: InvalidRecordError,
    Status.UNSAFE: UnsafeContentError,
    Status.UNKNOWN: UnknownArtifactError,
}


@dataclass(frozen=True)
class Result:
    """The outcome of verifying one artifact."""

    name: str
    status: Status
    message: str = ""
    expected: Digest | None = None
    actual: Digest | None = None
    member: str | None = None
    fix: str | None = None
    hashed_bytes: int = 0
    cached: bool = False
    kind: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is Status.VERIFIED

    def error(self) -> ArtifactError:
        if self.status is Status.GAP:
            return GapError(self.name, self.message)
        return _ERRORS[self.status](self.name, self.message, fix=self.fix)

    def raise_for_status(self) -> None:
        if not self.ok:
            raise self.error()

    @classmethod
    def cached_verified(cls, name: str, kind: str | None, hexpart: str, size: int) -> Result:
        """A record whose objects the cache vouched for, from values this code validated and
        wrote itself (a verify snapshot): built without the checks of ``__init__``, which cost
        more than a warm verify's lstat does per record."""
        digest = Digest.unchecked(hexpart, size)
        result = object.__new__(cls)
        result.__dict__.update(
            name=name,
            status=Status.VERIFIED,
            expected=digest,
            actual=digest,
            cached=True,
            kind=kind,
        )
        return result

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Result:
        """The result :meth:`to_json` printed (``hashed_bytes`` is not printed: 0)."""

        def digest(which: str) -> Digest | None:
            text = raw.get(which)
            return None if text is None else digests.parse(text, raw.get(f"{which}_size"))

        return cls(
            str(raw["name"]),
            Status(raw["status"]),
            str(raw.get("message") or ""),
            expected=digest("expected"),
            actual=digest("actual"),
            member=raw.get("member"),
            fix=raw.get("fix"),
            cached=bool(raw.get("cached")),
            kind=raw.get("kind"),
        )

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "status": str(self.status),
            "kind": self.kind,
            "message": self.message,
            "expected": self.expected.text if self.expected else None,
            "expected_size": self.expected.size if self.expected else None,
            "actual": self.actual.text if self.actual else None,
            "actual_size": self.actual.size if self.actual else None,
            "member": self.member,
            "fix": self.fix,
            "cached": self.cached,
        }


@dataclass(frozen=True, slots=True)
class ObjectCheck:
    """How one object compared with its expected digest."""

    status: Status
    actual: Digest | None = None
    hashed: int = 0
    cached: bool = False
    note: str | None = None  # replaces the generic mismatch message when set
    blake3: str | None = None  # BLAKE3 of bytes whose SHA-256 matched (when asked for)
    fix: str | None = None  # with a note: what to do before the record's repair command


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
    d = digests.of_file(fd, read_ahead=read_ahead)
    return Hashed(d, None, d.size)


# hash_path's arguments: store root, object hex, BLAKE3 alone, BLAKE3 beside, small.
HashJob = tuple[str, str, bool, bool, bool]
# Expected SHA-256 hex, size and recorded BLAKE3: plain values, cheap to hash on the warm path.
ObjectKey = tuple[str, int, str | None]
# Below this average size per object, hashing inline beats a thread or process pool: per-object
# Python overhead holds the GIL longer than the hash of a few KiB (see bench "small").
SMALL_OBJECT = 64 << 10


def object_key(digest: Digest, blake3: str | None) -> ObjectKey:
    return (digest.hex, digest.size, blake3)


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
            else:
                to_hash.append((key, st))
        return to_hash

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


def repair_command(record: Record) -> str:
    """The command that brings a record's bytes back: fetch, or rerun the generator stage."""
    if isinstance(record.source, GeneratorSource):
        return f"fixture-store regenerate {record.source.stage} --fetch"
    return f"fixture-store fetch {record.name}"


def assemble(
    record: Record,
    store: Store,
    check: Callable[[Digest, str | None], ObjectCheck],
    *,
    full: bool = False,
) -> Result:
    """One record's Result from the checks of its objects (see :meth:`Record.objects`), then
    the content check of a record of one object (an archive or arrays against its manifest;
    other bytes must not be either)."""
    name = record.name
    if record.gap is not None and record.digest is None:
        return Result(name, Status.GAP, record.gap.reason, kind=record.kind)
    fetch = repair_command(record)
    hashed = 0
    all_cached = True
    for ref in record.objects():
        c = check(ref.digest, ref.blake3)
        hashed += c.hashed
        all_cached = all_cached and c.cached
        if c.status is not Status.VERIFIED:
            return _failure(
                record, store, c, member=ref.member, expected=ref.digest, fetch=fetch, hashed=hashed
            )
    if not record.is_tree:
        failure = content.check(store, record, full=full)
        if failure is not None:
            return Result(
                name,
                Status.UNSAFE,
                failure.about(name),
                expected=record.digest,
                actual=record.digest,
                fix=failure.fix,
                kind=record.kind,
                hashed_bytes=hashed,
            )
    return Result(
        name,
        Status.VERIFIED,
        expected=record.digest,
        actual=record.digest,
        hashed_bytes=hashed,
        cached=all_cached,
        kind=record.kind,
    )


def _failure(
    record: Record,
    store: Store,
    check: ObjectCheck,
    *,
    member: str | None,
    expected: Digest,
    fetch: str,
    hashed: int,
) -> Result:
    what = f"member {member!r}" if member else "object"
    if record.is_tree and member is None:
        what = "tree manifest"
    if check.status is Status.MISSING:
        msg = f"{what} {expected.text} is not in the store {store.root}"
        if record.gap is not None:
            return Result(
                record.name, Status.GAP, record.gap.reason, expected=expected, kind=record.kind
            )
        return Result(
            record.name,
            Status.MISSING,
            msg,
            expected=expected,
            member=member,
            fix=fetch,
            hashed_bytes=hashed,
            kind=record.kind,
        )
    if check.note is not None:
        return Result(
            record.name,
            Status.MISMATCH,
            f"{what}: {check.note}",
            expected=expected,
            actual=check.actual,
            member=member,
            kind=record.kind,
            hashed_bytes=hashed,
            fix=f"{check.fix}, then {fetch}"
            if check.fix
            else f"fixture-store rehash {record.name}  (rewrites the record's BLAKE3 "
            "after a SHA-256 check)",
        )
    msg = (
        f"{what} does not match its record: expected {expected}, "
        f"got {check.actual if check.actual else 'unreadable bytes'}"
    )
    return Result(
        record.name,
        Status.MISMATCH,
        msg,
        expected=expected,
        actual=check.actual,
        member=member,
        fix=f"{fetch}  (re-fetches and replaces the damaged object)",
        hashed_bytes=hashed,
        kind=record.kind,
    )


def _hash_quiet(store: Store, hexpart: str) -> Digest | None:
    try:
        with store.open_object(hexpart) as f:
            return digests.of_file(f.fileno())
    except FileNotFoundError:
        return None


@cyclic_gc_paused()
def verify_names(  # noqa: PLR0913 - the verify command's options, each keyword-only
    store: Store,
    registry: Registry,
    names: Iterable[str],
    *,
    full: bool = False,
    workers: int | None = None,
    on_result: Callable[[Result], None] | None = None,
    algorithm: Algorithm = Algorithm.AUTO,
    executor: str = "thread",
    verifier: Verifier | None = None,
    flush: bool = True,
) -> list[Result]:
    """Verify artifacts by name; results in the order of ``names``.

    Work is planned across objects, not records (see :class:`VerifyPlan`): every distinct
    object is checked once (the node corpus shares many members), the stat-and-cache pass runs
    first without a pool (a warm run costs stat calls only), and only the objects left are
    hashed in parallel, largest first. ``executor`` is "thread" (hashlib and BLAKE3 release the
    GIL on large buffers) or "process". With ``flush=False`` the verified-state cache saves new
    entries only when a batch is due (see :meth:`VerifiedCache.flush_due`): for callers that
    verify one artifact at a time.
    """
    verifier = verifier or Verifier(store, full=full, algorithm=algorithm)
    plan = VerifyPlan.of(store, registry, names)
    return plan.execute(
        verifier, workers=workers, executor=executor, on_result=on_result, flush=flush
    )


@dataclass(frozen=True)
class VerifyPlan:
    """What verifying some names takes, decided from the registry alone (nothing read yet).

    ``settled`` holds the results the registry decides by itself (an invalid record, an unknown
    name, a gap without an object), ``records`` every other record with the keys of its
    objects, and ``objects`` each distinct object once, with what it must match. Inspect it,
    then :meth:`execute` it; indexes are positions in ``names``.
    """

    store: Store
    names: Sequence[str]
    settled: Mapping[int, Result]
    records: Mapping[int, tuple[Record, list[ObjectKey]]]
    objects: Mapping[ObjectKey, tuple[Digest, str | None]]

    @classmethod
    def of(cls, store: Store, registry: Registry, names: Iterable[str]) -> VerifyPlan:
        names = list(names)
        invalid = dict(registry.invalid())
        settled: dict[int, Result] = {}
        records: dict[int, tuple[Record, list[ObjectKey]]] = {}
        objects: dict[ObjectKey, tuple[Digest, str | None]] = {}
        for i, name in enumerate(names):
            record = _lookup(registry, invalid, name)
            if isinstance(record, Result):
                settled[i] = record
                continue
            keys = _object_keys(objects, record)
            if keys:
                records[i] = (record, keys)
            else:
                settled[i] = assemble(record, store, _never)
        return cls(store, names, settled, records, objects)

    def execute(
        self,
        verifier: Verifier,
        *,
        workers: int | None = None,
        executor: str = "thread",
        on_result: Callable[[Result], None] | None = None,
        flush: bool = True,
    ) -> list[Result]:
        """Run the plan: :meth:`_Run.sweep`, :meth:`_Run.settle`, :meth:`_Run.hash`; results in
        the order of ``names``, each also passed to ``on_result`` as soon as it is known."""
        run = _Run(self, verifier, on_result)
        try:
            run.sweep()
            run.settle()
            run.hash(workers, executor)
        finally:
            run.files.close()
            if flush:
                verifier.cache.flush()
            else:
                verifier.cache.flush_due()
        return [r for r in run.results if r is not None]


def _lookup(registry: Registry, invalid: Mapping[str, RegistryError], name: str) -> Record | Result:
    """The record named ``name``, or the result that there is no valid one."""
    err = invalid.get(name)
    if err is not None:
        fix = err.fix or "edit the record so it validates"
        return Result(name, Status.INVALID_RECORD, err.about(name), fix=fix)
    try:
        return registry.get(name)
    except UnknownArtifactError as e:
        return Result(name, Status.UNKNOWN, e.about(name), fix=e.fix)


def _object_keys(
    objects: dict[ObjectKey, tuple[Digest, str | None]], record: Record
) -> list[ObjectKey]:
    """The keys of ``record``'s objects, adding to ``objects`` those not planned yet."""
    keys: list[ObjectKey] = []
    for ref in record.objects():
        key = object_key(ref.digest, ref.blake3)
        keys.append(key)
        if key not in objects:
            objects[key] = (ref.digest, ref.blake3)
    return keys


class _Run:
    """One execution of a :class:`VerifyPlan`: the checks found so far, and which records wait
    on which objects. Each step is a method; ``finish`` settles one record."""

    def __init__(
        self,
        plan: VerifyPlan,
        verifier: Verifier,
        on_result: Callable[[Result], None] | None,
    ) -> None:
        self.plan, self.verifier, self.on_result = plan, verifier, on_result
        self.results: list[Result | None] = [None] * len(plan.names)
        self.checks: dict[ObjectKey, ObjectCheck] = {}
        self.waiting: dict[ObjectKey, list[int]] = {}  # object -> records that wait on it
        self.remaining: dict[int, int] = {}  # record -> how many of its objects are unchecked
        self.to_hash: list[tuple[ObjectKey, os.stat_result]] = []
        self.files = ObjectFiles(plan.store.root)  # closed by VerifyPlan.execute
        # What the registry decided is known, and reported, before any object is read.
        for i in sorted(plan.settled):
            self.results[i] = plan.settled[i]
            if on_result is not None:
                on_result(plan.settled[i])

    def sweep(self) -> None:
        """One stat per object: the missing ones and those the verified-state cache vouches for
        are checked; the others, with their stat, are left to hash."""
        self.to_hash = self.verifier.sweep(self.plan.objects, self.checks)

    def settle(self) -> None:
        """Finish every record whose objects the sweep checked (on a warm run, all of them);
        the others wait for the objects still to hash."""
        checks, waiting, remaining, finish = self.checks, self.waiting, self.remaining, self.finish
        for i, (_, keys) in self.plan.records.items():
            for k in keys:
                if k not in checks:
                    break
            else:  # no set built on the warm path, where every record ends here
                finish(i)
                continue
            left = {k for k in keys if k not in checks}
            remaining[i] = len(left)
            for key in left:
                waiting.setdefault(key, []).append(i)

    def hash(self, workers: int | None, executor: str) -> None:
        """Hash the objects the sweep left, largest first, in a pool where that pays; each
        record is finished as soon as its last object is checked."""
        to_hash, objects, judge = self.to_hash, self.plan.objects, self.verifier.judge
        to_hash.sort(key=_largest_first)
        jobs = [self.verifier.job(*objects[key], st.st_size) for key, st in to_hash]
        with _hashing(jobs, _pool_size(to_hash, workers), executor) as hashed:
            for (key, st), h in zip(to_hash, hashed, strict=True):
                self.checked(key, judge(*objects[key], st, h))

    def checked(self, key: ObjectKey, check: ObjectCheck) -> None:
        """Keep one hashed object's check; finish the records it was the last one missing."""
        self.checks[key] = check
        remaining = self.remaining
        for i in self.waiting[key]:
            remaining[i] -= 1
            if remaining[i] == 0:
                self.finish(i)

    def sniff(self, hexpart: str) -> str:
        """The format of an object by its leading bytes, opened through the path primitive
        (the run's object folders, opened once): a link, FIFO or folder there is refused."""
        fd = self.files.open_fd(hexpart)
        try:
            return content.sniff(fd)
        finally:
            os.close(fd)

    def finish(self, i: int) -> None:
        """Record ``i``'s result, from the checks of all its objects."""
        record, keys = self.plan.records[i]
        checks = self.checks
        result = _all_verified(record, keys, checks, self.sniff) or assemble(
            record,
            self.plan.store,
            lambda d, b3: checks[object_key(d, b3)],
            full=self.verifier.full,
        )
        self.results[i] = result
        if self.on_result is not None:
            self.on_result(result)


def _all_verified(
    record: Record,
    keys: list[ObjectKey],
    checks: Mapping[ObjectKey, ObjectCheck],
    sniff: Callable[[str], str],
) -> Result | None:
    """The result of a record whose objects all verified and whose content needs no check of
    its own (the warm path: no second walk over its objects, a plain object's leading bytes
    sniffed by ``sniff``); ``None`` for any other record."""
    verified = Status.VERIFIED
    hashed, cached = 0, True
    for k in keys:
        c = checks[k]
        if c.status is not verified:
            return None
        hashed += c.hashed
        cached = cached and c.cached
    if record.content is not None:
        return None  # checked against its manifest by assemble
    # Content undeclared: a tree, or one object whose leading bytes must be no archive or array.
    if record.members is None and sniff(keys[0][0]) != "unknown":
        return None
    return Result(
        record.name,
        verified,
        expected=record.digest,
        actual=record.digest,
        hashed_bytes=hashed,
        cached=cached,
        kind=record.kind,
    )


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


def _never(_d: Digest, _b3: str | None) -> ObjectCheck:
    raise AssertionError("a record without objects has nothing to check")


# -- presence: which objects are in the store, without hashing any ----------------------------
def present(store: Store, record: Record) -> bool:
    """Whether every object verifying ``record`` would read is in the store (nothing is hashed,
    so present is not verified)."""
    return all(store.has(ref.digest) for ref in record.objects())


def presence_by_family(store: Store, registry: Registry) -> dict[str, Counter[str]]:
    """Per family, how many records are ``present``, ``missing``, a ``gap`` (declared, with no
    object yet) or ``invalid``; ``invalid`` is always counted, the others only when non-zero."""
    per_family: dict[str, Counter[str]] = {}
    for family, fam in registry.families.items():
        counts: Counter[str] = Counter()
        for record in fam.records.values():
            if record.is_gap and record.digest is None:
                counts["gap"] += 1
            else:
                counts["present" if present(store, record) else "missing"] += 1
        counts["invalid"] += len(fam.invalid)
        per_family[family] = counts
    return per_family
