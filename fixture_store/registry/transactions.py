"""Registry transactions (DESIGN decision 10): :func:`transaction` holds the registry lock
(``provenance/.locks/registry.lock``, a flock the kernel releases if its holder dies; the folder
ignores itself in git), re-reads what it changes under it, and replaces files through
:mod:`.writing`, so concurrent writers never lose each other's records; the next transaction
removes the temp file of a writer that died. :func:`write_family`, given a registry read
earlier, refuses to write when the file changed since. A command that also publishes objects
takes the store's writer lock first (see :mod:`fixture_store.objects.store`), then this one."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from fixture_store.errors import RegistryError, UsageError
from fixture_store.objects import anchored, fsutil
from fixture_store.objects.digests import Awaited, Digest
from fixture_store.registry import shards
from fixture_store.registry.documents import LOCK_NAME, LOCKS_DIRNAME
from fixture_store.registry.family import FamilyFile, Registry
from fixture_store.registry.known_failures import KnownFailure
from fixture_store.registry.raw_files import DIRNAME, family_digest, family_of, project_root
from fixture_store.registry.reading import (
    load,
    load_file,
    orphan_error,
    refuse_orphans,
)
from fixture_store.registry.records import Record, check_family
from fixture_store.registry.sources import NoSource
from fixture_store.registry.writing import replace_family

# The temp file of a family file being replaced: ``.<family>.json.<random>.tmp``.
_TEMP_NAME = re.compile(r"\.[a-z0-9][a-z0-9_-]*\.json\.[A-Za-z0-9_]+\.tmp")


class Transaction:
    """A read-modify-write of one project's registry, made under its lock (see
    :func:`transaction`): what it reads is the registry as it is now, what it writes replaces a
    family file atomically."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._read: dict[str, FamilyFile | None] = {}

    @property
    def directory(self) -> Path:
        return self.root / DIRNAME

    def family(self, family: str, known: FamilyFile | None = None) -> FamilyFile | None:
        """The family's file as it is on disk now; ``None`` if it has none yet. ``known``, the
        family as read before the transaction, is returned as it is if the file still holds
        the very text it was parsed from (parsing a large family again costs a second)."""
        check_family(family)
        if family not in self._read:
            path = self.directory / f"{family}.json"
            self._read[family] = _reread(path, known)
        return self._read[family]

    def registry(self, known: Registry | None = None) -> Registry:
        """Every family file as it is on disk now; the families of ``known`` whose files are
        unchanged are reused (see :meth:`family`)."""
        if known is None:
            return load(self.root)
        if not self.directory.is_dir():
            raise UsageError(f"{self.directory} does not exist", fix="fixture-store init")
        refuse_orphans(self.directory)
        for path in shards.family_files(self.directory):
            try:
                check_family(path.stem)
            except UsageError:
                load_file(path)  # raises the registry error naming the file
            self.family(path.stem, known=known.families.get(path.stem))
        return Registry(self.root, {f: ff for f, ff in sorted(self._read.items()) if ff})

    def write(
        self,
        family: str,
        records: Iterable[Record],
        *,
        description: str | None = None,
        known_failures: Iterable[KnownFailure] | None = None,
    ) -> Path:
        """Replace the family's file: ``records`` are its complete set of valid records; its
        invalid records (but those ``records`` name) stay as the file states them, and so do
        the description and known failures unless given (``""`` and ``()``: none)."""
        existing = self.family(family)
        path = replace_family(
            self.directory,
            family,
            records,
            existing=existing,
            description=description,
            known_failures=known_failures,
        )
        self._read.pop(family, None)
        return path


def _reread(path: Path, known: FamilyFile | None) -> FamilyFile | None:
    if known is not None and known.text_digest:
        try:
            now: str | None = family_digest(path)
        except RegistryError:
            now = None  # load_file says what is wrong
        if now == known.text_digest:
            return known
    if os.path.lexists(path):
        return load_file(path)
    if shards.shard_files(path):
        raise orphan_error(shards.folder(path))
    return None


_held = threading.local()


@contextlib.contextmanager
def transaction(root: str | os.PathLike[str] | None = None) -> Iterator[Transaction]:
    """Lock the registry of the project at ``root`` for a read-modify-write.

    Every change to a family file happens in one: read the family through the transaction
    (never a registry loaded before it), check, write. Concurrent transactions, in other
    processes or threads, wait for each other; one nested in another on the same thread joins
    it. On entry, temp files of writers that died mid-write are removed (under the lock no other
    writer is writing).
    """
    base = project_root(root)
    held: set[Path] = _held.__dict__.setdefault("roots", set())
    if base in held:
        yield Transaction(base)
        return
    directory = base / DIRNAME
    locks = directory / LOCKS_DIRNAME
    try:
        lock_folder = _lock_folder(directory)
    except OSError as e:
        raise RegistryError(
            f"cannot create the registry's lock folder {locks}: {e.strerror}",
            fix="make provenance/ writable",
        ) from e
    with lock_folder, fsutil.flocked(locks / LOCK_NAME, folder=lock_folder):
        held.add(base)
        try:
            _remove_dead_temps(directory)
            yield Transaction(base)
        finally:
            held.discard(base)


