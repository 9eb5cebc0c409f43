"""Content checks: a record whose object is an archive or arrays is verified only if its content
passes its profile.

A record says what its object holds (:attr:`Record.content <fixture_store.registry.Record>`): an
``archive`` or ``array`` kind, or, whatever its kind (a checkpoint ``.tar.zst`` or
``model.safetensors``, a video ``.npy``), the media type of an archive, NPY/NPZ or safetensors
format. After the digest matched, verification asks :func:`check` whether the bytes are also
safe: an archive is read as a stream against its ``members`` manifest, NPY/NPZ and safetensors
(its header: every data byte is a valid value) against its ``arrays`` manifest, all under the
record's limits profile, and the leading bytes must be the format the media type names. A record
that declares nothing is refused when its object's leading bytes are an archive or an array
anyway, so such bytes never verify unchecked.

A pass is remembered per (object digest, manifest, profile) under ``state/``, since the result
depends on nothing else; ``full`` verification ignores that memory. :func:`describe` reads a new
file the same way and gives the manifest its record carries (``add`` and ``regenerate
--accept``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fixture_store import limits
from fixture_store.errors import FixtureStoreError, MissingObjectError, UnsafeContentError
from fixture_store.objects import names, statecache, trees
from fixture_store.objects.store import Store
from fixture_store.readers.formats import Sniffed, sniff
from fixture_store.registry import (
    FORMAT_MEDIA_TYPES,
    MEDIA_TYPE_FORMATS,
    Content,
    GeneratorSource,
    Kind,
    Record,
)
from fixture_store.registry.frozen import thaw

if TYPE_CHECKING:
    from fixture_store.readers.range_tap import RangeDigests

_ARCHIVE_FORMATS = ("zip", "tar", "tar.lz4", "tar.zst")
# The leading bytes each media type's format begins with: an NPZ is a zip.
_SNIFFED_AS = {"npz": "zip"}
_WHAT: Mapping[str, str] = {
    "npy": "an NPY array",
    "safetensors": "a safetensors file",
    "zip": "a zip archive (or an NPZ)",
    "tar": "a tar archive",
    "tar.lz4": "a tar.lz4 archive",
    "tar.zst": "a tar.zst archive",
}


def needs_check(record: Record) -> bool:
    """Whether ``record`` declares content that verification reads against its manifest (a
    record of one object that declares none is only sniffed: :func:`undeclared`)."""
    return record.content is not None and record.digest is not None


def undeclared(record: Record, source: str | Path | int) -> UnsafeContentError | None:
    """The refusal of a record of one object that declares no content while the leading bytes
    of its object (at ``source``: a path, or a descriptor opened through the path primitive)
    are an archive or an array; ``None`` for plain bytes, a tree or a record that declares its
    content. One short read, never remembered."""
    if record.content is not None or record.digest is None or record.is_tree:
        return None
    fmt = sniff(source)
    if fmt == "unknown":
        return None
    return UnsafeContentError(
        record.name,
        f"the object is {_WHAT[fmt]} by its leading bytes, but its record does not say so: "
        "an archive or array is verified against the media type and content manifest its "
        "record carries",
        fix=f"{_rewrite_fix(record)}  (records the media type and the manifest)",
    )


def profile_for(record: Record, tighten: Mapping[str, int] | None = None) -> limits.Limits:
    """The record's named profile, tightened by the caller (loosening is refused)."""
    return limits.tighten(limits.profile(record.profile), **dict(tighten or {}))


