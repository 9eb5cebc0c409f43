"""Distance in units in the last place (ULP) between two arrays of one dtype, element by element.

The distance between two floats is the number of steps between them through the values their
dtype can represent: adjacent values are 1 apart, ``+0.0`` and ``-0.0`` are 0 apart (they are one
value). float16, float32 and float64 are counted on their bit patterns (sign-magnitude order);
the small formats of ``ml_dtypes`` (bfloat16, the float8, float6 and float4 variants, and
exponent-only ``float8_e8m0fnu``) on a table of every value the dtype holds, so each one's own
layout (no negative zero, no infinities, several NaNs) needs no special case. ``ml_dtypes`` is
imported only when such an array is compared, which it cannot be without it.

Special values: NaN is 0 from NaN (any payload) and infinitely far from anything else; an
infinity is 0 from the same infinity and infinitely far from anything else (overflowing to
``inf`` is never "one ULP" from the largest finite value). Integers are 1 ULP per unit, counted
exactly (:mod:`fixture_store.parity.integers`: no float64 cast, so int64 ``2**53 + 1`` is one ULP
from ``2**53``), booleans 1 apart when they differ, complex numbers the larger of their real and
imaginary distances.

:func:`steps` keeps each count exact (uint64: float64's widest gap is 2**64 - 2 steps), which a
ULP bound is judged on; :func:`distance` is the same count as float64, for reports.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from fixture_store.numerics import integers

# ml_dtypes names its floats float8_e4m3fn, bfloat16, ...; its integers int4, uint2, ...
_SMALL_FLOAT_PREFIXES = ("float", "bfloat")
_SMALL_INT_PREFIXES = ("int", "uint")
_SMALL_BYTES = 2  # bfloat16 and below: counted on a table of every value
_WIDE_BYTES = 8  # float64: ordinals whose difference overflows int64
_IEEE = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))


@dataclass(frozen=True)
class Steps:
    """ULPs between two arrays, exact: ``count`` where both values are numbers (0 where a NaN or
    an infinity meets its like), ``infinite`` where they are not the same special value."""

    count: np.ndarray[Any, np.dtype[np.uint64]]
    infinite: np.ndarray[Any, np.dtype[np.bool_]]

    def as_float(self) -> np.ndarray[Any, np.dtype[np.float64]]:
        return self._floats

    @functools.cached_property
    def _floats(self) -> np.ndarray[Any, np.dtype[np.float64]]:
        counts: np.ndarray[Any, np.dtype[np.float64]] = self.count.astype(np.float64)
        if self.infinite.any():
            counts[self.infinite] = np.inf
        return counts

    def beyond(self, bound: float) -> np.ndarray[Any, np.dtype[np.bool_]]:
        """Where the distance is more than ``bound`` ULPs (exactly: the count is an integer)."""
        past: np.ndarray[Any, np.dtype[np.bool_]] = self.infinite | integers.beyond(
            self.count, bound
        )
        return past


def distance(expected: Any, actual: Any) -> np.ndarray[Any, np.dtype[np.float64]]:
    """ULPs between ``actual`` and ``expected`` (same dtype and shape) as float64, per element."""
    return steps(expected, actual).as_float()


def steps(expected: Any, actual: Any) -> Steps:
    """ULPs between ``actual`` and ``expected`` (same dtype and shape), exact, per element."""
    exp, act = np.asarray(expected), np.asarray(actual)
    if exp.dtype != act.dtype or exp.shape != act.shape:
        raise ValueError(f"ULPs need one dtype and shape: {exp.dtype}{exp.shape}, {act.dtype}")
    if exp.dtype.kind == "c":
        real, imag = steps(exp.real, act.real), steps(exp.imag, act.imag)
        return Steps(np.maximum(real.count, imag.count), real.infinite | imag.infinite)
    never = np.zeros(exp.shape, bool)
    if exp.dtype.kind == "b":
        return Steps(np.not_equal(exp, act).astype(np.uint64), never)
    if exp.dtype.kind in "iu" or exp.dtype.name.startswith(_SMALL_INT_PREFIXES):
        return Steps(integers.difference(exp, act), never)
    if not is_float(exp.dtype):
        raise TypeError(f"no unit in the last place for dtype {exp.dtype}")
    count = _steps(_ordinals(exp), _ordinals(act), wide=exp.dtype.itemsize == _WIDE_BYTES)
    if exp.dtype not in _IEEE:  # ml_dtypes' floats are tested for NaN and inf in float64
        exp, act = exp.astype(np.float64), act.astype(np.float64)
    return _special(exp, act, count)


def is_float(dtype: np.dtype[Any]) -> bool:
    """A dtype ULPs are counted in: numpy's floats and ml_dtypes' small floats."""
    return dtype.kind == "f" or (dtype.kind == "V" and dtype.name.startswith(_SMALL_FLOAT_PREFIXES))


def _ordinals(values: np.ndarray[Any, Any]) -> np.ndarray[Any, np.dtype[np.int64]]:
    """Each value's position in the ordered values of its dtype (finite values only)."""
    dtype = values.dtype
    if dtype in _IEEE:
        bits = np.ascontiguousarray(values).view(f"i{dtype.itemsize}").astype(np.int64)
        magnitude = bits & np.int64(2 ** (8 * dtype.itemsize - 1) - 1)
        return np.where(bits < 0, -magnitude, magnitude)
    if dtype.itemsize <= _SMALL_BYTES:  # ml_dtypes' small floats (some of which say kind 'f')
        table = _table(dtype)
        return np.searchsorted(table, values.astype(np.float64)).astype(np.int64)
    return _ordinals(values.astype(np.float64))  # long double: no integer of its width


@functools.cache
def _table(dtype: np.dtype[Any]) -> np.ndarray[Any, np.dtype[np.float64]]:
    """Every finite value of a small float dtype, ascending, ``-0.0`` and ``0.0`` as one."""
    ml_dtypes = importlib.import_module("ml_dtypes")
    bits = int(ml_dtypes.finfo(dtype).bits)
    patterns = np.arange(2**bits, dtype=np.uint16 if dtype.itemsize == _SMALL_BYTES else np.uint8)
    with np.errstate(invalid="ignore"):  # the NaN patterns
        values = patterns.view(dtype).astype(np.float64)
    table: np.ndarray[Any, np.dtype[np.float64]] = np.unique(values[np.isfinite(values)])
    return table


def _steps(
    a: np.ndarray[Any, np.dtype[np.int64]], b: np.ndarray[Any, np.dtype[np.int64]], *, wide: bool
) -> np.ndarray[Any, np.dtype[np.uint64]]:
    if not wide:  # ordinals of 32 bits or fewer: their difference fits in int64
        narrow: np.ndarray[Any, np.dtype[np.uint64]] = np.abs(a - b).astype(np.uint64)
        return narrow
    # In uint64, where float64's widest gap (2**64 - 2 steps) fits and wrap-around is exact.
    au, bu = a.view(np.uint64), b.view(np.uint64)
    with np.errstate(over="ignore"):
        gap: np.ndarray[Any, np.dtype[np.uint64]] = np.where(a >= b, au - bu, bu - au)
    return gap


def _special(
    e: np.ndarray[Any, Any],
    a: np.ndarray[Any, Any],
    count: np.ndarray[Any, np.dtype[np.uint64]],
) -> Steps:
    finite = np.isfinite(e) & np.isfinite(a)
    if finite.all():
        return Steps(count, np.zeros(e.shape, bool))
    same = (np.isnan(e) & np.isnan(a)) | (np.isinf(e) & (e == a))
    return Steps(np.where(finite, count, np.uint64(0)), ~finite & ~same)
