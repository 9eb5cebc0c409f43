"""Records: the registry entry of one artifact, as small immutable values, and their validation.

Validation is done in code first, so that each rule gives a message naming the field and what is
wrong with it; the shipped JSON Schema then runs as a backstop for structure. A record is parsed
field by field into typed values (its :mod:`source <fixture_store.registry.sources>`, its
:mod:`tolerance <fixture_store.registry.tolerance>`, its :class:`Kind`, a declared :class:`Gap`;
each field's own parser is in :mod:`fixture_store.registry.record_fields`, the rules between
fields are here) and prints itself back to the same JSON.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, NamedTuple

from fixture_store.errors import GapError, UsageError
from fixture_store.objects import names, trees
from fixture_store.objects.digests import Awaited, Digest
from fixture_store.registry import record_fields, tensor_ranges
from fixture_store.registry import upstream as upstream_mod
from fixture_store.registry.frozen import freeze, thaw
from fixture_store.registry.raw_files import family_of
from fixture_store.registry.sources import NoSource, PackageSource, Source, parse_source
from fixture_store.registry.tensor_ranges import manifest_json
from fixture_store.registry.tolerance import Tolerance
from fixture_store.registry.upstream import Upstream
from fixture_store.registry.video import Description
from fixture_store.registry.where import Where


class Kind(StrEnum):
    """What an artifact is."""

    FIXTURE = "fixture"
    CHECKPOINT = "checkpoint"
    VIDEO = "video"
    ONNX_MODEL = "onnx-model"
    ONNX_CASE = "onnx-case"
    TREE = "tree"
    ARCHIVE = "archive"
    ARRAY = "array"


KINDS = tuple(k.value for k in Kind)
# Folders of objects; an archive's members describe its content instead.
TREE_KINDS = frozenset({Kind.TREE, Kind.ONNX_CASE})


class Content(StrEnum):
    """What verification reads inside a record's object once its digest matched."""

    ARCHIVE = "archive"  # its members, against the record's ``members`` manifest
    ARRAYS = "arrays"  # its NPY/NPZ/safetensors arrays, against the record's ``arrays`` manifest


# The object formats the content readers know (detected by leading bytes), by the media type a
# record names them with, and what verification reads in each. ``npz`` is a zip of arrays;
# safetensors has no registered media type, so it takes the ``x-`` name the others use.
MEDIA_TYPE_FORMATS: Mapping[str, str] = MappingProxyType(
    {
        "application/x-npy": "npy",
        "application/x-npz": "npz",
        "application/x-safetensors": "safetensors",
        "application/zip": "zip",
        "application/x-tar": "tar",
        "application/x-lz4": "tar.lz4",
        "application/zstd": "tar.zst",
    }
)
FORMAT_MEDIA_TYPES: Mapping[str, str] = MappingProxyType(
    {fmt: media for media, fmt in MEDIA_TYPE_FORMATS.items()}
)
_FORMAT_CONTENT = {"npy": Content.ARRAYS, "npz": Content.ARRAYS, "safetensors": Content.ARRAYS}


def content_of(kind: Kind, media_type: str | None, arrays: object = None) -> Content | None:
    """What a record of this kind and media type holds for verification to read: an archive
    or arrays whatever its kind (a checkpoint ``.tar.zst``, a video ``.npy``); ``None`` for a
    tree, whose members are objects of their own, and for bytes of no format the readers know."""
    if kind in TREE_KINDS:
        return None
    if kind is Kind.ARCHIVE:
        return Content.ARCHIVE
    if kind is Kind.ARRAY:
        return Content.ARRAYS
    fmt = MEDIA_TYPE_FORMATS.get(media_type) if media_type is not None else None
    if fmt is not None:
        return _FORMAT_CONTENT.get(fmt, Content.ARCHIVE)
    return Content.ARRAYS if arrays is not None else None


# A name is a family (a file of ``provenance/``: lower case, so no two collide anywhere) and
# a path of the one name grammar (:mod:`fixture_store.objects.names`).
_FAMILY = re.compile(r"[a-z0-9][a-z0-9_-]*")


