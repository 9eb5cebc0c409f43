"""Tolerances: how close a regenerated or computed array must be to the registered one.

A record's ``tolerance`` is parsed once into a :class:`Tolerance` (its default and its per-array
overrides, exactly as written, so it prints back to the same JSON); every comparison asks it for
the :class:`ArrayTolerance` of one array, with the defaults filled in.

The metrics and the fields each one takes (the JSON a record carries):

- ``{"metric": "exact"}``: the values must be equal (NaN matches NaN);
- ``{"metric": "allclose", "atol": A, "rtol": R}``: ``|a - e| <= A + R * |e|`` for every
  element (defaults: the ONNX backend runner's ``atol=1e-7``, ``rtol=1e-3``);
- ``{"metric": "mean_abs", "max": M}``: the mean of ``|a - e|`` over the array is at most ``M``;
- ``{"metric": "max_abs", "max": M}``: every ``|a - e|`` is at most ``M``;
- ``{"metric": "ulp", "max": N}``: every element is at most ``N`` units in the last place of
  the array's dtype away from the expected one;
- ``{"metric": "rms", "max": M}``: the root-mean-square of ``a - e`` is at most ``M``;
- ``{"metric": "max_rel", "max": M, "floor": F}``: every ``|a - e| / max(|e|, F)`` is at most
  ``M`` (``floor`` default 0: an expected 0 then takes only 0);
- ``{"metric": "cosine", "max": M}``: ``1 - cos(a, e)`` over the flattened arrays is at most ``M``;
- ``{"metric": "default"}``: ``allclose`` with the ``atol``/``rtol`` of :data:`DEFAULT_TABLE`
  for the array's dtype (torch.testing.assert_close's table), ``exact`` for any other dtype.

``"equal_nan"`` (default ``true``, as every record written before it judged) says whether a NaN
matches a NaN; with ``false`` a NaN equals nothing. ``"checks"`` is a list of metrics with their
bounds that must all hold (in place of ``metric``); ``"why"`` is a reason failures print.

Any of them may add ``"dtype": "same_kind"`` (a float candidate of another width is compared in
the expected dtype; default ``"exact"``) and ``"shape": "squeeze"`` (shapes equal once their
size-1 axes are dropped; default ``"exact"``). ``per_array`` maps an array's name (as the
record's ``arrays`` manifest names it; for an ONNX case, the output's name) or a glob pattern
over names to an override of the same fields; ``per_dtype`` maps a dtype name to one; an
override that switches to a metric with a bound gives that bound.

Which rule an array takes (:meth:`Tolerance.for_array`): the ``per_array`` entry of its exact
name, else the most specific ``per_array`` pattern that matches it (fewest wildcards, then the
longest literal text; two matching patterns equal on both are a registry error naming both),
else the ``per_dtype`` entry of its dtype, else the record's rule.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from fixture_store.errors import RegistryError
from fixture_store.registry import aggregate, evidence, oracle, ordered, roles
from fixture_store.registry import expectations as by_env
from fixture_store.registry.aggregate import Aggregate
from fixture_store.registry.dtypes import DTYPES
from fixture_store.registry.environment import Environment
from fixture_store.registry.metrics import (
    ALL_BOUNDS,
    BOUND,
    DEFAULT_ATOL,
    DEFAULT_RTOL,
    FLOOR,
    METRICS,
    RULES,
    DtypeRule,
    Metric,
    ShapeRule,
    check_bounds,
    parse_flag,
    parse_metric,
    parse_rule,
    parse_why,
    refuse_orphan_bounds,
)
from fixture_store.registry.oracle import Oracle
from fixture_store.registry.ordered import Intermediates
from fixture_store.registry.patterns import is_pattern, specificity, tie
from fixture_store.registry.patterns import matches as _matches
from fixture_store.registry.where import Where

# The vocabulary lives in registry/metrics.py; the names callers import from here:
__all__ = [
    "BOUND",
    "DEFAULT_ATOL",
    "DEFAULT_RTOL",
    "FLOOR",
    "ArrayTolerance",
    "Check",
    "DtypeRule",
    "Metric",
    "ShapeRule",
    "Tolerance",
]

_CHECK_KEYS = frozenset({"metric", *ALL_BOUNDS, *aggregate.KEYS})
_OVERRIDE_KEYS = frozenset({*_CHECK_KEYS, *RULES, "equal_nan", "why", "checks", evidence.KEY})
_KEYS = _OVERRIDE_KEYS | {"per_array", "per_dtype", by_env.KEY, ordered.KEY, oracle.KEY, roles.KEY}


@dataclass(frozen=True)
class Check:
    """One metric with its bounds: a rule holds when every one of its checks does."""

    metric: Metric = Metric.ALLCLOSE
    atol: float = DEFAULT_ATOL
    rtol: float = DEFAULT_RTOL
    bound: float = 0.0
    floor: float = 0.0
    over: Aggregate | None = None  # a statistic of per-slice errors, not the whole array's

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"metric": self.metric.value}
        if self.over is not None:
            out.update(self.over.to_json())
        if self.metric is Metric.ALLCLOSE:
            out.update(atol=self.atol, rtol=self.rtol)
        elif BOUND in self.metric.bounds:
            out[BOUND] = self.bound
        if self.metric is Metric.MAX_REL:
            out[FLOOR] = self.floor
        return out

    def describe(self) -> str:
        """The check as a reader sees it in a message: ``mean_abs <= 0.0005``."""
        if self.metric is Metric.ALLCLOSE:
            return f"allclose atol={self.atol:g} rtol={self.rtol:g}"
        what = self.over.describe(self.metric.value) if self.over else self.metric.value
        if self.metric is Metric.MAX_REL:
            return f"{what} <= {self.bound:g} (floor {self.floor:g})"
        if not self.metric.bounds:
            return what
        return f"{what} <= {self.bound:g}"


@dataclass(frozen=True)
class ArrayTolerance:
    """The tolerance one array is compared under: its metric and bounds (its first check),
    any further checks that must hold too (``more``), how strictly dtype and shape must match,
    whether NaN matches NaN, and the reason a failure prints (``why``). ``bound`` is the
    ``max`` of every metric but ``allclose``, which ``atol``/``rtol`` bound."""

    metric: Metric = Metric.ALLCLOSE
    atol: float = DEFAULT_ATOL
    rtol: float = DEFAULT_RTOL
    bound: float = 0.0
    dtype: DtypeRule = DtypeRule.EXACT
    shape: ShapeRule = ShapeRule.EXACT
    floor: float = 0.0
    equal_nan: bool = True
    why: str = ""
    more: tuple[Check, ...] = ()
    over: Aggregate | None = None

    @property
    def checks(self) -> tuple[Check, ...]:
        """Every check the array must pass, the first one's fields on this object."""
        first = Check(self.metric, self.atol, self.rtol, self.bound, self.floor, self.over)
        return (first, *self.more)

    @classmethod
    def of_checks(cls, checks: tuple[Check, ...], **rules: Any) -> ArrayTolerance:
        first, *more = checks
        return cls(
            first.metric,
            first.atol,
            first.rtol,
            first.bound,
            floor=first.floor,
            more=tuple(more),
            over=first.over,
            **rules,
        )

    def with_checks(self, checks: tuple[Check, ...]) -> ArrayTolerance:
        first, *more = checks
        return replace(
            self,
            metric=first.metric,
            atol=first.atol,
            rtol=first.rtol,
            bound=first.bound,
            floor=first.floor,
            more=tuple(more),
            over=first.over,
        )

    def to_json(self) -> dict[str, Any]:
        if self.more:
            out: dict[str, Any] = {"checks": [c.to_json() for c in self.checks]}
        else:
            out = self.checks[0].to_json()
        if self.dtype is not DtypeRule.EXACT:
            out["dtype"] = self.dtype.value
        if self.shape is not ShapeRule.EXACT:
            out["shape"] = self.shape.value
        if not self.equal_nan:
            out["equal_nan"] = False
        if self.why:
            out["why"] = self.why
        return out

    def describe(self) -> str:
        """The tolerance as a reader sees it in a message: ``mean_abs <= 0.0005``."""
        return " and ".join(c.describe() for c in self.checks)


