"""Aggregates: a check that bounds a statistic of an error over one axis instead of the error
over the whole array.

``{"metric": "max_abs", "reduce": "median", "axis": 0, "max": 0.01}`` reads: cut the array into
its slices along axis 0 (``a[i]`` for a frame axis, ``a[:, i]`` for axis 1), take each slice's
``max_abs`` error exactly as the metric defines it over a whole array, and bound the *median* of
those per-slice errors by ``max``. ``reduce`` is one of :class:`Reduce`; ``axis`` is an integer
(negative counts from the end, as numpy's). Only the metrics bounded by one ``max`` take an
aggregate (``exact``, ``allclose`` and ``default`` judge element by element: there is no
per-slice error to take a statistic of).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from fixture_store.registry.where import Where

REDUCE = "reduce"
AXIS = "axis"
KEYS = (REDUCE, AXIS)


class Reduce(StrEnum):
    MAX = "max"  # the worst slice: every slice within the bound
    MEAN = "mean"  # the mean of the per-slice errors
    MEDIAN = "median"  # numpy's median: the mean of the two middle values for an even count


@dataclass(frozen=True)
class Aggregate:
    """The statistic ``reduce`` of a metric's per-slice errors along ``axis``."""

    reduce: Reduce
    axis: int

    def to_json(self) -> dict[str, Any]:
        return {REDUCE: self.reduce.value, AXIS: self.axis}

    def describe(self, metric: str) -> str:
        """``median over axis 0 of max_abs``."""
        return f"{self.reduce.value} over axis {self.axis} of {metric}"


def parse(
    raw: Mapping[str, Any], where: Where, field: str, *, takes_max: bool, metric: str
) -> Aggregate | None:
    """The aggregate a rule or check states (``None`` when it has neither key); both keys go
    together, and only on a metric with a ``max``."""
    given = [k for k in KEYS if k in raw]
    if not given:
        return None
    if not takes_max:
        raise where.fail(
            f"{field}.{given[0]}",
            f"does not apply: metric {metric!r} judges element by element (an aggregate bounds "
            "a statistic of a metric with a 'max': mean_abs, max_abs, ulp, rms, max_rel, cosine)",
        )
    missing = [k for k in KEYS if k not in raw]
    if missing:
        raise where.fail(
            f"{field}.{missing[0]}",
            f"missing required field: an aggregate names both {REDUCE!r} and {AXIS!r}, e.g. "
            f'{{"metric": "{metric}", "{REDUCE}": "median", "{AXIS}": 0, "max": 0.01}}',
        )
    reduce, axis = raw[REDUCE], raw[AXIS]
    if reduce not in tuple(Reduce):
        raise where.fail(
            f"{field}.{REDUCE}", f"must be one of {[r.value for r in Reduce]}, not {reduce!r}"
        )
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise where.fail(
            f"{field}.{AXIS}", f"must be an integer (an axis of the array), not {axis!r}"
        )
    return Aggregate(Reduce(reduce), axis)


def check_axes(tolerance: Any, known: Collection[str], where: Where) -> None:
    """Refuse an aggregate whose axis an array it judges does not have, by the shapes of the
    record's arrays manifest (``known``; an ONNX case's output names carry no shape)."""
    if not isinstance(known, Mapping) or not _has_aggregate(tolerance):
        return
    for name, spec in known.items():
        shape = spec.get("shape") if isinstance(spec, Mapping) else None
        if shape is None:
            continue
        for check in tolerance.for_array(name, dtype=spec.get("dtype")).checks:
            over = check.over
            if over is not None and not -len(shape) <= over.axis < len(shape):
                raise where.fail(
                    "tolerance",
                    f"the aggregate's axis {over.axis} is out of range for array {name!r} of "
                    f"shape {list(shape)} ({check.describe()})",
                    fix=f"bound an axis the array has (-{len(shape)} to {len(shape) - 1}), or "
                    f"give {name!r} a rule of its own in per_array",
                )


def _has_aggregate(tolerance: Any) -> bool:
    """Any rule of ``tolerance`` (its own, its checks, its overrides, its intermediates')
    bounds an aggregate: the manifest is walked only then."""
    if tolerance.over is not None or any(c.over is not None for c in tolerance.checks or ()):
        return True
    subs = [sub for _, sub in (*(tolerance.per_array or ()), *(tolerance.per_dtype or ()))]
    if tolerance.intermediates is not None:
        subs.append(tolerance.intermediates.rule)
    return any(_has_aggregate(sub) for sub in subs)
