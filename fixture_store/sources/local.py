"""The local source: a file or folder inside the project, still verified before it is stored."""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

from fixture_store.objects.trees import check_member_path
from fixture_store.registry import LocalSource, Record
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
            put_object(ctx, record, f, record.object)
