"""Tolerance-aware comparison of arrays as report values: bit-identical, within tolerance, or
drift, with the errors of each array.

Used by the comparators (a runtime's outputs vs a case's expected outputs), by regeneration (a
candidate fixture vs the registered one) and by the parity assertion (a maintainer's outputs vs
the verified reference). The arithmetic is :func:`fixture_store.numerics.arrays.judge_arrays`'s,
the one every comparison goes through (a video frame's block means too); this module reports it.
Every comparison reports every metric's error: max/mean absolute and relative errors, the max
ULP distance (:mod:`fixture_store.numerics.ulp`), the root-mean-square error and 1 - cosine
similarity, whatever metric judges it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fixture_store.numerics.arrays import WIDENED_RTOL, Outcome, dtype_name, judge_arrays
from fixture_store.parity import parts
from fixture_store.registry.tolerance import ArrayTolerance

__all__ = ["WIDENED_RTOL", "ArrayComparison", "Outcome", "compare_arrays", "dtype_name"]


@dataclass(frozen=True)
class ArrayComparison:
    """How one actual array compares with the expected one.

    Its errors, worst index and reason are run numbers (:mod:`fixture_store.parity.parts`):
    they depend on the machine's kernels even where every machine is within the tolerance.
    """

    name: str = field(metadata=parts.KEY)
    outcome: Outcome
    max_abs: float = field(default=0.0, metadata=parts.RUN)
    mean_abs: float = field(default=0.0, metadata=parts.RUN)
    max_rel: float = field(default=0.0, metadata=parts.RUN)
    mean_rel: float = field(default=0.0, metadata=parts.RUN)
    worst_index: tuple[int, ...] | None = field(default=None, metadata=parts.RUN)
    reason: str = field(default="", metadata=parts.RUN)
    tolerance: ArrayTolerance | None = None
    max_ulp: float = field(default=0.0, metadata=parts.RUN)
    # False when nothing was measured: a dtype or shape mismatch, strings or objects.
    measured: bool = True
    # Elements where a NaN or an infinity meets anything but its like (each an infinite error),
    # and the largest error between two numbers (what is left once those are set aside).
    specials: int = field(default=0, metadata=parts.RUN)
    max_abs_finite: float = field(default=0.0, metadata=parts.RUN)
    # The other metrics' errors, whatever metric judges: root-mean-square of a - e, and
    # 1 - cosine similarity.
    rms: float = field(default=0.0, metadata=parts.RUN)
    cosine: float = field(default=0.0, metadata=parts.RUN)

    @property
    def ok(self) -> bool:
        return self.outcome is not Outcome.DRIFT

    def to_json(self, part: parts.Part = parts.Part.ALL) -> dict[str, Any]:
        return parts.fields_json(self, part, skip=("measured", "specials", "max_abs_finite"))


def compare_arrays(
    name: str, expected: Any, actual: Any, tolerance: ArrayTolerance | None = None
) -> ArrayComparison:
    """Compare ``actual`` with ``expected`` under ``tolerance`` (default: the ONNX runner's)."""
    judged = judge_arrays(expected, actual, tolerance)
    errors = judged.errors
    if errors is None:
        return ArrayComparison(
            name,
            judged.outcome,
            worst_index=judged.worst_index,
            reason=judged.reason,
            tolerance=judged.tolerance,
            measured=judged.measured,
        )
    return ArrayComparison(
        name,
        judged.outcome,
        errors.max_abs,
        errors.mean_abs,
        errors.max_rel,
        errors.mean_rel,
        judged.worst_index,
        judged.reason,
        judged.tolerance,
        errors.max_ulp,
        specials=errors.specials,
        max_abs_finite=errors.max_abs_finite,
        rms=errors.rms,
        cosine=errors.cosine,
    )
