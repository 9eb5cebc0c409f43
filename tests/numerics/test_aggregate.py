"""Aggregates: a statistic of a metric's per-slice errors along an axis, held to a reference
written from the definition in pure Python over lists."""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from fixture_store.numerics.aggregate import per_slice
from fixture_store.numerics.arrays import Errors, judge_arrays
from fixture_store.registry import Tolerance, Where
from fixture_store.registry.aggregate import Aggregate, Reduce
from fixture_store.registry.tolerance import Check, Metric

Pair = tuple[float, float]


def rule(raw: dict[str, Any]) -> Any:
    return Tolerance.from_json(raw, Where("provenance/fam.json", "fam/x")).for_array("x")


# The reference: each metric over one slice's (expected, actual) pairs, from its definition.
def _special_error(e: float, a: float) -> float | None:
    """0 for the same special value (NaN with NaN, an infinity with itself), infinite for any
    other pair holding one, None for two numbers."""
    if math.isfinite(e) and math.isfinite(a):
        return None
    same = (math.isnan(e) and math.isnan(a)) or e == a
    return 0.0 if same else math.inf


def _abs_errors(pairs: Sequence[Pair]) -> list[float]:
    out = []
    for e, a in pairs:
        special = _special_error(e, a)
        out.append(abs(Fraction(a) - Fraction(e)) if special is None else special)
    return [float(x) for x in out]


def ref_max_abs(pairs: Sequence[Pair], _floor: float) -> float:
    return max(_abs_errors(pairs), default=0.0)


def ref_mean_abs(pairs: Sequence[Pair], _floor: float) -> float:
    errors = _abs_errors(pairs)
    return math.fsum(errors) / len(errors) if errors else 0.0


def ref_rms(pairs: Sequence[Pair], _floor: float) -> float:
    errors = _abs_errors(pairs)
    if any(math.isinf(x) for x in errors):
        return math.inf
    if not errors:
        return 0.0
    mean = Fraction(sum(Fraction(x) ** 2 for x in errors), len(errors))  # exact
    if mean == 0:
        return 0.0
    k = (mean.denominator.bit_length() - mean.numerator.bit_length()) // 2
    return math.ldexp(math.sqrt(float(mean * 4**k)), -k)  # the root of a normal number, scaled


def ref_max_rel(pairs: Sequence[Pair], floor: float) -> float:
    worst = 0.0
    for (e, _a), err in zip(pairs, _abs_errors(pairs), strict=True):
        if err == 0:
            continue
        scale = max(abs(e), floor) if math.isfinite(e) else max(0.0, floor)
        worst = max(worst, math.inf if scale == 0 or math.isinf(err) else err / scale)
    return worst


def ref_cosine(pairs: Sequence[Pair], _floor: float) -> float:
    kept = []
    for e, a in pairs:
        special = _special_error(e, a)
        if special == math.inf:
            return math.inf
        if special is None:
            kept.append((Fraction(e), Fraction(a)))
    ne = sum(e * e for e, _ in kept)
    na = sum(a * a for _, a in kept)
    if ne == 0 or na == 0:
        return 0.0 if ne == na else 1.0
    dot = sum(e * a for e, a in kept)
    cos = math.copysign(math.sqrt(dot * dot / (ne * na)), dot)  # exact until the root
    return min(2.0, max(0.0, 1.0 - cos))


REFERENCE: dict[Metric, Callable[[Sequence[Pair], float], float]] = {
    Metric.MAX_ABS: ref_max_abs,
    Metric.MEAN_ABS: ref_mean_abs,
    Metric.RMS: ref_rms,
    Metric.MAX_REL: ref_max_rel,
    Metric.COSINE: ref_cosine,
}
STATISTIC: dict[Reduce, Callable[[list[float]], float]] = {
    Reduce.MAX: max,
    Reduce.MEAN: lambda v: math.fsum(v) / len(v) if not any(map(math.isinf, v)) else math.inf,
    Reduce.MEDIAN: statistics.median,
}


def reference(
    exp: np.ndarray, act: np.ndarray, metric: Metric, reduce: Reduce, axis: int, floor: float
) -> tuple[list[float], float | None]:
    """Slice ``i`` along ``axis`` holds the elements whose index there is ``i``; each slice's
    error is the metric over it; the statistic is over those errors (None: no slice)."""
    axis %= exp.ndim
    slices: list[list[Pair]] = [[] for _ in range(exp.shape[axis])]
    for index in itertools.product(*(range(n) for n in exp.shape)):
        slices[index[axis]].append((float(exp[index]), float(act[index])))
    errors = [REFERENCE[metric](s, floor) for s in slices]
    return errors, (STATISTIC[reduce](errors) if errors else None)


values = st.one_of(
    st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, math.inf, -math.inf, math.nan]),
)


