"""The one bounded JSON reader (DESIGN decision 19): every JSON document that comes from a
remote, the store's state, a cache or a user's file is parsed here, under a size bound and a
depth bound, checked before the parser runs.

Python's parser recurses once per nested array or object and stops where the interpreter's
recursion limit happens to be (a ``RecursionError`` from deep inside, wherever the caller's
stack stood): one small hostile file could end every ``pull`` or ``expectations``. Here the
depth is measured first from the text, without recursion (strings taken out, then the running
count of brackets), and a document deeper than its bound is refused with an error that says so;
the parser then only ever sees documents far shallower than any stack. A document longer than
its cap is refused before it is decoded or scanned.

:func:`loads` parses one document; :func:`lines` reads a JSON-lines stream one line at a time,
each line under its own cap (a longer one is skipped, never held whole), so a log of any length
is read in bounded memory.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from itertools import accumulate
from typing import Any, BinaryIO

KiB = 1 << 10
MiB = 1 << 20
# Real documents nest a few levels (a pack index 3, a registry's metadata at most 64 below its
# record); this leaves every recursive consumer (json.dumps, freeze, jsonschema) far from the
# interpreter's limit of 1,000 frames, on any thread.
MAX_DEPTH = 128
# What a state file, a cache entry or a small answer of a server may be at most.
STATE_CAP = 64 * MiB

_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'[]{}"')
_STEP = tuple(1 if b in b"[{" else -1 if b in b"]}" else 0 for b in range(256))

Hook = Callable[[list[tuple[str, Any]]], Any]


class BoundError(ValueError):
    """A JSON document refused for its size or depth before it was parsed (a ``ValueError``,
    like the parser's own :class:`json.JSONDecodeError`, so a caller handles both as one)."""


class TooLarge(BoundError):
    """Longer than its cap."""


class TooDeep(BoundError):
    """Nested deeper than its bound."""


def depth(data: bytes) -> int:
    """How deep the arrays and objects of the UTF-8 JSON text ``data`` nest (0: a scalar), from
    the text alone, in C loops (a 100,000-deep document costs a pass, never a stack).

    Strings are taken out first: escaped backslashes, then escaped quotes (backslashes stand
    only inside strings, where JSON reads them left to right as these pairs do), then every
    byte but brackets and quotes; quotes then alternate opening and closing, so an adjacent
    pair holds nothing of interest and goes, and of what is left the parts outside strings are
    every other piece between quotes. The depth is the highest running count of brackets. Up
    to a syntax error the count is exact, so the parser, which stops there, never nests deeper.
    """
    if b"\\" in data:
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    structure = data.translate(None, _NOT_STRUCTURE).replace(b'""', b"")
    brackets = b"".join(structure.split(b'"')[0::2])
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def check(data: bytes, *, cap: int, max_depth: int = MAX_DEPTH) -> None:
    """Refuse ``data`` longer than ``cap`` bytes (:class:`TooLarge`) or nested deeper than
    ``max_depth`` (:class:`TooDeep`)."""
    if len(data) > cap:
        raise TooLarge(f"{len(data):,} bytes, more than the {cap:,} read")
    # A document with fewer opening brackets than the bound cannot nest deeper (most do not).
    if data.count(b"[") + data.count(b"{") > max_depth and depth(data) > max_depth:
        raise TooDeep(f"nested more than {max_depth} levels deep")


def loads(
    data: bytes | str,
    *,
    cap: int = STATE_CAP,
    max_depth: int = MAX_DEPTH,
    object_pairs_hook: Hook | None = None,
    parse_int: Callable[[str], Any] | None = None,
    parse_constant: Callable[[str], Any] | None = None,
) -> Any:
    """The JSON document ``data`` (UTF-8 bytes or text), checked by :func:`check` first.

    Raises :class:`TooLarge` or :class:`TooDeep` (bounds), :class:`json.JSONDecodeError`
    (syntax), :class:`UnicodeDecodeError` (bytes that are not UTF-8), or whatever the hooks
    raise; all but the hooks' are ``ValueError``."""
    if isinstance(data, str):
        raw = data.encode("utf-8", "surrogatepass")
        check(raw, cap=cap, max_depth=max_depth)
        text = data
    else:  # decoded here, as UTF-8 only: the scan reads ASCII bytes, which UTF-16 would hide
        check(data, cap=cap, max_depth=max_depth)
        text = data.decode("utf-8-sig")
    try:
        return json.loads(
            text,
            object_pairs_hook=object_pairs_hook,
            parse_int=parse_int,
            parse_constant=parse_constant,
        )
    except RecursionError as e:  # called with the stack nearly spent already: still a bound
        raise TooDeep(f"nested too deep to parse here (under {max_depth} levels): {e}") from None


def load(stream: BinaryIO, *, cap: int = STATE_CAP, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON document of a file or stream open for reading: at most ``cap + 1`` bytes are
    read (a longer one is :class:`TooLarge` without the rest being read), then :func:`loads`."""
    return loads(stream.read(cap + 1), cap=cap, max_depth=max_depth)


def lines(
    stream: BinaryIO, *, line_cap: int, max_depth: int = MAX_DEPTH
) -> Iterator[Any | BoundError | ValueError | None]:
    """Each line of a JSON-lines ``stream``, in order, read one at a time: its document, or
    the error that refused it (a line longer than ``line_cap`` is :class:`TooLarge`, and only
    its first ``line_cap`` bytes are ever held); ``None`` for a blank line."""
    while True:
        line = stream.readline(line_cap + 1)
        if not line:
            return
        if len(line) > line_cap and not line.endswith(b"\n"):
            while (rest := stream.readline(line_cap)) and not rest.endswith(b"\n"):
                pass  # the rest of the long line, read in pieces and dropped
            yield TooLarge(f"a line of more than {line_cap:,} bytes")
            continue
        if not line.strip():
            yield None
            continue
        try:
            yield loads(line, cap=line_cap + 1, max_depth=max_depth)
        except ValueError as e:
            yield e
