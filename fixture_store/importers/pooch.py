"""pooch registries: the text file ``Pooch.load_registry`` reads, or a Python module holding
the ``registry`` dict that ``pooch.create(registry=...)`` is given.

The text form follows pooch's own rules: each line stripped, lines starting with ``#`` skipped,
the rest split like a shell line into ``name hash [url]`` (quotes allowed); the hash is
``alg:hex`` or bare hex (SHA-256), compared in lower case. The module form is never imported
or run, nor parsed whole: its tokens are read (:mod:`tokenize`, one pass, no recursion) to find
the module-level ``registry = {"name": "hash", ...}`` and, if present,
``registry_urls = {"name": "url", ...}``, and only those two, once their tokens show them to be
flat literals of strings, are parsed with :mod:`ast`. A module holding a 60,000-term expression
elsewhere (which ``ast.parse`` of the whole module would recurse through until it fails) costs
one token pass.
"""

from __future__ import annotations

import ast
import dataclasses
import io
import re
import shlex
import tokenize
from collections.abc import Iterator

from fixture_store.importers.entry import (
    ExpectedDigest,
    ManifestEntry,
    ManifestError,
    refuse_duplicates,
)

FORMAT = "pooch"
_HASH = re.compile(r"([A-Za-z0-9_]+:)?[0-9A-Fa-f]{32,}")
_FIX = "write one 'name hash [url]' per line, as pooch.make_registry does"


def parse(text: str, shown: str) -> tuple[ManifestEntry, ...]:
    """The entries of the registry ``text`` read from ``shown`` (``.py``: the module form)."""
    if shown.endswith(".py"):
        return _parse_module(text, shown)
    return parse_text(text, shown)


def with_base_url(entries: tuple[ManifestEntry, ...], base_url: str) -> tuple[ManifestEntry, ...]:
    """The entries with the URL pooch downloads each from: the registry's own URL for the name
    if it gives one, else ``base_url`` joined with the name, as ``Pooch.get_url`` joins them
    (no separator added: pooch's base URLs end in ``/``)."""
    return tuple(
        e if e.url is not None else dataclasses.replace(e, url=f"{base_url}{e.path}")
        for e in entries
    )


def looks_like(text: str, shown: str) -> bool:
    """Whether ``text`` reads as a pooch registry (for auto-detection): every line a name then
    a hash, where sha256sum output has the hash first."""
    if shown.endswith(".py"):
        return "registry" in text
    # pooch strips each line before it looks for "#": an indented comment is a comment.
    lines = (
        ln.split() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")
    )
    seen = False
    for ln in lines:
        if not (len(ln) in (2, 3) and _HASH.fullmatch(ln[1]) and not _HASH.fullmatch(ln[0])):
            return False
        seen = True
    return seen


def parse_text(text: str, shown: str) -> tuple[ManifestEntry, ...]:
    entries = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if line.startswith("#"):
            continue
        where = f"{shown} line {number}"
        try:
            elements = shlex.split(line)
        except ValueError as e:
            raise ManifestError(where, f"cannot split the line: {e}", fix=_FIX) from e
        if len(elements) not in (0, 2, 3):
            raise ManifestError(
                where, f"expected 2 or 3 elements (name hash [url]), got {len(elements)}", fix=_FIX
            )
        if elements:
            url = elements[2] if len(elements) == 3 else None  # noqa: PLR2004
            entries.append(entry(elements[0], elements[1], url, where))
    return refuse_duplicates(entries)


def entry(name: str, checksum: str, url: str | None, where: str) -> ManifestEntry:
    """One registry item as pooch reads it: ``alg:hex`` or bare hex meaning SHA-256."""
    algorithm, sep, hexpart = checksum.rpartition(":")
    digest = ExpectedDigest.parse(algorithm if sep else "sha256", hexpart, where)
    return ManifestEntry(name, (digest,), where, url=url)


_NAMES = ("registry", "registry_urls")
# The tokens a flat ``{"name": "value", ...}`` literal is made of, besides strings.
_LITERAL_OPS = frozenset("{}:,")
_SKIPPED = frozenset({tokenize.NL, tokenize.COMMENT})


