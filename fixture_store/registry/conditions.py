"""Machine conditions a known failure may depend on, written ``KIND:ARGUMENT`` in the registry.

Most known failures are facts about a runtime and hold everywhere. A few depend on the machine
(ONNX Runtime's StringNormalizer needs the system locale ``en_US.UTF-8``). Such an entry names its
condition; where the condition does not hold the entry is inactive: the case is expected to pass,
a pass is reported with the inactive entry but does not fail the run, and a failure is not
excused. So a run has the same exit code on a machine with the locale and on one without it.
"""

from __future__ import annotations

import locale
from collections.abc import Callable, Mapping

from fixture_store.errors import UsageError


def _locale_missing(name: str) -> bool:
    """True when the C library cannot load the locale ``name`` (what std::locale(name) needs)."""
    current = locale.setlocale(locale.LC_CTYPE)
    try:
        locale.setlocale(locale.LC_CTYPE, name)
    except locale.Error:
        return True
    finally:
        locale.setlocale(locale.LC_CTYPE, current)
    return False


KINDS: Mapping[str, Callable[[str], bool]] = {"locale-missing": _locale_missing}


def parse(condition: str) -> tuple[str, str]:
    """``(kind, argument)`` of a condition, or a UsageError naming the kinds there are."""
    kind, sep, argument = condition.partition(":")
    if not sep or not argument or kind not in KINDS:
        raise UsageError(
            f"unknown condition {condition!r}",
            fix=f"write KIND:ARGUMENT with KIND one of: {', '.join(sorted(KINDS))}",
        )
    return kind, argument


def holds(condition: str) -> bool:
    """Whether the condition is true on this machine now (not cached: LOCPATH may change)."""
    kind, argument = parse(condition)
    return KINDS[kind](argument)
