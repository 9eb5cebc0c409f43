"""ULP distances: one step through a dtype's values is 1, whatever the dtype's layout."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from fixture_store.numerics import ulp

NATIVE = [np.float16, np.float32, np.float64]
SMALL = [
    ml_dtypes.bfloat16,
    ml_dtypes.float8_e4m3fn,
    ml_dtypes.float8_e4m3fnuz,
    ml_dtypes.float8_e5m2,
    ml_dtypes.float8_e5m2fnuz,
    ml_dtypes.float8_e8m0fnu,
    ml_dtypes.float4_e2m1fn,
]


@pytest.mark.parametrize("dtype", NATIVE)
@given(data=st.data())
def test_the_next_float_is_one_ulp_away(dtype: Any, data: st.DataObject) -> None:
    x = data.draw(hnp.arrays(dtype, 8, elements={"allow_nan": False, "allow_infinity": False}))
    finite = np.abs(x) < np.finfo(dtype).max
    x = x[finite]
    up = np.nextafter(x, np.array(np.inf, dtype))
    assert np.all(ulp.distance(x, up) == 1)
    assert np.all(ulp.distance(up, x) == 1)
    assert np.all(ulp.distance(x, x) == 0)


@pytest.mark.parametrize("dtype", NATIVE)
@given(data=st.data())
def test_ulps_add_up_along_the_line(dtype: Any, data: st.DataObject) -> None:
    finite = hnp.from_dtype(np.dtype(dtype), allow_nan=False, allow_infinity=False)
    a, b, c = (data.draw(finite) for _ in range(3))
    lo, mid, hi = sorted([a, b, c])
    total = ulp.distance(np.array(lo, dtype), np.array(hi, dtype))
    parts = ulp.distance(np.array(lo, dtype), np.array(mid, dtype)) + ulp.distance(
        np.array(mid, dtype), np.array(hi, dtype)
    )
    # float64 carries the step count exactly up to 2**53 steps.
    assert total == parts or total > 2**53


@pytest.mark.parametrize("dtype", SMALL, ids=lambda d: np.dtype(d).name)
def test_every_small_float_is_one_ulp_from_its_neighbour(dtype: Any) -> None:
    table = ulp._table(np.dtype(dtype))
    values = table.astype(dtype)
    # The table holds each value once, ascending; adjacent entries are one step apart.
    assert np.all(np.diff(table) > 0)
    assert np.all(ulp.distance(values[:-1], values[1:]) == 1)
    assert ulp.distance(values[:1], values[-1:])[0] == len(table) - 1


def test_the_two_zeros_are_one_value() -> None:
    for dtype in [*NATIVE, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn]:
        assert ulp.distance(np.array([-0.0], dtype), np.array([0.0], dtype))[0] == 0
    smallest = np.array([np.finfo(np.float32).smallest_subnormal], np.float32)
    assert ulp.distance(-smallest, smallest)[0] == 2


def test_bfloat16_steps_are_its_bit_steps() -> None:
    x = np.array([1.0, 3.5, 1e-3, 1e30], ml_dtypes.bfloat16)
    up = (x.view(np.uint16) + 1).view(ml_dtypes.bfloat16)
    assert np.all(ulp.distance(x, up) == 1)


@pytest.mark.parametrize(
    ("dtype", "big"),
    [
        (np.float32, 3.4028235e38),
        (np.float64, 1.7976931348623157e308),
        (ml_dtypes.bfloat16, 3.3895e38),
    ],
)
def test_nan_and_infinity_match_only_themselves(dtype: Any, big: float) -> None:
    e = np.array([np.nan, np.nan, np.inf, np.inf, -np.inf, 1.0], dtype)
    a = np.array([np.nan, 1.0, np.inf, big, np.inf, np.nan], dtype)
    assert ulp.distance(e, a).tolist() == [0, np.inf, 0, np.inf, np.inf, np.inf]


def test_float64_extremes_do_not_overflow() -> None:
    lo, hi = np.array([-np.finfo(np.float64).max]), np.array([np.finfo(np.float64).max])
    assert ulp.distance(lo, hi)[0] == pytest.approx(2.0**64 - 2**53, rel=1e-12)


def test_integers_complex_and_booleans() -> None:
    assert ulp.distance(np.array([3, -2], np.int8), np.array([5, 2], np.int8)).tolist() == [2, 4]
    assert ulp.distance(np.array([0, 255], np.uint8), np.array([255, 0], np.uint8)).tolist() == [
        255,
        255,
    ]
    one = np.array([1 + 1j], np.complex64)
    shifted = np.array([complex(1, np.nextafter(np.float32(1), np.float32(2)))], np.complex64)
    assert ulp.distance(one, shifted)[0] == 1
    assert ulp.distance(np.array([True]), np.array([False]))[0] == 1


def test_different_dtypes_or_strings_are_refused() -> None:
    with pytest.raises(ValueError, match="one dtype and shape"):
        ulp.distance(np.zeros(2, np.float32), np.zeros(2, np.float64))
    with pytest.raises(TypeError, match="no unit in the last place"):
        ulp.distance(np.array(["a"]), np.array(["b"]))
