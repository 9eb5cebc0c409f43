"""Where a family's records live: one file, or a folder of shards once the file grows large.

A family starts as one file, ``provenance/<family>.json``. When writing it would make that file
larger than :data:`SHARD_ABOVE` bytes, the family is written as :data:`COUNT` shards instead:
``provenance/<family>/<ab>.json``, where ``ab`` is the first two hex digits of the SHA-256 of
the record's name (:func:`shard_of`). A record's shard depends on its name alone, so adding or
changing records rewrites only the shards they fall in, and a reviewer reads a change as the
diff of those few files. The family's file stays, holding ``"shards": 256`` and the family's
description and known failures; each shard is a registry document of its own (format version
and records only). A sharded family stays sharded.

This module knows the layout (names, paths and the digest that pins a family's bytes); reading
and writing the documents is :mod:`fixture_store.registry.files`'s job.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from fixture_store.errors import RegistryError
from fixture_store.objects import anchored

# Shards per sharded family: the first byte of a SHA-256, two hex digits.
COUNT = 256
# A family's file is sharded once it would grow past this: 8 MiB is a few thousand typical
# records, far below what git hosts refuse (100 MB) and about where their web views give up.
SHARD_ABOVE = 8 * 1024 * 1024
_SHARD_NAME = re.compile(r"[0-9a-f]{2}")


def shard_of(name: str) -> str:
    """The shard a record's name falls in: two hex digits, stable for the name."""
    return hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:2]


def is_shard_name(stem: str) -> bool:
    return _SHARD_NAME.fullmatch(stem) is not None


def folder(head: Path) -> Path:
    """The shard folder beside a family's file: ``provenance/<family>/``."""
    return head.parent / head.stem


def head_of(folder: Path) -> Path:
    """The family's file a shard folder belongs to: ``provenance/<family>.json`` (the inverse
    of :func:`folder`; ``with_suffix`` would cut a folder name at its last dot)."""
    return folder.parent / f"{folder.name}.json"


def shard_path(head: Path, shard: str) -> Path:
    return folder(head) / f"{shard}.json"


def refusal(path: str, what: str) -> RegistryError:
    """The registry's refusal of a link or a special file where it keeps a folder or a file:
    never followed, never skipped (its records would vanish, and gc would collect their
    objects)."""
    return RegistryError(
        f"is {what}; the registry is plain folders and reviewed JSON files, and fixture-store "
        "never reads or writes through a link there",
        file=path,
        fix=f"replace {path} with the family's folder or JSON file it stands for, or remove it",
    )


def registry_folder(directory: Path) -> anchored.Folder:
    """``provenance/`` (trusted, as the project names it): every folder and file below it is
    reached through the path primitive (DESIGN 13)."""
    return anchored.Folder.root(directory, refuse=refusal)


def family_files(directory: Path) -> list[Path]:
    """The family files of ``provenance/`` (its ``*.json`` entries), sorted, from one listing
    of the folder opened through the path primitive; each is then read through it too (a link
    or a special file at a family's name is refused there, never followed)."""
    with registry_folder(directory) as base:
        names = base.names()
    return sorted(directory / name for name in names if name.endswith(".json"))


def shard_files(head: Path) -> list[Path]:
    """The JSON files in the family's shard folder, sorted; none if it has no folder. Other
    files there (a temp file of a write in progress, a note) are not registry files. A shard
    folder that is a link or not a folder is refused."""
    try:
        with registry_folder(head.parent) as directory:
            base = directory.find(folder(head).name)
            if base is None:
                return []
            with base:
                names = base.names()
    except FileNotFoundError:
        return []
    return sorted(folder(head) / name for name in names if name.endswith(".json"))


def orphan_folders(directory: Path) -> list[Path]:
    """Folders of ``provenance/`` that hold JSON files but have no family file beside them:
    shards without the file that says they are shards (the lock folder is hidden, never one)."""
    out = []
    with registry_folder(directory) as base:
        for entry in sorted(base.scandir(), key=lambda e: e.name):
            if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
                continue  # a link is never a shard folder: it is not followed
            path = directory / entry.name
            if os.path.lexists(head_of(path)):
                continue
            with base.folder(entry.name) as sub:
                if any(name.endswith(".json") for name in sub.names()):
                    out.append(path)
    return out


def relative(head: Path, path: Path) -> str:
    """A registry file's name within its family: ``<family>.json`` or ``<family>/<ab>.json``."""
    return path.name if path == head else f"{head.stem}/{path.name}"


def combined_digest(digests: Mapping[str, str]) -> str:
    """One digest for a family's files, given each file's SHA-256 by :func:`relative` name.
    A family of one file has that file's digest, so a change of layout is a change of digest
    and an unsharded registry keeps the digests it always had."""
    if len(digests) == 1:
        return next(iter(digests.values()))
    h = hashlib.sha256()
    for name, digest in sorted(digests.items()):
        h.update(f"{name}\0{digest}\0".encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def grouped(names: Iterable[str]) -> dict[str, list[str]]:
    """Names by the shard they fall in."""
    out: dict[str, list[str]] = {}
    for name in names:
        out.setdefault(shard_of(name), []).append(name)
    return out
