"""``.gitattributes`` read and resolved as git does it (gitattributes(5), git's ``attr.c``), so the
Git LFS importer takes a file for LFS-tracked exactly when ``git check-attr filter`` says
``lfs``.

- A line is a pattern and its attributes; a pattern may be C-quoted (``"a b.bin"``); a negative
  pattern (``!x``) is ignored, as is a line with an invalid attribute name or longer than git's
  2048 bytes. ``name`` sets, ``-name`` unsets, ``!name`` makes unspecified, ``name=v`` gives
  a value.
- A pattern without ``/`` matches a file's name at any depth; one with ``/`` (a leading one
  only anchors it) matches the path from its file's folder, by :func:`wildmatch`. A pattern
  ending in ``/`` names a folder, and a pattern that matches a folder does not apply to the
  files in it.
- For each attribute the first decision wins, looking at ``.git/info/attributes``, then the
  ``.gitattributes`` of the file's own folder, then of each folder above it to the top; within
  a file the last matching line first. ``[attr]NAME ...`` macros (only at the top and in
  ``info/attributes``; the built-in ``binary``) expand where they are set.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from fixture_store.importers.entry import ManifestError, read_manifest
from fixture_store.importers.wildmatch import wildmatch

State = bool | bytes | None
"""An attribute's state for a path: ``True`` set, ``False`` unset, ``None`` unspecified, bytes
its value."""

MAX_LINE = 2048  # git ignores a line this long or longer (ATTR_MAX_LINE_LENGTH)
_BLANK = b" \t\r\n"
_MACRO = b"[attr]"
_BOM = b"\xef\xbb\xbf"
_SPECIAL = b"*?[\\"
_NAME_BYTES = frozenset(b"-._0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_ESCAPES = {
    ord("a"): 7,
    ord("b"): 8,
    ord("f"): 12,
    ord("n"): 10,
    ord("r"): 13,
    ord("t"): 9,
    ord("v"): 11,
    ord("\\"): ord("\\"),
    ord('"'): ord('"'),
}


@dataclass(frozen=True)
class Pattern:
    """A path pattern as git's ``parse_path_pattern`` leaves it."""

    text: bytes  # without a trailing '/'
    nodir: bool  # no '/': matched against the file's name
    mustbedir: bool  # ended in '/': a folder, never a file
    prefix: int  # bytes before the first wildcard
    endswith: bool  # '*' and then no wildcard

    @classmethod
    def parse(cls, raw: bytes) -> Pattern:
        mustbedir = raw.endswith(b"/")
        text = raw[:-1] if mustbedir else raw
        simple = next((i for i, c in enumerate(raw) if c in _SPECIAL), len(raw))
        endswith = raw.startswith(b"*") and not any(c in _SPECIAL for c in raw[1:])
        return cls(text, b"/" not in text, mustbedir, min(simple, len(text)), endswith)

    def matches(self, path: bytes, base: bytes) -> bool:
        """Whether this pattern, read from the ``.gitattributes`` of folder ``base``, names the
        file ``path`` (both relative to the repository's top)."""
        if self.mustbedir:
            return False
        if self.nodir:
            name = path.rpartition(b"/")[2]
            if self.prefix == len(self.text):
                return name == self.text
            if self.endswith:  # "*literal", as git's match_basename shortcuts it
                return name.endswith(self.text[1:])
            return wildmatch(self.text, name, pathname=False)
        return self._matches_path(path, base)

    def _matches_path(self, path: bytes, base: bytes) -> bool:
        text, prefix = self.text, self.prefix
        if text.startswith(b"/"):
            text, prefix = text[1:], prefix - 1
        if base:
            if not path.startswith(base + b"/"):
                return False
            path = path[len(base) + 1 :]
        if prefix:
            if prefix > len(path) or path[:prefix] != text[:prefix]:
                return False
            text, path = text[prefix:], path[prefix:]
            if not text and not path:
                return True
        return wildmatch(text, path, pathname=True)


@dataclass(frozen=True)
class Line:
    """One meaningful line: a pattern (or, for a macro definition, ``None`` and its name) and
    its attribute states in order."""

    pattern: Pattern | None
    macro: bytes
    states: tuple[tuple[bytes, State], ...]


def parse(data: bytes, *, macros: bool) -> list[Line]:
    """The lines git keeps of a ``.gitattributes`` file's bytes; ``macros``: whether ``[attr]``
    definitions are allowed (the top folder's file, ``info/attributes``)."""
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    lines = (parse_line(line, macros=macros) for line in data.split(b"\n"))
    return [line for line in lines if line is not None]


def parse_line(line: bytes, *, macros: bool) -> Line | None:
    """A line as git's ``parse_attr_line`` reads it; ``None`` for what git ignores."""
    line = line.partition(b"\0")[0]
    cp = line.lstrip(_BLANK)
    if len(line) >= MAX_LINE or not cp or cp.startswith(b"#"):
        return None
    quoted = _unquote(cp) if cp.startswith(b'"') else None
    name, rest = quoted if quoted is not None else _split_blank(cp)
    macro = b""
    if len(name) > len(_MACRO) and name.startswith(_MACRO):
        macro = _split_blank(name[len(_MACRO) :].lstrip(_BLANK))[0]
        if not macros or not _valid_name(macro):
            return None
    states = _states(rest.lstrip(_BLANK))
    if states is None:
        return None
    if macro:
        return Line(None, macro, states)
    name = name.partition(b"\0")[0]
    if name.startswith(b"!"):
        return None  # negative patterns are ignored in git attributes
    return Line(Pattern.parse(name), b"", states)


