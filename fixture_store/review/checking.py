"""The registry judged on its own, without the store: what ``fixture-store check`` and the
pre-commit hook report. Loading already refuses a file that does not parse (that raises); this
names each invalid record, and each record a tolerance names (an ``oracle``, an expectation's
``reference``) that is not registered, which loading cannot see one record at a time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fixture_store.registry.family import Registry


@dataclass(frozen=True)
class Problem:
    """One record's problem: its name and what is wrong (with the fix, when there is one)."""

    name: str
    message: str

    def __str__(self) -> str:
        return f"invalid-record: {self.name}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "problem": self.message}


def problems(registry: Registry) -> list[Problem]:
    """Every problem of the registry's records, sorted by name."""
    found = [Problem(name, _with_fix(e.about(name), e.fix)) for name, e in registry.invalid()]
    known = set(registry.names())
    for record in registry.records():
        for what, other in _named(record.tolerance):
            if other not in known:
                found.append(
                    Problem(
                        record.name,
                        _with_fix(
                            f"its tolerance's {what} names {other!r}, which has no record",
                            "register it, or name a registered record",
                        ),
                    )
                )
    return sorted(found, key=lambda p: p.name)


def _with_fix(message: str, fix: str | None) -> str:
    return f"{message} (fix: {fix})" if fix else message


def _named(tolerance: Any) -> list[tuple[str, str]]:
    """The records a tolerance names: its oracle's, each expectation's reference and oracle."""
    if tolerance is None:
        return []
    out = []
    if tolerance.oracle is not None:
        out.append(("oracle", tolerance.oracle.record))
    for entry in tolerance.expectations or ():
        if entry.reference is not None:
            out.append((f"expectation {entry.key!r} reference", entry.reference))
        if entry.tolerance.oracle is not None and entry.tolerance.oracle != tolerance.oracle:
            out.append((f"expectation {entry.key!r} oracle", entry.tolerance.oracle.record))
    return out
