"""A loaded registry: each family's parsed file (:class:`FamilyFile`) and the project's
families (:class:`Registry`), with the lookups every command makes (a name, its nearest
spellings, a selection of names and families)."""

from __future__ import annotations

import fnmatch
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fixture_store.errors import RegistryError, UnknownArtifactError, UsageError
from fixture_store.objects import names
from fixture_store.objects.gcpause import cyclic_gc_paused
from fixture_store.registry import shards
from fixture_store.registry.known_failures import KnownFailure
from fixture_store.registry.lazy_records import LazyRecords
from fixture_store.registry.raw_files import DIRNAME, family_of
from fixture_store.registry.records import Record


@dataclass(frozen=True)
class FamilyFile:
    """One parsed registry file."""

    path: Path
    family: str
    records: Mapping[str, Record]
    invalid: Mapping[str, RegistryError]
    known_failures: tuple[KnownFailure, ...] = ()
    description: str | None = None
    # SHA-256 of the text it was parsed from: a transaction that finds the file unchanged reuses
    # this parse instead of parsing it again under the lock.
    text_digest: str = field(default="", compare=False)
    # Each invalid record as the file states it (never changed; not frozen, as it may nest too
    # deep to): a write of the family keeps it for the reviewer to fix, unless the write
    # replaces that very record.
    invalid_json: Mapping[str, Any] = field(default_factory=dict, compare=False)
    # The SHA-256 of each file read, by its name within the family (``<family>.json``,
    # ``<family>/<ab>.json``); ``text_digest`` combines them. Writes skip unchanged files.
    digests: Mapping[str, str] = field(default_factory=dict, compare=False)
    sharded: bool = False

    @cyclic_gc_paused()
    def kinds(self) -> dict[str, str | None]:
        """Each record's name, sorted, with its kind (``None``: an invalid record), what test
        collection keeps of a family: records a lazy mapping holds unbuilt stay unbuilt (see
        :meth:`.lazy_records.LazyRecords.kinds`)."""
        records = self.records
        kinds: dict[str, str | None] = {}
        if isinstance(records, LazyRecords):
            kinds.update(records.kinds())
        else:
            kinds.update((n, r.kind.value) for n, r in records.items())
        kinds.update(dict.fromkeys(self.invalid))
        return dict(sorted(kinds.items()))

    def file_of(self, name: str) -> Path:
        """The file that holds (or would hold) the record ``name``."""
        return shards.shard_path(self.path, shards.shard_of(name)) if self.sharded else self.path


@dataclass(frozen=True)
class Registry:
    """All registry files of a project, loaded."""

    root: Path
    families: Mapping[str, FamilyFile] = field(default_factory=dict)

    @property
    def directory(self) -> Path:
        return self.root / DIRNAME

    def records(self) -> Iterator[Record]:
        for fam in self.families.values():
            yield from fam.records.values()

    def invalid(self) -> Iterator[tuple[str, RegistryError]]:
        for fam in self.families.values():
            yield from fam.invalid.items()

    def invalid_summary(self) -> str | None:
        """How many records are invalid and the first of them, with why (``None``: none is):
        what a refusal to decide garbage while one is invalid says."""
        invalid = dict(self.invalid())
        if not invalid:
            return None
        first = sorted(invalid)[0]
        return f"{len(invalid)} invalid record(s) (first: {first}: {invalid[first].about(first)})"

    def names(self) -> list[str]:
        return sorted(n for fam in self.families.values() for n in (*fam.records, *fam.invalid))

    def known_failures(self) -> Iterator[KnownFailure]:
        for fam in self.families.values():
            yield from fam.known_failures

    def get(self, name: str) -> Record:
        """The valid record for ``name``; typed errors for unknown names and invalid records."""
        from fixture_store.errors import InvalidRecordError

        if isinstance(name, str) and not name.isascii():
            name = unicodedata.normalize("NFC", name)  # as the registry holds it (names.Name)
        fam = self.families.get(family_of(name)) if isinstance(name, str) else None
        if fam is not None:
            if name in fam.records:
                return fam.records[name]
            if name in fam.invalid:
                err = fam.invalid[name]
                fix = err.fix or f"edit {fam.file_of(name)}"
                raise InvalidRecordError(name, err.about(name), fix=fix)
        near = self.nearest(name) if isinstance(name, str) else []
        if near:
            raise UnknownArtifactError(
                name,
                f"no record in the registry; did you mean {' or '.join(near)}?",
                fix=f"use the record's name as registered: {names.shell(near[0])} "
                "(fixture-store list)",
            )
        raise UnknownArtifactError(
            name,
            "no record in the registry; nothing without a record is trusted",
            fix=f"register it: fixture-store add PATH --name {names.shell(name)} --kind KIND",
        )

    def nearest(self, name: str, limit: int = 3) -> list[str]:
        """The registered names ``name`` is most likely a typing of: the same name with its file
        extension (``ref/logits`` for ``ref/logits.npz``) or without it first, then the
        closest by :mod:`difflib`'s ratio (at least 0.75)."""
        import difflib

        every = self.names()
        stem = name.rsplit("/", 1)[-1]
        same = [
            n
            for n in every
            if (n.startswith(f"{name}.") and "/" not in n[len(name) :])
            or ("." in stem and n == name.rsplit(".", 1)[0])
        ]
        close = difflib.get_close_matches(name, every, n=limit, cutoff=0.75)
        return list(dict.fromkeys([*same, *close]))[:limit]

    def select(self, names: Iterable[str] = (), families: Iterable[str] = ()) -> list[str]:
        """Names matching the explicit names (glob patterns allowed) and families; all if none."""
        names, families = list(names), list(families)
        every = self.names()
        if not names and not families:
            return every
        chosen: set[str] = set()
        # One pass over the names for each question (a set, and the names by family), never one
        # per pattern or family: selecting thousands of names stays linear.
        by_family: dict[str, list[str]] = {}
        for n in every if families else ():
            by_family.setdefault(family_of(n), []).append(n)
        for fam in families:
            if fam not in self.families:
                raise UsageError(
                    f"no family {fam!r} in {self.directory}",
                    fix=f"one of: {', '.join(sorted(self.families)) or '(none yet)'}",
                )
            chosen.update(by_family.get(fam, ()))
        known = set(every) if names else set()
        for pattern in names:
            if any(ch in pattern for ch in "*?["):
                hits = fnmatch.filter(every, pattern)
                if not hits:
                    raise UnknownArtifactError(
                        pattern, "matches no record in the registry", fix="fixture-store list"
                    )
                chosen.update(hits)
            else:
                if pattern not in known:
                    self.get(pattern)  # raises UnknownArtifactError with the fix
                chosen.add(pattern)
        return sorted(chosen)