def check_name(name: object) -> str:
    """``name`` as a record name (its path in NFC: :class:`~fixture_store.objects.names.Name`);
    UsageError saying which rule it breaks otherwise."""
    if isinstance(name, str):
        family, slash, path = name.partition("/")
        if slash and _FAMILY.fullmatch(family) is not None:
            try:
                return f"{family}/{names.parse(path)}"
            except names.NameRefusedError as e:
                raise UsageError(f"invalid artifact name {name!r}: {e.reason}") from None
    raise UsageError(
        f"invalid artifact name {name!r}: use 'FAMILY/PATH', a lower-case family (letters, "
        "digits, '_', '-') and a relative path"
    )


def check_family(family: object) -> str:
    if not isinstance(family, str) or _FAMILY.fullmatch(family) is None:
        raise UsageError(f"invalid family name {family!r}")
    return family


def parse_kind(value: object, where: Where) -> Kind:
    if not isinstance(value, str) or value not in KINDS:
        raise where.fail("kind", f"unknown kind {value!r}; one of {', '.join(KINDS)}")
    return Kind(value)


@dataclass(frozen=True)
class Gap:
    """An artifact the project expects but cannot have yet, and why."""

    reason: str
    issue: str | None = None  # where the gap is tracked, as written
    # The digest of the bytes the gap awaits, when known without their size: their sha256 (a
    # manifest that lists a file by its sha256 alone) or a weak md5 or sha1 (one that knows it
    # by nothing else). The record's ``digest`` field holds it, for a reviewer to see.
    expected: Awaited | None = None

    @classmethod
    def from_json(cls, raw: Any, where: Where) -> Gap:
        if not isinstance(raw, Mapping) or not record_fields.is_text(raw.get("reason")):
            raise where.fail("gap.reason", "a declared gap needs a non-empty reason")
        return cls(raw["reason"], raw.get("issue"))

    def to_json(self) -> dict[str, Any]:
        return {"reason": self.reason, **({"issue": self.issue} if self.issue is not None else {})}

    def __str__(self) -> str:
        return self.reason


class ObjectRef(NamedTuple):
    """One object a record needs in the store, and the BLAKE3 recorded for it."""

    digest: Digest
    member: str | None = None  # its path in the tree; None: the record's object or manifest
    blake3: str | None = None


@dataclass(frozen=True)
class Annotations:
    """What a record says about its bytes besides identity and source, as a generator or a user
    gives it (``None``: not given)."""

    media_type: str | None = None
    license: str | None = None
    profile: str | None = None
    description: str | None = None
    arrays: Mapping[str, Any] | None = None
    tolerance: Tolerance | None = None
    metadata: Mapping[str, Any] | None = None
    upstream: tuple[Upstream, ...] | None = None
    seed: int | None = None
    # The generator's input shape: a list of dimensions, or input name -> dimensions.
    input_shape: Any = None
    command: tuple[str, ...] | None = None  # the generator's command line, one argument each
    # A ranged safetensors file's header: {length, sha256} (registry.tensor_ranges).
    header: Mapping[str, Any] | None = None

    @classmethod
    def from_json(cls, raw: Mapping[str, Any], where: Where) -> Annotations:
        """Parse the fields given on their own; any other key is refused."""
        unknown = sorted(set(raw) - ANNOTATION_KEYS)
        if unknown:
            raise where.fail(
                unknown[0], f"not a descriptive field; one of {', '.join(sorted(ANNOTATION_KEYS))}"
            )
        return _parse_annotations(raw, where)

    def apply(self, record: Record) -> Record:
        """``record`` with every field given here set."""
        given = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if getattr(self, f.name) is not None
        }
        return dataclasses.replace(record, **given) if given else record


_STRING_KEYS = ("media_type", "license", "profile", "description")
ANNOTATION_KEYS = frozenset(f.name for f in dataclasses.fields(Annotations))


