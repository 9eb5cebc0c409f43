"""How deep registry JSON may nest, and where a document breaks that rule.

Free-form fields (a record's ``metadata``, a generator's ``environment`` and ``params``) are
the only ones whose shape the schema does not fix. Frozen, thawed and printed by recursive code,
a value nested hundreds of levels deep would end in a ``RecursionError`` far from the file that
holds it, so it is refused when the record loads, naming the field. Every walk here is
iterative: it must not itself run out of stack on the document it judges.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from fixture_store.registry.where import Where

# Real metadata nests a few levels; a limit far below Python's recursion limit leaves room for
# every recursive consumer (freeze, thaw, json.dumps, jsonschema) on any thread.
MAX_DEPTH = 64

Path = tuple[str, ...]

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{},]')


def first_too_deep(text: str, limit: int = MAX_DEPTH) -> Path | None:
    """The keys leading to the first container of JSON ``text`` nested more than ``limit``
    deep, read from the text (for documents the parser refused); ``None`` if there is none."""
    stack: list[list[Any]] = []  # per open container: [is_object, its current key or index]
    expect_key = False
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token[0] == '"':
            if stack and stack[-1][0] and expect_key:
                stack[-1][1] = token[1:-1]
                expect_key = False
        elif token in "[{":
            if len(stack) >= limit:
                return tuple(_label(frame) for frame in stack)
            stack.append([token == "{", None if token == "{" else 0])
            expect_key = token == "{"
        elif token in "]}":
            if stack:
                stack.pop()
            expect_key = False
        elif stack:  # a comma
            if stack[-1][0]:
                expect_key = True
            else:
                stack[-1][1] += 1
    return None


def _label(frame: list[Any]) -> str:
    is_object, at = frame
    return str(at) if is_object else f"[{at}]"


def too_deep(value: Any, limit: int = MAX_DEPTH) -> Path | None:
    """The path to the first container in a parsed ``value`` more than ``limit`` levels below
    it; ``None`` if it nests no deeper."""
    return first_path(value, lambda _v: False, limit=limit)


def first_path(
    value: Any, matches: Callable[[Any], bool], *, limit: int | None = None
) -> Path | None:
    """The path to the first node of a parsed document for which ``matches`` holds (or, with
    ``limit``, the first container deeper than it), depth first."""
    pending: list[tuple[Any, Path]] = [(value, ())]
    while pending:
        node, path = pending.pop()
        if matches(node):
            return path
        children: list[tuple[Any, Path]] = []
        if isinstance(node, Mapping):
            children = [(v, (*path, str(k))) for k, v in node.items()]
        elif isinstance(node, list | tuple):
            children = [(v, (*path, f"[{i}]")) for i, v in enumerate(node)]
        if children and limit is not None and len(path) >= limit:
            return path
        pending.extend(reversed(children))
    return None


def check_depth(value: Any, where: Where, field: str, limit: int = MAX_DEPTH) -> None:
    """Refuse a free-form ``value`` nested more than ``limit`` levels deep, naming ``field``."""
    path = too_deep(value, limit)
    if path is not None:
        raise where.fail(
            nesting_field(field, path),
            f"nested more than {limit} levels deep",
            fix="flatten it: registry values nest a few levels",
        )


def nesting_field(field: str, path: Path) -> str:
    return field_name((field, *path))


def field_name(path: Path, keep: int = 3) -> str:
    """A dotted field name for ``path``, its first ``keep`` parts (a path 64 levels deep says
    nothing more useful than where it starts)."""
    shown = "".join(
        p if p.startswith("[") or i == 0 else f".{p}" for i, p in enumerate(path[:keep])
    )
    return shown + "…" if len(path) > keep else shown
