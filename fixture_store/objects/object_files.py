"""Reading the store's object files through the path primitive (DESIGN 13), one open per object."""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

from fixture_store.objects import anchored
from fixture_store.objects.layout import SHARD_LEN


class ObjectFiles:
    """The store's object files, each opened through the path primitive (DESIGN 13): the
    folder ``objects/sha256`` is opened once, each shard folder once, and each object from its
    shard's descriptor with ``O_NOFOLLOW`` and checked to be a regular file. What verify and
    the readers of verified objects read: one open per object, as a path would cost, and a
    link, FIFO or folder at an object's name or its shard's is the store's refusal. Open for
    one run (shard folders removed meanwhile are not seen again); not shared across threads."""

    __slots__ = ("_base", "_root", "_shards")

    def __init__(self, root: Path) -> None:
        self._root = root
        self._base: anchored.Folder | None = None
        self._shards: dict[str, anchored.Folder] = {}

    def _shard(self, shard: str) -> anchored.Folder:
        folder = self._shards.get(shard)
        if folder is None:
            if self._base is None:
                with anchored.Folder.root(self._root) as root:
                    self._base = root.folder("objects", "sha256")
            folder = self._shards[shard] = self._base.folder(shard)
        return folder

    def open_fd(self, hexpart: str) -> int:
        """A read descriptor on the object ``hexpart`` (see :meth:`Store.open_object`)."""
        return self._shard(hexpart[:SHARD_LEN]).open_fd(hexpart[SHARD_LEN:])

    def open(self, hexpart: str) -> BinaryIO:
        return self._shard(hexpart[:SHARD_LEN]).open(hexpart[SHARD_LEN:])

    def close(self) -> None:
        for folder in self._shards.values():
            folder.close()
        self._shards.clear()
        if self._base is not None:
            self._base.close()
            self._base = None

    def __enter__(self) -> ObjectFiles:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