@dataclass(frozen=True)
class Record:
    """The registry entry for one artifact."""

    name: str
    kind: Kind
    source: Source
    digest: Digest | None = None
    media_type: str | None = None
    blake3: str | None = None
    lineage: tuple[str, ...] = ()
    members: trees.Tree | None = None
    # member path -> BLAKE3 hex, recorded beside the members' SHA-256 for fast re-verification.
    member_blake3: Mapping[str, str] = field(default_factory=dict)
    arrays: Mapping[str, Any] | None = None
    tolerance: Tolerance | None = None
    license: str | None = None
    profile: str | None = None
    gap: Gap | None = None
    description: str | None = None
    metadata: Mapping[str, Any] | None = None
    upstream: tuple[Upstream, ...] = ()
    seed: int | None = None
    input_shape: Any = None
    command: tuple[str, ...] | None = None
    # The bytes before a ranged safetensors file's data section: {length, sha256}.
    header: Mapping[str, Any] | None = None
    # The arrays manifest was read with its plain entries as objects (the form before one string
    # per array): written back so, byte for byte, until ``fixture-store migrate`` rewrites it.
    arrays_as_objects: bool = field(default=False, compare=False)

    @property
    def family(self) -> str:
        return family_of(self.name)

    @property
    def is_gap(self) -> bool:
        return self.gap is not None

    @property
    def content(self) -> Content | None:
        """What verification reads inside the object (see :func:`content_of`)."""
        return content_of(self.kind, self.media_type, self.arrays)

    @property
    def tree(self) -> trees.Tree | None:
        """The member manifest of a tree record (a folder of objects); ``None`` for a record of
        one object. An archive's ``members`` describe its content, not objects."""
        return self.members if self.content is not Content.ARCHIVE else None

    @property
    def is_tree(self) -> bool:
        return self.tree is not None

    @property
    def object(self) -> Digest:
        """The digest of the record's object (a tree's: its manifest); a declared gap that has
        no digest raises GapError."""
        if self.digest is None:
            raise GapError(self.name, self.gap.reason if self.gap else "the record has no digest")
        return self.digest

    def objects(self) -> list[ObjectRef]:
        """The objects verifying this record checks: a tree's members then its manifest, or its
        one object; none for a gap without a digest."""
        digest = self.digest
        if digest is None:
            return []
        members = self.members
        if members is None or self.content is Content.ARCHIVE:
            return [ObjectRef(digest, None, self.blake3)]
        # A warm verify of a corpus walks every member: the tuples are built without the named
        # tuple's Python-level __new__, which would double the cost.
        new, b3 = tuple.__new__, self.member_blake3
        out = [new(ObjectRef, (d, m, b3.get(m))) for m, d in members.members.items()]
        out.append(ObjectRef(digest))
        return out

    def filled(self, digest: Digest, *, proved: Awaited | None = None) -> Record | None:
        """This gap's record once the bytes it awaits have arrived: their ``digest`` (SHA-256 and
        size) recorded and the gap lifted; ``None`` if they are not those bytes, or it is no
        gap. The bytes it awaits are the digest and size it kept, or the SHA-256 it expected,
        or, for a gap known by a weak digest, bytes ``proved`` to have it (a SHA-256 cannot tell
        that). The weak digest stays in the metadata: where an import keeps it
        (``imported_from.digests``), else as ``checked_against``."""
        gap = self.gap
        if gap is None:
            return None
        if self.digest is not None:
            awaited = self.digest == digest
        else:
            expected = gap.expected
            awaited = expected is not None and (expected.names(digest) or expected == proved)
        if not awaited:
            return None
        metadata = self.metadata
        if gap.expected is not None and gap.expected.weak:
            metadata = _keeping(metadata, str(gap.expected))
        return dataclasses.replace(self, digest=digest, gap=None, metadata=metadata)

    def referenced(self) -> frozenset[str]:
        """Hex digests of every object the store keeps for this record: its :meth:`objects`,
        and the distribution a package source points into (it serves every record pointing into
        it, offline too)."""
        keep = {ref.digest.hex for ref in self.objects()}
        if isinstance(self.source, PackageSource):
            keep.add(self.source.file_hex)
        return frozenset(keep)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind.value}
        if not isinstance(self.source, NoSource):
            out["source"] = self.source.to_json()
        if self.digest is not None:
            out["digest"] = self.digest.text
            out["size"] = self.digest.size
        elif self.gap is not None and self.gap.expected is not None:
            out["digest"] = str(self.gap.expected)
        optional: dict[str, Any] = {
            "media_type": self.media_type,
            "blake3": self.blake3,
            "license": self.license,
            "profile": self.profile,
            "description": self.description,
            "lineage": list(self.lineage) if self.lineage else None,
            "members": self._members_json(),
            "arrays": (
                manifest_json(self.arrays, as_objects=self.arrays_as_objects)
                if self.arrays is not None
                else None
            ),
            "header": thaw(self.header),
            "tolerance": self.tolerance.to_json() if self.tolerance is not None else None,
            "metadata": thaw(self.metadata),
            "upstream": [u.to_json() for u in self.upstream] if self.upstream else None,
            "seed": self.seed,
            "input_shape": thaw(self.input_shape),
            "command": list(self.command) if self.command is not None else None,
            "gap": self.gap.to_json() if self.gap is not None else None,
        }
        out.update((key, value) for key, value in optional.items() if value is not None)
        return out

    def _members_json(self) -> dict[str, dict[str, Any]] | None:
        if self.members is None:
            return None
        out = trees.to_json(self.members)
        for path, b3 in self.member_blake3.items():
            out[path]["blake3"] = b3
        return out