def _split_blank(text: bytes) -> tuple[bytes, bytes]:
    end = next((i for i, c in enumerate(text) if c in _BLANK), len(text))
    return text[:end], text[end:]


def _states(text: bytes) -> tuple[tuple[bytes, State], ...] | None:
    """The states of a line's attribute list; ``None`` if a name is invalid (git then ignores
    the whole line)."""
    out: list[tuple[bytes, State]] = []
    while text:
        token, rest = _split_blank(text)
        name, eq, value = token.partition(b"=")
        state: State
        if name.startswith((b"-", b"!")):
            state = False if name.startswith(b"-") else None
            name = name[1:]
        else:
            state = value if eq else True
        if not _valid_name(name):
            return None
        out.append((name, state))
        text = rest.lstrip(_BLANK)
    return tuple(out)


def _valid_name(name: bytes) -> bool:
    return bool(name) and not name.startswith(b"-") and all(c in _NAME_BYTES for c in name)


def _unquote(text: bytes) -> tuple[bytes, bytes] | None:
    """A C-quoted pattern (git's ``unquote_c_style``) and the text after its closing quote;
    ``None`` if it is not well quoted (git then reads the line unquoted)."""
    out = bytearray()
    i = 1
    while i < len(text):
        c = text[i]
        i += 1
        if c == ord('"'):
            return bytes(out), text[i:]
        if c != ord("\\"):
            out.append(c)
            continue
        if i < len(text) and text[i] in _ESCAPES:
            out.append(_ESCAPES[text[i]])
            i += 1
        elif text[i : i + 3].isdigit() and b"0" <= text[i : i + 1] <= b"3":
            digits = text[i : i + 3]
            if any(d > ord("7") for d in digits):
                return None
            out.append(int(digits, 8))
            i += 3
        else:
            return None
    return None


_BINARY = Line(None, b"binary", ((b"diff", False), (b"merge", False), (b"text", False)))


@dataclass
class Attributes:
    """Every ``.gitattributes`` of a repository (by folder, ``b""`` the top) and its
    ``info/attributes``."""

    files: dict[bytes, list[Line]] = field(default_factory=dict)
    info: list[Line] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.macros: dict[bytes, Line] = {}
        for line in [_BINARY, *self.files.get(b"", []), *self.info]:
            if line.pattern is None:
                self.macros[line.macro] = line  # the later definition wins

    def value(self, path: bytes, name: bytes) -> State:
        """The state of attribute ``name`` for the file ``path`` (relative to the top)."""
        determined: dict[bytes, State] = {}
        for base, lines in self._stack(path):
            for line in reversed(lines):
                if line.pattern is not None and line.pattern.matches(path, base):
                    self._fill(line, determined)
            if name in determined:
                break
        return determined.get(name)

    def _stack(self, path: bytes) -> Iterator[tuple[bytes, list[Line]]]:
        """The attribute files that apply to ``path``, the first to decide first."""
        yield b"", self.info
        folder = path.rpartition(b"/")[0]
        while True:
            yield folder, self.files.get(folder, [])
            if not folder:
                return
            folder = folder.rpartition(b"/")[0]

    def _fill(self, line: Line, determined: dict[bytes, State]) -> None:
        for name, state in reversed(line.states):
            if name not in determined:
                determined[name] = state
                macro = self.macros.get(name)
                if state is True and macro is not None:
                    self._fill(macro, determined)


def read(top: Path, root: Path) -> Attributes:
    """The attributes of the repository whose top folder is ``top`` that apply inside ``root``
    (``top`` or a folder in it): ``info/attributes``, the ``.gitattributes`` of ``root``'s
    folders and of the folders above it up to ``top``. Each file is read bounded, as a
    manifest is; one that is a symbolic link is refused (git does not follow it)."""
    inside = root.relative_to(top)
    folders = [inside, *inside.parents] if inside != Path(".") else [inside]
    files: dict[bytes, list[Line]] = {}
    for folder in folders[1:]:
        _read_into(files, top, folder)
    for walked, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        if ".gitattributes" in names:
            _read_into(files, top, Path(walked).relative_to(top))
    info = top / ".git" / "info" / "attributes"
    lines = parse(_read(info), macros=True) if info.is_file() else []
    return Attributes(files, lines)


def _read_into(files: dict[bytes, list[Line]], top: Path, folder: Path) -> None:
    path = top / folder / ".gitattributes"
    if not path.exists() and not path.is_symlink():
        return
    key = b"" if folder == Path(".") else os.fsencode(folder.as_posix())
    files[key] = parse(_read(path), macros=not key)


def _read(path: Path) -> bytes:
    if path.is_symlink():
        raise ManifestError(
            str(path),
            "is a symbolic link, which git does not read as attributes",
            fix=f"replace the link by the file it names, or remove it: {path}",
        )
    return read_manifest(path, str(path))
