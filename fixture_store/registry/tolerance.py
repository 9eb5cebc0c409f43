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
  the array's dtype away from the expected one.

Any of them may add ``"dtype": "same_kind"`` (a float candidate of another width is compared in
the expected dtype; default ``"exact"``) and ``"shape": "squeeze"`` (shapes equal once their
size-1 axes are dropped; default ``"exact"``). ``per_array`` maps an array's name (as the
record's ``arrays`` manifest names it; for an ONNX case, the output's name) to an override of
the same fields; an override that switches to a metric with a bound gives that bound.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from fixture_store.registry.where import Where

# The onnx backend test runner's defaults.
DEFAULT_RTOL = 1e-3
DEFAULT_ATOL = 1e-7


class Metric(StrEnum):
    EXACT = "exact"
    ALLCLOSE = "allclose"
    MEAN_ABS = "mean_abs"
    MAX_ABS = "max_abs"
    ULP = "ulp"

    @property
    def bounds(self) -> tuple[str, ...]:
        """The JSON fields that bound this metric."""
        return _BOUNDS_OF[self]


class DtypeRule(StrEnum):
    EXACT = "exact"
    SAME_KIND = "same_kind"  # floats of another width compare in the expected dtype


class ShapeRule(StrEnum):
    EXACT = "exact"
    SQUEEZE = "squeeze"  # equal once size-1 axes are dropped


BOUND = "max"  # the one bound of mean_abs, max_abs and ulp
_BOUNDS_OF: Mapping[Metric, tuple[str, ...]] = {
    Metric.EXACT: (),
    Metric.ALLCLOSE: ("atol", "rtol"),
    Metric.MEAN_ABS: (BOUND,),
    Metric.MAX_ABS: (BOUND,),
    Metric.ULP: (BOUND,),
}
_METRICS = tuple(m.value for m in Metric)
_ALL_BOUNDS = ("atol", "rtol", BOUND)
_RULES: Mapping[str, tuple[str, ...]] = {
    "dtype": tuple(r.value for r in DtypeRule),
    "shape": tuple(r.value for r in ShapeRule),
}
_OVERRIDE_KEYS = frozenset({"metric", *_ALL_BOUNDS, *_RULES})
_KEYS = _OVERRIDE_KEYS | {"per_array"}


@dataclass(frozen=True)
class ArrayTolerance:
    """The tolerance one array is compared under: its metric and bounds, and how strictly
    dtype and shape must match. ``bound`` is the ``max`` of ``mean_abs``, ``max_abs`` and
    ``ulp``; ``atol``/``rtol`` bound ``allclose``."""

    metric: Metric = Metric.ALLCLOSE
    atol: float = DEFAULT_ATOL
    rtol: float = DEFAULT_RTOL
    bound: float = 0.0
    dtype: DtypeRule = DtypeRule.EXACT
    shape: ShapeRule = ShapeRule.EXACT

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"metric": self.metric.value}
        if self.metric is Metric.ALLCLOSE:
            out.update(atol=self.atol, rtol=self.rtol)
        elif self.metric is not Metric.EXACT:
            out[BOUND] = self.bound
        if self.dtype is not DtypeRule.EXACT:
            out["dtype"] = self.dtype.value
        if self.shape is not ShapeRule.EXACT:
            out["shape"] = self.shape.value
        return out

    def describe(self) -> str:
        """The tolerance as a reader sees it in a message: ``mean_abs <= 0.0005``."""
        if self.metric is Metric.ALLCLOSE:
            return f"allclose atol={self.atol:g} rtol={self.rtol:g}"
        if self.metric is Metric.EXACT:
            return "exact"
        return f"{self.metric.value} <= {self.bound:g}"


