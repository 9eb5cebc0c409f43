"""Exact integer distances and bounds: never through float64, never overflowing."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fixture_store.numerics import integers

I64 = st.integers(-(2**63), 2**63 - 1)
U64 = st.integers(0, 2**64 - 1)
BOUNDS = st.one_of(
    st.floats(0, 2.0**70, allow_nan=False), st.sampled_from([0.0, 0.5, 2.0**53, 2.0**64])
)


@given(st.lists(st.tuples(I64, I64), min_size=1, max_size=6))
def test_int64_distances_and_magnitudes_are_exact(pairs: list[tuple[int, int]]) -> None:
    e = np.array([p[0] for p in pairs], np.int64)
    a = np.array([p[1] for p in pairs], np.int64)
    assert integers.difference(e, a).tolist() == [abs(y - x) for x, y in pairs]
    assert integers.magnitude(e).tolist() == [abs(x) for x, _ in pairs]
    assert integers.total(integers.difference(e, a)) == sum(abs(y - x) for x, y in pairs)


@given(st.lists(st.tuples(U64, U64), min_size=1, max_size=6))
def test_uint64_distances_are_exact(pairs: list[tuple[int, int]]) -> None:
    e = np.array([p[0] for p in pairs], np.uint64)
    a = np.array([p[1] for p in pairs], np.uint64)
    assert integers.difference(e, a).tolist() == [abs(y - x) for x, y in pairs]


@given(st.lists(st.tuples(U64, U64), min_size=1, max_size=6), BOUNDS, BOUNDS)
def test_bounds_are_decided_exactly(pairs: list[tuple[int, int]], atol: float, rtol: float) -> None:
    diff = np.array([p[0] for p in pairs], np.uint64)
    scale = np.array([p[1] for p in pairs], np.uint64)
    assert integers.beyond(diff, atol).tolist() == [d > atol for d, _ in pairs]
    want = [Fraction(d) <= Fraction(atol) + Fraction(rtol) * s for d, s in pairs]
    assert integers.within_affine(diff, scale, atol, rtol).tolist() == want
    mean_past = Fraction(sum(d for d, _ in pairs)) > Fraction(atol) * len(pairs)
    assert integers.mean_beyond(diff, atol) == mean_past


def test_signed_and_unsigned_are_not_mixed() -> None:
    with pytest.raises(ValueError, match="signedness"):
        integers.difference(np.array([1], np.int64), np.array([1], np.uint64))
