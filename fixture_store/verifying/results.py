"""What verification answers: the statuses, one artifact's :class:`Result`, one object's
:class:`ObjectCheck`, and the key an object is planned under (plain values, no I/O)."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from fixture_store.errors import (
    ArtifactError,
    DigestMismatchError,
    GapError,
    InvalidRecordError,
    MissingObjectError,
    UnknownArtifactError,
    UnsafeContentError,
)
from fixture_store.objects import digests
from fixture_store.objects.digests import Digest


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


class ResultColumns(Sequence[Result]):
    """Results kept in columns (a verify snapshot's), each :class:`Result` built only when it is
    asked for: a summary of 10^5 results that all verified needs their names and statuses,
    never 10^5 objects (building them cost a warm verify as much as a third of its lstats)."""

    @abstractmethod
    def outcomes(self) -> tuple[Sequence[str], Sequence[Status]]:
        """Every result's name and status, in order."""

    def __iter__(self) -> Iterator[Result]:
        return (self[i] for i in range(len(self)))


def outcomes(results: Sequence[Result]) -> tuple[Sequence[str], Sequence[Status]]:
    """The names and statuses of ``results``, from their columns when they are kept so."""
    if isinstance(results, ResultColumns):
        return results.outcomes()
    return [r.name for r in results], [r.status for r in results]


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


# Expected SHA-256 hex, size and recorded BLAKE3: plain values, cheap to hash on the warm path.
ObjectKey = tuple[str, int, str | None]


def object_key(digest: Digest, blake3: str | None) -> ObjectKey:
    return (digest.hex, digest.size, blake3)
