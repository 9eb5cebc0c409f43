"""Free-form JSON inside a record (metadata, a generator's environment), frozen and thawed.

Records are immutable values, so nested JSON is held as read-only mappings and tuples; ``thaw``
gives the plain dicts and lists back for JSON and for other processes (a mapping proxy does not
pickle).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

# The leaves of JSON: returned as they are, without the ABC checks below (a record's metadata
# of an import of 300,000 lines is walked that many times).
_LEAVES = frozenset({str, int, float, bool, type(None)})


def freeze(value: Any) -> Any:
    """``value`` with every dict a read-only mapping and every list a tuple."""
    if type(value) in _LEAVES:
        return value
    if type(value) is dict or isinstance(value, Mapping):  # dict first: skips the ABC check
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """The plain JSON form of a frozen value: dicts and lists again."""
    if type(value) in _LEAVES:
        return value
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(v) for v in value]
    return value
