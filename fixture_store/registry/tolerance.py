"""Tolerances: how close a regenerated or computed array must be to the registered one.

A record's ``tolerance`` is parsed once into a :class:`Tolerance` (its default and its per-array
overrides, exactly as written, so it prints back to the same JSON); every comparison asks it for
the :class:`ArrayTolerance` of one array, with the defaults filled in.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
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


_METRICS = tuple(m.value for m in Metric)
_BOUNDS = ("atol", "rtol")
_OVERRIDE_KEYS = frozenset({"metric", *_BOUNDS})
_KEYS = _OVERRIDE_KEYS | {"per_array"}


@dataclass(frozen=True)
class ArrayTolerance:
    """The tolerance one array is compared under: ``exact``, or ``allclose`` with atol/rtol."""

    metric: Metric = Metric.ALLCLOSE
    atol: float = DEFAULT_ATOL
    rtol: float = DEFAULT_RTOL

    def to_json(self) -> dict[str, Any]:
        return {"metric": self.metric.value, "atol": self.atol, "rtol": self.rtol}


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
    per_array: tuple[tuple[str, Tolerance], ...] | None = None

    @classmethod
    def from_json(
        cls, raw: Any, where: Where, field: str = "tolerance", *, need_metric: bool = True
    ) -> Tolerance:
        """Parse and check a tolerance object; a RegistryError names the offending field."""
        if not isinstance(raw, Mapping):
            raise where.fail(field, "must be an object")
        if need_metric and "metric" not in raw:
            raise where.fail(f"{field}.metric", "missing required field ('exact' or 'allclose')")
        allowed = _KEYS if need_metric else _OVERRIDE_KEYS
        unknown = sorted(set(raw) - allowed, key=str)
        if unknown:
            raise where.fail(f"{field}.{unknown[0]}", f"unknown field; one of {sorted(allowed)}")
        metric = raw.get("metric")
        if metric is not None and metric not in _METRICS:
            raise where.fail(f"{field}.metric", f"unknown metric {metric!r}")
        for key in _BOUNDS:
            if key in raw and not _is_bound(raw[key]):
                raise where.fail(f"{field}.{key}", "must be a finite, non-negative number")
        return cls(
            Metric(metric) if metric is not None else None,
            raw.get("atol"),
            raw.get("rtol"),
            _per_array(raw["per_array"], where, f"{field}.per_array")
            if "per_array" in raw
            else None,
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.metric is not None:
            out["metric"] = self.metric.value
        if self.atol is not None:
            out["atol"] = self.atol
        if self.rtol is not None:
            out["rtol"] = self.rtol
        if self.per_array is not None:
            out["per_array"] = {name: sub.to_json() for name, sub in self.per_array}
        return out

    def override(self, name: str) -> Tolerance | None:
        """The override written for array ``name``, if any."""
        for array, sub in self.per_array or ():
            if array == name:
                return sub
        return None

    def for_array(self, *names: str) -> ArrayTolerance:
        """The tolerance of an array: the override of the first of ``names`` that has one, over
        the record's default, over the built-in defaults."""
        base = ArrayTolerance(
            self.metric or Metric.ALLCLOSE,
            DEFAULT_ATOL if self.atol is None else float(self.atol),
            DEFAULT_RTOL if self.rtol is None else float(self.rtol),
        )
        for name in names:
            sub = self.override(name)
            if sub is not None:
                return ArrayTolerance(
                    sub.metric or base.metric,
                    base.atol if sub.atol is None else float(sub.atol),
                    base.rtol if sub.rtol is None else float(sub.rtol),
                )
        return base


def _is_bound(value: Any) -> bool:
    return (
        not isinstance(value, bool)
        and isinstance(value, int | float)
        and value >= 0
        # NaN is no bound, and an infinite one (``Infinity``, ``1e400``) passes any drift.
        and not (isinstance(value, float) and not math.isfinite(value))
    )


def _per_array(raw: Any, where: Where, field: str) -> tuple[tuple[str, Tolerance], ...]:
    if not isinstance(raw, Mapping):
        raise where.fail(field, "must be an object of array name -> {metric, atol, rtol}")
    return tuple(
        (name, Tolerance.from_json(sub, where, f"{field}.{name}", need_metric=False))
        for name, sub in raw.items()
    )
