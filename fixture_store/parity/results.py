"""What one comparator run of one case produced, as small immutable values."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from fixture_store.parity import parts
from fixture_store.parity.arrays import ArrayComparison
from fixture_store.registry import Tolerance
from fixture_store.registry.known_failures import KnownFailure


class Outcome(StrEnum):
    PASS = "pass"
    MISMATCH = "mismatch"
    NOT_IMPLEMENTED = "not-implemented"
    ERROR = "error"
    KNOWN_FAILURE = "known-failure"
    REFUSED = "refused"
    TIMEOUT = "timeout"
    CRASH = "crash"
    GAP = "gap"


# Outcomes that fail a compare run (exit code 1); a known failure that now passes also does.
FAILING = frozenset(
    {
        Outcome.MISMATCH,
        Outcome.NOT_IMPLEMENTED,
        Outcome.ERROR,
        Outcome.REFUSED,
        Outcome.TIMEOUT,
        Outcome.CRASH,
    }
)


@dataclass(frozen=True)
class Task:
    """One case for one runtime, as sent to a worker: only verified paths and record data."""

    name: str
    runtime: str
    folder: str
    tolerance: Tolerance | None = None
    members: tuple[str, ...] | None = None  # the tree's manifest: the only files the worker reads


@dataclass(frozen=True)
class KnownError:
    """A mismatch's error next to the bounds of the known failure that matched it.

    The error is the largest over the arrays that drifted (an array within tolerance is not
    what the entry excuses). The relative error is kept only where the entry bounds it: it is
    infinite wherever an expected value is 0, and flips between finite and infinite from run to
    run for a random operator. The bounds are registry data (tracked); the errors are run
    numbers: another CPU's kernels, or a random operator's next draw, give others.
    """

    pattern: str = field(metadata=parts.KEY)
    max_abs: float = field(default=0.0, metadata=parts.RUN)
    max_abs_bound: float = 0.0
    max_rel: float | None = field(default=None, metadata=parts.RUN)
    max_rel_bound: float | None = None
    # No drifted array was measured: the outputs differ in number, dtype, shape or structure,
    # so there is no value error to bound (its errors read 0, which is no error seen).
    structural: bool = False
    # Elements where a NaN or an infinity met anything but its like: an infinite error each,
    # counted apart from max_abs (the largest error between numbers), bounded by the entry's
    # special_values (0 when it names none).
    special_values: int = field(default=0, metadata=parts.RUN)
    special_values_bound: int | None = None

    @classmethod
    def of(cls, arrays: Iterable[ArrayComparison], entry: KnownFailure) -> KnownError:
        drifted = [a for a in arrays if not a.ok]
        max_rel = max((a.max_rel for a in drifted), default=0.0)
        return cls(
            entry.pattern,
            max((a.max_abs_finite for a in drifted), default=0.0),
            entry.max_abs if entry.max_abs is not None else 0.0,
            max_rel if entry.max_rel is not None else None,
            entry.max_rel,
            special_values=sum(a.specials for a in drifted),
            special_values_bound=entry.special_values,
            structural=not any(a.measured for a in drifted),
        )

    def exceeded(self) -> list[tuple[str, float, float]]:
        """``(key, error seen, bound)`` for each bound the error exceeds."""
        pairs = (
            ("max_abs", self.max_abs, self.max_abs_bound),
            ("max_rel", self.max_rel, self.max_rel_bound),
            ("special_values", self.special_values, self.special_values_bound or 0),
        )
        # "not seen <= bound" also catches NaN.
        return [
            (key, seen, bound)
            for key, seen, bound in pairs
            if seen is not None and bound is not None and not seen <= bound
        ]

    def to_json(self, part: parts.Part = parts.Part.ALL) -> dict[str, Any]:
        # A relative error and a count of special values are written only where the entry
        # bounds them (which fields appear is tracked: it must not depend on a run number).
        skip: tuple[str, ...] = (
            () if self.max_rel_bound is not None else ("max_rel", "max_rel_bound")
        )
        if self.special_values_bound is None:
            skip += ("special_values", "special_values_bound")
        return parts.fields_json(self, part, skip=skip)


@dataclass(frozen=True)
class CaseResult:
    """One case run by one runtime. Its outcome, operators and what the registry says of it are
    tracked; its detail (the runtime's own message), array statistics and time are run numbers
    (:mod:`fixture_store.parity.parts`)."""

    name: str = field(metadata=parts.KEY)
    runtime: str = field(metadata=parts.KEY)
    outcome: Outcome
    detail: str = field(default="", metadata=parts.RUN)
    arrays: tuple[ArrayComparison, ...] = field(default=(), metadata=parts.RUN)
    operators: tuple[str, ...] = ()
    seconds: float = field(default=0.0, metadata=parts.RUN)
    fix: str | None = None
    # Set when a registered known failure matched: what it stood for and why it is known.
    underlying: Outcome | None = None
    known_reason: str | None = None
    now_passing: bool = False
    # A known failure matched but its machine condition does not hold here: the entry is
    # reported, and excuses nothing.
    inactive_condition: str | None = None
    # A mismatch a known failure matched: its error and the entry's bounds (excused when within
    # them, failing otherwise).
    known_error: KnownError | None = None

    @property
    def failing(self) -> bool:
        return self.outcome in FAILING or self.now_passing

    @property
    def beyond_known_bounds(self) -> bool:
        """A known failure matched this mismatch, but its error is larger than the entry's."""
        return self.known_error is not None and self.outcome is Outcome.MISMATCH

    def to_json(self, part: parts.Part = parts.Part.ALL) -> dict[str, Any]:
        return parts.fields_json(self, part, convert={"seconds": lambda s: round(s, 6)})