@given(data=st.data())
@settings(max_examples=400, deadline=None)
def test_an_aggregate_is_the_statistic_of_the_per_slice_metric(data: st.DataObject) -> None:
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4))
    exp = data.draw(hnp.arrays(np.float64, shape, elements=values))
    noise = data.draw(hnp.arrays(np.float64, shape, elements=values))
    use = data.draw(hnp.arrays(np.bool_, shape))
    act = np.where(use, noise, exp)
    metric = data.draw(st.sampled_from(sorted(REFERENCE)))
    reduce = data.draw(st.sampled_from(list(Reduce)))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    floor = data.draw(st.sampled_from([0.0, 1e-3, 1.0])) if metric is Metric.MAX_REL else 0.0
    slices, stat = reference(exp, act, metric, reduce, axis, floor)

    check = Check(metric, bound=0.0, floor=floor, over=Aggregate(reduce, axis))
    got = per_slice(Errors.of(exp, act), check, Aggregate(reduce, axis))
    assert got.tolist() == pytest.approx(slices, rel=1e-9, abs=1e-12, nan_ok=False)

    if stat is None:  # no slice: no error
        assert judge_arrays(exp, act, rule(_raw(metric, reduce, axis, 0.0, floor))).ok
        return
    for bound in (stat * 0.5, stat * 2, stat + 1.0):
        assume(math.isfinite(bound))
        judged = judge_arrays(exp, act, rule(_raw(metric, reduce, axis, bound, floor)))
        assert judged.ok == (stat <= bound or stat == 0), (stat, bound, judged.reason)


def _raw(metric: Metric, reduce: Reduce, axis: int, bound: float, floor: float) -> dict[str, Any]:
    raw: dict[str, Any] = {"metric": metric.value, "reduce": reduce.value, "axis": axis}
    raw["max"] = bound
    if metric is Metric.MAX_REL:
        raw["floor"] = floor
    return raw


def _video(bad_frames: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Five frames of 4x4 pixels; each bad frame one pixel 0.5 off, every frame 1e-4 off."""
    exp = np.linspace(0, 1, 80, dtype=np.float32).reshape(5, 4, 4)
    act = exp + np.float32(1e-4)
    for f in bad_frames:
        act[f, 1, 2] += np.float32(0.5)
    return exp, act


@pytest.mark.smoke
def test_the_median_over_frames_lets_one_bad_frame_through_and_not_three() -> None:
    tol = rule({"metric": "max_abs", "reduce": "median", "axis": 0, "max": 1e-3})
    assert tol.describe() == "median over axis 0 of max_abs <= 0.001"
    whole = rule({"metric": "max_abs", "max": 1e-3})
    exp, act = _video([3])
    assert judge_arrays(exp, act, tol).ok
    assert not judge_arrays(exp, act, whole).ok
    exp, act = _video([0, 2, 4])
    judged = judge_arrays(exp, act, tol)
    assert not judged.ok
    assert judged.reason.startswith("median over axis 0 of max_abs 0.5 above max=0.001")
    assert "(worst slice 0 of 5: 0.5)" in judged.reason


def test_the_max_over_a_batch_bounds_every_item_and_the_mean_their_average() -> None:
    exp, act = _video([1])
    worst = rule({"metric": "rms", "reduce": "max", "axis": 0, "max": 0.01})
    assert not judge_arrays(exp, act, worst).ok  # item 1's RMS is 0.125
    mean = rule({"metric": "rms", "reduce": "mean", "axis": 0, "max": 0.03})
    assert judge_arrays(exp, act, mean).ok  # (0.125 + 4 x 1e-4) / 5 = 0.025


def test_ulp_per_slice_counts_in_the_dtype() -> None:
    exp = np.ones((3, 2), np.float32)
    act = exp.copy()
    act[1, 0] = np.nextafter(np.nextafter(np.float32(1), np.float32(2)), np.float32(2))
    tol = rule({"metric": "ulp", "reduce": "max", "axis": -1, "max": 1})
    judged = judge_arrays(exp, act, tol)
    assert not judged.ok and "(worst slice 0 of 2: 2)" in judged.reason
    assert judge_arrays(exp, act, rule({**_raw(Metric.ULP, Reduce.MEDIAN, 0, 0, 0)})).ok


def test_integers_per_slice_are_compared_as_integers() -> None:
    exp = np.array([[2**53, 0], [0, 0]], np.int64)
    act = np.array([[2**53 + 1, 0], [0, 0]], np.int64)
    tol = rule({"metric": "max_abs", "reduce": "max", "axis": 0, "max": 0})
    judged = judge_arrays(exp, act, tol)
    assert not judged.ok and "(worst slice 0 of 2: 1)" in judged.reason


def test_an_axis_the_array_does_not_have_is_drift_naming_it() -> None:
    tol = rule({"metric": "max_abs", "reduce": "median", "axis": 3, "max": 1})
    judged = judge_arrays(np.zeros((2, 2)), np.ones((2, 2)), tol)
    assert not judged.ok
    assert judged.reason == "axis 3 is out of range for shape (2, 2) (the aggregate's axis)"


def test_an_aggregate_among_several_checks_is_named_when_it_fails() -> None:
    tol = rule(
        {
            "checks": [
                {"metric": "max_abs", "reduce": "median", "axis": 0, "max": 1e-3},
                {"metric": "max_abs", "max": 1.0},
            ],
            "why": "the upstream's per-frame median",
        }
    )
    exp, act = _video([0, 1, 2])
    judged = judge_arrays(exp, act, tol)
    assert "check median over axis 0 of max_abs <= 0.001 fails" in judged.reason
    assert judged.reason.endswith("(why this rule: the upstream's per-frame median)")
