"""Array roles: the inputs an NPZ stores beside the outputs they produce.

``"inputs": ["x", "mask/*"]`` in a record's tolerance names the arrays of the record that are a
model's *inputs*, by name or glob pattern (:mod:`~fixture_store.registry.patterns`); every other
array is an output. A parity assertion hands the inputs to the test (they are arrays of the
record like any other) and neither requires them from the candidate nor judges them by the
record's rule: a candidate that gives an input back has it compared *exactly* (bit for bit, dtype
and shape included), because an input that differs means the outputs beside it were computed from
other data, and no tolerance on the outputs makes that comparison meaningful.

Precedence: the role is decided before any rule. An array an ``inputs`` entry matches is an input
whatever ``per_array``, ``per_dtype`` or ``intermediates`` say of it; those entries must not name
it (a rule nobody looks up is refused, as an override naming no array is). Every entry must
name an array of the record's arrays manifest or, as a pattern, match one; at least one array
must be left to judge. The role is the record's: an ``expectations`` entry inherits it and cannot
change it (an environment changes how outputs are judged, not which arrays are outputs).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from fixture_store.registry.patterns import is_pattern, selects, unmatched
from fixture_store.registry.where import Where

KEY = "inputs"


@dataclass(frozen=True)
class Inputs:
    """The names and patterns of a record's input arrays."""

    entries: tuple[str, ...]

    def to_json(self) -> list[str]:
        return list(self.entries)

    def holds(self, name: str) -> bool:
        """``name`` is an input (listed, or matched by a pattern)."""
        return any(selects(e, name) for e in self.entries)

    def check_names(self, known: Collection[str], where: Where, field: str, rules: Any) -> None:
        """Refuse an entry that names no known array (a pattern matching none), inputs that
        leave no array to judge, and a rule of ``rules`` (the record's Tolerance) keyed by an
        input's exact name."""
        found = unmatched(self.entries, known)
        if found is not None:
            raise where.fail(
                f"{field}.{KEY}",
                found[1],
                fix="name the inputs as the arrays manifest names them, or by glob patterns "
                "over those names",
            )
        if known and all(self.holds(n) for n in known):
            raise where.fail(
                f"{field}.{KEY}",
                f"every array of the record is an input (its arrays: {sorted(known)}): a parity "
                "assertion would judge nothing",
                fix="name only the arrays the model is given; the outputs stay unnamed",
            )
        steps = rules.intermediates.order if rules.intermediates is not None else ()
        self.check_rules([*(k for k, _ in rules.per_array or ()), *steps], where, field)

    def check_rules(self, named: Collection[str], where: Where, field: str) -> None:
        """Refuse a rule keyed by the exact name of an input (``named``: the ``per_array`` keys
        and the intermediates' order): an input is never judged by a rule."""
        for name in named:
            if not is_pattern(name) and self.holds(name):
                raise where.fail(
                    f"{field}.{KEY}",
                    f"{name!r} is an input and has a rule of its own: an input is not judged "
                    "by the record's rules (a candidate that gives it back is compared exactly)",
                    fix=f"remove {name!r} from the inputs, or its rule",
                )


def parse(raw: Mapping[str, Any], where: Where, field: str) -> Inputs | None:
    """The record's ``inputs`` (``None`` when it has none)."""
    if KEY not in raw:
        return None
    value = raw[KEY]
    at = f"{field}.{KEY}"
    if not isinstance(value, list) or not value:
        raise where.fail(at, "must be a non-empty list of array names or glob patterns")
    for entry in value:
        if not isinstance(entry, str) or not entry:
            raise where.fail(at, f"each entry is an array name or a pattern, not {entry!r}")
    duplicate = next((e for i, e in enumerate(value) if e in value[:i]), None)
    if duplicate is not None:
        raise where.fail(at, f"lists {duplicate!r} twice")
    return Inputs(tuple(value))
