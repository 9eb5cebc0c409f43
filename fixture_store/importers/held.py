"""What the importers of data people already have share: a Hugging Face cache
(:mod:`.hfcache`), a Git LFS repository (:mod:`.gitlfs`) and an installed distribution
(:mod:`.installed`) are folders, not manifests. Each module says whether it ``claims`` a path
and makes the :class:`~fixture_store.importers.plan.Plan` of its files, checked as every
import's are, with the origin :func:`~fixture_store.importers.register.register` takes.

Their files are read from folders the user did not write (a cache, ``.git``, site-packages):
each is opened through the path primitive (:mod:`fixture_store.objects.anchored`) below its
folder, never through a link, and copied to the import's scratch folder; what is checked and
stored is that copy.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fixture_store.errors import FixtureStoreError, UsageError
from fixture_store.objects import digests
from fixture_store.objects.anchored import Folder


@dataclass(frozen=True)
class Options:
    """What the command line says about a folder import besides the folder."""

    project: Path
    scratch: Path
    revision: str | None = None
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    dist: str | None = None
    dist_digest: str | None = None
    root: str | None = None  # refused: a folder import's paths are the folder's own


def refusal(path: str, what: str) -> FixtureStoreError:
    """The path primitive's refusal for a folder an import reads: it is input, not the store."""
    return UsageError(
        f"{path} is {what}; an import reads only regular files inside the folder it is given "
        "and follows no link out of it",
        fix=f"replace {path} with the file itself, or leave it out (--include)",
    )


def copy_in(folder: Folder, parts: Sequence[str], scratch: Path) -> Path | None:
    """Copy the regular file ``parts`` below ``folder`` (each component opened without
    following a link) into ``scratch``; ``None`` if it is missing."""
    *dirs, name = parts
    try:
        with folder.folder(*dirs) as parent, parent.open(name) as src:
            fd, copied = _temp(scratch)
            with os.fdopen(fd, "wb") as out:
                shutil.copyfileobj(src, out, digests.CHUNK)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return Path(copied)


def _temp(scratch: Path) -> tuple[int, str]:
    return tempfile.mkstemp(dir=scratch, prefix="held-")


@dataclass(frozen=True)
class Selection:
    """Which listed paths an import takes: ``--include`` globs (none given: every path), then
    ``--exclude`` globs. ``*`` matches across ``/``, as in ``--include 'pkg/data/*'``. The same
    for every import, manifests and folders alike."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def keeps(self, path: str) -> bool:
        return (not self.include or any(fnmatch.fnmatchcase(path, g) for g in self.include)) and (
            not any(fnmatch.fnmatchcase(path, g) for g in self.exclude)
        )


EVERY = Selection()


def selection(options: Options) -> Selection:
    """The selection the command line's ``--include`` and ``--exclude`` make."""
    return Selection(options.include, options.exclude)


def included(path: str, options: Options) -> bool:
    """Whether the command line's selection keeps ``path``."""
    return selection(options).keeps(path)
