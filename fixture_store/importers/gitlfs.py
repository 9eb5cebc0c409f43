"""Git LFS: the pointers of a repository, whose ``sha256 + size`` is this project's identity,
imported without downloading anything; the bytes from the repository's LFS object folder.

A pointer is the small text file git-lfs commits in place of the bytes::

    version https://git-lfs.github.com/spec/v1
    oid sha256:<64 hex>
    size <bytes>

Given a repository folder, every pointer file in its working tree is read (a file git-lfs tracks
by ``.gitattributes`` ``filter=lfs`` that is checked out as its bytes is read too: its SHA-256
is its oid, accepted when the object folder holds that oid). Given a file, it is the output of
``git lfs ls-files --long`` (``<oid> [*-] <path>`` per line), with the sizes from the object
folder. The bytes are read from ``.git/lfs/objects/<oid[0:2]>/<oid[2:4]>/<oid>`` through the
path primitive, hashed and checked against the oid and size; a pointer whose object is not
there is absent (``--gaps`` declares it as a gap that keeps its digest and size). A file that
starts like a pointer but is not one is an error naming it. The records get local sources:
the files' paths in the working tree, which hold the bytes once ``git lfs pull`` has run.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from fixture_store.errors import UsageError
from fixture_store.importers import gitattributes, held
from fixture_store.importers.entry import (
    ExpectedDigest,
    ManifestEntry,
    ManifestError,
    read_manifest,
)
from fixture_store.importers.plan import (
    LocalOrigin,
    Located,
    Plan,
    Unverified,
    make_plan,
)
from fixture_store.objects import digests
from fixture_store.objects.anchored import Folder
from fixture_store.registry import Source

FORMAT = "git-lfs"
MAX_POINTER = 1024  # git-lfs reads no pointer larger than this
_VERSIONS = ("https://git-lfs.github.com/spec/v1", "https://hawser.github.com/spec/v1")
_LS_LINE = re.compile(r"(?P<oid>[0-9a-f]{64}) [*-] (?P<path>.+)")
_FIX = "restore the pointer: git checkout -- FILE (or git lfs pointer --file=FILE to write one)"


@dataclass(frozen=True)
class LfsOrigin:
    """The working tree's files as local sources (``local``); their bytes read from the LFS
    object folder ``objects`` by oid."""

    local: LocalOrigin
    objects: Path | None
    scratch: Path

    def manifest(self, path: str) -> tuple[str, str]:
        return self.local.manifest(path)

    def name(self, manifest: str) -> str:
        return self.local.name(manifest)

    def locate(self, entry: ManifestEntry) -> Located | None:
        oid = entry.sha256
        if self.objects is None or oid is None:
            return None
        try:
            folder = Folder.root(self.objects, refuse=held.refusal)
        except FileNotFoundError:
            return None
        with folder:
            copied = held.copy_in(folder, [oid[:2], oid[2:4], oid], self.scratch)
        shown = str(self.local.root / entry.path)  # the pointer the user's tree holds
        return None if copied is None else Located(copied, self.source(entry.path), shown)

    def unlisted(self, _listed: frozenset[str], _manifest: str) -> list[str]:
        return []

    def source(self, path: str) -> Source:
        return self.local.source(path)


def claims(path: Path) -> bool:
    """A folder with a ``.gitattributes`` setting ``filter=lfs`` or an LFS object folder."""
    if (path / ".git" / "lfs").is_dir():
        return True
    try:
        lines = gitattributes.parse(read_manifest(path / ".gitattributes", ""), macros=True)
    except ManifestError:
        return False
    return any((b"filter", b"lfs") in line.states for line in lines)


def plan(path: Path, options: held.Options) -> tuple[Plan, LfsOrigin]:
    """Every pointer (of the working tree, or of ``ls-files`` output) checked against the
    object folder's bytes; nothing is stored."""
    root = path if path.is_dir() else path.parent
    objects = _objects(root)
    origin = LfsOrigin(LocalOrigin(options.project, root), objects, options.scratch)
    if path.is_dir():
        entries, unverified = _working_tree(root, objects, held.selection(options))
        manifest = str(root / ".gitattributes")
    else:
        entries, unverified = _ls_files(path, objects, held.selection(options)), []
        manifest = str(path)
    done = make_plan(FORMAT, manifest, entries, origin)
    return dataclasses.replace(done, unverified=tuple(unverified)), origin


def _top(root: Path) -> Path | None:
    """The top folder of the repository holding ``root`` (``None``: no repository)."""
    for folder in (root.absolute(), *root.absolute().parents):
        if (folder / ".git").is_dir():
            return folder
    return None


def _objects(root: Path) -> Path | None:
    """``.git/lfs/objects`` of the repository holding ``root`` (``None``: no repository); a
    link at ``.git``, ``.git/lfs`` or the object folder is refused, never followed: the bytes
    an import reads come from inside the repository it is given."""
    top = _top(root)
    if top is None:
        return None
    path = top
    for part in (".git", "lfs", "objects"):
        path = path / part
        if path.is_symlink():
            raise held.refusal(str(path), "a symbolic link")
    return path


