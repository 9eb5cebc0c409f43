"""Tree artifacts: a folder as a manifest of relative path -> digest, itself addressed by digest.

The manifest's canonical bytes are JSON with sorted keys and no whitespace, so the same folder
always has the same tree digest. Member paths are names of the one grammar
(:mod:`fixture_store.objects.names`): relative POSIX paths in NFC, no ``..`` or ``.`` or empty
segments, no backslashes or drive letters, nothing unprintable, no segment over 255 bytes or
path over 4096; no member is another member's folder at any depth, and no two collide under
case folding or Unicode normalisation.
Names are kept as they are spelt (``test_AvgPool1d`` stays so); only collisions are refused.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from fixture_store import bounded_json
from fixture_store.errors import DigestFormatError, UsageError
from fixture_store.objects import digests, names
from fixture_store.objects.digests import Digest

FORMAT = "fixture-store.tree/1"
MEDIA_TYPE = "application/vnd.fixture-store.tree+json"
# What a checkout can create on the filesystems it runs on (see :mod:`.names`).
NAME_MAX = names.NAME_MAX
PATH_MAX = names.PATH_MAX


class TreePathError(UsageError):
    """A member path that could write outside its folder or is ambiguous."""


def check_member_path(path: object) -> str:
    """``path`` as a member name of the one grammar (:mod:`.names`, in NFC), else
    TreePathError saying which rule it breaks."""
    try:
        return names.parse(path)
    except names.NameRefusedError as e:
        raise TreePathError(f"member path {e.message}") from None


def _check_no_collision(files: Iterable[str]) -> None:
    """No two members are one file where case or Unicode normalisation is not told apart."""
    for first, other in names.collisions(files):
        raise TreePathError(f"member path {other!r} {names.collision_reason(first)}")


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
        _check_no_collision(self.members)  # as spelt: two spellings of one name collide too
        checked: dict[str, Digest] = {}
        for raw in sorted(self.members):
            path = check_member_path(raw)
            digest = self.members[raw]
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
    try:
        doc = bounded_json.loads(data)
    except ValueError as e:
        raise UsageError(f"not a {FORMAT} manifest: {e}") from None
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
                member = check_member_path(prefix + entry.name)
                if member in found:  # two spellings of one name on a normalising filesystem
                    raise TreePathError(f"member path {member!r} {names.collision_reason(member)}")
                found[member] = Path(entry.path)
            else:
                raise TreePathError(f"{entry.path} is not a regular file")
        for sub in subdirs:
            walk(sub.path, f"{prefix}{sub.name}/")

    walk(os.fspath(folder), "")
    return found


def hash_folder(folder: str | os.PathLike[str]) -> tuple[Tree, dict[str, Path]]:
    files = scan_folder(folder)
    return Tree({rel: digests.of_file(p) for rel, p in files.items()}), files
