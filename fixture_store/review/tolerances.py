"""What a change to a record's tolerance does to its verdicts: each change classed as
**loosened** (some candidate that failed now passes, none that passed fails), **tightened**
(the reverse), **reshaped** (neither is certain: another metric, another reference, bounds moved
both ways) or **reworded** (only a ``why`` or a calibration's ``evidence`` changed: no verdict
changes).

Both sides are the one parsed :class:`~fixture_store.registry.tolerance.Tolerance` value
(DESIGN 16), compared rule by rule as a comparison would resolve them: for the record's rule and
each ``expectations`` entry (its environment), the rule of the record, of every ``per_array``
key and of every ``per_dtype`` key present on either side, each resolved on both sides with
:meth:`~fixture_store.registry.tolerance.Tolerance.for_array`. So a rule added or removed is
classed by its effect on the arrays it names: a ``per_array`` override or an ``expectations``
entry that raises a bound is **loosened** against the rule that judged those arrays before.

Within one rule, checks are matched by metric (and aggregate):

- a bound (``max``, ``atol``, ``rtol``, ``floor``) raised: loosened; lowered: tightened;
- a check added beside the others: tightened (every check must hold); one removed: loosened;
- the metric replaced by another: reshaped (their bounds do not compare), except from or to
  ``exact``, the strictest of all (any other metric passes equal arrays): loosened or tightened;
- ``dtype: same_kind``, ``shape: squeeze`` and ``equal_nan: true`` accept more than ``exact``,
  ``exact`` and ``false``;
- an ``oracle`` added is a further requirement (tightened), removed is loosened; its ``factor``
  or ``floor`` raised is loosened; another oracle record or metric is reshaped; so is another
  ``reference`` of an expectation;
- moves both ways in one rule: reshaped.

A change inherited from another rule is shown once, where it was made: an ``expectations`` entry
that changes exactly as the record's rule did, or an override that changes as its environment's
rule did, is not repeated.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from fixture_store.errors import RegistryError
from fixture_store.registry.metrics import BOUND, FLOOR, DtypeRule, Metric, ShapeRule
from fixture_store.registry.oracle import Oracle
from fixture_store.registry.tolerance import ArrayTolerance, Check, Tolerance


class Direction(StrEnum):
    LOOSENED = "loosened"
    TIGHTENED = "tightened"
    RESHAPED = "reshaped"
    REWORDED = "reworded"


RECORD = "record"  # the scope of a record's (or an environment's) own rule


@dataclass(frozen=True)
class ToleranceChange:
    """One rule's change: its class, where it applies (the ``expectations`` key, ``""`` for
    every environment; the scope: ``record``, ``array NAME``, ``dtype NAME``, ``oracle`` or
    ``reference``), the rule before and after as a reader sees it, and the rule's ``why``."""

    direction: Direction
    environment: str
    scope: str
    before: str
    after: str
    why: str = ""

    @property
    def where(self) -> str:
        """``array logits where device:cuda``: the scope, and the environment if any."""
        return self.scope + (f" where {self.environment}" if self.environment else "")

    def to_json(self) -> dict[str, Any]:
        return {
            "class": self.direction.value,
            "environment": self.environment or None,
            "scope": self.scope,
            "before": self.before,
            "after": self.after,
            "why": self.why or None,
        }


