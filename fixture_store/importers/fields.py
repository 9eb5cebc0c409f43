"""The fields an importer knows, under every name manifests give them: one table per object
of a manifest, and one reader that applies it.

A field the importer does not know never refuses an import: :func:`read` keeps it verbatim,
by its JSON pointer in the manifest (RFC 6901: ``/fixtures/block0.npz/notes``), and the
import lands it in the record's ``metadata.unknown_fields`` and lists it in its report. A
field whose meaning is known under another name (a row's ``spellings``) is read as that field
and the mapping is reported. The next manifest's synonyms are one word each in these tables.

When a manifest gives one field under several names, the first in the row's order is read;
another with the same value is reported as mapped too, one with another value is kept verbatim
as unknown (and reported): nothing is guessed and nothing is lost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fixture_store.objects import names

# The record's metadata key holding every field no table knows, by its JSON pointer.
UNKNOWN_FIELDS = "unknown_fields"
# The metric a bare tolerance number means in a manifest: the largest mean absolute error.
MEAN_ABS = "mean_abs"


@dataclass(frozen=True)
class Field:
    """One field the importer reads: its name, the other names manifests give it, where it
    lands on the record, and what the report says whenever it is read (``note``)."""

    name: str
    spellings: tuple[str, ...] = ()
    lands: str = ""
    note: str | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.spellings)


# The top level of a JSON manifest, besides its one map of files.
DOCUMENT: tuple[Field, ...] = (
    Field("format_version", lands="(read, not kept)"),
    Field("locked_environment", ("environment", "env"), "metadata.locked_environment"),
)

# One file's entry.
ENTRY: tuple[Field, ...] = (
    Field("sha256", ("sha256sum", "digest", "checksum", "hash"), "the record's digest"),
    Field("size", ("size_bytes", "nbytes", "bytes"), "checked against the bytes"),
    Field("url", ("download_url",), "metadata.url"),
    Field("arrays", (), "arrays"),
    Field("tolerance", ("tol",), "tolerance"),
    # The rule of a record's intermediate activations, and their order (the parity model's
    # ``tolerance.intermediates``); without the order or the record's tolerance it is kept as
    # the named field ``metadata.intermediate_tolerance``, and the report says why.
    Field(
        "intermediate_tolerance",
        ("intermediates_tolerance", "tolerance_intermediate", "activation_tolerance"),
        "tolerance.intermediates",
    ),
    Field(
        "intermediates",
        ("intermediate_order", "intermediate_names", "activations"),
        "tolerance.intermediates.order",
    ),
    Field("upstream", ("upstreams",), "upstream"),
    # A digest of the upstream written beside it rather than inside it.
    Field(
        "upstream_digest",
        ("checkpoint_sha256", "upstream_sha256", "weights_sha256", "checkpoint_digest"),
        "upstream digest",
    ),
    Field("seed", ("random_seed",), "seed"),
    Field("input_shape", (), "input_shape"),
    Field("generator", ("generated_by", "script"), "command"),
)

# One upstream written as an object.
UPSTREAM: tuple[Field, ...] = (
    Field("repository", ("repo", "repo_id", "model_id", "url"), "upstream"),
    Field("revision", ("commit", "rev", "sha", "commit_sha", "git_sha"), "upstream revision"),
    Field("checkpoint", ("file", "path", "filename"), "upstream path"),
    Field(
        "digest",
        ("sha256", "checkpoint_sha256", "checksum", "file_sha256", "checkpoint_digest"),
        "upstream digest",
    ),
    Field("repo_type", (), "upstream repo_type"),
    Field("license", (), "upstream license"),
)

# One array of an entry's ``arrays``.
ARRAY: tuple[Field, ...] = (
    Field("dtype", lands="arrays.dtype"),
    Field("shape", lands="arrays.shape"),
)


# One out of a ``.dvc`` file or a ``dvc.lock`` stage: the fields DVC itself reads the bytes by.
DVC_OUT: tuple[Field, ...] = (
    Field("path", lands="the record's name and source"),
    Field("md5", lands="metadata.imported_from.digests (checked against the bytes)"),
    Field("size", lands="checked against the bytes"),
    Field("hash", lands="(how DVC hashed: read)"),
    Field("nfiles", lands="(a directory's file count: read)"),
)


def pointer(base: str, key: str) -> str:
    """The JSON pointer of ``key`` inside the object at ``base`` (RFC 6901 escapes)."""
    return f"{base}/{names.pointer(key)}"


@dataclass(frozen=True)
class Mapped:
    """A field read under another name (or one whose reading the report states)."""

    pointer: str
    lands: str
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = {"field": self.pointer, "as": self.lands}
        return out | ({"note": self.note} if self.note else {})


@dataclass
class Fields:
    """What reading a manifest's objects found: the unknown fields (pointer -> value, verbatim)
    and the mapped ones."""

    unknown: dict[str, Any] = field(default_factory=dict)
    mapped: list[Mapped] = field(default_factory=list)

    def read(
        self, raw: Mapping[str, Any], table: Sequence[Field], at: str
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """The fields of ``raw`` (the object at pointer ``at``) that ``table`` knows, by their
        names, and the key each was read from; every other field is kept here verbatim and
        every mapping noted."""
        known: dict[str, Any] = {}
        keys: dict[str, str] = {}
        claimed: set[str] = set()
        for row in table:
            present = [name for name in row.names if name in raw]
            claimed.update(present)
            if not present:
                continue
            first = present[0]
            known[row.name], keys[row.name] = raw[first], first
            for name in present:
                here = pointer(at, name)
                if name != first and raw[name] != raw[first]:
                    self.unknown[here] = raw[name]  # a second, different value: kept
                elif name != row.name or row.note:
                    self.mapped.append(Mapped(here, row.lands, row.note))
        for key, value in raw.items():
            if key not in claimed:
                self.unknown[pointer(at, key)] = value
        return known, keys

    def relabel(self, at: str, lands: str, note: str | None) -> None:
        """Say that the field at ``at`` landed as ``lands`` (and why) after all."""
        self.mapped = [Mapped(at, lands, note) if m.pointer == at else m for m in self.mapped]
        if all(m.pointer != at for m in self.mapped):
            self.mapped.append(Mapped(at, lands, note))

    def merged(self, other: Fields) -> Fields:
        return Fields({**self.unknown, **other.unknown}, [*self.mapped, *other.mapped])
