"""A project's registry files as bytes: found, opened through the path primitive, read and
hashed, never parsed. What a verify snapshot and a transaction compare (the digests of the files
as they are now) costs only this module and :mod:`.shards`, not the record parsers: a warm
``fixture-store verify`` imports nothing else of the registry.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from fixture_store.errors import RegistryError, UsageError
from fixture_store.registry import shards

DIRNAME = "provenance"
ENV_VAR = "FIXTURE_STORE_REGISTRY"


def family_of(name: str) -> str:
    """The family of a record name: its first part, the file of ``provenance/`` it lives in."""
    return name.split("/", 1)[0]


_T = TypeVar("_T")


def read_listed(path: Path, read: Callable[[Path], _T]) -> _T | None:
    """``read(path)`` of a shard listed a moment ago; ``None`` if it is gone since: a writer
    removed it, emptied (readers take no lock, so one may list a folder while a writer
    changes it)."""
    try:
        return read(path)
    except RegistryError:
        if not os.path.lexists(path):
            return None
        raise


def read_text(path: Path) -> str:
    """The text of a registry file (see :func:`read_bytes`), which must be UTF-8."""
    try:
        return read_bytes(path).decode("utf-8")
    except UnicodeDecodeError as e:
        raise RegistryError(f"cannot read: {e}", file=str(path)) from e


def read_bytes(path: Path) -> bytes:
    """The bytes of a registry file, ``provenance/<family>.json`` or a shard
    ``provenance/<family>/<ab>.json``, opened through the path primitive from ``provenance/``:
    refused before reading unless it and its shard folder are plain (a FIFO would block the
    reader forever, a link to ``/dev/zero`` would never end, a link out of the project would be
    read as the family's records)."""
    shown = str(path)
    shard = shards.is_shard_name(path.stem) and _is_registry_dir(path.parent.parent)
    try:
        with (
            shards.registry_folder(path.parent.parent if shard else path.parent) as base,
            base.folder(path.parent.name) if shard else base as folder,
        ):
            fd = folder.open_fd(path.name)
    except OSError as e:
        raise RegistryError(f"cannot read: {e.strerror}", file=shown) from e
    with os.fdopen(fd, "rb") as f:
        try:
            return f.read()
        except OSError as e:
            raise RegistryError(f"cannot read: {e}", file=shown) from e


def _is_registry_dir(directory: Path) -> bool:
    """Whether ``directory`` is a project's ``provenance/`` (a shard's file lies one folder
    below it; a family file at ``<somewhere>/<ab>.json`` is not a shard)."""
    return directory.name == DIRNAME


def family_digests(directory: Path) -> list[tuple[str, str]]:
    """Each family's :attr:`FamilyFile.text_digest`, from the bytes of its files without
    parsing them, and one entry per shard folder without a family file (which loading
    refuses): a change to any registry file changes this list."""
    out = [(p.stem, family_digest(p)) for p in shards.family_files(directory)]
    for orphan in shards.orphan_folders(directory):
        out.append((f"{orphan.name}/", family_digest(shards.head_of(orphan))))
    return out


def family_digest(head: Path) -> str:
    """The :attr:`FamilyFile.text_digest` a family's files have now, from their bytes: its
    file's and those of every JSON file in its shard folder."""
    digests: dict[str, str] = {}
    if os.path.lexists(head):
        digests[head.name] = hashlib.sha256(read_bytes(head)).hexdigest()
    for path in shards.shard_files(head):
        data = read_listed(path, read_bytes)
        if data is not None:
            digests[shards.relative(head, path)] = hashlib.sha256(data).hexdigest()
    return shards.combined_digest(digests)


def find_root(start: str | os.PathLike[str] | None = None) -> Path:
    """The project root: from ``$FIXTURE_STORE_REGISTRY``, else the nearest one with provenance/."""
    env = os.environ.get(ENV_VAR)
    if env:
        p = Path(env).expanduser().absolute()
        return p.parent if p.name == DIRNAME else p
    here = Path(start or Path.cwd()).absolute()
    for folder in (here, *here.parents):
        if (folder / DIRNAME).is_dir():
            return folder
    raise UsageError(
        f"no {DIRNAME}/ folder in {here} or any parent",
        fix="run 'fixture-store init' in your project, or pass --registry",
    )


def create_directory(project: str | os.PathLike[str]) -> tuple[Path, bool]:
    """Make ``provenance/`` in ``project``; returns it and whether it is new."""
    directory = Path(project) / DIRNAME
    created = not directory.exists()
    directory.mkdir(parents=True, exist_ok=True)
    return directory, created


def project_root(root: str | os.PathLike[str] | None = None) -> Path:
    """The folder holding ``provenance/``: ``root`` (that folder, or ``provenance/`` itself),
    else the nearest parent of the working directory with one."""
    base = Path(root).absolute() if root is not None else find_root()
    return base.parent if base.name == DIRNAME else base