def _parse_module(text: str, shown: str) -> tuple[ManifestEntry, ...]:
    found = _assignments(text, shown)
    registry = found.get("registry")
    if registry is None:
        raise ManifestError(
            shown,
            "assigns no 'registry' dict at module level",
            fix="a pooch registry module holds registry = {'name': 'hash', ...}",
        )
    hashes = _literal_dict(registry, shown, "registry")
    urls_node = found.get("registry_urls")
    urls = _literal_dict(urls_node, shown, "registry_urls") if urls_node is not None else {}
    return refuse_duplicates(
        [
            entry(name, checksum, urls.get(name, (None, 0))[0], f"{shown} line {lineno}")
            for name, (checksum, lineno) in hashes.items()
        ]
    )


def _assignments(text: str, shown: str) -> dict[str, ast.expr]:
    """The values last assigned to :data:`_NAMES` at module level, each parsed from its own
    tokens once they show a flat literal of strings."""
    found: dict[str, ast.expr] = {}
    statement: list[tokenize.TokenInfo] = []
    try:
        for tok in _statements_tokens(text):
            if tok.type not in (tokenize.NEWLINE, tokenize.ENDMARKER):
                statement.append(tok)
                continue
            named = _assigned(statement)
            if named is not None:
                found[named] = _value(statement[2:], named, text, shown)
            statement = []
    except (tokenize.TokenError, SyntaxError) as e:
        line = e.lineno if isinstance(e, SyntaxError) else e.args[1][0]
        raise ManifestError(f"{shown} line {line}", f"not Python: {e.args[0]}") from e
    return found


def _statements_tokens(text: str) -> Iterator[tokenize.TokenInfo]:
    """The module's tokens at indentation level 0 (inside no block), one statement after the
    other, each ended by a NEWLINE token; ``;`` ends a statement too."""
    level = 0
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.INDENT:
            level += 1
        elif tok.type == tokenize.DEDENT:
            level -= 1
        elif level == 0 and tok.type == tokenize.OP and tok.string == ";":
            yield tok._replace(type=tokenize.NEWLINE)
        elif level == 0 and tok.type not in _SKIPPED:
            yield tok


def _assigned(statement: list[tokenize.TokenInfo]) -> str | None:
    """The name of :data:`_NAMES` a ``NAME = VALUE`` statement assigns, if it is one."""
    match statement:
        case [target, equals, _, *_] if (
            target.type == tokenize.NAME
            and target.string in _NAMES
            and equals.type == tokenize.OP
            and equals.string == "="
        ):
            return target.string
    return None


def _value(tokens: list[tokenize.TokenInfo], name: str, text: str, shown: str) -> ast.expr:
    """The assigned value, parsed by :mod:`ast` only if its tokens are strings and the
    punctuation of a flat dict: nothing else is ever parsed, so nothing recurses."""
    for tok in tokens:
        if tok.type == tokenize.STRING or (tok.type == tokenize.OP and tok.string in _LITERAL_OPS):
            continue
        raise ManifestError(
            f"{shown} line {tok.start[0]}",
            f"{name} is not a dict literal of strings: it holds {tok.string[:40]!r}",
            fix="a pooch registry module holds registry = {'name': 'hash', ...}",
        )
    (row, col), (end_row, end_col) = tokens[0].start, tokens[-1].end
    lines = text.split("\n")[row - 1 : end_row]
    lines[-1] = lines[-1][:end_col]
    lines[0] = lines[0][col:]
    try:  # newlines first: the nodes keep the module's line numbers
        return ast.parse("\n" * (row - 1) + "\n".join(lines), mode="eval").body
    except SyntaxError as e:
        raise ManifestError(f"{shown} line {e.lineno}", f"not Python: {e.msg}") from e


def _literal_dict(node: ast.expr, shown: str, name: str) -> dict[str, tuple[str, int]]:
    """A ``{str: str}`` literal as name -> (value, line); duplicate keys are refused (Python
    would keep the last one silently)."""
    if not isinstance(node, ast.Dict):
        raise ManifestError(f"{shown} line {node.lineno}", f"{name} is not a dict literal")
    out: dict[str, tuple[str, int]] = {}
    for key, value in zip(node.keys, node.values, strict=True):
        lineno = value.lineno
        where = f"{shown} line {lineno}"
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            raise ManifestError(where, f"{name} keys must be string literals")
        if not (isinstance(value, ast.Constant) and isinstance(value.value, str)):
            raise ManifestError(where, f"{name}[{key.value!r}] must be a string literal")
        if key.value in out:
            first = out[key.value][1]
            raise ManifestError(where, f"{key.value!r} is listed twice (first at line {first})")
        out[key.value] = (value.value, lineno)
    return out
