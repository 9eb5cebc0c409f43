"""The first divergence of an ordered record: which intermediate activation is the first to
break parity, and that every one before it held.

A record's tolerance lists its intermediates in the order the model computes them
(:mod:`fixture_store.registry.ordered`); the arrays it does not list are its outputs. Where a
port goes wrong, every later activation is wrong too: the array worth looking at is the first
one in that order that is outside its rule (or was not given), not the one with the largest
error.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from fixture_store.parity.arrays import ArrayComparison
from fixture_store.registry.ordered import Intermediates

_NAMES_SHOWN = 4


@dataclass(frozen=True)
class Divergence:
    """Where an ordered record's comparison first breaks parity.

    ``order`` is the intermediates compared, in order; ``first`` the first of them outside its
    rule or not given (``None``: every intermediate held); ``held`` the ones before it, each
    within its rule; ``outputs`` the failing outputs (every array that is no intermediate)."""

    order: tuple[str, ...]
    first: str | None
    held: tuple[str, ...]
    outputs: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        """What a failure message says of it."""
        n = len(self.order)
        if self.first is None:
            said = f"every intermediate held ({n} of {n}, in order)"
            if self.outputs:
                said += f"; the outputs diverge: {', '.join(self.outputs)}"
            return [said]
        k = len(self.held)
        before = (
            f"the {k} before it held ({_names(self.held)})" if k else "it is the first in order"
        )
        return [f"first divergence: {self.first} (intermediate {k + 1} of {n} in order); {before}"]


def first_divergence(
    intermediates: Intermediates,
    comparisons: Collection[ArrayComparison],
    missing: Collection[str],
) -> Divergence:
    """The first intermediate, in order, that failed its rule or was not given."""
    by_name: Mapping[str, ArrayComparison] = {c.name: c for c in comparisons}
    order = intermediates.sequence([*by_name, *missing])
    held: list[str] = []
    first = None
    for name in order:
        compared = by_name.get(name)
        if compared is None or not compared.ok:
            first = name
            break
        held.append(name)
    outputs = tuple(c.name for c in comparisons if not c.ok and c.name not in order)
    return Divergence(order, first, tuple(held), outputs)


def _names(names: tuple[str, ...]) -> str:
    if len(names) <= _NAMES_SHOWN:
        return ", ".join(names)
    return f"{', '.join(names[:2])}, …, {names[-1]}"
