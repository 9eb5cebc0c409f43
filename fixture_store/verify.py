"""Verification, the one door: a record is valid, its object is present, digest and size match.

Nothing without a record is trusted; every refusal is a typed error (see errors.py) naming the
artifact, expected vs actual digest, and the command that fixes it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from fixture_store import content, digests
from fixture_store.digests import Digest
from fixture_store.errors import (
    ArtifactError,
    DigestMismatchError,
    GapError,
    InvalidRecordError,
    MissingObjectError,
    UnknownArtifactError,
    UnsafeContentError,
)
from fixture_store.registry import Record, Registry
from fixture_store.statecache import VerifiedCache
from fixture_store.store import Store


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


@dataclass
class ObjectCheck:
    """How one object compared with its expected digest."""

    status: Status
    actual: Digest | None = None
    hashed: int = 0
    cached: bool = False


@dataclass
class Verifier:
    """Verifies objects of one store, sharing a verified-state cache across a run."""

    store: Store
    full: bool = False
    cache: VerifiedCache = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.cache is None:
            self.cache = VerifiedCache.open(self.store.state_dir)

    def check_object(self, expected: Digest) -> ObjectCheck:
        path = self.store.object_path(expected)
        try:
            st = path.stat()
        except FileNotFoundError:
            return ObjectCheck(Status.MISSING)
        if not self.full and self.cache.lookup(path, st, expected.hex):
            return ObjectCheck(Status.VERIFIED, expected, 0, cached=True)
        actual = _hash_quiet(path)
        if actual is None:
            return ObjectCheck(Status.MISSING)
        if actual != expected:
            self.cache.forget(path)
            return ObjectCheck(Status.MISMATCH, actual, actual.size)
        # Remember the stat taken before hashing: a write during hashing changes it.
        self.cache.remember(path, st, expected.hex)
        return ObjectCheck(Status.VERIFIED, actual, actual.size)

    def verify(self, record: Record) -> Result:
        name = record.name
        if record.is_gap and record.digest is None:
            return Result(name, Status.GAP, record.gap or "", kind=record.kind)
        assert record.digest is not None
        fetch = f"fixture-store fetch {name}"
        if record.is_tree:
            return self._verify_tree(record, fetch)
        check = self.check_object(record.digest)
        result = self._result(record, check, None, record.digest, fetch)
        if result.ok and content.needs_check(record):
            failure = content.check(self.store, record, full=self.full)
            if failure is not None:
                # The error's message names the artifact already; Result.error() adds it back.
                message = failure.message.removeprefix(f"{name}: ")
                return Result(name, Status.UNSAFE, message, expected=record.digest,
                              actual=check.actual, fix=failure.fix, kind=record.kind)
        return result

    def _verify_tree(self, record: Record, fetch: str) -> Result:
        assert record.members is not None and record.digest is not None
        hashed = 0
        all_cached = True
        for member, digest in record.members:
            check = self.check_object(digest)
            hashed += check.hashed
            all_cached = all_cached and check.cached
            if check.status is not Status.VERIFIED:
                return self._result(record, check, member, digest, fetch, hashed)
        manifest = self.check_object(record.digest)
        if manifest.status is not Status.VERIFIED:
            return self._result(record, manifest, None, record.digest, fetch, hashed)
        return Result(record.name, Status.VERIFIED, expected=record.digest, actual=record.digest,
                      hashed_bytes=hashed + manifest.hashed,
                      cached=all_cached and manifest.cached, kind=record.kind)

    def _result(
        self, record: Record, check: ObjectCheck, member: str | None, expected: Digest,
        fetch: str, hashed: int = 0,
    ) -> Result:
        what = f"member {member!r}" if member else "object"
        if check.status is Status.VERIFIED:
            return Result(record.name, Status.VERIFIED, expected=expected, actual=check.actual,
                          hashed_bytes=check.hashed, cached=check.cached, kind=record.kind)
        if check.status is Status.MISSING:
            msg = f"{what} {expected.text} is not in the store {self.store.root}"
            if record.is_gap:
                return Result(record.name, Status.GAP, record.gap or "", expected=expected,
                              kind=record.kind)
            return Result(record.name, Status.MISSING, msg, expected=expected, member=member,
                          fix=fetch, hashed_bytes=hashed, kind=record.kind)
        msg = (
            f"{what} does not match its record: expected {expected}, "
            f"got {check.actual if check.actual else 'unreadable bytes'}"
        )
        return Result(record.name, Status.MISMATCH, msg, expected=expected, actual=check.actual,
                      member=member, fix=f"{fetch}  (re-fetches and replaces the damaged object)",
                      hashed_bytes=hashed + check.hashed, kind=record.kind)


def _hash_quiet(path: Path) -> Digest | None:
    try:
        return digests.of_file(path)
    except FileNotFoundError:
        return None


def verify_names(
    store: Store,
    registry: Registry,
    names: Iterable[str],
    *,
    full: bool = False,
    workers: int | None = None,
    on_result: Callable[[Result], None] | None = None,
    verifier: Verifier | None = None,
) -> list[Result]:
    """Verify artifacts by name, in parallel across objects; results in the order of ``names``.

    Pass a long-lived ``verifier`` to share its verified-state cache across calls.
    """
    verifier = verifier or Verifier(store, full=full)
    names = list(names)
    invalid = dict(registry.invalid())

    def one(name: str) -> Result:
        if name in invalid:
            err = invalid[name]
            return Result(name, Status.INVALID_RECORD, err.message,
                          fix=err.fix or "edit the record so it validates")
        try:
            record = registry.get(name)
        except UnknownArtifactError as e:
            return Result(name, Status.UNKNOWN, e.message, fix=e.fix)
        return verifier.verify(record)

    results: list[Result] = []
    pool_size = workers or min(8, os.cpu_count() or 1)
    try:
        if pool_size == 1 or len(names) < 2:
            mapped: Iterable[Result] = map(one, names)
            pool = None
        else:
            pool = ThreadPoolExecutor(max_workers=pool_size)
            mapped = pool.map(one, names)
        for result in mapped:
            results.append(result)
            if on_result is not None:
                on_result(result)
        if pool is not None:
            pool.shutdown()
    finally:
        verifier.cache.flush()
    return results


def iter_failures(results: Iterable[Result]) -> Iterator[Result]:
    return (r for r in results if not r.ok)
