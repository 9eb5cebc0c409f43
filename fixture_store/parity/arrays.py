"""Tolerance-aware comparison of arrays: bit-identical, within tolerance, or drift.

Used by the comparators (a runtime's outputs vs a case's expected outputs) and by regeneration (a
candidate fixture vs the registered one). Shapes and dtypes must match exactly: a float64 output
where float32 is expected is drift however close the values are.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

import numpy as np

from fixture_store.registry.tolerance import ArrayTolerance, Metric

# Low-precision float types are compared in float32 with a relative tolerance widened to their
# precision (bfloat16 has 8 bits of mantissa: one ulp is 2**-7 relative).
WIDENED_RTOL = {"bfloat16": 1e-2}
_LOW_PRECISION_KINDS = ("bfloat16", "float8", "float4", "int4", "uint4", "int2", "uint2")


class Outcome(StrEnum):
    IDENTICAL = "bit-identical"
    WITHIN = "within-tolerance"
    DRIFT = "drift"


@dataclass(frozen=True)
class ArrayComparison:
    """How one actual array compares with the expected one."""

    name: str
    outcome: Outcome
    max_abs: float = 0.0
    mean_abs: float = 0.0
    max_rel: float = 0.0
    mean_rel: float = 0.0
    worst_index: tuple[int, ...] | None = None
    reason: str = ""
    tolerance: ArrayTolerance | None = None

    @property
    def ok(self) -> bool:
        return self.outcome is not Outcome.DRIFT

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "outcome": str(self.outcome),
            "max_abs": self.max_abs,
            "mean_abs": self.mean_abs,
            "max_rel": self.max_rel,
            "mean_rel": self.mean_rel,
            "worst_index": list(self.worst_index) if self.worst_index is not None else None,
            "reason": self.reason,
            "tolerance": self.tolerance.to_json() if self.tolerance else None,
        }


def dtype_name(dtype: np.dtype[Any]) -> str:
    return str(dtype.name if hasattr(dtype, "name") else dtype)


def _is_low_precision(dtype: np.dtype[Any]) -> bool:
    name = dtype_name(dtype)
    return any(name.startswith(k) for k in _LOW_PRECISION_KINDS)


def compare_arrays(
    name: str, expected: Any, actual: Any, tolerance: ArrayTolerance | None = None
) -> ArrayComparison:
    """Compare ``actual`` with ``expected`` under ``tolerance`` (default: the ONNX runner's)."""
    tol = tolerance or ArrayTolerance()
    exp = np.asarray(expected)
    act = np.asarray(actual)
    if exp.dtype != act.dtype:
        return ArrayComparison(
            name,
            Outcome.DRIFT,
            reason=f"dtype {dtype_name(act.dtype)} where {dtype_name(exp.dtype)} is expected",
            tolerance=tol,
        )
    if exp.shape != act.shape:
        return ArrayComparison(
            name,
            Outcome.DRIFT,
            reason=f"shape {act.shape} where {exp.shape} is expected",
            tolerance=tol,
        )
    low_precision = _is_low_precision(exp.dtype)
    exact_only = exp.dtype.kind in "OUSb" or (exp.dtype.kind == "V" and not low_precision)
    if not exact_only and np.ascontiguousarray(exp).tobytes() == (
        np.ascontiguousarray(act).tobytes()
    ):
        return ArrayComparison(name, Outcome.IDENTICAL, tolerance=tol)
    if exact_only:
        equal = _exact_equal(exp, act)
        if equal is True:
            return ArrayComparison(name, Outcome.IDENTICAL, tolerance=tol)
        return ArrayComparison(
            name,
            Outcome.DRIFT,
            worst_index=equal or None,
            reason="values differ (compared exactly: strings, objects and booleans)",
            tolerance=tol,
        )

    rtol = tol.rtol
    if low_precision:
        rtol = max(rtol, WIDENED_RTOL.get(dtype_name(exp.dtype), 1e-1))
    e = exp.astype(np.float64)
    a = act.astype(np.float64)
    if np.iscomplexobj(exp):
        e, a = exp.astype(np.complex128), act.astype(np.complex128)
    both_nan = np.isnan(e) & np.isnan(a)
    same_inf = np.isinf(e) & (e == a)
    matched = both_nan | same_inf
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(matched, 0.0, np.abs(a - e))
        diff = np.where(np.isnan(diff), np.inf, diff)
        scale = np.abs(e)
        rel = np.where(
            diff == 0, 0.0, np.divide(diff, scale, out=np.full_like(diff, np.inf), where=scale != 0)
        )
    max_abs = float(diff.max()) if diff.size else 0.0
    mean_abs = float(diff.mean()) if diff.size else 0.0
    max_rel = float(rel.max()) if rel.size else 0.0
    finite_rel = rel[np.isfinite(rel)]
    mean_rel = float(finite_rel.mean()) if finite_rel.size else (0.0 if not rel.size else max_rel)
    worst = (
        tuple(int(i) for i in np.unravel_index(int(np.argmax(diff)), diff.shape))
        if (diff.size)
        else None
    )
    if tol.metric is Metric.EXACT:
        outcome, reason = Outcome.DRIFT, "values differ and the tolerance is 'exact'"
    else:
        with np.errstate(invalid="ignore", over="ignore"):
            inside = diff <= tol.atol + rtol * scale
        if bool(np.all(inside | matched)):
            outcome, reason = Outcome.WITHIN, ""
        else:
            count = int(np.count_nonzero(~(inside | matched)))
            outcome = Outcome.DRIFT
            reason = f"{count} of {diff.size} elements outside atol={tol.atol:g} rtol={rtol:g}"
    return ArrayComparison(
        name,
        outcome,
        max_abs,
        mean_abs,
        max_rel,
        mean_rel,
        worst,
        reason,
        replace(tol, rtol=rtol),
    )


def _exact_equal(exp: np.ndarray[Any, Any], act: np.ndarray[Any, Any]) -> bool | tuple[int, ...]:
    """True if equal element by element, else the first differing index."""
    flat_e, flat_a = exp.reshape(-1), act.reshape(-1)
    for i in range(flat_e.size):
        if flat_e[i] != flat_a[i]:
            return tuple(int(x) for x in np.unravel_index(i, exp.shape))
    return True