def _key(record: Record, profile: limits.Limits) -> str:
    manifest = trees.to_json(record.members) if record.members is not None else None
    arrays_ = {k: thaw(v) for k, v in (record.arrays or {}).items()}  # ranges too
    doc = {
        "digest": record.object.text,
        "content": record.content,
        "media_type": record.media_type,
        "members": manifest,
        "arrays": arrays_,
        "profile": {**profile.as_dict(), "name": None},
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def _marker(store: Store, record: Record, profile: limits.Limits | None = None) -> Path:
    key = _key(record, profile or profile_for(record))
    return store.state_dir / "content" / f"{key}.ok"


def check(
    store: Store,
    record: Record,
    *,
    full: bool = False,
    tighten: Mapping[str, int] | None = None,
    digests_read: bool = False,
) -> UnsafeContentError | None:
    """None if the record's (already digest-verified) object passes its content rules.
    ``digests_read``: the record's range digests were taken from this object's bytes in the
    read that stored them (:mod:`.range_tap`), so ``full`` does not read the ranges again."""
    profile = profile_for(record, tighten)  # a loosening is the caller's error: UsageError
    if record.content is None:
        if record.digest is None or record.is_tree:
            return None
        with store.open_object(record.object) as f:  # never through a link (DESIGN 13)
            return undeclared(record, f.fileno())
    marker = _marker(store, record, profile)
    if not full and statecache.has_marker(marker, store.root):
        return None
    try:
        _check(store, record, profile, full=full and not digests_read)
    except UnsafeContentError as e:
        return e
    except FixtureStoreError as e:
        return UnsafeContentError(record.name, e.message, fix=e.fix)
    statecache.mark_passed(marker, store.root)
    return None


def _rewrite_fix(record: Record) -> str:
    if isinstance(record.source, GeneratorSource):
        return f"fixture-store regenerate {record.source.stage} --accept"
    return f"fixture-store add FILE --name {record.name} --kind {record.kind} --replace"


def _check(store: Store, record: Record, profile: limits.Limits, *, full: bool = False) -> None:
    with store.open_object(record.object) as f:  # never through a link (DESIGN 13)
        fmt = sniff(f.fileno())
    declared = MEDIA_TYPE_FORMATS.get(record.media_type or "")
    if declared is not None and _SNIFFED_AS.get(declared, declared) != fmt:
        raise UnsafeContentError(
            record.name,
            f"the record's media type {record.media_type} names {declared}, but the object's "
            f"leading bytes are {_WHAT.get(fmt, 'of no format the readers know')}",
            fix=f"{_rewrite_fix(record)}  (records the media type the bytes have)",
        )
    if record.content is Content.ARRAYS:
        _check_arrays(store, fmt, record, profile, full=full)
    else:
        _check_archive(store, fmt, record, profile)


def _check_arrays(
    store: Store, fmt: Sniffed, record: Record, profile: limits.Limits, *, full: bool
) -> None:
    # The readers pull in numpy, lz4 and zstandard: imported here, when content is checked,
    # so a verify of plain objects (and every CLI start) does not pay for them.
    from fixture_store.readers import npy as arrays
    from fixture_store.readers import safetensors
    from fixture_store.readers.array_ranges import check_npy_ranges, check_npz_ranges
    from fixture_store.readers.pinned import pin_object
    from fixture_store.readers.tensor_ranges import check_header, check_ranges

    if fmt == "safetensors":
        with pin_object(store, record.object, record.name) as pinned:  # never through a link
            header = safetensors.parse_header(pinned.file, pinned.size, profile, record.name)
            check_header(header, record.header, pinned, artifact=record.name)
            if record.arrays is not None:
                safetensors.check_manifest(header, record.arrays, artifact=record.name)
                check_ranges(header, record.arrays, pinned, artifact=record.name, full=full)
    elif fmt == "npy":
        spec = None
        if record.arrays is not None:
            if len(record.arrays) != 1:
                raise UnsafeContentError(
                    record.name,
                    f"an NPY holds one array; the manifest lists {len(record.arrays)}",
                    fix="list exactly one array in 'arrays'",
                )
            spec = next(iter(record.arrays.values()))
        pinned = pin_object(store, record.object, record.name)  # never through a link
        npy_header = arrays.check_npy(pinned, profile, spec, artifact=record.name)
        if record.arrays is not None:
            with pin_object(store, record.object, record.name) as pinned:
                check_npy_ranges(npy_header, record.arrays, pinned, artifact=record.name, full=full)
    elif fmt == "zip":
        pinned = pin_object(store, record.object, record.name)  # never through a link
        arrays.read_npz(pinned, profile, record.arrays, artifact=record.name)
        if record.arrays is not None:
            check_npz_ranges(
                lambda: pin_object(store, record.object, record.name),
                record.arrays,
                profile,
                artifact=record.name,
                full=full,
            )
    else:
        raise UnsafeContentError(
            record.name,
            "an array record's object is not NPY, NPZ or safetensors",
            fix="register .npy, .npz or .safetensors bytes as kind 'array'",
        )


def _check_archive(store: Store, fmt: Sniffed, record: Record, profile: limits.Limits) -> None:
    from fixture_store.readers import archives
    from fixture_store.readers.pinned import pin_object

    if record.members is None:
        raise UnsafeContentError(
            record.name,
            "an archive record needs its member manifest ('members')",
            fix=f"{_rewrite_fix(record)}  (records the manifest of a checked scan)",
        )
    if fmt not in _ARCHIVE_FORMATS:
        raise UnsafeContentError(
            record.name,
            "the object is not a tar, tar.lz4, tar.zst or zip",
            fix="register a supported archive format",
        )
    pinned = pin_object(store, record.object, record.name)  # never through a link
    archives.scan(pinned, profile, record.members, artifact=record.name, fmt=fmt)  # type: ignore[arg-type]


def extract(store: Store, record: Record, tighten: Mapping[str, int] | None = None) -> Path:
    """Extract a verified archive record into the store; return the members folder."""
    from fixture_store.readers import archives

    if record.content is not Content.ARCHIVE or record.members is None or record.digest is None:
        raise UnsafeContentError(record.name, "is not an archive record with a member manifest")
    from fixture_store.readers.pinned import pin_object

    try:
        pinned = pin_object(store, record.digest, record.name)  # never through a link
        return archives.extract(
            store,
            pinned,
            record.members,
            profile_for(record, tighten),
            archive_digest=record.digest,
            artifact=record.name,
            fmt=archives.detect_format(pinned),
        )
    except FileNotFoundError as e:  # the caller verified it, but the store may have lost it since
        raise MissingObjectError(
            record.name,
            f"its object {record.digest.text} is not in the store {store.root}",
            fix=f"fixture-store fetch {names.shell(record.name)}",
        ) from e


# -- describing a new file: the manifest its record will carry ---------------------------------
@dataclass(frozen=True)
class Described:
    """What a file holds for verification to read, as its record states it: the media type of
    its format and its content manifest. :data:`PLAIN` for bytes of no such format."""

    media_type: str | None = None
    members: trees.Tree | None = None
    arrays: Mapping[str, Mapping[str, Any]] | None = None
    header: Mapping[str, Any] | None = None  # a ranged safetensors file's (tensor_ranges)

    @property
    def content(self) -> Content | None:
        if self.members is not None:
            return Content.ARCHIVE
        return Content.ARRAYS if self.arrays is not None else None


PLAIN = Described()


def describe(
    path: str | Path,
    *,
    kind: Kind,
    array_name: str,
    profile: limits.Limits = limits.DEFAULT,
    artifact: str | None = None,
    pending: RangeDigests | None = None,
) -> Described:
    """The media type and content manifest of the file at ``path``, by its leading bytes, after
    reading it under ``profile`` as verification will: an archive's members from a checked scan,
    NPY/NPZ and safetensors arrays (name -> dtype, shape) from their checked headers. An NPY's
    one array is named ``array_name``; a zip is an NPZ when the kind is ``array``, or, for a
    kind other than ``archive``, when every member is a top-level ``<name>.npy``.

    A hostile archive, a pickle or an object array raises its reader's UnsafeContentError
    (the rule named); so does a file of kind ``archive`` or ``array`` that is neither.

    With ``pending`` the digests of the array ranges are not read here: the manifest gets the
    ranges, ``pending`` the wish for their digests, and the caller hands it to the store's read
    of the bytes (:mod:`fixture_store.readers.range_tap`) and fills them in from it.
    """
    from fixture_store.readers import archives, safetensors
    from fixture_store.readers import npy as arrays
    from fixture_store.readers.array_ranges import describe_npy, describe_npz

    p = Path(path)
    label = artifact or str(p)
    fmt = sniff(p)
    if fmt == "safetensors" and kind is not Kind.ARCHIVE:
        from fixture_store.readers.pinned import pin
        from fixture_store.readers.tensor_ranges import header_entry, ranged_manifest

        with pin(p, label) as pinned:
            header = safetensors.parse_header(pinned.file, pinned.size, profile, label)
            return Described(
                FORMAT_MEDIA_TYPES["safetensors"],
                arrays=ranged_manifest(header, pinned, pending),
                header=header_entry(header, pinned),
            )
    if fmt == "npy" and kind is not Kind.ARCHIVE:
        npy = arrays.check_npy(p, profile, artifact=label)
        manifest = describe_npy(p, npy, array_name, label, pending)
        return Described(FORMAT_MEDIA_TYPES["npy"], arrays=manifest)
    if (
        fmt == "zip"
        and kind is not Kind.ARCHIVE
        and (kind is Kind.ARRAY or _is_npz(p, profile, label))
    ):
        # Read as verification reads an NPZ (the zip's container check, then each member's
        # array), once: an archive scan of its members as well would be one more pass.
        read = arrays.read_npz(p, profile, artifact=label)
        manifest = {n: _spec(a) for n, a in read.items()}
        arrays_ = describe_npz(p, manifest, profile, label, pending)
        return Described(FORMAT_MEDIA_TYPES["npz"], arrays=arrays_)
    if fmt in _ARCHIVE_FORMATS:
        members = archives.scan(p, profile, artifact=label, fmt=fmt)  # type: ignore[arg-type]
        if kind is not Kind.ARRAY:
            return Described(FORMAT_MEDIA_TYPES[fmt], members=members)
    if kind is Kind.ARCHIVE:
        raise UnsafeContentError(
            label,
            f"is {_WHAT.get(fmt, 'of no archive format')} by its leading bytes, not a tar, "
            "tar.lz4, tar.zst or zip",
            fix="register an archive as kind 'archive'",
        )
    if kind is Kind.ARRAY:
        raise UnsafeContentError(
            label,
            f"is {_WHAT.get(fmt, 'of no array format')} by its leading bytes, not NPY, NPZ or "
            "safetensors",
            fix="register .npy, .npz or .safetensors bytes as kind 'array'",
        )
    return PLAIN


def _spec(arr: Any) -> dict[str, Any]:
    return {"dtype": str(arr.dtype), "shape": [int(d) for d in arr.shape]}


def _is_npz(path: Path, profile: limits.Limits, label: str) -> bool:
    """Whether every file member of the zip at ``path`` is a top-level ``<name>.npy`` (and it
    has one): its checked central directory says, no member is read."""
    from fixture_store.readers.archives import open_zip

    with open_zip(path, profile, label) as (_zf, infos):
        names = [i.filename for i in infos]
    return len(names) > 0 and all(n.endswith(".npy") and "/" not in n for n in names)


__all__ = [
    "PLAIN",
    "Described",
    "check",
    "describe",
    "extract",
    "needs_check",
    "sniff",
    "undeclared",
]
