"""One name grammar for the world (DESIGN 17): a record's path or a tree's member is any
relative POSIX path a real project ships, as one value that parses and prints itself.

Accepted: segments of any printable characters but ``/`` and ``\\`` (a leading ``_`` or ``.``,
spaces, parentheses, ``@``, ``~``, ``+``, ``:``, non-ASCII), read as their NFC form, so that a
name typed on macOS and one listed on Linux are the same name. Refused, each for its own
reason: a name that is not text or is empty, an absolute path, a drive letter (``C:``), a
backslash, an empty, ``.`` or ``..`` segment, a character that is not printable (NUL, control
and format characters such as a bidirectional override, separators other than the space,
unassigned code points), a segment over :data:`NAME_MAX` or a path over :data:`PATH_MAX` bytes
of UTF-8 (what a checkout can create on Linux and macOS). Two names that differ only in case
or Unicode normalisation are one name on the filesystems checkouts land on: :attr:`Name.key`
is what they share, and :func:`collisions` says which of a collection collide.

A name is printed as it is (:meth:`Name.__str__`) and escaped for each place it goes:
:func:`shell` for a ``fix:`` command line, :func:`html` for a page, :func:`pointer` for a JSON
pointer segment; a terminal shows it as it is, since nothing non-printable is accepted
(:func:`fixture_store.display.escape` still guards every console against what was refused).
"""

from __future__ import annotations

import html as html_mod
import re
import shlex
import unicodedata
from collections.abc import Iterable

from fixture_store.errors import UsageError

# What a checkout can create on the filesystems it runs on (NAME_MAX, PATH_MAX of Linux and
# macOS), in bytes of UTF-8: a longer name would verify, then fail with an OS error when it is
# checked out.
NAME_MAX = 255
PATH_MAX = 4096

# The common case in one match: ASCII segments of printable characters but '/' and '\\', none
# empty or all dots (which rules out '.' and '..' and is rare enough to leave to the rules),
# short enough that no length check is needed. Everything else goes rule by rule.
_ASCII_SEGMENT = r"(?!\.{1,2}(?:/|$))[ -.0-\[\]-~]+"  # printable ASCII but '/' and '\'
_SIMPLE = re.compile(rf"(?![A-Za-z]:)(?:{_ASCII_SEGMENT}/)*{_ASCII_SEGMENT}")
_DRIVE = re.compile(r"[A-Za-z]:")


class NameRefusedError(UsageError):
    """A name outside the grammar; ``reason`` says which rule, without the name."""

    def __init__(self, raw: object, reason: str) -> None:
        self.raw = raw
        self.reason = reason
        super().__init__(f"{_shown(raw)} {reason}")


class Name(str):
    """A name of the grammar, in NFC: a ``str`` that is known to be one.

    ``Name.parse(text)`` is the only way in; ``str(name)`` prints it back, and ``parse`` of what
    it prints is the same name."""

    __slots__ = ()

    @classmethod
    def parse(cls, raw: object) -> Name:
        """``raw`` as a name (NFC), or :class:`NameRefusedError` saying which rule it breaks."""
        if isinstance(raw, Name):
            return raw
        if isinstance(raw, str) and len(raw) <= NAME_MAX and _SIMPLE.fullmatch(raw):
            return str.__new__(cls, raw)  # ASCII is NFC; one match for the common case
        return str.__new__(cls, _checked(raw))

    @property
    def segments(self) -> tuple[str, ...]:
        return tuple(self.split("/"))

    @property
    def key(self) -> str:
        """What a case-insensitive, normalisation-insensitive filesystem sees: two names with
        the same key are one file there."""
        return key(self)


def parse(raw: object) -> Name:
    """:meth:`Name.parse`."""
    return Name.parse(raw)


def key(name: str) -> str:
    """The collision key of ``name``: case-folded, in NFC."""
    if name.isascii():
        return name.lower()
    return unicodedata.normalize("NFC", name.casefold())


def collisions(names: Iterable[str]) -> list[tuple[str, str]]:
    """Each name of ``names`` that collides with an earlier one (another spelling of the same
    :func:`key`), as (the earlier name, this name), in order."""
    seen: dict[str, str] = {}
    found = []
    for name in names:
        k = key(name)
        if k in seen:
            found.append((seen[k], name))
        else:
            seen[k] = name
    return found


def collision_reason(first: str) -> str:
    """The reason a name colliding with ``first`` is refused, in the words of every place."""
    return (
        f"collides with {first!r}: they differ only in case or Unicode normalisation, and are "
        "one file where a checkout lands on macOS or Windows"
    )


def shell(name: str) -> str:
    """``name`` as one argument of a command line a user may paste into a POSIX shell."""
    return shlex.quote(name)


def html(name: str) -> str:
    """``name`` as text or an attribute value of an HTML page."""
    return html_mod.escape(name, quote=True)


def pointer(name: str) -> str:
    """``name`` as one segment of a JSON pointer (RFC 6901): ``~`` as ``~0``, ``/`` as ``~1``."""
    return name.replace("~", "~0").replace("/", "~1")


def _checked(raw: object) -> str:
    """``raw`` in NFC if it is a name, rule by rule, each refusal with its own reason."""
    if not isinstance(raw, str):
        raise NameRefusedError(raw, "is not text")
    if not raw:
        raise NameRefusedError(raw, "is empty")
    if "\\" in raw:
        raise NameRefusedError(raw, "holds a backslash (a path separator on Windows); use '/'")
    if raw.startswith("/"):
        raise NameRefusedError(raw, "is absolute; names are relative paths")
    if _DRIVE.match(raw):
        raise NameRefusedError(raw, "starts with a drive letter (absolute on Windows)")
    bad = next((c for c in raw if not c.isprintable()), None)
    if bad is not None:
        what = "a control character" if unicodedata.category(bad) == "Cc" else "a character"
        raise NameRefusedError(raw, f"holds {what} that is not printable ({bad!a})")
    try:
        text = unicodedata.normalize("NFC", raw)
        encoded = len(text.encode())
    except UnicodeEncodeError:  # a lone surrogate
        raise NameRefusedError(raw, "is not valid Unicode (a lone surrogate)") from None
    for seg in text.split("/"):
        if seg in ("", ".", ".."):
            raise NameRefusedError(raw, "has an empty, '.' or '..' segment")
        size = len(seg.encode())
        if size > NAME_MAX:
            raise NameRefusedError(
                raw, f"has a segment of {size} bytes; a filesystem allows {NAME_MAX}"
            )
    if encoded > PATH_MAX:
        raise NameRefusedError(raw, f"is {encoded} bytes long; a filesystem allows {PATH_MAX}")
    return text


def _shown(raw: object) -> str:
    """The refused name in a message: quoted, cut when long (the console escapes the rest)."""
    if isinstance(raw, str) and len(raw) > 64:  # noqa: PLR2004 - enough to recognise it
        return f"{raw[:64]!r}..."
    return repr(raw)
