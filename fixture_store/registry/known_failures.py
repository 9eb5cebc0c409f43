"""Known failures of the comparators: registry data that excuses only what it names.

An entry names a runtime (or ``*``), its cases, the outcome it excuses and why. It excuses:

- only its ``outcome``; an entry without one excuses any failing outcome except a mismatch,
  which needs bounds;
- for a mismatch, an error up to its bounds: ``max_abs`` (required) and ``max_rel`` (optional;
  left out where an expected value is exactly 0, since the relative error is infinite there).
  The rule for a bound: twice the largest error seen over the entry's cases, rounded up to two
  significant digits (:func:`suggest_bound`). A structural mismatch (a shape, dtype or type the
  runtime gets wrong) has no value error, so its bounds are 0 and a value error is not excused.
  ``max_abs`` bounds the error between numbers; an element where a NaN or an infinity meets
  anything but its like is an infinite error, which no finite bound holds: ``special_values``
  (optional, default 0) is how many such elements the entry excuses, counted exactly;
- only the cases it expects: an exact name is one case; a glob pattern states ``expect``, the
  number of registered names it matches, so that cases added by an upgrade of the upstream are
  not excused silently (:func:`check_counts`).
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fixture_store.errors import RegistryError, UsageError
from fixture_store.registry import conditions
from fixture_store.registry.environment import Environment

GLOB_CHARS = "*?["
MISMATCH = "mismatch"
# A bound is this many times the largest error seen, rounded up to two significant digits.
MARGIN = 2.0
# A wrong count lists this many of the names it matched, and counts the rest.
_NAMES_SHOWN = 20


def is_glob(pattern: str) -> bool:
    return any(ch in pattern for ch in GLOB_CHARS)


def suggest_bound(seen: float) -> float:
    """The bound an entry should register for the largest error ``seen``: MARGIN times it,
    rounded up to two significant digits (0 stays 0: a structural mismatch)."""
    value = MARGIN * seen
    if value <= 0 or not math.isfinite(value):
        return value
    scale = 10.0 ** (math.floor(math.log10(value)) - 1)
    # round() first: 6.9e-4 / 1e-5 is 68.99999999999999 in binary floating point.
    return float(f"{math.ceil(round(value / scale, 9)) * scale:.2g}")


@dataclass(frozen=True)
class KnownFailure:
    """A failure the project knows about, kept as data: which runtime, which cases, why."""

    runtime: str
    pattern: str
    reason: str
    outcome: str | None = None
    # KIND:ARGUMENT (see fixture_store.registry.conditions): the entry applies only where this
    # holds.
    condition: str | None = None
    # How many registered names a glob pattern matches (an exact name is one).
    expect: int | None = None
    # For a mismatch: the largest absolute and relative errors it excuses.
    max_abs: float | None = None
    max_rel: float | None = None
    # For a mismatch: how many elements it excuses where a NaN or an infinity is not matched.
    special_values: int | None = None
    # Where the entry was read from, for error messages.
    file: str | None = field(default=None, compare=False, repr=False)
    index: int | None = field(default=None, compare=False, repr=False)

    @property
    def label(self) -> str:
        return f"{self.pattern!r} ({self.runtime})"

    @property
    def expected_count(self) -> int:
        return self.expect if self.expect is not None else 1

    def active(self, where: Environment | None = None) -> bool:
        """Whether the entry applies: its condition holds on this machine, and (an environment
        condition such as ``provider:CUDAExecutionProvider``) in ``where`` the case ran."""
        return self.condition is None or conditions.holds(self.condition, where)

    def matches(self, runtime: str, name: str) -> bool:
        return self.runtime in (runtime, "*") and fnmatch.fnmatchcase(name, self.pattern)

    def to_json(self) -> dict[str, Any]:
        fields = (
            ("runtime", self.runtime),
            ("pattern", self.pattern),
            ("reason", self.reason),
            ("outcome", self.outcome),
            ("condition", self.condition),
            ("expect", self.expect),
            ("max_abs", self.max_abs),
            ("max_rel", self.max_rel),
            ("special_values", self.special_values),
        )
        return {k: v for k, v in fields if v is not None}


def parse(raw: Any, *, file: str, index: int) -> KnownFailure:
    """One ``known_failures`` entry of a registry file, or a RegistryError naming its field."""
    where = f"known_failures[{index}]"
    if not isinstance(raw, dict) or not all(
        isinstance(raw.get(k), str) and raw.get(k) for k in ("runtime", "pattern", "reason")
    ):
        raise RegistryError(
            "each known failure needs non-empty runtime, pattern and reason", file=file, field=where
        )
    condition = raw.get("condition")
    if condition is not None:
        try:
            conditions.parse(condition if isinstance(condition, str) else "")
        except UsageError as e:
            raise RegistryError(e.message, file=file, field=f"{where}.condition", fix=e.fix) from e
    pattern: str = raw["pattern"]
    expect = raw.get("expect")
    if expect is not None and (
        not isinstance(expect, int) or isinstance(expect, bool) or expect < 1
    ):
        raise RegistryError(
            "must be a whole number of cases, 1 or more", file=file, field=f"{where}.expect"
        )
    if is_glob(pattern) and expect is None:
        raise RegistryError(
            f"the glob {pattern!r} needs 'expect', the number of cases it matches, so that "
            "new cases are not excused silently",
            file=file,
            field=f"{where}.expect",
            fix='list the exact names, or add "expect": N (a compare names the cases '
            "matched when N is wrong)",
        )
    if not is_glob(pattern) and expect not in (None, 1):
        raise RegistryError(
            f"{pattern!r} is an exact name: it matches one case", file=file, field=f"{where}.expect"
        )
    outcome = raw.get("outcome")
    bounds = {k: _bound(raw, k, file=file, field=f"{where}.{k}") for k in ("max_abs", "max_rel")}
    bounds["special_values"] = _count(raw, "special_values", file=file, field=f"{where}.")
    if outcome == MISMATCH and bounds["max_abs"] is None:
        raise RegistryError(
            "a mismatch entry needs 'max_abs', the largest absolute error it excuses "
            "(and 'max_rel' where the relative error is finite)",
            file=file,
            field=f"{where}.max_abs",
            fix='add "max_abs": 0 and run fixture-store compare on its cases: a case whose '
            "error is larger fails and names the bound to register (twice the error seen)",
        )
    if outcome != MISMATCH:
        extra = next((k for k, v in bounds.items() if v is not None), None)
        if extra is not None:
            raise RegistryError(
                f"bounds apply to a mismatch; this entry's outcome is {outcome!r}",
                file=file,
                field=f"{where}.{extra}",
            )
    return KnownFailure(
        raw["runtime"],
        pattern,
        raw["reason"],
        outcome,
        condition,
        expect,
        bounds["max_abs"],
        bounds["max_rel"],
        _whole(bounds["special_values"]),
        file=file,
        index=index,
    )


def _bound(raw: Mapping[str, Any], key: str, *, file: str, field: str) -> float | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RegistryError("must be a number", file=file, field=field)
    if not math.isfinite(value) or value < 0:
        raise RegistryError("must be a finite number, 0 or more", file=file, field=field)
    return value  # as written (0 stays 0), so rewriting the file leaves it unchanged


def _count(raw: Mapping[str, Any], key: str, *, file: str, field: str) -> int | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RegistryError("must be a whole number, 0 or more", file=file, field=field + key)
    return value


def _whole(value: float | None) -> int | None:
    return None if value is None else int(value)


def check_counts(known: Iterable[KnownFailure], names: Sequence[str]) -> None:
    """Raise a RegistryError naming every entry whose pattern does not match as many of
    ``names`` (the registry's) as it expects, with the names it matched."""
    wrong = []
    for entry in known:
        hits = fnmatch.filter(names, entry.pattern)
        if len(hits) == entry.expected_count:
            continue
        more = len(hits) - _NAMES_SHOWN
        shown = ", ".join(hits[:_NAMES_SHOWN]) + (f", ... ({more} more)" if more > 0 else "")
        where = f"{entry.file}: known_failures[{entry.index}]: " if entry.file else ""
        wrong.append(
            f"{where}{entry.label} expects {entry.expected_count} case(s) and matches "
            f"{len(hits)}: {shown or 'none'}"
        )
    if wrong:
        raise RegistryError(
            "known failures match other cases than they expect:\n  " + "\n  ".join(wrong),
            fix="check that each case matched fails for the entry's reason, then set "
            "'expect' to the count matched or list the exact names; remove an entry "
            "that matches none",
        )