@dataclass(frozen=True)
class Tolerance:
    """A record's tolerance as written: a default and overrides by array name, by pattern and
    by dtype.

    A field left out is ``None`` (the default applies, or for an override the record's value);
    ``per_array``/``per_dtype``/``checks`` are ``None`` when the record has no such key. Plain
    tuples, so a worker process can receive it.
    """

    metric: Metric | None = None
    atol: float | None = None
    rtol: float | None = None
    bound: float | None = None
    dtype: DtypeRule | None = None
    shape: ShapeRule | None = None
    per_array: tuple[tuple[str, Tolerance], ...] | None = None
    floor: float | None = None
    equal_nan: bool | None = None
    why: str | None = None
    checks: tuple[Tolerance, ...] | None = None
    per_dtype: tuple[tuple[str, Tolerance], ...] | None = None
    # By environment (registry/expectations.py): each entry's rule layered over this one.
    expectations: tuple[by_env.Expectation, ...] | None = None
    over: Aggregate | None = None  # registry/aggregate.py
    intermediates: Intermediates | None = None  # registry/ordered.py
    evidence: evidence.Evidence | None = None  # what a calibration observed (judges nothing)
    oracle: Oracle | None = None  # registry/oracle.py: judged by the upstream's own error
    inputs: roles.Inputs | None = None  # registry/roles.py: arrays no rule judges
    # Lookups built once per value (not part of it: equality, hashing and the JSON ignore it):
    # the overrides by exact name, the pattern keys, and each array's resolved tolerance. A
    # record with thousands of per-array entries is resolved in one pass, not one per array.
    _memo: dict[Any, Any] = field(
        default_factory=dict, init=False, compare=False, hash=False, repr=False
    )

    @classmethod
    def from_json(
        cls,
        raw: Any,
        where: Where,
        field: str = "tolerance",
        *,
        need_metric: bool = True,
        parent: Metric | None = None,
    ) -> Tolerance:
        """Parse and check a tolerance object; a RegistryError names the offending field.

        An override (``need_metric=False``) is checked against the metric it inherits from
        ``parent`` unless it names its own (``parent`` is ``None`` under a record judged by
        several checks: an override there names its metric or its checks).
        """
        if not isinstance(raw, Mapping):
            raise where.fail(field, "must be an object")
        if need_metric and "metric" not in raw and "checks" not in raw:
            raise where.fail(field + ".metric", f"missing required field (one of {METRICS})")
        allowed = _KEYS if need_metric else _OVERRIDE_KEYS
        unknown = sorted(set(raw) - allowed, key=str)
        if unknown:
            raise where.fail(f"{field}.{unknown[0]}", f"unknown field; one of {sorted(allowed)}")
        checks = _parse_checks(raw, where, field)
        metric = parse_metric(raw, where, field)
        over = None
        if checks is None:
            inherited = parent if not need_metric else None
            if metric is None and inherited is None and not need_metric:
                refuse_orphan_bounds(raw, where, field)
            switched = metric if metric is not inherited else None
            judged = metric or inherited or Metric.ALLCLOSE
            check_bounds(raw, where, field, judged, switched=switched)
            over = _parse_over(raw, where, field, judged)
        rules = {key: parse_rule(raw, key, where, field) for key in RULES}
        # Overrides inherit the record's metric; under several checks there is none to inherit.
        own = metric if checks is None else None
        child = own if need_metric else None
        return cls(
            metric,
            raw.get("atol"),
            raw.get("rtol"),
            raw.get(BOUND),
            DtypeRule(rules["dtype"]) if rules["dtype"] else None,
            ShapeRule(rules["shape"]) if rules["shape"] else None,
            _overrides(raw, "per_array", where, field, child, need_metric=need_metric),
            raw.get(FLOOR),
            parse_flag(raw, "equal_nan", where, field),
            parse_why(raw, where, field),
            checks,
            _overrides(raw, "per_dtype", where, field, child, need_metric=need_metric),
            by_env.parse(raw, where, field, cls.from_json, _KEYS - {by_env.KEY, roles.KEY})
            if need_metric
            else None,
            over,
            ordered.parse(
                raw,
                where,
                field,
                lambda sub, at: cls.from_json(sub, where, at, need_metric=False, parent=child),
            )
            if need_metric
            else None,
            evidence.parse(raw, where, field),
            Oracle.from_json(raw[oracle.KEY], where, field) if oracle.KEY in raw else None,
            roles.parse(raw, where, field) if need_metric else None,
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.metric is not None:
            out["metric"] = self.metric.value
        if self.checks is not None:
            out["checks"] = [c.to_json() for c in self.checks]
        plain = (("atol", self.atol), ("rtol", self.rtol), (BOUND, self.bound), (FLOOR, self.floor))
        out.update((key, value) for key, value in plain if value is not None)
        for key, rule in (("dtype", self.dtype), ("shape", self.shape)):
            if rule is not None:
                out[key] = rule.value
        said = (("equal_nan", self.equal_nan), ("why", self.why))
        out.update((key, value) for key, value in said if value is not None)
        for key, subs in (("per_array", self.per_array), ("per_dtype", self.per_dtype)):
            if subs is not None:
                out[key] = {name: sub.to_json() for name, sub in subs}
        if self.expectations is not None:
            out[by_env.KEY] = {e.key: e.to_json() for e in self.expectations}
        if self.over is not None:
            out.update(self.over.to_json())
        parts = ((ordered.KEY, self.intermediates), (evidence.KEY, self.evidence))
        for key, part in (*parts, (oracle.KEY, self.oracle), (roles.KEY, self.inputs)):
            if part is not None:
                out[key] = part.to_json()
        return out

    def expectation(self, where: Environment | None) -> by_env.Expectation | None:
        """The ``expectations`` entry that applies in ``where`` (``None``: the record's rule)."""
        return by_env.select(self.expectations, where)

    def in_environment(self, where: Environment | None) -> Tolerance:
        """The tolerance a comparison in ``where`` judges by: the entry's that applies there,
        layered over this one, else this one."""
        found = self.expectation(where)
        return self if found is None else found.tolerance

    def override(self, name: str) -> Tolerance | None:
        """The override written for array ``name`` exactly, if any."""
        exact: dict[str, Tolerance] | None = self._memo.get("exact")
        if exact is None:
            exact = self._memo["exact"] = {}
            for array, sub in reversed(self.per_array or ()):
                exact[array] = sub  # the first of duplicate keys, as a scan finds it
        return exact.get(name)

    def _patterns(self) -> list[tuple[str, Tolerance]]:
        found: list[tuple[str, Tolerance]] | None = self._memo.get("patterns")
        if found is None:
            found = self._memo["patterns"] = [
                (key, sub) for key, sub in self.per_array or () if is_pattern(key)
            ]
        return found

    def pattern_for(self, *names: str) -> tuple[str, Tolerance] | None:
        """The most specific ``per_array`` pattern matching any of ``names`` (a key that is an
        exact name of one of them is no pattern here), or ``None``; a RegistryError when two
        equally specific patterns match."""
        matching = [
            (key, sub)
            for key, sub in self._patterns()
            if key not in names and any(_matches(key, n) for n in names)
        ]
        if not matching:
            return None
        matching.sort(key=lambda kv: specificity(kv[0]), reverse=True)
        if len(matching) > 1 and specificity(matching[0][0]) == specificity(matching[1][0]):
            raise tie(matching[0][0], matching[1][0], names[0])
        return matching[0]

    def check_names(
        self,
        known: Collection[str],
        where: Where,
        *,
        what: str = "array of the record's arrays manifest",
        plural: str = "arrays",
    ) -> None:
        """Refuse a ``per_array`` key that names no array of ``known`` (the record's arrays
        manifest, or an ONNX model's outputs) and, as a pattern, matches none, and two patterns
        that tie on an array: an override nobody looks up would silently not apply."""
        for name, _sub in self.per_array or ():
            if name in known:
                continue
            if not is_pattern(name):
                raise where.fail(
                    f"tolerance.per_array.{name}",
                    f"names no {what} (its {plural}: {sorted(known)})",
                    fix=f"key per_array by a name exactly as the {plural} are named, "
                    "or by a glob pattern over those names",
                )
            if not any(_matches(name, array) for array in known):
                raise where.fail(
                    f"tolerance.per_array.{name}",
                    f"the pattern matches no {what} (its {plural}: {sorted(known)})",
                    fix="correct the pattern (* any characters, ? one, [abc] one of a set)",
                )
        if self.intermediates is not None:
            self.intermediates.check_names(known, where, "tolerance")
        if self.inputs is not None:
            self.inputs.check_names(known, where, "tolerance", self)
        for array in known:
            try:
                self.pattern_for(array)
            except RegistryError as tie:
                raise where.fail("tolerance.per_array", tie.reason, fix=tie.fix) from None
        for entry in self.expectations or ():
            entry.tolerance.check_names(known, where, what=what, plural=plural)
        aggregate.check_axes(self, known, where)

    def for_array(self, *names: str, dtype: str | None = None) -> ArrayTolerance:
        """The tolerance of an array: the override of the first of ``names`` that has one by
        exact name, else the most specific pattern matching any of them, else the ``per_dtype``
        entry of ``dtype``, over the record's default, over the built-in defaults."""
        memo = self._memo.get((names, dtype))
        if memo is None:
            memo = self._memo[(names, dtype)] = self._for_array(names, dtype)
        return memo

    def _for_array(self, names: tuple[str, ...], dtype: str | None) -> ArrayTolerance:
        if self.inputs is not None and any(self.inputs.holds(n) for n in names):
            return _INPUT  # the role before any rule (registry/roles.py)
        base = self._memo.get("base")
        if base is None:
            base = self._memo["base"] = _resolve(self, ArrayTolerance())
        for name in names:
            sub = self.override(name)
            if sub is not None:
                return self._shared(sub, base)
        pattern = self.pattern_for(*names) if names else None
        if pattern is not None:
            return self._shared(pattern[1], base)
        steps = self.intermediates
        if steps is not None and any(steps.holds(n) for n in names):
            return self._shared(steps.rule, base)
        for key, sub in self.per_dtype or ():
            if key == dtype:
                return self._shared(sub, base)
        return base

    def _shared(self, sub: Tolerance, base: ArrayTolerance) -> ArrayTolerance:
        """One rule per override: the arrays a pattern or a dtype matches share it (a batch of
        them is then one group)."""
        rule = self._memo.get(("rule", id(sub)))
        if rule is None:
            rule = self._memo[("rule", id(sub))] = _resolve(sub, base)
        return rule


def _resolve(sub: Tolerance, base: ArrayTolerance) -> ArrayTolerance:
    """``sub``'s fields over ``base``'s."""
    rules: dict[str, Any] = {
        "dtype": sub.dtype or base.dtype,
        "shape": sub.shape or base.shape,
        "equal_nan": base.equal_nan if sub.equal_nan is None else sub.equal_nan,
        "why": base.why if sub.why is None else sub.why,
    }
    if sub.checks is not None:
        checks = tuple(_check(c, Check()) for c in sub.checks)
        return ArrayTolerance.of_checks(checks, **rules)
    if sub.metric is None:  # the inherited checks, with this rule's bounds on the one metric
        return ArrayTolerance.of_checks((_check(sub, base.checks[0]), *base.more), **rules)
    # A metric of its own replaces the inherited checks (its other bounds inherited from the
    # record's one metric, as before checks existed).
    own = _check(sub, base.checks[0] if not base.more else Check())
    return ArrayTolerance.of_checks((own,), **rules)


def _check(sub: Tolerance, base: Check) -> Check:
    """``sub``'s metric and bounds over ``base``'s; an aggregate goes with its metric (a rule
    switching to another metric does not inherit it)."""
    same = sub.metric is None or sub.metric is base.metric
    return Check(
        sub.metric or base.metric,
        base.atol if sub.atol is None else float(sub.atol),
        base.rtol if sub.rtol is None else float(sub.rtol),
        base.bound if sub.bound is None else float(sub.bound),
        base.floor if sub.floor is None else float(sub.floor),
        sub.over if sub.over is not None or not same else base.over,
    )


def _parse_over(
    raw: Mapping[str, Any], where: Where, field: str, metric: Metric
) -> Aggregate | None:
    takes_max = BOUND in metric.bounds
    return aggregate.parse(raw, where, field, takes_max=takes_max, metric=metric.value)


def _parse_checks(raw: Mapping[str, Any], where: Where, field: str) -> tuple[Tolerance, ...] | None:
    """``checks``: a non-empty list of ``{metric, bounds}`` that must all hold, in place of the
    rule's own ``metric`` and bounds."""
    if "checks" not in raw:
        return None
    items = raw["checks"]
    if not isinstance(items, list) or not items:
        raise where.fail(f"{field}.checks", "must be a non-empty list of {metric, bounds}")
    beside = sorted(k for k in _CHECK_KEYS if k in raw)
    if beside:
        raise where.fail(
            f"{field}.{beside[0]}",
            "does not apply beside 'checks': each check in the list names its metric and bounds",
        )
    out = []
    for i, item in enumerate(items):
        at = f"{field}.checks[{i}]"
        if not isinstance(item, Mapping):
            raise where.fail(at, "must be an object {metric, bounds}")
        unknown = sorted(set(item) - _CHECK_KEYS, key=str)
        if unknown:
            raise where.fail(f"{at}.{unknown[0]}", f"unknown field; one of {sorted(_CHECK_KEYS)}")
        metric = parse_metric(item, where, at)
        if metric is None:
            raise where.fail(f"{at}.metric", f"missing required field (one of {METRICS})")
        check_bounds(item, where, at, metric, switched=metric)
        over = _parse_over(item, where, at, metric)
        out.append(
            Tolerance(
                metric,
                item.get("atol"),
                item.get("rtol"),
                item.get(BOUND),
                floor=item.get(FLOOR),
                over=over,
            )
        )
    return tuple(out)


def _overrides(
    raw: Mapping[str, Any],
    key: str,
    where: Where,
    field: str,
    parent: Metric | None,
    *,
    need_metric: bool,
) -> tuple[tuple[str, Tolerance], ...] | None:
    if key not in raw or not need_metric:
        return None
    entries = raw[key]
    at = f"{field}.{key}"
    what = "array name or pattern" if key == "per_array" else "dtype name"
    if not isinstance(entries, Mapping):
        raise where.fail(at, f"must be an object of {what} -> {{metric, bounds}}")
    if key == "per_dtype":
        for name in entries:
            if name not in DTYPES:
                raise where.fail(f"{at}.{name}", f"is no dtype name; one of {sorted(DTYPES)}")
    return tuple(
        (
            name,
            Tolerance.from_json(sub, where, f"{at}.{name}", need_metric=False, parent=parent),
        )
        for name, sub in entries.items()
    )


# An input given back (registry/roles.py): the reference's own bits, dtype and shape.
_INPUT = ArrayTolerance(Metric.EXACT, why="an input: the reference's own bits (registry/roles.py)")
