"""git's wildmatch, the glob of ``.gitignore`` and ``.gitattributes`` patterns, as git matches
it (``wildmatch.c``), over bytes: ``*`` and ``?`` and a bracket never match ``/``; ``**``
matches across folders only as ``**/`` at the start, ``/**`` at the end or ``/**/`` inside
(elsewhere it is ``*``); ``\\`` quotes the next byte; a bracket takes ``!`` or ``^``, ranges
and the POSIX classes ``[:space:]`` and kin (``git lfs track`` writes ``[[:space:]]`` for a
space). ``pathspec``'s gitignore patterns are a translation to regular expressions that does
not read POSIX classes and lets a negated bracket match ``/``; this is the algorithm itself.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from enum import Enum

_SPECIAL = frozenset(b"*?[\\")


class _Result(Enum):
    MATCH = 0
    NOMATCH = 1
    ABORT_ALL = 2
    ABORT_TO_STARSTAR = 3


def _set(chars: str) -> frozenset[int]:
    return frozenset(chars.encode())


_UPPER = _set(string.ascii_uppercase)
_LOWER = _set(string.ascii_lowercase)
_DIGIT = _set(string.digits)
_PUNCT = _set(string.punctuation)
_CLASSES: dict[bytes, frozenset[int]] = {
    b"alnum": _UPPER | _LOWER | _DIGIT,
    b"alpha": _UPPER | _LOWER,
    b"blank": _set(" \t"),
    b"cntrl": frozenset([*range(32), 127]),
    b"digit": _DIGIT,
    b"graph": _UPPER | _LOWER | _DIGIT | _PUNCT,
    b"lower": _LOWER,
    b"print": _UPPER | _LOWER | _DIGIT | _PUNCT | _set(" "),
    b"punct": _PUNCT,
    b"space": _set(" \t\n\r"),  # git's own isspace: not \v or \f
    b"upper": _UPPER,
    b"xdigit": _set(string.hexdigits),
}


def wildmatch(pattern: bytes, text: bytes, *, pathname: bool = True) -> bool:
    """Whether ``text`` matches ``pattern`` (``pathname``: git's ``WM_PATHNAME``, the flag
    ``.gitattributes`` paths are matched with)."""
    return _Wild(pattern, text, pathname).match(0, 0) is _Result.MATCH


@dataclass(frozen=True)
class _Wild:
    """git's ``dowild`` over pattern ``p`` and text ``t``, from indexes into both."""

    p: bytes
    t: bytes
    pathname: bool

    def match(self, pi: int, ti: int) -> _Result:
        p, t = self.p, self.t
        while pi < len(p):
            ch = p[pi]
            if ch == ord("*"):
                return self._star(pi, ti)
            if ti >= len(t):
                return _Result.ABORT_ALL
            one = self._one(pi, t[ti])
            if one is None:
                return _Result.ABORT_ALL  # a malformed bracket matches nothing
            if not one:
                return _Result.NOMATCH
            pi = self._after_one(pi)
            ti += 1
        return _Result.NOMATCH if ti < len(t) else _Result.MATCH

    def _one(self, pi: int, c: int) -> bool | None:
        """Whether byte ``c`` matches the one-byte item at ``p[pi]``."""
        ch = self.p[pi]
        if ch == ord("["):
            matched, _ = _bracket(self.p, pi, c)
            if matched is None:
                return None
            return matched and not (self.pathname and c == ord("/"))
        if ch == ord("?"):
            return not (self.pathname and c == ord("/"))
        if ch == ord("\\"):
            pi += 1  # the next byte, literally (none left: it matches nothing)
        return pi < len(self.p) and c == self.p[pi]

    def _after_one(self, pi: int) -> int:
        ch = self.p[pi]
        if ch == ord("["):
            return _bracket(self.p, pi, 0)[1] + 1
        return pi + (2 if ch == ord("\\") else 1)

    def _star(self, pi: int, ti: int) -> _Result:
        """``p[pi]`` is ``*``: one star, or a run of them."""
        p, t = self.p, self.t
        start = pi
        pi += 1
        if pi < len(p) and p[pi] == ord("*"):
            while pi < len(p) and p[pi] == ord("*"):
                pi += 1
            after_slash = start == 0 or p[start - 1] == ord("/")
            rest = p[pi:]
            match_slash = after_slash and (rest == b"" or rest[:1] == b"/" or rest[:2] == b"\\/")
            if match_slash and rest[:1] == b"/" and self.match(pi + 1, ti) is _Result.MATCH:
                return _Result.MATCH
        else:
            match_slash = not self.pathname
        if pi >= len(p):
            # A trailing ** matches everything; a trailing * only what has no more slash.
            return _Result.NOMATCH if not match_slash and b"/" in t[ti:] else _Result.MATCH
        if not match_slash and p[pi] == ord("/"):
            slash = t.find(b"/", ti)
            if slash < 0:
                return _Result.NOMATCH
            return self.match(pi + 1, slash + 1)  # one star: the rest of this folder's name
        return self._scan(pi, ti, match_slash)

    def _scan(self, pi: int, ti: int, match_slash: bool) -> _Result:
        """A star consumes ``t[ti:]`` a byte at a time until the rest of the pattern matches."""
        p, t = self.p, self.t
        while ti < len(t):
            if p[pi] not in _SPECIAL:
                # On to the literal that must follow (never past a slash for one star).
                while ti < len(t) and (match_slash or t[ti] != ord("/")) and t[ti] != p[pi]:
                    ti += 1
                if ti >= len(t) or t[ti] != p[pi]:
                    return _Result.NOMATCH
            matched = self.match(pi, ti)
            if matched is not _Result.NOMATCH:
                if not match_slash or matched is not _Result.ABORT_TO_STARSTAR:
                    return matched
            elif not match_slash and t[ti] == ord("/"):
                return _Result.ABORT_TO_STARSTAR
            ti += 1
        return _Result.ABORT_ALL