@dataclass(frozen=True)
class Tolerance:
    """A record's tolerance as written: a default and overrides by array name.

    A field left out is ``None`` (the default applies, or for an override the record's value);
    ``per_array`` is ``None`` when the record has no such key. Plain tuples, so a worker process
    can receive it.
    """

    metric: Metric | None = None
    atol: float | None = None
    rtol: float | None = None
    bound: float | None = None
    dtype: DtypeRule | None = None
    shape: ShapeRule | None = None
    per_array: tuple[tuple[str, Tolerance], ...] | None = None

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
        ``parent`` unless it names its own.
        """
        if not isinstance(raw, Mapping):
            raise where.fail(field, "must be an object")
        if need_metric and "metric" not in raw:
            raise where.fail(field + ".metric", f"missing required field (one of {_METRICS})")
        allowed = _KEYS if need_metric else _OVERRIDE_KEYS
        unknown = sorted(set(raw) - allowed, key=str)
        if unknown:
            raise where.fail(f"{field}.{unknown[0]}", f"unknown field; one of {sorted(allowed)}")
        metric = _parse_metric(raw, where, field)
        switched = metric if metric is not parent else None
        _check_bounds(raw, where, field, metric or parent or Metric.ALLCLOSE, switched=switched)
        rules = {key: _parse_rule(raw, key, where, field) for key in _RULES}
        return cls(
            metric,
            raw.get("atol"),
            raw.get("rtol"),
            raw.get(BOUND),
            DtypeRule(rules["dtype"]) if rules["dtype"] else None,
            ShapeRule(rules["shape"]) if rules["shape"] else None,
            _per_array(raw["per_array"], where, f"{field}.per_array", metric)
            if "per_array" in raw
            else None,
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.metric is not None:
            out["metric"] = self.metric.value
        for key, value in (("atol", self.atol), ("rtol", self.rtol), (BOUND, self.bound)):
            if value is not None:
                out[key] = value
        if self.dtype is not None:
            out["dtype"] = self.dtype.value
        if self.shape is not None:
            out["shape"] = self.shape.value
        if self.per_array is not None:
            out["per_array"] = {name: sub.to_json() for name, sub in self.per_array}
        return out

    def override(self, name: str) -> Tolerance | None:
        """The override written for array ``name``, if any."""
        for array, sub in self.per_array or ():
            if array == name:
                return sub
        return None

    def check_names(self, known: Collection[str], where: Where) -> None:
        """Refuse a ``per_array`` key that names no array of ``known`` (the record's arrays
        manifest): an override nobody looks up would silently not apply."""
        for name, _sub in self.per_array or ():
            if name not in known:
                raise where.fail(
                    f"tolerance.per_array.{name}",
                    f"names no array of the record's arrays manifest (its arrays: {sorted(known)})",
                    fix="key per_array by an array's name exactly as 'arrays' lists it",
                )

    def for_array(self, *names: str) -> ArrayTolerance:
        """The tolerance of an array: the override of the first of ``names`` that has one, over
        the record's default, over the built-in defaults."""
        base = ArrayTolerance(
            self.metric or Metric.ALLCLOSE,
            DEFAULT_ATOL if self.atol is None else float(self.atol),
            DEFAULT_RTOL if self.rtol is None else float(self.rtol),
            0.0 if self.bound is None else float(self.bound),
            self.dtype or DtypeRule.EXACT,
            self.shape or ShapeRule.EXACT,
        )
        for name in names:
            sub = self.override(name)
            if sub is not None:
                return ArrayTolerance(
                    sub.metric or base.metric,
                    base.atol if sub.atol is None else float(sub.atol),
                    base.rtol if sub.rtol is None else float(sub.rtol),
                    base.bound if sub.bound is None else float(sub.bound),
                    sub.dtype or base.dtype,
                    sub.shape or base.shape,
                )
        return base


def _parse_metric(raw: Mapping[str, Any], where: Where, field: str) -> Metric | None:
    metric = raw.get("metric")
    if metric is None:
        return None
    if metric not in _METRICS:
        raise where.fail(f"{field}.metric", f"unknown metric {metric!r}; one of {_METRICS}")
    return Metric(metric)


def _check_bounds(
    raw: Mapping[str, Any], where: Where, field: str, metric: Metric, *, switched: Metric | None
) -> None:
    """Each bound given is a finite, non-negative number the metric uses; a metric ``switched``
    to here that has a ``max`` gets it here (it is not inherited from another metric)."""
    for key in _ALL_BOUNDS:
        if key not in raw:
            continue
        if key not in metric.bounds:
            uses = f"takes {' and '.join(metric.bounds)}" if metric.bounds else "takes no bound"
            raise where.fail(f"{field}.{key}", f"does not apply: metric {metric.value!r} {uses}")
        if not _is_bound(raw[key]):
            raise where.fail(f"{field}.{key}", "must be a finite, non-negative number")
    if switched is not None and BOUND in switched.bounds and BOUND not in raw:
        raise where.fail(
            f"{field}.{BOUND}",
            f"missing required field: metric {switched.value!r} needs its bound, "
            f'e.g. {{"metric": "{switched.value}", "{BOUND}": 0.0005}}',
        )


def _parse_rule(raw: Mapping[str, Any], key: str, where: Where, field: str) -> str | None:
    value = raw.get(key)
    if value is None:
        return None
    if value not in _RULES[key]:
        raise where.fail(f"{field}.{key}", f"must be one of {_RULES[key]}, not {value!r}")
    return str(value)


def _is_bound(value: Any) -> bool:
    return (
        not isinstance(value, bool)
        and isinstance(value, int | float)
        and value >= 0
        # NaN is no bound, and an infinite one (``Infinity``, ``1e400``) passes any drift.
        and not (isinstance(value, float) and not math.isfinite(value))
    )


def _per_array(
    raw: Any, where: Where, field: str, parent: Metric | None
) -> tuple[tuple[str, Tolerance], ...]:
    if not isinstance(raw, Mapping):
        raise where.fail(field, "must be an object of array name -> {metric, bounds}")
    return tuple(
        (
            name,
            Tolerance.from_json(
                sub, where, f"{field}.{name}", need_metric=False, parent=parent or Metric.ALLCLOSE
            ),
        )
        for name, sub in raw.items()
    )