IMPORTED_FROM = "imported_from"  # the metadata field an import records its manifest in
CHECKED_AGAINST = "checked_against"  # the weak digest a filled gap's bytes were checked against


def _keeping(metadata: Mapping[str, Any] | None, weak: str) -> Mapping[str, Any]:
    """``metadata`` that keeps the weak digest a gap awaited, once its SHA-256 stands for the
    bytes: an imported record lists it among the digests its manifest stated already."""
    imported = (metadata or {}).get(IMPORTED_FROM)
    if isinstance(imported, Mapping) and weak in (imported.get("digests") or ()):
        return metadata or {}
    kept: Mapping[str, Any] = freeze({**thaw(metadata or {}), CHECKED_AGAINST: weak})
    return kept


def parse_record(name: str, raw: Any, *, file: str) -> Record:
    """Validate one record's mapping and return the Record; raise RegistryError otherwise."""
    where = Where(file, name)
    _check_name(name, where)
    raw = record_fields.mapping(raw, where)
    gap = Gap.from_json(raw["gap"], where) if "gap" in raw else None
    kind, source = _parse_head(raw, where, gap is not None)
    digest = None
    if gap is not None and "size" not in raw and "digest" in raw:
        gap = dataclasses.replace(gap, expected=record_fields.parse_expected(raw["digest"], where))
    elif gap is not None and "digest" not in raw and "size" in raw:
        raise where.fail("size", "a declared gap gives a size only with its digest")
    elif gap is None or "digest" in raw or "size" in raw:
        digest = record_fields.parse_digest(raw, where)
    blake3 = record_fields.parse_blake3(raw.get("blake3"), where)
    lineage = record_fields.parse_lineage(raw.get("lineage", []), where)
    members, member_blake3 = (
        record_fields.parse_members(raw["members"], where) if "members" in raw else (None, {})
    )
    given = _parse_annotations(raw, where)
    content = content_of(kind, given.media_type, given.arrays)
    _check_shape(
        where, source=source, kind=kind, digest=digest, gap=gap, members=members, content=content
    )
    _check_overrides(given.tolerance, given.arrays, where)
    _check_metadata(kind, given.metadata, where)
    _check_layout(given.media_type, given.arrays, given.header, digest, where)
    return Record(
        name,
        kind,
        source,
        digest,
        media_type=given.media_type,
        blake3=blake3,
        lineage=lineage,
        members=members,
        member_blake3=MappingProxyType(member_blake3),
        arrays=given.arrays,
        tolerance=given.tolerance,
        license=given.license,
        profile=given.profile,
        gap=gap,
        description=given.description,
        metadata=given.metadata,
        upstream=given.upstream or (),
        seed=given.seed,
        input_shape=given.input_shape,
        command=given.command,
        header=given.header,
        arrays_as_objects=record_fields.plain_objects(raw.get("arrays")),
    )


def check_record(record: Record, *, file: str) -> Record:
    """Check a record built in code (from a command line or a generator) by the rules
    :func:`parse_record` applies to its values; return it."""
    where = Where(file, record.name)
    _check_name(record.name, where)
    record.source.check(where)
    _check_stated(record, where)
    _check_shape(
        where,
        source=record.source,
        kind=record.kind,
        digest=record.digest,
        gap=record.gap,
        members=record.members,
        content=record.content,
    )
    _check_overrides(record.tolerance, record.arrays, where)
    _check_metadata(record.kind, record.metadata, where)
    _check_layout(record.media_type, record.arrays, record.header, record.digest, where)
    return record


def _check_layout(
    media_type: str | None,
    arrays: Mapping[str, Any] | None,
    header: Mapping[str, Any] | None,
    digest: Digest | None,
    where: Where,
) -> None:
    """A ranged safetensors record's ranges tile its data section after its header."""
    tensor_ranges.check_layout(
        arrays,
        header,
        digest.size if digest is not None else None,
        safetensors=media_type == FORMAT_MEDIA_TYPES["safetensors"],
        where=where,
    )