def _lock_folder(directory: Path) -> anchored.Folder:
    """``provenance/.locks``, made if missing (with a ``.gitignore``: the lock folder is no
    part of the reviewed registry), reached through the path primitive."""
    directory.mkdir(parents=True, exist_ok=True)
    with shards.registry_folder(directory) as base:
        locks = base.folder(LOCKS_DIRNAME, create=True)
    try:
        if locks.regular_size(".gitignore") is None:
            locks.write_atomically(".gitignore", b"*\n", temp=".gitignore.")
    except BaseException:
        locks.close()
        raise
    return locks


def _remove_dead_temps(directory: Path, *, shard_folders: bool = True) -> None:
    """Temp files of writers that died, beside the family files and in the shard folders."""
    with shards.registry_folder(directory) as base:
        _remove_temps_in(base, shard_folders=shard_folders)


def _remove_temps_in(folder: anchored.Folder, *, shard_folders: bool) -> None:
    for entry in list(folder.scandir()):
        if _TEMP_NAME.fullmatch(entry.name):
            folder.unlink(entry.name)
        elif shard_folders and not entry.name.startswith(".") and entry.is_dir():
            with folder.folder(entry.name) as sub:  # a link is refused, never descended into
                _remove_temps_in(sub, shard_folders=False)


def write_family(
    registry: Registry,
    family: str,
    records: Iterable[Record],
    *,
    description: str | None = None,
    known_failures: Iterable[KnownFailure] | None = None,
) -> Path:
    """Write a family file atomically in the stable format. Records are the complete set.

    ``registry`` is what the records were derived from: if the family's file changed since it
    was read (another writer), nothing is written and :class:`UsageError` says so, instead of
    the other writer's records being lost. A read-modify-write that should merge with
    concurrent writers reads under :func:`transaction` instead.
    """
    check_family(family)
    with transaction(registry.root) as tx:
        read = registry.families.get(family)
        _check_unchanged(read, tx.family(family, known=read), tx.directory, family)
        return tx.write(family, records, description=description, known_failures=known_failures)


def _check_unchanged(
    read: FamilyFile | None, now: FamilyFile | None, directory: Path, family: str
) -> None:
    if read is now:  # the file holds the text ``read`` was parsed from (see Transaction.family)
        return

    def state(f: FamilyFile | None) -> object:
        if f is None:
            return None
        return (dict(f.records), sorted(f.invalid), f.known_failures, f.description)

    if state(read) != state(now):
        raise UsageError(
            f"{directory / f'{family}.json'} changed since this registry was read (another "
            "writer); nothing was written",
            fix="load the registry again and redo the change",
        )


@dataclass(frozen=True)
class Fill:
    """The bytes that filled a gap. For a gap known without its size: the digest they were
    checked against (``proved``, what the gap awaited), and their SHA-256, size and BLAKE3,
    taken from the same bytes. For a gap that kept its digest and size: that digest, verified
    in the store (``proved`` is ``None``: the digest itself was the check)."""

    name: str
    proved: Awaited | None
    digest: Digest
    blake3: str | None = None


def record_fills(registry: Registry, fills: Sequence[Fill]) -> frozenset[str]:
    """Record each fill's SHA-256 and size as its record's digest and lift its gap
    (:meth:`Record.filled`; a gap that kept its digest keeps it, only the gap goes), in one
    transaction: each family file written once. A record that is no longer the gap the bytes
    were checked for (changed or removed since ``registry`` was read), or that has no source
    to stand on once lifted, is left as it is. The names whose records now hold their fill's
    digest without a gap: recorded here, or by another writer first (two fetches at once)."""
    by_family: dict[str, list[Fill]] = {}
    for fill in fills:
        by_family.setdefault(family_of(fill.name), []).append(fill)
    recorded: set[str] = set()
    with transaction(registry.root) as tx:
        for family, group in sorted(by_family.items()):
            now = tx.family(family, known=registry.families.get(family))
            records = dict(now.records) if now is not None else {}
            written = False
            for fill in group:
                old = records.get(fill.name)
                if old is not None and old.gap is None and old.digest == fill.digest:
                    recorded.add(fill.name)  # lifted by another writer, to these very bytes
                    continue
                new = old.filled(fill.digest, proved=fill.proved) if old is not None else None
                if new is None or isinstance(new.source, NoSource):
                    continue
                records[fill.name] = dataclasses.replace(new, blake3=new.blake3 or fill.blake3)
                recorded.add(fill.name)
                written = True
            if written:
                tx.write(family, records.values())
    return frozenset(recorded)
