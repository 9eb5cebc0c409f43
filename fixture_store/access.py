"""Verified access: the only way library users, the pytest plugin and the comparators get bytes.

Every accessor verifies first (the verified-state cache makes repeats cost a stat) and raises a
typed :class:`~fixture_store.errors.ArtifactError` instead of handing out unverified data.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from fixture_store import registry as registry_mod
from fixture_store.errors import UsageError
from fixture_store.objects import fsutil
from fixture_store.objects.store import Store
from fixture_store.objects.trees import Tree
from fixture_store.registry import Record, Registry
from fixture_store.verify import Result, Verifier


@dataclass
class Fixtures:
    """A verified view of one store and one registry."""

    store: Store
    registry: Registry
    full: bool = False
    # Save verified-state cache entries in batches rather than after each artifact; the owner
    # calls close() at the end (a long-lived view, as the pytest plugin keeps for a session).
    batch_cache_writes: bool = False
    _verifier: Verifier = field(init=False, repr=False)
    _results: dict[str, Result] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self._verifier = Verifier(self.store, full=self.full)

    @classmethod
    def open(
        cls,
        store: str | os.PathLike[str] | None = None,
        registry: str | os.PathLike[str] | None = None,
        *,
        full: bool = False,
    ) -> Fixtures:
        return cls(Store.at(store), registry_mod.load(registry), full=full)

    def record(self, name: str) -> Record:
        return self.registry.get(name)

    def check(self, name: str) -> Result:
        """Verify ``name`` once per view and return the result (never raises for bad data)."""
        from fixture_store.verify import verify_names

        with self._lock:
            cached = self._results.get(name)
        if cached is not None:
            return cached
        result = verify_names(
            self.store,
            self.registry,
            [name],
            workers=1,
            verifier=self._verifier,
            flush=not self.batch_cache_writes,
        )[0]
        with self._lock:
            self._results[name] = result
        return result

    def close(self) -> None:
        """Save what the verified-state cache learnt (needed with ``batch_cache_writes``)."""
        self._verifier.cache.flush()

    def verified(self, name: str) -> Record:
        """The record of ``name`` after its bytes verified; raises a typed error otherwise."""
        self.check(name).raise_for_status()
        return self.registry.get(name)

    def path(self, name: str) -> Path:
        """Path of a verified single-object artifact (read-only; never write to it)."""
        record = self.verified(name)
        if record.is_tree:
            raise UsageError(f"{name} is a tree; use tree({name!r})")
        return self.store.object_path(record.object)

    def open_bytes(self, name: str) -> BinaryIO:
        return open(self.path(name), "rb")

    def read_bytes(self, name: str) -> bytes:
        return self.path(name).read_bytes()

    def tree(self, name: str) -> Path:
        """A folder holding the verified members of a tree artifact (links to the objects)."""
        return checkout_tree(self.store, self.verified(name))


def checkout_tree(store: Store, record: Record) -> Path:
    """The checkout of a tree record whose objects verified; UsageError for a single object."""
    tree = record.tree
    if tree is None:
        raise UsageError(f"{record.name} is not a tree; use path({record.name!r})")
    return checkout(store, tree, record.object.hex)


def checkout(store: Store, tree: Tree, key: str) -> Path:
    """Materialise a tree under ``trees/<key>`` as hard links to its (verified) objects.

    Built in a staging folder and renamed into place, so a crash never leaves a half tree. An
    existing checkout is reused only if every member is still the same inode as its object.
    """
    final = store.root / "trees" / key
    if final.is_dir() and _checkout_intact(store, tree, final):
        return final
    store.ensure()
    staging = Path(tempfile.mkdtemp(dir=store.tmp_dir, prefix="tree-"))
    try:
        for member, digest in tree:
            target = staging / member
            target.parent.mkdir(parents=True, exist_ok=True)
            source = store.object_path(digest)
            try:
                os.link(source, target)
            except OSError:
                shutil.copyfile(source, target)
                os.chmod(target, 0o444)
        final.parent.mkdir(parents=True, exist_ok=True)
        if final.exists():
            fsutil.remove_tree(final)
        try:
            os.rename(staging, final)
        except OSError:
            if not (final.is_dir() and _checkout_intact(store, tree, final)):
                raise
    finally:
        if staging.exists():
            fsutil.remove_tree(staging)
    return final


def _checkout_intact(store: Store, tree: Tree, folder: Path) -> bool:
    count = 0
    for dirpath, _dirs, files in os.walk(folder):
        count += len(files)
        del dirpath
    if count != len(tree):
        return False
    for member, digest in tree:
        try:
            if not os.path.samefile(folder / member, store.object_path(digest)):
                return False
        except OSError:
            return False
    return True
