"""pooch registries: the text file ``Pooch.load_registry`` reads, or a Python module holding
the ``registry`` dict that ``pooch.create(registry=...)`` is given.

The text form follows pooch's own rules: each line stripped, lines starting with ``#`` skipped,
the rest split like a shell line into ``name hash [url]`` (quotes allowed); the hash is
``alg:hex`` or bare hex (SHA-256), compared in lower case. The module form is read with
:mod:`ast`, never imported or run: ``registry = {"name": "hash", ...}`` and, if present,
``registry_urls = {"name": "url", ...}``, both plain literals.
"""

from __future__ import annotations

import ast
import re
import shlex

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


def looks_like(text: str, shown: str) -> bool:
    """Whether ``text`` reads as a pooch registry (for auto-detection): every line a name then
    a hash, where sha256sum output has the hash first."""
    if shown.endswith(".py"):
        return "registry" in text
    lines = [ln.split() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    return bool(lines) and all(
        len(ln) in (2, 3) and _HASH.fullmatch(ln[1]) and not _HASH.fullmatch(ln[0]) for ln in lines
    )


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


def _parse_module(text: str, shown: str) -> tuple[ManifestEntry, ...]:
    try:
        tree = ast.parse(text, shown)
    except SyntaxError as e:
        raise ManifestError(f"{shown} line {e.lineno}", f"not Python: {e.msg}") from e
    found = {
        node.targets[0].id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
    }
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
