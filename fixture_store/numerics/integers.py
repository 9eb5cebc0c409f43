"""Exact integer arithmetic for comparing integer arrays, without a float64 cast.

float64 holds integers exactly only up to 2**53: cast to it, the int64 values ``2**53 + 1`` and
``2**53`` are one value, and two uint64 values near 2**64 are thousands apart yet "equal". So
integers are compared as integers: the distance ``|a - e|`` is computed in uint64, where it always
fits (int64 extremes are 2**64 - 1 apart; a signed difference would overflow), and every test of a
distance against a bound the tolerance gives as a float is decided exactly, as Python's own
``int <= float`` is.

numpy's array arithmetic wraps around on overflow (it does not raise): each function here relies
on that where it computes in uint64, and only there.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

U64 = np.dtype(np.uint64)
_U64_SPAN = 2**64  # a threshold at or past this exceeds every uint64
# A float64 sum of non-negative terms carries a relative error of at most a few units of 2**-53;
# nearer than this the float result is not trusted and the element is decided exactly.
_RELATIVE_MARGIN = 2.0**-48
_ABSOLUTE_MARGIN = 2.0**-1060  # below the smallest normal: a product that underflowed


def as_integers(values: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """``values`` as int64 or uint64 (ml_dtypes' small integers widen exactly)."""
    if values.dtype.kind == "u":
        return values.astype(np.uint64)
    return values.astype(np.int64)


def magnitude(values: np.ndarray[Any, Any]) -> np.ndarray[Any, np.dtype[np.uint64]]:
    """``|values|`` in uint64, exact (``|int64 min|`` is 2**63, which int64 cannot hold)."""
    wide = as_integers(values)
    if wide.dtype == U64:
        return wide
    bits = wide.view(np.uint64)
    with np.errstate(over="ignore"):
        mag: np.ndarray[Any, np.dtype[np.uint64]] = np.where(wide < 0, np.uint64(0) - bits, bits)
    return mag


def difference(
    expected: np.ndarray[Any, Any], actual: np.ndarray[Any, Any]
) -> np.ndarray[Any, np.dtype[np.uint64]]:
    """``|actual - expected|`` element by element in uint64, exact for every integer dtype."""
    e, a = as_integers(expected), as_integers(actual)
    if e.dtype != a.dtype:  # one signed, one unsigned: no common 64-bit type holds both
        raise ValueError(f"integers of one signedness only: {expected.dtype}, {actual.dtype}")
    eu, au = e.view(np.uint64), a.view(np.uint64)
    # Modulo 2**64 the difference is exact, and the true one is below 2**64.
    with np.errstate(over="ignore"):
        diff: np.ndarray[Any, np.dtype[np.uint64]] = np.where(a >= e, au - eu, eu - au)
    return diff


def beyond(
    counts: np.ndarray[Any, np.dtype[np.uint64]], bound: float | Fraction
) -> np.ndarray[Any, Any]:
    """Where ``counts > bound``, exactly: a count is an integer, so it is past ``bound`` when it
    is past ``floor(bound)``, an integer compared in uint64."""
    threshold = math.floor(bound)
    if threshold >= _U64_SPAN:
        return np.zeros(counts.shape, bool)
    past: np.ndarray[Any, Any] = counts > np.uint64(threshold)
    return past


def within_affine(
    diff: np.ndarray[Any, np.dtype[np.uint64]],
    scale: np.ndarray[Any, np.dtype[np.uint64]],
    atol: float,
    rtol: float,
) -> np.ndarray[Any, Any]:
    """Where ``diff <= atol + rtol * scale`` holds exactly (``allclose`` over integers).

    float64 decides every element whose two sides are clearly apart (its error is a few units of
    2**-53 relative: all terms are non-negative, nothing cancels); the few that are within that
    margin are decided in rational arithmetic, with the floats' exact values.
    """
    flat_diff, flat_scale = diff.reshape(-1), scale.reshape(-1)
    d = flat_diff.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        t = atol + rtol * flat_scale.astype(np.float64)
        # An infinite t (rtol * scale overflowed) is past every uint64: never near.
        near = np.isfinite(t) & (
            np.abs(d - t) <= _RELATIVE_MARGIN * np.maximum(d, t) + _ABSOLUTE_MARGIN
        )
    within: np.ndarray[Any, Any] = d <= t
    exact_atol, exact_rtol = Fraction(atol), Fraction(rtol)
    for i in np.flatnonzero(near).tolist():
        within[i] = int(flat_diff[i]) <= exact_atol + exact_rtol * int(flat_scale[i])
    return within.reshape(diff.shape)


def total(counts: np.ndarray[Any, np.dtype[np.uint64]]) -> int:
    """The exact sum of ``counts`` (uint64 sums wrap past 2**64: the high and low 32 bits of
    each count are summed apart, which cannot wrap below 2**32 elements)."""
    if not counts.size:
        return 0
    high = int(np.sum(counts >> np.uint64(32), dtype=np.uint64))
    low = int(np.sum(counts & np.uint64(0xFFFFFFFF), dtype=np.uint64))
    return (high << 32) + low


def mean_beyond(counts: np.ndarray[Any, np.dtype[np.uint64]], bound: float) -> bool:
    """Whether the mean of ``counts`` is past ``bound``, exactly."""
    return bool(counts.size) and Fraction(total(counts)) > Fraction(bound) * counts.size


def cosine_within(expected: list[int], actual: list[int], bound: float) -> bool:
    """Whether ``1 - cos(a, e) <= bound``, exactly: with ``d = <e, a>``, ``p = |e|**2 |a|**2``
    and ``c = 1 - bound``, ``d / sqrt(p) >= c`` is decided on squares (both all-zero: cos 1;
    one all-zero: cos 0)."""
    d = sum(e * a for e, a in zip(expected, actual, strict=True))
    p = sum(e * e for e in expected) * sum(a * a for a in actual)
    c = 1 - Fraction(bound)
    if p == 0:
        cos = 1 if not any(expected) and not any(actual) else 0
        return cos >= c
    if c <= 0:
        return d >= 0 or Fraction(d) ** 2 <= c * c * p
    return d > 0 and Fraction(d) ** 2 >= c * c * p
