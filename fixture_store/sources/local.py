"""The local source: a file or folder inside the project, still verified before it is stored."""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from fixture_store.objects import names
from fixture_store.objects.trees import check_member_path
from fixture_store.registry import LocalSource, Record
from fixture_store.registry import project as project_mod
from fixture_store.registry.files import DIRNAME
from fixture_store.sources import FetchContext, SourceError, put_object, put_tree, source_as


def resolve(root: Path, relpath: str, record: Record) -> Path:
    """The source path under the project root; never outside it, never through a link."""
    parts = [p for p in relpath.split("/") if p != "."]
    if not parts:
        return root
    check_member_path("/".join(parts))
    path = root.joinpath(*parts)
    probe = root
    for part in parts:
        probe = probe / part
        if probe.is_symlink():
            raise SourceError(record.name, f"local source {relpath!r} goes through a link {probe}")
    return path


def fetch(ctx: FetchContext, record: Record) -> None:
    relpath = source_as(record, LocalSource).path
    path = resolve(ctx.root, relpath, record)
    fix = f"restore {relpath} in the project (git checkout / git lfs pull), then fetch again"
    tree = record.tree
    if tree is not None:
        if not path.is_dir():
            raise SourceError(record.name, f"local source folder {relpath!r} is missing", fix=fix)

        def open_member(member: str) -> BinaryIO:
            member_path = resolve(path, member, record)
            if not member_path.is_file():
                raise SourceError(
                    record.name,
                    f"member {member!r} is missing from local source {relpath!r}",
                    fix=fix,
                )
            return open(member_path, "rb")

        put_tree(ctx, record, tree, open_member)
        return
    if not path.is_file():
        raise SourceError(record.name, f"local source file {relpath!r} is missing", fix=fix)
    if ctx.needs(record.object):
        with open(path, "rb") as f:
            _refuse_lfs_pointer(f, relpath, record)
            put_object(ctx, record, f, record.object)


# A Git LFS pointer (https://git-lfs.github.com/spec/v1): what a checkout without git-lfs, or
# before `git lfs pull`, holds in place of the bytes. git-lfs reads none larger than 1024 bytes.
_LFS_POINTER = re.compile(
    rb"version https://git-lfs\.github\.com/spec/v1\n(?:.*\n)*?oid sha256:([0-9a-f]{64})\n"
)
_LFS_POINTER_MAX = 1024


def _refuse_lfs_pointer(f: BinaryIO, relpath: str, record: Record) -> None:
    """A local source that is a Git LFS pointer names the bytes it stands for, not holds them:
    refused with the command that brings them (the file is read from its start afterwards)."""
    head = f.read(_LFS_POINTER_MAX + 1)
    f.seek(0)
    match = _LFS_POINTER.match(head) if len(head) <= _LFS_POINTER_MAX else None
    if match is None or record.object.size == len(head):
        return
    oid = match[1].decode()
    same = "these bytes" if oid == record.object.hex else f"other bytes (sha256:{oid})"
    raise SourceError(
        record.name,
        f"local source {relpath!r} is a Git LFS pointer to {same}, not the bytes themselves",
        fix=f"git lfs pull --include {relpath!r}  (the bytes replace the pointer), then fetch "
        "again",
    )


# -- orphans --------------------------------------------------------------------------------------
# A *source folder* is a folder that holds the project's local sources: the folder of every local
# file source, the folder holding every local tree source, and (recursively) every tree source
# folder itself. The project root and provenance/ are never source folders: a local source at
# the root does not make every file of the project an orphan. An *orphan* is an entry in a source
# folder that no record names: directly inside the folder of a file or tree source (its
# subfolders are other folders, judged only if they hold sources themselves), anywhere inside a
# tree source folder that the tree's manifest does not list. Names starting with '.'
# (.gitignore, .gitattributes) are the project's housekeeping, never orphans.
@dataclass(frozen=True)
class Orphan:
    """A file in a source folder that no record names, by its path in the project."""

    path: str
    folder: str

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "folder": self.folder}

    @property
    def fix(self) -> str:
        return (
            f"register it (fixture-store add {names.shell(self.path)} --name FAMILY/NAME "
            "--kind KIND) or remove it"
        )


def orphans(root: Path, records: Iterable[Record], ignore: Iterable[str] = ()) -> list[Orphan]:
    """Every orphan under the project ``root``, sorted by path (see the rules above), but the
    paths that match a glob of ``ignore`` (the project's ``orphans-ignore``) and the manifests
    the records were imported from (``metadata.imported_from.manifest``)."""
    named: set[str] = set()
    folders: set[str] = set()
    trees: dict[str, frozenset[str]] = {}
    for record in records:
        if not isinstance(record.source, LocalSource):
            continue
        named.update(_imported_from(record))
        relpath = "/".join(p for p in record.source.path.split("/") if p != ".")
        if not relpath:
            continue  # the project root itself: not a folder of sources (see above)
        named.add(relpath)
        folders.add(posixpath.dirname(relpath))
        if record.tree is not None:
            trees[relpath] = frozenset(record.tree.members)
    folders -= {"", DIRNAME}
    found = [o for folder in folders for o in _unnamed_in(root, folder, named | set(trees))]
    for folder, members in trees.items():
        found.extend(_unlisted_in(root, folder, members))
    patterns = tuple(ignore)
    kept = {o for o in found if not project_mod.ignored(o.path, patterns)}
    return sorted(kept, key=lambda o: o.path)


def _imported_from(record: Record) -> tuple[str, ...]:
    """The project-relative manifest a record was imported from, if any: never an orphan."""
    origin = (record.metadata or {}).get("imported_from")
    manifest = origin.get("manifest") if isinstance(origin, Mapping) else None
    return (manifest,) if isinstance(manifest, str) else ()


def _unnamed_in(root: Path, folder: str, named: set[str]) -> Iterator[Orphan]:
    try:
        entries = list(os.scandir(root / folder))
    except (FileNotFoundError, NotADirectoryError):
        return  # a missing source folder is a missing source: fetch and verify say so
    for entry in entries:
        path = f"{folder}/{entry.name}"
        if entry.name.startswith(".") or path in named:
            continue
        if entry.is_dir(follow_symlinks=False):
            continue
        yield Orphan(path, folder)


def _unlisted_in(root: Path, folder: str, members: frozenset[str]) -> Iterator[Orphan]:
    base = root / folder
    if base.is_symlink() or not base.is_dir():
        return
    for dirpath, dirnames, filenames in os.walk(base):
        links = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        dirnames[:] = sorted(d for d in dirnames if d not in links and not d.startswith("."))
        rel = Path(dirpath).relative_to(base).as_posix()
        for name in (*filenames, *links):
            member = name if rel == "." else f"{rel}/{name}"
            if not name.startswith(".") and member not in members:
                yield Orphan(f"{folder}/{member}", folder)
