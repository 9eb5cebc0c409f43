"""Ordered intermediates: a record whose arrays are a model's intermediate activations, in the
order the model computes them, beside its outputs.

``"intermediates": {"order": ["embed", "blocks.*", "norm"], "metric": "rms", "max": 1e-4}`` in a
record's tolerance says which arrays are intermediates and in what order, and the rule they are
judged by; every other array of the record is an *output*, judged by the record's own rule. The
order is stated here, not taken from the ``arrays`` manifest: a registry file is written with its
keys sorted, so the manifest's order is alphabetical, which is not the order of ``blocks.10``
and ``blocks.9``.

Each ``order`` entry is an array name or a glob pattern (:mod:`~fixture_store.registry.patterns`).
A name listed exactly takes its entry's place; any other array takes the place of the first
pattern that matches it, the arrays one pattern matches in natural order (runs of digits
compared as numbers: ``blocks.2`` before ``blocks.10``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fixture_store.registry.patterns import is_pattern, matches, selects, unmatched
from fixture_store.registry.where import Where

KEY = "intermediates"
ORDER = "order"
_DIGITS = re.compile(r"(\d+)")


@dataclass(frozen=True)
class Intermediates:
    """The intermediates' order (names and patterns) and their rule (an override of the
    record's rule, as a ``per_array`` entry is)."""

    order: tuple[str, ...]
    rule: Any  # a Tolerance (this module is below tolerance.py)

    def to_json(self) -> dict[str, Any]:
        return {ORDER: list(self.order), **self.rule.to_json()}

    def holds(self, name: str) -> bool:
        """``name`` is an intermediate (listed, or matched by a pattern of the order)."""
        return any(selects(entry, name) for entry in self.order)

    def sequence(self, names: Iterable[str]) -> tuple[str, ...]:
        """The intermediates among ``names``, in the order the model computes them."""
        listed = set(self.order)
        place: dict[str, int] = {}
        for name in names:
            if name in listed:
                place[name] = self.order.index(name)
                continue
            for i, entry in enumerate(self.order):
                if is_pattern(entry) and matches(entry, name):
                    place[name] = i
                    break
        return tuple(sorted(place, key=lambda n: (place[n], natural(n))))

    def check_names(self, known: Collection[str], where: Where, field: str) -> None:
        """Refuse an entry that names no known array and, as a pattern, matches none."""
        found = unmatched(self.order, known)
        if found is not None:
            raise where.fail(
                f"{field}.{KEY}.{ORDER}",
                found[1],
                fix="list the intermediates by their names in the arrays manifest, or by glob "
                "patterns over those names",
            )


def natural(name: str) -> tuple[tuple[int, int | str], ...]:
    """A sort key comparing runs of digits as numbers: ``blocks.2`` before ``blocks.10``."""
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in _DIGITS.split(name) if p)


def parse(
    raw: Mapping[str, Any],
    where: Where,
    field: str,
    rule: Callable[[Mapping[str, Any], str], Any],
) -> Intermediates | None:
    """The record's ``intermediates`` (``None`` when it has none); ``rule`` parses the rest of
    the object as an override of the record's rule."""
    if KEY not in raw:
        return None
    at = f"{field}.{KEY}"
    value = raw[KEY]
    if not isinstance(value, Mapping):
        raise where.fail(at, 'must be an object {"order": [names], metric, bounds}')
    order = value.get(ORDER)
    if not isinstance(order, list) or not order:
        raise where.fail(
            f"{at}.{ORDER}",
            "missing or empty: a non-empty list of the intermediates' names (or glob patterns), "
            "in the order the model computes them",
        )
    for entry in order:
        if not isinstance(entry, str) or not entry:
            raise where.fail(f"{at}.{ORDER}", f"each entry is a name or a pattern, not {entry!r}")
    duplicate = next((e for i, e in enumerate(order) if e in order[:i]), None)
    if duplicate is not None:
        raise where.fail(
            f"{at}.{ORDER}", f"lists {duplicate!r} twice: which place it takes is not defined"
        )
    rest = {k: v for k, v in value.items() if k != ORDER}
    return Intermediates(tuple(order), rule(rest, at))
