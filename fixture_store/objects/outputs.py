"""The one output primitive (DESIGN 18): every file a command writes at a path a user names.

``--output``, ``-o``, ``--report``, ``--metrics``, ``--plot``, ``report --html DIR``, the
certificates, the dumps: a :class:`Target` is the path the user named and the folders it must
stay out of (the store). Writing it

- opens the folder the file belongs in (the user chose it: a link there is followed once, as
  :meth:`anchored.Folder.root` follows a trusted root) and refuses it when that folder is, or is
  inside, one of the folders to stay out of: the check walks up from the opened folder's
  descriptor (``..`` after ``..``, by device and inode), so neither a link in the path nor a
  rename meanwhile can put the file into the store unnoticed;
- writes a temp file beside the target (``O_CREAT | O_EXCL``), fsyncs it and renames it over the
  name (:meth:`anchored.Folder.writing`): a link at the last component is replaced, never written
  through, so a link to a store object (or to any file) never has its bytes changed; a folder
  there is refused.

A folder target (``report --html DIR``) is opened the same way and its files are written
through the path primitive. A refusal is a :class:`UsageError` naming the path and the fix.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from fixture_store.errors import UsageError
from fixture_store.objects import anchored

# Far more than any real folder depth: a loop (a bind mount of a folder into itself) ends.
_MAX_DEPTH = 4096


@dataclass(frozen=True)
class Target:
    """A path a user named for a command to write, and the folders it must never be inside
    (``outside``: the store). Build derived files (a run report beside a tracked one) with
    :meth:`beside`, so they keep the same rule."""

    path: Path
    outside: tuple[Path, ...] = field(default=())
    what: str = "output"

    def __str__(self) -> str:
        return str(self.path)

    def beside(self, path: Path) -> Target:
        """Another file the same command writes (derived from this one's path)."""
        return Target(path, self.outside, self.what)

    @contextlib.contextmanager
    def writing(self) -> Iterator[BinaryIO]:
        """A new file for the block, renamed over the target when the block ends without an
        error (a failed block leaves the target as it was)."""
        name = self.path.name
        if not name or name in (".", ".."):
            raise UsageError(
                f"the {self.what} {self.path} names no file", fix="name a file, not a folder"
            )
        with self._folder(self.path.parent) as folder, folder.writing(name) as out:
            yield out

    def write_bytes(self, data: bytes | Iterable[bytes]) -> None:
        with self.writing() as out:
            for chunk in [data] if isinstance(data, bytes) else data:
                out.write(chunk)

    def write_text(self, text: str) -> None:
        self.write_bytes(text.encode("utf-8"))

    def folder(self, refuse: anchored.Refusal | None = None) -> anchored.Folder:
        """The target as a folder (created if missing), opened, to write files into through the
        path primitive (``refuse``: what a link below it is refused with); the caller closes
        it."""
        return self._folder(self.path, refuse)

    def check_wipeable(self) -> Path:
        """The target as a folder a command empties before it writes (``regenerate --scratch``):
        created if missing, refused inside the store (:meth:`folder`) and refused when the store
        is inside it, since emptying it would delete the store. Returns its path."""
        with self.folder() as folder:
            for root in self.outside:
                try:
                    fd = os.open(root, os.O_RDONLY | anchored.FOLDER_FLAGS)
                except OSError:
                    continue  # no store there yet: nothing to delete
                try:
                    holds = _walks_to(fd, {_identity(os.fstat(folder.fd)): self.path})
                finally:
                    os.close(fd)
                if holds is not None:
                    raise UsageError(
                        f"the {self.what} {self.path} holds the store {root}: it is emptied "
                        "before it is written, which would delete the store",
                        fix="name a folder outside the store and not above it",
                    )
        return self.path

    def _refusal(self, path: str, what: str) -> UsageError:
        return UsageError(
            f"cannot write the {self.what} {self.path}: {path} is {what}",
            fix=f"remove {path}, or name another path",
        )

    def _folder(self, path: Path, refuse: anchored.Refusal | None = None) -> anchored.Folder:
        """The folder ``path``, opened: its nearest existing ancestor is opened (followed: the
        user chose it) and checked to be outside the store before anything is created; the
        missing folders below it are then made through the path primitive."""
        refuse = refuse or self._refusal
        existing, missing = Path(os.path.abspath(path)), list[str]()
        while not os.path.lexists(existing) and existing.parent != existing:
            missing.insert(0, existing.name)
            existing = existing.parent
        try:
            base = anchored.Folder.root(existing, refuse=refuse)
        except OSError as e:
            raise UsageError(
                f"cannot write the {self.what} {self.path}: {e.strerror or e}",
                fix="name a path in a folder you can write",
            ) from None
        with base:
            inside = _inside(base.fd, self.outside)
            if inside is not None:
                raise UsageError(
                    f"the {self.what} {self.path} is inside the store {inside}: a file "
                    "written there could replace or pose as a verified object",
                    fix="write it outside the store (beside the project, or in a temp folder)",
                )
            try:
                return base.folder(*missing, create=True)
            except OSError as e:
                raise UsageError(
                    f"cannot write the {self.what} {self.path}: {e.strerror or e}",
                    fix="name a path in a folder you can write",
                ) from None


def target(path: Target | str | os.PathLike[str], *, outside: Iterable[Path] = ()) -> Target:
    """``path`` as a :class:`Target` (a target is returned as it is)."""
    if isinstance(path, Target):
        return path
    return Target(Path(path), tuple(outside))


def _identity(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def _inside(fd: int, roots: Iterable[Path]) -> Path | None:
    """The root among ``roots`` that the open folder ``fd`` is, or is below (``None``: none):
    the folder's ancestors are walked by ``..`` from the descriptor, never by a path."""
    wanted: dict[tuple[int, int], Path] = {}
    for root in roots:
        with contextlib.suppress(OSError):  # a store not made yet holds nothing to protect
            st = os.stat(root)
            if stat.S_ISDIR(st.st_mode):
                wanted[_identity(st)] = root
    return _walks_to(fd, wanted) if wanted else None


def _walks_to(fd: int, wanted: dict[tuple[int, int], Path]) -> Path | None:
    """The first of ``wanted`` (by device and inode) met walking up from the open folder
    ``fd`` by ``..``, itself included; ``None`` at the file system's root."""
    current = os.dup(fd)
    try:
        seen = _identity(os.fstat(current))
        for _ in range(_MAX_DEPTH):
            if seen in wanted:
                return wanted[seen]
            parent = os.open("..", os.O_RDONLY | anchored.FOLDER_FLAGS, dir_fd=current)
            os.close(current)
            current = parent
            up = _identity(os.fstat(current))
            if up == seen:  # the file system's root
                return None
            seen = up
        return None
    finally:
        os.close(current)


__all__ = ["Target", "target"]
