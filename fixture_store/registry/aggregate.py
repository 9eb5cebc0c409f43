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

from collections.abc import Mapping
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
