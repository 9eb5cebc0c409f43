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

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fixture_store.numerics import batch
from fixture_store.numerics.arrays import (
    WIDENED_RTOL,
    Outcome,
    conform,
    dtype_name,
    judge_arrays,
    resolved,
)
from fixture_store.parity import parts
from fixture_store.registry.tolerance import ArrayTolerance

__all__ = [
    "WIDENED_RTOL",
    "ArrayComparison",
    "Outcome",
    "compare_arrays",
    "compare_many",
    "dtype_name",
]


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


# One array to compare: its name, the expected and actual values, and its tolerance.
Pair = tuple[str, Any, Any, ArrayTolerance | None]


def compare_many(pairs: Iterable[Pair]) -> tuple[ArrayComparison, ...]:
    """Each pair compared as :func:`compare_arrays` compares it, in order, with the same
    result: the arrays that can be (:func:`~fixture_store.numerics.batch.batchable`) are judged
    in batches by (dtype, tolerance), a few numpy calls per batch instead of per array; those a
    batch leaves undecided (a failure, a special value) and every other pair are judged alone."""
    items = [(name, np.asarray(e), np.asarray(a), tol) for name, e, a, tol in pairs]
    out: list[ArrayComparison | None] = [None] * len(items)
    # Each (tolerance, dtype) is resolved and interned once, by identity first: a record's
    # arrays share a few rule objects, and equal rules share one batch.
    seen: dict[tuple[int, int], tuple[ArrayTolerance, list[int]] | None] = {}
    interned: dict[tuple[np.dtype[Any], ArrayTolerance], tuple[ArrayTolerance, list[int]]] = {}
    # An actual array its rule reshapes or casts (``shape: squeeze``, ``dtype: same_kind``), as
    # judging it alone would (``conform``): then it batches with the arrays already alike.
    conformed: dict[int, Any] = {}
    for i, (_name, exp, act, tol) in enumerate(items):
        key = (id(tol), id(exp.dtype))
        if key not in seen:
            rule = resolved(tol or ArrayTolerance(), exp.dtype)
            seen[key] = (
                interned.setdefault((exp.dtype, rule), (rule, []))
                if batch.batchable_dtype(exp.dtype) and batch.batched_tolerance(rule)
                else None
            )
        group = seen[key]
        if group is None:
            continue
        if not batch.batchable_pair(exp, act):
            fitted, problem = conform(exp, act, group[0])
            if problem or not batch.batchable_pair(exp, fitted):
                continue
            conformed[i] = fitted
        group[1].append(i)
    for rule, members in interned.values():
        if not members:
            continue
        judged = batch.judge_batch(
            [items[i][1] for i in members],
            [conformed.get(i, items[i][2]) for i in members],
            rule,
        )
        for i, done in zip(
            members, _from_batch(judged, [items[i] for i in members], rule), strict=True
        ):
            out[i] = done
    return tuple(
        done if done is not None else compare_arrays(*items[i]) for i, done in enumerate(out)
    )


def _from_batch(
    judged: batch.Batch, items: list[tuple[str, Any, Any, Any]], rule: ArrayTolerance
) -> list[ArrayComparison | None]:
    """The comparisons a batch decided, in its order (``None``: judge that array alone)."""
    columns = zip(
        judged.status.tolist(),
        judged.worst.tolist(),
        judged.max_abs.tolist(),
        judged.mean_abs.tolist(),
        judged.max_rel.tolist(),
        judged.mean_rel.tolist(),
        judged.max_ulp.tolist(),
        judged.rms.tolist(),
        judged.cosine.tolist(),
        strict=True,
    )
    out: list[ArrayComparison | None] = []
    for (name, exp, _act, _tol), (status, worst, max_abs, *errors) in zip(
        items, columns, strict=True
    ):
        if status == _IDENTICAL:
            out.append(ArrayComparison(name, Outcome.IDENTICAL, tolerance=rule))
        elif status == _WITHIN:
            mean_abs, max_rel, mean_rel, max_ulp, rms, cosine = errors
            shape = exp.shape
            index = (worst,) if len(shape) == 1 else tuple(map(int, np.unravel_index(worst, shape)))
            out.append(
                ArrayComparison(
                    name,
                    Outcome.WITHIN,
                    max_abs,
                    mean_abs,
                    max_rel,
                    mean_rel,
                    index,
                    "",
                    rule,
                    max_ulp,
                    max_abs_finite=max_abs,
                    rms=rms,
                    cosine=cosine,
                )
            )
        else:
            out.append(None)
    return out


_IDENTICAL, _WITHIN = int(batch.Status.IDENTICAL), int(batch.Status.WITHIN)
