"""Reductions over the segments of one flat array: many arrays' sums and maxima in one call.

A record of thousands of small arrays is judged by laying its arrays end to end (one flat array
per side) and reducing each array's segment with ``np.add.reduceat`` / ``np.maximum.reduceat``
(:mod:`fixture_store.numerics.batch`), instead of one numpy call per array and metric.

A sum is the one reduction whose result depends on the order it adds in: ``np.sum`` adds
pairwise, ``np.add.reduceat`` left to right, and the two differ in the last bits. So every sum a
comparison reports or judges (the mean absolute and relative errors, the RMS, the cosine's dot
products) goes through :func:`total` or :func:`totals`, the same left-to-right sum over the same
elements, and an array judged alone and judged in a batch get the same bits.
"""

from __future__ import annotations

from typing import Any

import numpy as np

FlatArray = np.ndarray[Any, Any]


def total(values: FlatArray) -> float:
    """The sum of ``values`` left to right, as :func:`totals` sums each segment."""
    flat = values.reshape(-1)
    if not flat.size:
        return 0.0
    return float(np.add.reduceat(flat, _FIRST)[0])


_FIRST = np.zeros(1, np.intp)


def starts_of(sizes: np.ndarray[Any, np.dtype[np.intp]]) -> np.ndarray[Any, np.dtype[np.intp]]:
    """Where each segment of the given (non-zero) sizes starts in the flat array."""
    starts = np.zeros(sizes.size, np.intp)
    np.cumsum(sizes[:-1], out=starts[1:])
    return starts


def totals(values: FlatArray, starts: np.ndarray[Any, Any]) -> FlatArray:
    """Each segment's sum, left to right (every segment non-empty)."""
    return np.add.reduceat(values, starts)


def maxima(values: FlatArray, starts: np.ndarray[Any, Any]) -> FlatArray:
    """Each segment's largest value (every segment non-empty)."""
    return np.maximum.reduceat(values, starts)


def every(mask: FlatArray, starts: np.ndarray[Any, Any]) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """Whether ``mask`` holds over the whole of each segment."""
    held: np.ndarray[Any, np.dtype[np.bool_]] = np.logical_and.reduceat(mask, starts)
    return held


def any_of(mask: FlatArray, starts: np.ndarray[Any, Any]) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """Whether ``mask`` holds anywhere in each segment."""
    held: np.ndarray[Any, np.dtype[np.bool_]] = np.logical_or.reduceat(mask, starts)
    return held


def first_maxima(
    values: FlatArray, starts: np.ndarray[Any, Any], sizes: np.ndarray[Any, Any]
) -> np.ndarray[Any, np.dtype[np.intp]]:
    """The offset in each segment of its first largest value, as ``np.argmax`` finds it
    there (no NaN in ``values``)."""
    top = np.repeat(maxima(values, starts), sizes)
    hits = np.flatnonzero(values == top)
    # Every segment holds its maximum, so the first hit at or after its start is in it.
    first: np.ndarray[Any, np.dtype[np.intp]] = hits[np.searchsorted(hits, starts)] - starts
    return first
