"""Tree artifacts: a folder as a manifest of relative path -> digest, itself addressed by digest.

The manifest's canonical bytes are JSON with sorted keys and no whitespace, so the same folder
always has the same tree digest. Member paths are POSIX, relative, and checked with full matches:
no absolute paths, no ``..`` or ``.`` segments, no backslashes or drive letters, no empty segments,
no control characters, no segment over 255 bytes or path over 4096, no member that is another
member's folder at any depth, no duplicates (Unicode/case folding is *not* applied: names are
bytes-exact, as the ONNX corpus needs).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from fixture_store.errors import DigestFormatError, UsageError
from fixture_store.objects import digests
from fixture_store.objects.digests import Digest

FORMAT = "fixture-store.tree/1"
MEDIA_TYPE = "application/vnd.fixture-store.tree+json"
_SEGMENT = re.compile(r"[A-Za-z0-9_+=,@~-][A-Za-z0-9._+=,@~-]*")
# A whole path of such segments: no segment is empty, '.' or '..' (none starts with a dot), and
# none holds a backslash or a drive letter's colon. Paths this short need no length check.
_SHORT_PATH = re.compile(rf"(?:{_SEGMENT.pattern}/)*{_SEGMENT.pattern}")
# What a checkout can create on the filesystems it runs on (NAME_MAX, PATH_MAX of Linux and
# macOS): a longer member would verify, then fail with an OS error when it is checked out.
NAME_MAX = 255
PATH_MAX = 4096


class TreePathError(UsageError):
    """A member path that could write outside its folder or is ambiguous."""


def check_member_path(path: object) -> str:
    """Return ``path`` if it is a safe relative POSIX member path, else raise TreePathError."""
    if isinstance(path, str) and len(path) <= NAME_MAX and _SHORT_PATH.fullmatch(path):
        return path  # one match for the common case; the checks below say what is wrong
    return _check_member_path_rules(path)


def _check_member_path_rules(path: object) -> str:
    """:func:`check_member_path` rule by rule, each with its own message."""
    if not isinstance(path, str) or not path:
        raise TreePathError(f"member path must be a non-empty string, got {path!r}")
    if "\\" in path:
        raise TreePathError(f"member path {path!r} contains a backslash")
    if path.startswith("/"):
        raise TreePathError(f"member path {path!r} is absolute")
    if re.match(r"[A-Za-z]:", path):
        raise TreePathError(f"member path {path!r} starts with a drive letter")
    for seg in path.split("/"):
        if seg in ("", ".", ".."):
            raise TreePathError(f"member path {path!r} has an empty, '.' or '..' segment")
        if _SEGMENT.fullmatch(seg) is None:
            raise TreePathError(f"member path {path!r} has a disallowed character in {seg!r}")
        if len(seg) > NAME_MAX:  # segments are ASCII: characters are bytes
            raise TreePathError(
                f"member path {path[:64]!r}... has a segment of {len(seg)} bytes; "
                f"a filesystem allows {NAME_MAX}"
            )
    if len(path) > PATH_MAX:
        raise TreePathError(
            f"member path {path[:64]!r}... is {len(path)} bytes long; "
            f"a filesystem allows {PATH_MAX}"
        )
    return path


def _check_no_file_is_a_folder(files: Mapping[str, object]) -> None:
    """No member is a folder of another member, at any depth (``a`` beside ``a/b/c``)."""
    for p in files:
        end = p.rfind("/")
        while end > 0:
            parent = p[:end]
            if parent in files:
                raise TreePathError(f"member path {parent!r} is both a file and a folder")
            end = p.rfind("/", 0, end)


@dataclass(frozen=True)
class Tree:
    """An immutable, validated manifest: member path -> digest."""

    members: Mapping[str, Digest]

    def __post_init__(self) -> None:
        checked: dict[str, Digest] = {}
        for path in sorted(self.members):
            check_member_path(path)
            digest = self.members[path]
            if not isinstance(digest, Digest):
                raise TypeError(f"member {path!r}: expected a Digest")
            checked[path] = digest
        _check_no_file_is_a_folder(checked)
        object.__setattr__(self, "members", MappingProxyType(checked))

    def canonical_bytes(self) -> bytes:
        doc = {
            "format": FORMAT,
            "members": {p: {"digest": d.text, "size": d.size} for p, d in self.members.items()},
        }
        return (json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n").encode()

    @property
    def digest(self) -> Digest:
        return digests.of_bytes(self.canonical_bytes())

    @property
    def total_size(self) -> int:
        return sum(d.size for d in self.members.values())

    def __iter__(self) -> Iterator[tuple[str, Digest]]:
        return iter(self.members.items())

    def __len__(self) -> int:
        return len(self.members)


def from_json(members: Mapping[str, object]) -> Tree:
    """Build a Tree from the record form ``{path: {"digest": ..., "size": ...}}``."""
    out: dict[str, Digest] = {}
    for path, entry in members.items():
        if not isinstance(entry, Mapping):
            raise DigestFormatError(f"member {path!r}: expected {{digest, size}}")
        out[path] = digests.parse(entry.get("digest"), entry.get("size"))
    return Tree(out)


def to_json(tree: Tree) -> dict[str, dict[str, object]]:
    return {p: {"digest": d.text, "size": d.size} for p, d in tree.members.items()}


def parse_manifest(data: bytes) -> Tree:
    doc = json.loads(data)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise UsageError(f"not a {FORMAT} manifest")
    return from_json(doc["members"])


def scan_folder(folder: str | os.PathLike[str]) -> dict[str, Path]:
    """Relative member path -> file path for every regular file under ``folder``.

    Symlinks and special files are refused: a tree holds regular files only.
    """
    found: dict[str, Path] = {}

    # scandir's entry types come with the listing: no stat per file (ingest of 10,000 files).
    def walk(path: str, prefix: str) -> None:
        try:
            with os.scandir(path) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as e:
            raise TreePathError(f"cannot list {path}: {e.strerror}") from e
        subdirs = []
        for entry in entries:
            if entry.is_symlink():
                raise TreePathError(
                    f"{entry.path} is a symbolic link; trees hold regular files only"
                )
            if entry.is_dir(follow_symlinks=False):
                subdirs.append(entry)
            elif entry.is_file(follow_symlinks=False):
                found[check_member_path(prefix + entry.name)] = Path(entry.path)
            else:
                raise TreePathError(f"{entry.path} is not a regular file")
        for sub in subdirs:
            walk(sub.path, f"{prefix}{sub.name}/")

    walk(os.fspath(folder), "")
    return found


def hash_folder(folder: str | os.PathLike[str]) -> tuple[Tree, dict[str, Path]]:
    files = scan_folder(folder)
    return Tree({rel: digests.of_file(p) for rel, p in files.items()}), files
