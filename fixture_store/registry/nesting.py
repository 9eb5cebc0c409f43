"""What a registry value may be, and where a document breaks that rule: how deep it nests,
how long its integers are, that its numbers are finite and its strings are text UTF-8 can hold.

Free-form fields (a record's ``metadata``, a generator's ``environment`` and ``params``) are
the only ones whose shape the schema does not fix. Frozen, thawed and printed by recursive code,
a value nested hundreds of levels deep would end in a ``RecursionError`` far from the file that
holds it, so it is refused when the record loads, naming the field. The same bounds hold for
every value, wherever it was read (a registry file, a manifest an import reads, a header a
content reader parses): :func:`loads` is the one JSON reader that keeps them while it parses,
:func:`first_flaw` finds the first value that breaks one in anything already parsed. Every walk
here is iterative: it must not itself run out of stack on the document it judges.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from fixture_store import bounded_json
from fixture_store.registry.where import Where

# Real metadata nests a few levels; a limit far below Python's recursion limit leaves room for
# every recursive consumer (freeze, thaw, json.dumps, jsonschema) on any thread.
MAX_DEPTH = 64
# Integer literals longer than any 64-bit size are refused: nothing in a registry needs one, and
# past 4,300 digits Python's own parser fails with an error that names nothing.
MAX_INTEGER_DIGITS = 20
_INTEGER_BOUND = 10**MAX_INTEGER_DIGITS
# The longest registry file or manifest text read (a family of 10^5 records is ~50 MB; a larger
# one is sharded).
TEXT_CAP = 512 * bounded_json.MiB
# The deepest document parsed at all: up to it, a value nested past MAX_DEPTH makes only its
# own record (or manifest entry) invalid; past it the whole text is refused before parsing.
DOCUMENT_DEPTH = 4 * MAX_DEPTH

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


def nesting_field(field: str, path: Path) -> str:
    return field_name((field, *path))


def field_name(path: Path, keep: int = 3) -> str:
    """A dotted field name for ``path``, its first ``keep`` parts (a path 64 levels deep says
    nothing more useful than where it starts)."""
    shown = "".join(
        p if p.startswith("[") or i == 0 else f".{p}" for i, p in enumerate(path[:keep])
    )
    return shown + "…" if len(path) > keep else shown


Hook = Callable[[list[tuple[str, Any]]], Any]


def loads(
    text: str,
    object_pairs_hook: Hook | None = None,
    *,
    constants: bool = True,
    max_depth: int = DOCUMENT_DEPTH,
) -> tuple[Any, bool]:
    """The JSON document ``text`` and whether a value in it may break a bound (an integer
    longer than :data:`MAX_INTEGER_DIGITS`, ``NaN`` or ``Infinity``, an escaped surrogate): when
    it may, :func:`first_flaw` says where. Checking every value of a large registry costs more
    than parsing it, so the parse itself notices what it can, and one look at the text notices
    escapes (only a ``\\u`` escape can spell a surrogate in text decoded as UTF-8).

    The parser's own failures pass through: ``json.JSONDecodeError`` for bad syntax,
    bounds below,
    ``ValueError`` for an integer past Python's 4,300 digits, and (unless ``constants``) for
    ``NaN`` or ``Infinity``, as a strict JSON parser fails on them.

    It parses through the one bounded reader (:mod:`fixture_store.bounded_json`): a text
    longer than :data:`TEXT_CAP` or nested deeper than its bound is refused before the parser
    runs (``bounded_json.TooLarge``, ``bounded_json.TooDeep``, both ``ValueError``;
    :func:`first_too_deep` finds where)."""
    flagged: list[str] = []

    def integer(literal: str) -> int:
        if len(literal) - literal.startswith("-") > MAX_INTEGER_DIGITS:
            flagged.append(literal)  # kept as it is written: an invalid record is written back
        return int(literal)

    def constant(literal: str) -> float:
        if not constants:
            raise ValueError(f"{literal} is not JSON")
        flagged.append(literal)
        return float(literal)

    doc = bounded_json.loads(
        text,
        cap=TEXT_CAP,
        max_depth=max_depth,
        object_pairs_hook=object_pairs_hook,
        parse_int=integer,
        parse_constant=constant,
    )
    return doc, bool(flagged) or "\\u" in text


def parse_bounded(data: bytes, *, limit: int = MAX_DEPTH) -> Any:
    """A JSON document that came from elsewhere (a remote's pack index, a list of them), its
    bytes already read under their size cap: strict UTF-8, strict JSON (no ``NaN``), nested at
    most ``limit`` deep and holding no value past a bound (:func:`first_flaw`), whatever the
    interpreter's recursion limit; :class:`ValueError` saying what is wrong and where."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"not UTF-8 text ({e.reason} at byte {e.start})") from None
    try:
        doc, flagged = loads(text, constants=False, max_depth=limit)
    except bounded_json.TooDeep:
        where = first_too_deep(text, limit) or ()
        raise ValueError(
            f"nested more than {limit} levels deep (at {field_name(where) or 'its top'})"
        ) from None
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON: {e}") from None
    found = first_flaw(doc, limit) if flagged else None
    deep = too_deep(doc, limit) if found is None else None
    if found is None and deep is not None:
        found = deep, f"nested more than {limit} levels deep"
    if found is not None:
        path, message = found
        raise ValueError(f"{field_name(path) or 'its top'}: {message}")
    return doc


def first_flaw(value: Any, limit: int = MAX_DEPTH) -> tuple[Path, str] | None:
    """The path to the first value (or key) of a parsed document that breaks a bound, and what
    is wrong with it; ``None`` if none does. Works on values read from any format (JSON, YAML,
    Python literals, a binary header), not only from :func:`loads`."""
    pending: list[tuple[Any, Path]] = [(value, ())]
    while pending:
        node, path = pending.pop()
        kind = type(node)
        if kind is str and (node.isascii() or encodable(node)):
            continue  # the common leaf, decided without the general checks
        wrong = None if kind is dict or kind is list else _flaw(node)
        if wrong is not None:
            return path, wrong
        children: list[tuple[Any, Path]] = []
        if kind is dict or (kind is not list and isinstance(node, Mapping)):
            for key, child in node.items():
                if isinstance(key, str) and not encodable(key):
                    return (*path, key), f"the key {quoted(key)} {_NOT_TEXT}"
                children.append((child, (*path, str(key))))
        elif kind is list or isinstance(node, list | tuple):
            children = [(v, (*path, f"[{i}]")) for i, v in enumerate(node)]
        if children and len(path) >= limit:
            return path, f"nested more than {limit} levels deep"
        pending.extend(reversed(children))
    return None


_NOT_TEXT = "is not Unicode text (it holds a lone surrogate), so UTF-8 cannot write it"


def _flaw(node: Any) -> str | None:
    if isinstance(node, str):
        return None if encodable(node) else f"the string {quoted(node)} {_NOT_TEXT}"
    if type(node) is int and not -_INTEGER_BOUND < node < _INTEGER_BOUND:
        return f"an integer with more than {MAX_INTEGER_DIGITS} digits; no registry value needs one"
    if isinstance(node, float) and not math.isfinite(node):
        return f"the number {node} is not finite; JSON has no NaN or Infinity"
    return None


_SURROGATE = re.compile("[\ud800-\udfff]")


def escape_surrogates(text: str) -> str:
    """JSON ``text`` with each lone surrogate written as its ``\\uXXXX`` escape, which reads
    back as the same string: a registry file states such a value this way, and writing it back
    must not fail."""
    if encodable(text):
        return text
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def encodable(text: str) -> bool:
    """Whether UTF-8 can hold ``text`` (it has no lone surrogate)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def quoted(text: str, limit: int = 80) -> str:
    """``text`` quoted for a message: surrogates and control characters escaped, cut at
    ``limit`` characters."""
    return repr(text if len(text) <= limit else text[:limit] + "…")


def check_value(value: Any, where: Where, field: str, limit: int = MAX_DEPTH) -> None:
    """Refuse a free-form ``value`` that breaks a bound (see :func:`first_flaw`), naming
    ``field`` and the path inside it."""
    found = first_flaw(value, limit)
    if found is not None:
        path, message = found
        raise where.fail(
            nesting_field(field, path),
            message,
            fix="flatten or fix it: registry values nest a few levels, hold finite numbers "
            "and Unicode text",
        )