def _bracket(p: bytes, pi: int, c: int) -> tuple[bool | None, int]:
    """Whether byte ``c`` is in the bracket expression opening at ``p[pi]``, and the index of
    its closing ``]``; ``None``: the expression is malformed (git then matches nothing)."""
    pi += 1
    negated = pi < len(p) and p[pi] in b"!^"
    if negated:
        pi += 1
    matched = False
    prev: int | None = None
    first = True
    while first or (pi < len(p) and p[pi] != ord("]")):
        first = False
        if pi >= len(p):
            return None, pi
        hit, pi, prev = _bracket_item(p, pi, c, prev)
        if hit is None:
            return None, pi
        matched = matched or hit
        pi += 1
    if pi >= len(p):
        return None, pi
    return matched != negated, pi


def _bracket_item(
    p: bytes, pi: int, c: int, prev: int | None
) -> tuple[bool | None, int, int | None]:
    """One item of a bracket at ``p[pi]``: whether ``c`` is it, the index of its last byte,
    and the byte a following ``-`` ranges from (``None`` after a range or a class)."""
    ch = p[pi]
    if ch == ord("\\"):
        pi += 1
        if pi >= len(p):
            return None, pi, None
        return c == p[pi], pi, p[pi]
    if ch == ord("-") and prev is not None and pi + 1 < len(p) and p[pi + 1] != ord("]"):
        pi += 1
        high = p[pi]
        if high == ord("\\"):
            pi += 1
            if pi >= len(p):
                return None, pi, None
            high = p[pi]
        return prev <= c <= high, pi, None
    if ch == ord("[") and pi + 1 < len(p) and p[pi + 1] == ord(":"):
        return _posix_class(p, pi, c)
    return c == ch, pi, ch


def _posix_class(p: bytes, pi: int, c: int) -> tuple[bool | None, int, int | None]:
    """``[:name:]`` at ``p[pi]``; a ``[:`` with no ``:]`` before the next ``]`` is a plain ``[``."""
    close = p.find(b"]", pi + 2)
    if close < 0:
        return None, len(p), None
    if close - 1 < pi + 2 or p[close - 1] != ord(":"):
        return c == ord("["), pi, ord("[")
    members = _CLASSES.get(p[pi + 2 : close - 1])
    if members is None:
        return None, close, None
    return c in members, close, None