def classify(before: Tolerance | None, after: Tolerance | None) -> tuple[ToleranceChange, ...]:
    """Every change from ``before`` to ``after`` (``None``: the record has no tolerance, so the
    built-in default judges), classed; none when they judge alike and say the same."""
    old, new = before or Tolerance(), after or Tolerance()
    if old == new:
        return ()
    changes: list[ToleranceChange] = []
    # what each (environment, scope) judges before and after, to tell an inherited change
    seen: dict[tuple[str, str], tuple[ArrayTolerance, ArrayTolerance]] = {}
    for env in _environments(old, new):
        tb, ta = _in(old, env), _in(new, env)
        for scope, key in _scopes(tb, ta):
            pair = _rule(tb, scope, key), _rule(ta, scope, key)
            judged = seen[(env, scope)] = _judging(pair[0]), _judging(pair[1])
            inherited = judged[0] != judged[1] and (
                (env and seen.get(("", scope)) == judged)
                or (scope != RECORD and seen.get((env, RECORD)) == judged)
            )
            direction = compare_rules(*pair)
            if direction is None or inherited:
                continue
            changes.append(
                ToleranceChange(
                    direction, env, scope, describe(pair[0]), describe(pair[1]), _why(*pair)
                )
            )
        changes.extend(_oracle_change(env, tb.oracle, ta.oracle))
        changes.extend(_reference_change(env, _reference(old, env), _reference(new, env)))
    if not changes:
        changes.extend(_leftover(old, new))
    return tuple(changes)


def _judging(rule: ArrayTolerance) -> ArrayTolerance:
    """The rule without its reason: what it judges."""
    return replace(rule, why="")


def _environments(old: Tolerance, new: Tolerance) -> list[str]:
    keys = {e.key for t in (old, new) for e in t.expectations or ()}
    return ["", *sorted(keys)]


def _in(tolerance: Tolerance, env: str) -> Tolerance:
    """The tolerance that judges where the ``expectations`` entry ``env`` applies: the entry's
    (layered over the record's), else the record's own."""
    for entry in tolerance.expectations or ():
        if entry.key == env:
            layered: Tolerance = entry.tolerance
            return layered
    return tolerance


def _reference(tolerance: Tolerance, env: str) -> str | None:
    for entry in tolerance.expectations or ():
        if entry.key == env:
            return entry.reference
    return None


def _scopes(*tolerances: Tolerance) -> Iterator[tuple[str, str]]:
    """``(scope, key)``: the record's rule, then each ``per_array`` and ``per_dtype`` key either
    side has."""
    yield RECORD, ""
    arrays = sorted({k for t in tolerances for k, _ in t.per_array or ()})
    dtypes = sorted({k for t in tolerances for k, _ in t.per_dtype or ()})
    yield from ((f"array {k}", k) for k in arrays)
    yield from ((f"dtype {k}", k) for k in dtypes)


def _rule(tolerance: Tolerance, scope: str, key: str) -> ArrayTolerance:
    """The rule an array named ``key`` (or of dtype ``key``) is judged by under ``tolerance``."""
    try:
        if scope == RECORD:
            return tolerance.for_array()
        if scope.startswith("array "):
            return tolerance.for_array(key)
        return tolerance.for_array(dtype=key)
    except RegistryError:  # two patterns tie on the key: the record's rule is what is certain
        return tolerance.for_array()


def compare_rules(before: ArrayTolerance, after: ArrayTolerance) -> Direction | None:
    """How ``after`` judges compared with ``before`` (``None``: alike, same ``why``)."""
    if before == after:
        return None
    moves = set(_check_moves(before.checks, after.checks))
    moves.update(_rule_moves(before, after))
    if not moves:
        return Direction.REWORDED  # only the why
    return _combined(moves)


def _combined(moves: Iterable[Direction]) -> Direction:
    found = set(moves)
    if Direction.RESHAPED in found or {Direction.LOOSENED, Direction.TIGHTENED} <= found:
        return Direction.RESHAPED
    return found.pop()


def _key(check: Check) -> tuple[Metric, Any]:
    return check.metric, check.over


def _check_moves(before: tuple[Check, ...], after: tuple[Check, ...]) -> Iterator[Direction]:
    if before == after:
        return
    if _is_exact(before) or _is_exact(after):
        # exact is the strictest check: whatever replaces it accepts at least as much
        yield Direction.LOOSENED if _is_exact(before) else Direction.TIGHTENED
        return
    old = {_key(c): c for c in before}
    new = {_key(c): c for c in after}
    if len(old) != len(before) or len(new) != len(after):
        yield Direction.RESHAPED  # a metric checked twice: no pairing is certain
        return
    shared = old.keys() & new.keys()
    if not shared:
        yield Direction.RESHAPED  # another metric: its bounds do not compare
        return
    if new.keys() - old.keys():
        yield Direction.TIGHTENED  # a further check must hold
    if old.keys() - new.keys():
        yield Direction.LOOSENED  # a check no longer holds anyone back
    for key in shared:
        yield from _bound_moves(old[key], new[key])


