"""Judging an aggregate check: a statistic of a metric's per-slice errors along one axis.

The definition (:mod:`fixture_store.registry.aggregate`), exactly as computed here:

1. the array's errors are cut into slices along ``axis``: slice ``i`` holds the elements whose
   index on that axis is ``i`` (``a[i]`` for axis 0, a frame of a video; ``a[:, i]`` for axis 1;
   a one-dimensional array's slices are its elements);
2. each slice's error is the metric's over that slice alone, by the same definition as over a
   whole array (special values, integers and all): ``max_abs``, ``mean_abs``, ``rms``, ``ulp``
   (the largest distance), ``max_rel`` (the largest ``|a - e| / max(|e|, floor)``) or ``cosine``;
3. the statistic ``reduce`` of those per-slice errors (``max``, ``mean`` or numpy's ``median``)
   is at most the check's ``max``.

An array with no slice (a zero-length axis) has no error: it passes. An axis the array does not
have is drift, naming the axis and the shape. The per-slice errors are float64 numbers, so the
statistic is decided in float64 (integers' per-slice errors are exact up to 2**53).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import numpy as np

from fixture_store.registry.aggregate import Aggregate, Reduce
from fixture_store.registry.tolerance import Check, Metric


class Errors(Protocol):
    """What an aggregate reads of :class:`fixture_store.numerics.arrays.Errors` (a dataclass
    whose per-element fields are cut into slices; this module is below it)."""

    @property
    def diff(self) -> np.ndarray[Any, Any]: ...
    @property
    def max_abs(self) -> float: ...
    @property
    def mean_abs(self) -> float: ...
    @property
    def rms(self) -> float: ...
    @property
    def max_ulp(self) -> float: ...
    @property
    def cosine(self) -> float: ...
    def relative_to(self, floor: float) -> np.ndarray[Any, Any]: ...


# Each metric's error over one slice, by the metric's own definition over a whole array.
PER_SLICE: Mapping[Metric, Callable[[Errors, Check], float]] = {
    Metric.MAX_ABS: lambda e, _c: e.max_abs,
    Metric.MEAN_ABS: lambda e, _c: e.mean_abs,
    Metric.RMS: lambda e, _c: e.rms,
    Metric.ULP: lambda e, _c: e.max_ulp,
    Metric.MAX_REL: lambda e, c: float(e.relative_to(c.floor).max()) if e.diff.size else 0.0,
    Metric.COSINE: lambda e, _c: e.cosine,
}

STATISTICS: Mapping[Reduce, Callable[[np.ndarray[Any, Any]], float]] = {
    Reduce.MAX: lambda v: float(v.max()),
    Reduce.MEAN: lambda v: float(v.mean()),
    Reduce.MEDIAN: lambda v: float(np.median(v)),
}


def per_slice(errors: Errors, check: Check, over: Aggregate) -> np.ndarray[Any, Any]:
    """The metric's error over each slice along ``over.axis`` (float64, one per slice)."""
    shape = errors.diff.shape
    axis = over.axis + len(shape) if over.axis < 0 else over.axis
    one = PER_SLICE[check.metric]
    values = [one(_slice(errors, i, axis, shape), check) for i in range(shape[axis])]
    return np.asarray(values, dtype=np.float64)


def judge(errors: Errors, check: Check) -> str:
    """``""`` when the statistic of the per-slice errors is within the check's ``max``, else
    why not (the statistic, and the worst slice)."""
    over = check.over
    assert over is not None
    shape = errors.diff.shape
    if not -len(shape) <= over.axis < len(shape):
        return f"axis {over.axis} is out of range for shape {shape} (the aggregate's axis)"
    values = per_slice(errors, check, over)
    if not values.size:
        return ""
    with np.errstate(invalid="ignore", over="ignore"):
        seen = STATISTICS[over.reduce](values)
    if seen <= check.bound:
        return ""
    worst = int(np.argmax(values))
    return (
        f"{over.describe(check.metric.value)} {seen:.3g} above max={check.bound:g} "
        f"(worst slice {worst} of {values.size}: {values[worst]:.3g})"
    )


def _slice(errors: Errors, i: int, axis: int, shape: tuple[int, ...]) -> Errors:
    """The errors of slice ``i`` along ``axis``: every per-element field cut alike."""
    return _take(errors, i, axis, shape)  # type: ignore[no-any-return]


def _take(value: Any, i: int, axis: int, shape: tuple[int, ...]) -> Any:
    if isinstance(value, np.ndarray):
        return np.take(value, [i], axis=axis) if value.shape == shape else value
    if isinstance(value, tuple):
        return tuple(_take(v, i, axis, shape) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        cut = {
            f.name: _take(getattr(value, f.name), i, axis, shape)
            for f in dataclasses.fields(value)
            if f.init
        }
        return type(value)(**cut)
    return value
