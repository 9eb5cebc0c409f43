"""Glob patterns over array names, as ``per_array`` keys and expectation keys use them.

``*`` any run of characters (``/`` included), ``?`` one, ``[abc]``/``[!abc]`` one of (none of) a
set; a pattern matches a whole name. The most specific of several matching patterns has the
fewest wildcards, then the most literal characters (:func:`specificity`).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable

from fixture_store.errors import RegistryError

_WILDCARD = re.compile(r"\[[^\]]*\]|[*?]")


def is_pattern(key: str) -> bool:
    """A ``per_array`` key holding a glob wildcard (``*``, ``?`` or ``[...]``)."""
    return _WILDCARD.search(key) is not None


def specificity(pattern: str) -> tuple[int, int]:
    """How specific a pattern is, larger first: fewer wildcards (``*``, ``?`` and each
    ``[...]`` count one), then more literal characters."""
    wildcards = _WILDCARD.findall(pattern)
    literal = len(pattern) - sum(len(w) for w in wildcards)
    return (-len(wildcards), literal)


def matches(pattern: str, name: str) -> bool:
    return _compiled(pattern).fullmatch(name) is not None


_PATTERNS: dict[str, re.Pattern[str]] = {}


def _compiled(pattern: str) -> re.Pattern[str]:
    """``*`` any run of characters (``/`` too), ``?`` one, ``[abc]``/``[!abc]`` one of a set."""
    found = _PATTERNS.get(pattern)
    if found is None:
        parts: list[str] = []
        pos = 0
        for m in _WILDCARD.finditer(pattern):
            parts.append(re.escape(pattern[pos : m.start()]))
            token = m.group()
            if token == "*":
                parts.append(".*")
            elif token == "?":
                parts.append(".")
            else:
                inner = token[1:-1]
                negate = inner.startswith("!")
                body = re.escape(inner[1:] if negate else inner).replace("\\-", "-")
                parts.append(f"[{'^' if negate else ''}{body}]")
            pos = m.end()
        parts.append(re.escape(pattern[pos:]))
        found = _PATTERNS[pattern] = re.compile("".join(parts), re.DOTALL)
    return found


def selects(entry: str, name: str) -> bool:
    """Whether a list entry (an array's exact name, or a glob pattern) selects ``name``."""
    return entry == name or (is_pattern(entry) and matches(entry, name))


def unmatched(entries: Iterable[str], known: Collection[str]) -> tuple[str, str] | None:
    """The first of ``entries`` that selects no array of ``known``, with the words that say
    so (naming the known arrays); ``None`` when each selects one."""
    for entry in entries:
        if entry in known or (is_pattern(entry) and any(matches(entry, n) for n in known)):
            continue
        return entry, (
            f"{entry!r} names no array of the record's arrays manifest"
            + (" (a pattern matching none)" if is_pattern(entry) else "")
            + f" (its arrays: {sorted(known)})"
        )
    return None


def tie(first: str, second: str, name: str) -> RegistryError:
    return RegistryError(
        f"per_array patterns {first!r} and {second!r} both match array {name!r} and are "
        "equally specific (as many wildcards, as much literal text): which rule applies is "
        "not defined",
        fix=f"add an entry for {name!r} by its exact name, or make one pattern more specific",
    )
