"""What one comparator run of one case produced, as small immutable values."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from fixture_store.parity.arrays import ArrayComparison
from fixture_store.registry import Tolerance


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


@dataclass(frozen=True)
class CaseResult:
    name: str
    runtime: str
    outcome: Outcome
    detail: str = ""
    arrays: tuple[ArrayComparison, ...] = ()
    operators: tuple[str, ...] = ()
    seconds: float = 0.0
    fix: str | None = None
    # Set when a registered known failure matched: what it stood for and why it is known.
    underlying: Outcome | None = None
    known_reason: str | None = None
    now_passing: bool = False
    # A known failure matched but its machine condition does not hold here: the entry is
    # reported, and excuses nothing.
    inactive_condition: str | None = None

    @property
    def failing(self) -> bool:
        return self.outcome in FAILING or self.now_passing

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "runtime": self.runtime,
            "outcome": str(self.outcome),
            "detail": self.detail,
            "fix": self.fix,
            "underlying": str(self.underlying) if self.underlying else None,
            "known_reason": self.known_reason,
            "now_passing": self.now_passing,
            "inactive_condition": self.inactive_condition,
            "operators": list(self.operators),
            "seconds": round(self.seconds, 6),
            "arrays": [a.to_json() for a in self.arrays],
        }
