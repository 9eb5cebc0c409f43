"""Batches: a record's arrays judged together give what each array judged alone gives, bit for
bit, whatever the metric, the values (NaN, infinities, errors past float64's range), the mix
of dtypes and rules in the record, or the shape and dtype rules that conform an actual array
before it is judged."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixture_store.numerics import batch
from fixture_store.parity.arrays import Outcome, compare_arrays, compare_many
from fixture_store.registry import ArrayTolerance, Metric
from fixture_store.registry.aggregate import Aggregate, Reduce
from fixture_store.registry.tolerance import Check, DtypeRule, ShapeRule

# Floats (batched) and dtypes a batch leaves to the per-array path.
BATCHED = [np.float16, np.float32, np.float64]
ALONE = [np.int32, np.int64, np.bool_, ml_dtypes.bfloat16, np.complex64, np.dtype(">f4")]
SCALES = [0.0, 1e-9, 1e-6, 1e-3, 0.1, 1.0, 1.0, 1e30, 1e300]
# Generous bounds weigh more: an array within every check is the one a batch decides itself.
_BOUNDS = st.sampled_from([0.0, 1e-9, 1e-5, 1e-3, 0.05, 1.0, 3.0, 1e10, 1e10, 1e300, 1e300])


def _checks() -> st.SearchStrategy[Check]:
    return st.builds(
        Check,
        st.sampled_from([m for m in Metric if m is not Metric.DEFAULT] + [Metric.DEFAULT]),
        atol=_BOUNDS,
        rtol=_BOUNDS,
        bound=st.one_of(_BOUNDS, st.sampled_from([1.0, 2.0, 4.0, 16.0])),
        floor=_BOUNDS,
    )


def _tolerances() -> st.SearchStrategy[ArrayTolerance]:
    return st.builds(
        lambda checks, nan, shape, dtype: ArrayTolerance.of_checks(
            tuple(checks), equal_nan=nan, shape=shape, dtype=dtype
        ),
        st.lists(_checks(), min_size=1, max_size=2),
        st.booleans(),
        st.sampled_from([ShapeRule.EXACT, ShapeRule.SQUEEZE, ShapeRule.SQUEEZE]),
        st.sampled_from([DtypeRule.EXACT, DtypeRule.EXACT, DtypeRule.SAME_KIND]),
    )


def _reshaped(draw: st.DrawFn, actual: np.ndarray) -> np.ndarray:
    """``actual`` as a port hands it over: the same values under a shape its size-1 axes make
    differ ((1, n) against (n,), a trailing 1), sometimes a non-contiguous view."""
    how = draw(st.sampled_from(["as is", "as is", "squeezed", "leading 1", "trailing 1", "view"]))
    if how == "squeezed":
        return actual.reshape(tuple(d for d in actual.shape if d != 1))
    if how == "leading 1":
        return actual[None]
    if how == "trailing 1":
        return actual[..., None]
    if how == "view" and actual.ndim:
        doubled = np.repeat(actual[None], 2, axis=0)[0]  # a copy's view with its own strides
        return np.asarray(doubled)[None].swapaxes(0, -1) if actual.ndim == 1 else doubled
    return actual


def _values(draw: st.DrawFn, dtype: np.dtype[Any], shape: tuple[int, ...]) -> np.ndarray:
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    scale = draw(st.sampled_from(SCALES))
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        return rng.integers(-1000, 1000, shape).astype(dtype)
    with np.errstate(over="ignore"):
        values = (rng.standard_normal(shape) * scale).astype(dtype)
    if values.size and draw(st.integers(0, 3)) == 0:  # a few special or extreme values
        flat = values.reshape(-1)
        for _ in range(draw(st.integers(1, 2))):
            where = draw(st.integers(0, flat.size - 1))
            with np.errstate(over="ignore"):
                flat[where] = draw(st.sampled_from([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e308]))
    return values


def _actual(draw: st.DrawFn, expected: np.ndarray) -> np.ndarray:
    how = draw(st.sampled_from(["same", "ulps", "ulps", "noise", "noise", "special", "shape"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if how == "same" or expected.dtype.kind in "biuc" or expected.dtype.name == "bfloat16":
        return expected.copy()
    if how == "ulps" and expected.dtype.isnative:
        steps = draw(st.integers(1, 3))
        out = expected.copy()
        for _ in range(steps):
            out = np.nextafter(out, np.asarray(np.inf, out.dtype))
        return out
    if how == "noise":
        noise = rng.standard_normal(expected.shape) * draw(st.sampled_from(SCALES[:6]))
        with np.errstate(over="ignore", invalid="ignore"):
            return (expected + noise).astype(expected.dtype)
    if how == "special" and expected.size:
        out = expected.copy()
        out.reshape(-1)[0] = draw(st.sampled_from([np.nan, np.inf, -np.inf]))
        return out
    if how == "shape" and draw(st.booleans()):
        return expected.reshape(-1)[:-1].copy() if expected.size > 1 else expected[None].copy()
    with np.errstate(over="ignore"):
        return expected.astype(np.float64 if expected.dtype != np.float64 else np.float32)


@dataclass
class _Record:
    pairs: list[tuple[str, Any, Any, ArrayTolerance | None]] = field(default_factory=list)


@st.composite
def _records(draw: st.DrawFn) -> _Record:
    rules = draw(st.lists(st.one_of(st.none(), _tolerances()), min_size=1, max_size=3))
    record = _Record()
    for i in range(draw(st.integers(1, 12))):
        dtype = np.dtype(draw(st.sampled_from(BATCHED * 3 + ALONE)))
        shape = draw(st.sampled_from([(1,), (5,), (17,), (3, 4), (2, 1, 3), (300,), (513,), (0,)]))
        expected = _values(draw, dtype, shape)
        actual = _reshaped(draw, _actual(draw, expected))
        record.pairs.append((f"a{i}", expected, actual, draw(st.sampled_from(rules))))
    return record


@given(record=_records())
@settings(max_examples=400, deadline=None)
def test_a_record_judged_in_batches_equals_each_array_judged_alone(record: _Record) -> None:
    together = compare_many(record.pairs)
    alone = tuple(compare_arrays(*pair) for pair in record.pairs)
    # repr: every float bit for bit (a NaN equal to a NaN), the tolerance and the reason too.
    assert repr(together) == repr(alone)


@pytest.mark.smoke
def test_a_record_of_many_small_arrays_is_decided_in_one_batch() -> None:
    rng = np.random.default_rng(0)
    expected = [rng.standard_normal(16).astype(np.float32) for _ in range(500)]
    actual = [np.nextafter(e, np.float32(np.inf)) for e in expected]
    actual[7] = expected[7].copy()
    tol = ArrayTolerance(Metric.ULP, bound=1)
    judged = batch.judge_batch(expected, actual, tol)
    assert judged.status[7] == batch.Status.IDENTICAL
    assert (np.delete(judged.status, 7) == batch.Status.WITHIN).all()
    assert np.delete(judged.max_ulp, 7).tolist() == [1.0] * 499


def test_a_batch_leaves_failures_and_special_values_to_the_array_alone() -> None:
    expected = [np.ones(4, np.float64), np.ones(4, np.float64), np.array([1.0, np.inf])]
    actual = [np.ones(4) + 1e-12, np.ones(4) + 1.0, np.array([1.0, np.inf])]
    judged = batch.judge_batch(expected, actual, ArrayTolerance(Metric.MAX_ABS, bound=1e-9))
    assert judged.status.tolist() == [
        batch.Status.WITHIN,
        batch.Status.UNDECIDED,  # outside: judged alone, which writes the reason
        batch.Status.UNDECIDED,  # an infinity matching its like: judged alone
    ]
    results = compare_many(
        (f"x{i}", e, a, ArrayTolerance(Metric.MAX_ABS, bound=1e-9))
        for i, (e, a) in enumerate(zip(expected, actual, strict=True))
    )
    assert [r.outcome for r in results] == [Outcome.WITHIN, Outcome.DRIFT, Outcome.IDENTICAL]
    assert "4 of 4 elements more than max_abs=1e-09 apart" in results[1].reason


@pytest.mark.parametrize(
    "tolerance",
    [
        ArrayTolerance(Metric.ALLCLOSE),
        ArrayTolerance(Metric.DEFAULT),  # not resolved: the caller resolves it first
    ],
)
def test_only_resolved_tolerances_of_known_metrics_are_batched(tolerance: ArrayTolerance) -> None:
    x = np.ones(3, np.float32)
    assert batch.batchable(x, x, tolerance) is (tolerance.metric is not Metric.DEFAULT)


def test_dtypes_a_batch_cannot_judge_go_alone() -> None:
    tol = ArrayTolerance()
    for dtype in ALONE:
        x = np.ones(3, dtype)
        assert not batch.batchable(x, x, tol), dtype
    x = np.ones(3, np.float32)
    assert not batch.batchable(x, x.astype(np.float64), tol)
    assert not batch.batchable(x, x.reshape(3, 1), tol)
    assert not batch.batchable(x[:0], x[:0], tol)


def test_a_rule_with_a_field_a_batch_does_not_know_goes_alone() -> None:
    # An aggregate bounds a statistic over an axis: a batch does not judge it, the array alone
    # does (any field a batch does not know, set, sends the array there).
    over = Aggregate(Reduce.MEDIAN, 0)
    tol = ArrayTolerance(Metric.MAX_ABS, bound=0.5, over=over)
    x = np.zeros((4, 3), np.float32)
    y = x.copy()
    y[0] = 1.0  # one slice of four past the bound: the median holds
    assert not batch.batchable(x, y, tol)
    assert batch.batchable(x, y, ArrayTolerance(Metric.MAX_ABS, bound=0.5))
    assert repr(compare_many([("x", x, y, tol)])) == repr((compare_arrays("x", x, y, tol),))
    assert compare_many([("x", x, y, tol)])[0].outcome is Outcome.WITHIN


def test_arrays_a_shape_rule_squeezes_are_judged_in_one_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A port's references are (1, n), its candidates (n,): one batch, not one array at a time.
    rng = np.random.default_rng(0)
    expected = [rng.standard_normal((1, 8)) for _ in range(50)]
    actual = [np.nextafter(e, np.inf).reshape(-1) for e in expected]
    tol = ArrayTolerance(Metric.ULP, bound=1, shape=ShapeRule.SQUEEZE)
    alone: list[str] = []
    real = compare_arrays

    def counted(name: str, *args: Any) -> Any:
        alone.append(name)
        return real(name, *args)

    monkeypatch.setattr("fixture_store.parity.arrays.compare_arrays", counted)
    pairs = [(f"x{i}", e, a, tol) for i, (e, a) in enumerate(zip(expected, actual, strict=True))]
    results = compare_many(pairs)
    assert alone == []
    assert {r.outcome for r in results} == {Outcome.WITHIN}
    assert results[0].worst_index is not None and len(results[0].worst_index) == 2
    # Without the rule the shapes differ: each is judged alone, and each drifts.
    plain = ArrayTolerance(Metric.ULP, bound=1)
    drift = compare_many([(n, e, a, plain) for n, e, a, _ in pairs])
    assert len(alone) == 50 and {r.outcome for r in drift} == {Outcome.DRIFT}
