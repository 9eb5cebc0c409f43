"""Machine conditions a known failure may depend on, written ``KIND:ARGUMENT`` in the registry.

Most known failures are facts about a runtime and hold everywhere. A few depend on the machine
(ONNX Runtime's StringNormalizer needs the system locale ``en_US.UTF-8``). Such an entry names its
condition; where the condition does not hold the entry is inactive: the case is expected to pass,
a pass is reported with the inactive entry but does not fail the run, and a failure is not
excused. So a run has the same exit code on a machine with the locale and on one without it.

The same language keys expectations by where a comparison runs: ``device:cuda``,
``runtime:onnxruntime``, ``provider:CUDAExecutionProvider``, ``dtype:bfloat16``,
``platform:linux`` hold when the :class:`~fixture_store.registry.environment.Environment` of the
comparison has that fact (an unknown fact: the condition does not hold). Several conditions
joined by commas (:func:`parse_all`) hold when each one does; the more conditions, the more
specific (:func:`specificity`).
"""

from __future__ import annotations

import locale
from collections.abc import Callable, Mapping

from fixture_store.errors import UsageError
from fixture_store.registry import environment
from fixture_store.registry.environment import Environment


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


MACHINE: Mapping[str, Callable[[str], bool]] = {"locale-missing": _locale_missing}
KINDS = (*MACHINE, *environment.KINDS)
_FIX = f"write KIND:ARGUMENT with KIND one of: {', '.join(sorted(KINDS))}"


def parse(condition: str) -> tuple[str, str]:
    """``(kind, argument)`` of a condition, or a UsageError naming the kinds there are."""
    kind, sep, argument = condition.partition(":")
    if not sep or not argument or kind not in KINDS:
        raise UsageError(f"unknown condition {condition!r}", fix=_FIX)
    problem = None if kind in MACHINE else environment.check_fact(kind, argument)
    if problem is not None:
        raise UsageError(f"condition {condition!r}: {problem}", fix=_FIX)
    return kind, argument


def parse_all(text: str) -> tuple[str, ...]:
    """The conditions of ``device:cuda,dtype:float32`` (each checked, in the order written); a
    UsageError for an empty one or a kind given twice (two facts of one kind never both hold)."""
    parts = tuple(p.strip() for p in text.split(environment.SEPARATOR))
    seen: set[str] = set()
    for part in parts:
        kind, _ = parse(part)
        if kind in seen and kind not in MACHINE:
            raise UsageError(f"conditions {text!r}: {kind} is given twice", fix=_FIX)
        seen.add(kind)
    return parts


def specificity(conditions: tuple[str, ...]) -> int:
    """How specific a conjunction of conditions is: how many conditions it holds."""
    return len(conditions)


def holds(condition: str, where: Environment | None = None) -> bool:
    """Whether the condition is true: a machine condition on this machine now (not cached:
    LOCPATH may change), an environment condition in ``where`` (never when ``None``)."""
    kind, argument = parse(condition)
    if kind in MACHINE:
        return MACHINE[kind](argument)
    return where is not None and where.get(kind) == argument