def parse_pointer(data: bytes, shown: str) -> tuple[str, int]:
    """The oid (sha256 hex) and size of a pointer; a ManifestError naming ``shown`` if the
    bytes start like a pointer but are not one."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ManifestError(shown, "not a Git LFS pointer: not UTF-8 text", fix=_FIX) from None
    lines = text.split("\n")
    if lines[-1] != "":
        raise ManifestError(shown, "not a Git LFS pointer: it must end with a newline", fix=_FIX)
    fields: dict[str, str] = {}
    for number, line in enumerate(lines[:-1], start=1):
        key, sep, value = line.partition(" ")
        if not sep or not key or key in fields:
            raise ManifestError(
                f"{shown} line {number}", f"not a 'key value' pointer line: {line!r}", fix=_FIX
            )
        fields[key] = value
    if next(iter(fields), None) != "version" or fields["version"] not in _VERSIONS:
        raise ManifestError(shown, f"the first line must be 'version {_VERSIONS[0]}'", fix=_FIX)
    algorithm, _, oid = fields.get("oid", "").partition(":")
    if algorithm != "sha256" or re.fullmatch(r"[0-9a-f]{64}", oid) is None:
        raise ManifestError(shown, f"oid {fields.get('oid')!r} is not sha256:<64 hex>", fix=_FIX)
    size = fields.get("size", "")
    if not size.isdigit() or (len(size) > 1 and size.startswith("0")):
        raise ManifestError(shown, f"size {size!r} is not a byte count", fix=_FIX)
    return oid, int(size)


def _working_tree(
    root: Path, objects: Path | None, include: held.Selection
) -> tuple[list[ManifestEntry], list[Unverified]]:
    entries: list[ManifestEntry] = []
    unverified: list[Unverified] = []
    tracked = lfs_tracked(root)
    for rel in _files(root):
        if not include.keeps(rel):
            continue
        shown = str(root / rel)
        lfs = tracked(rel)
        size = (root / rel).lstat().st_size
        head = _head(root, rel) if size <= MAX_POINTER else b""
        if _looks_like_pointer(head, lfs=lfs):
            oid, n = parse_pointer(head, shown)
            digest = ExpectedDigest("sha256", oid)
            entries.append(ManifestEntry(rel, (digest,), shown, size=n))
        elif lfs:
            checked = _checked_out(root, rel, objects)
            if checked is None:
                unverified.append(Unverified(rel, shown, _CHECKED_OUT))
            else:
                entries.append(ManifestEntry(rel, (checked,), shown, size=size))
    return entries, unverified


_CHECKED_OUT = (
    "tracked by Git LFS and checked out as its bytes, whose sha256 is no object in "
    ".git/lfs/objects: nothing to check them against"
)


def _looks_like_pointer(head: bytes, *, lfs: bool) -> bool:
    """A file that claims to be a pointer: its first line is a version line (naming git-lfs's
    spec, or any, for a file ``.gitattributes`` tracks); it is then read as one, or refused."""
    first = head.split(b"\n", 1)[0]
    if not first.startswith(b"version "):
        return False
    return lfs or any(v.encode() in first for v in _VERSIONS)


def _checked_out(root: Path, rel: str, objects: Path | None) -> ExpectedDigest | None:
    """The SHA-256 of a checked-out LFS file, when the object folder holds that oid."""
    digest = digests.of_file(root / rel)
    if objects is None or not (objects / digest.hex[:2] / digest.hex[2:4] / digest.hex).is_file():
        return None
    return ExpectedDigest("sha256", digest.hex)


def _files(root: Path) -> Iterator[str]:
    """The working tree's regular files (no link followed, ``.git`` left out), sorted."""
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        base = Path(folder).relative_to(root)
        for name in sorted(files):
            path = Path(folder) / name
            if path.is_file() and not path.is_symlink():
                yield (base / name).as_posix()


def _head(root: Path, rel: str) -> bytes:
    with Folder.root(root, refuse=held.refusal) as folder:
        *dirs, name = rel.split("/")
        with folder.folder(*dirs) as parent, parent.open(name) as f:
            return f.read(MAX_POINTER + 1)


def lfs_tracked(root: Path) -> Callable[[str], bool]:
    """Whether a file (a path relative to ``root``) is tracked by Git LFS: its ``filter``
    attribute is ``lfs`` as git resolves it, from every ``.gitattributes`` that applies (those
    above ``root`` in its repository too) and ``.git/info/attributes``."""
    absolute = root.absolute()
    top = _top(absolute) or absolute
    attributes = gitattributes.read(top, absolute)
    inside = absolute.relative_to(top).as_posix()
    prefix = "" if inside == "." else f"{inside}/"
    return lambda rel: attributes.value(os.fsencode(prefix + rel), b"filter") == b"lfs"


def _ls_files(path: Path, objects: Path | None, include: held.Selection) -> list[ManifestEntry]:
    """The entries of ``git lfs ls-files --long`` output: oid and path; the size is the
    object's, when the object folder holds it."""
    text = read_manifest(path, str(path)).decode("utf-8", "replace")
    entries = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path} line {number}"
        match = _LS_LINE.fullmatch(line)
        if match is None:
            raise ManifestError(
                where,
                f"not a 'git lfs ls-files --long' line: {line[:80]!r}",
                fix="git lfs ls-files --long > FILE  (the full 64-hex oids)",
            )
        if not include.keeps(match["path"]):
            continue
        oid = match["oid"]
        size = None
        if objects is not None:
            obj = objects / oid[:2] / oid[2:4] / oid
            size = obj.lstat().st_size if obj.is_file() and not obj.is_symlink() else None
        entries.append(
            ManifestEntry(match["path"], (ExpectedDigest("sha256", oid),), where, size=size)
        )
    if not entries:
        raise UsageError(f"{path} lists no Git LFS file", fix="git lfs ls-files --long > FILE")
    return entries
