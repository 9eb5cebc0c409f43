"""Hostile entries planted in a store where an object or its shard folder belongs: a symbolic
link (to a copy of the right bytes outside the store, so that following it would pass
unnoticed), a FIFO (no writer: a blocking open waits forever), a folder or a file."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from fixture_store.objects.digests import Digest
from fixture_store.objects.store import Store

OBJECT_KINDS = ("link", "fifo", "folder")
SHARD_KINDS = ("link", "fifo", "file")
WHAT = {"link": "symbolic link", "fifo": "FIFO", "folder": "a folder", "file": "a regular file"}


def plant(store: Store, digest: Digest, kind: str, at: str, outside: Path) -> Path:
    """Replace the object of ``digest`` (``at="object"``) or its shard folder (``"shard"``)
    with an entry of ``kind``; returns the planted path. ``outside`` receives the real bytes."""
    path = store.object_path(digest)
    if at == "shard":
        path = path.parent
    outside.mkdir(parents=True, exist_ok=True)
    moved = outside / path.name
    os.chmod(path.parent, 0o755)
    if path.is_dir():
        shutil.copytree(path, moved)
        for entry in path.iterdir():
            entry.chmod(0o644)
        shutil.rmtree(path)
    else:
        shutil.copyfile(path, moved)
        path.chmod(0o644)
        path.unlink()
    if kind == "link":
        path.symlink_to(moved)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    else:
        path.write_bytes(b"not a folder")
    return path


def cases() -> list[tuple[str, str]]:
    """(at, kind) for every hostile entry at an object's name and at its shard's."""
    return [("object", k) for k in OBJECT_KINDS] + [("shard", k) for k in SHARD_KINDS]