def _check_overrides(
    tolerance: Tolerance | None, arrays: Mapping[str, Any] | None, where: Where
) -> None:
    """A record with an arrays manifest keys its per-array tolerances by the manifest's names."""
    if tolerance is not None and arrays is not None:
        tolerance.check_names(arrays, where)


def _check_metadata(kind: Kind, metadata: Mapping[str, Any] | None, where: Where) -> None:
    """A video record's metadata is its decoded description: parsed, and its parts checked
    against each other, whenever the record is read or built (a record without one yet is
    valid; reading its frames asks for it)."""
    if kind is Kind.VIDEO and metadata:
        Description.from_json(metadata, where)


def _check_stated(record: Record, where: Where) -> None:
    """The upstreams, seed, input shape and command of a record built in code, by the rules
    their JSON is parsed by."""
    if record.upstream:
        upstream_mod.parse_list([u.to_json() for u in record.upstream], where)
    record_fields.parse_seed(record.seed, where)
    record_fields.parse_input_shape(thaw(record.input_shape), where)
    record_fields.parse_command(list(record.command) if record.command is not None else None, where)


def _check_name(name: str, where: Where) -> None:
    """A name as a registry holds it: of the grammar, and spelt as it prints (NFC), so that
    the file's key is the name every command finds."""
    try:
        checked = check_name(name)
    except UsageError as e:
        raise where.fail("name", e.message) from e
    if checked != name:
        raise where.fail(
            "name", f"{name!r} is not in Unicode normalisation form C; write it as {checked!r}"
        )


def _parse_head(raw: Mapping[str, Any], where: Where, is_gap: bool) -> tuple[Kind, Source]:
    """The kind and source; a declared gap may leave its source out (it has none yet)."""
    if "kind" not in raw:
        raise where.fail("kind", "missing required field")
    if "source" not in raw:
        if not is_gap:
            raise where.fail("source", "missing required field (only a declared gap may omit it)")
        return parse_kind(raw["kind"], where), NoSource()
    return parse_kind(raw["kind"], where), parse_source(raw["source"], where)


def _check_shape(
    where: Where,
    *,
    source: Source,
    kind: Kind,
    digest: Digest | None,
    gap: Gap | None,
    members: trees.Tree | None,
    content: Content | None,
) -> None:
    """The rules between fields: a digest and a source unless a gap, a tree bound to its
    manifest."""
    if digest is None and gap is None:
        raise where.fail("digest", "missing required field (only a declared gap may omit it)")
    if isinstance(source, NoSource) and gap is None:
        raise where.fail("source", "missing required field (only a declared gap may omit it)")
    if members is not None:
        # An archive record's digest is the archive's; its members are the content manifest.
        if digest is not None and content is not Content.ARCHIVE and members.digest != digest:
            raise where.fail(
                "digest",
                f"does not match the member manifest: the manifest hashes to {members.digest}",
                fix="regenerate the record with 'fixture-store add' or the family's generator",
            )
    elif kind in TREE_KINDS and gap is None:
        raise where.fail("members", f"a {kind} record needs its member manifest")


def _parse_annotations(raw: Mapping[str, Any], where: Where) -> Annotations:
    arrays, tolerance, metadata = raw.get("arrays"), raw.get("tolerance"), raw.get("metadata")
    upstream = raw.get("upstream")
    parsed_arrays = record_fields.parse_arrays(arrays, where) if arrays is not None else None
    parsed_tolerance = Tolerance.from_json(tolerance, where) if tolerance is not None else None
    strings = [record_fields.parse_string(raw, key, where) for key in _STRING_KEYS]
    media_type, license_, profile, description = strings
    if profile is not None:
        record_fields.check_profile(profile, where)
    return Annotations(
        media_type,
        license_,
        profile,
        description,
        parsed_arrays,
        parsed_tolerance,
        record_fields.parse_metadata(metadata, where) if metadata is not None else None,
        upstream_mod.parse_list(upstream, where) if upstream is not None else None,
        record_fields.parse_seed(raw.get("seed"), where),
        record_fields.parse_input_shape(raw.get("input_shape"), where),
        record_fields.parse_command(raw.get("command"), where),
        tensor_ranges.parse_header(raw["header"], where) if "header" in raw else None,
    )