def _is_exact(checks: tuple[Check, ...]) -> bool:
    return any(c.metric is Metric.EXACT for c in checks)


def _bound_moves(before: Check, after: Check) -> Iterator[Direction]:
    """Each bound the metric takes, raised (looser: a larger error, or a larger ``floor`` under
    ``max_rel``'s denominator, passes) or lowered."""
    for name in before.metric.bounds:
        attr = {BOUND: "bound", FLOOR: "floor"}.get(name, name)
        b, a = getattr(before, attr), getattr(after, attr)
        if a > b:
            yield Direction.LOOSENED
        elif a < b:
            yield Direction.TIGHTENED


def _rule_moves(before: ArrayTolerance, after: ArrayTolerance) -> Iterator[Direction]:
    looser = (
        (before.dtype, after.dtype, DtypeRule.EXACT),
        (before.shape, after.shape, ShapeRule.EXACT),
        (before.equal_nan, after.equal_nan, False),
    )
    for b, a, strict in looser:
        if b != a:
            yield Direction.LOOSENED if b == strict else Direction.TIGHTENED


def describe(rule: ArrayTolerance) -> str:
    """A rule as a reader sees it: ``max_abs <= 1e-05``, with the dtype, shape and NaN rules
    that are not the strict default."""
    parts = [rule.describe()]
    if rule.dtype is not DtypeRule.EXACT:
        parts.append(f"dtype {rule.dtype.value}")
    if rule.shape is not ShapeRule.EXACT:
        parts.append(f"shape {rule.shape.value}")
    if not rule.equal_nan:
        parts.append("NaN unequal")
    return ", ".join(parts)


def _why(before: ArrayTolerance, after: ArrayTolerance) -> str:
    return after.why or before.why


def _oracle_text(oracle: Oracle | None) -> str:
    if oracle is None:
        return "none"
    floor = f" + {oracle.floor:g}" if oracle.floor else ""
    return f"{oracle.metric} <= {oracle.factor:g} x {oracle.record}'s{floor}"


def _oracle_change(env: str, before: Oracle | None, after: Oracle | None) -> list[ToleranceChange]:
    if before == after:
        return []
    if before is None or after is None:
        direction = Direction.TIGHTENED if before is None else Direction.LOOSENED
    elif (before.record, before.metric) != (after.record, after.metric):
        direction = Direction.RESHAPED
    else:
        moves = [
            Direction.LOOSENED if a > b else Direction.TIGHTENED
            for b, a in ((before.factor, after.factor), (before.floor, after.floor))
            if a != b
        ]
        direction = _combined(moves)
    return [ToleranceChange(direction, env, "oracle", _oracle_text(before), _oracle_text(after))]


def _reference_change(env: str, before: str | None, after: str | None) -> list[ToleranceChange]:
    if before == after:
        return []
    shown = ("the record's own" if r is None else r for r in (before, after))
    return [ToleranceChange(Direction.RESHAPED, env, "reference", *shown)]


def _leftover(old: Tolerance, new: Tolerance) -> list[ToleranceChange]:
    """What differs besides the rules compared above (a calibration's evidence, intermediates,
    the arrays given as inputs): reworded if only the evidence, else reshaped."""
    plain_old, plain_new = replace(old, evidence=None), replace(new, evidence=None)
    direction = Direction.REWORDED if plain_old == plain_new else Direction.RESHAPED
    fields = sorted(
        k for k in {*old.to_json(), *new.to_json()} if old.to_json().get(k) != new.to_json().get(k)
    )
    return [ToleranceChange(direction, "", RECORD, "", f"changed: {', '.join(fields)}")]
