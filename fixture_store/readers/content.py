"""Content checks: an archive or array record is verified only if its content passes its profile.

After the digest matched, verification asks :func:`check` whether the bytes are also safe: an
``archive`` record's object is read as a stream against its ``members`` manifest, an ``array``
record's NPY/NPZ object against its ``arrays`` manifest, both under the record's limits profile.
A pass is remembered per (object digest, manifest, profile) under ``state/``, since the result
depends on nothing else; ``full`` verification ignores that memory.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

from fixture_store import limits
from fixture_store.errors import FixtureStoreError, UnsafeContentError
from fixture_store.objects import statecache, trees
from fixture_store.objects.store import Store
from fixture_store.registry import Kind, Record

CONTENT_KINDS = frozenset({Kind.ARCHIVE, Kind.ARRAY})
# Defined by the NPY reader, which imports numpy: repeated here so sniffing does not.
_NPY_MAGIC = b"\x93NUMPY"


def needs_check(record: Record) -> bool:
    return record.kind in CONTENT_KINDS and record.digest is not None


def sniff(path: Path) -> str:
    """The format of an object by its leading bytes: npy, zip, tar.lz4, tar.zst or tar."""
    # Only the content path sniffs, and it reads the archive next: importing here costs nothing.
    from fixture_store.readers import archives

    with open(path, "rb") as f:
        head = f.read(archives.TAR_MAGIC_OFFSET + len(archives.TAR_MAGIC))
    if head.startswith(_NPY_MAGIC):
        return "npy"
    if head.startswith((archives.ZIP_LOCAL_MAGIC, archives.ZIP_END_MAGIC)):
        return "zip"
    if head.startswith(archives.LZ4_MAGIC):
        return "tar.lz4"
    if head.startswith(archives.ZSTD_MAGIC):
        return "tar.zst"
    if head.startswith(archives.TAR_MAGIC, archives.TAR_MAGIC_OFFSET):
        return "tar"
    return "unknown"


def profile_for(record: Record, tighten: Mapping[str, int] | None = None) -> limits.Limits:
    """The record's named profile, tightened by the caller (loosening is refused)."""
    return limits.tighten(limits.profile(record.profile), **dict(tighten or {}))


def _key(record: Record, profile: limits.Limits) -> str:
    manifest = trees.to_json(record.members) if record.members is not None else None
    arrays_ = {
        k: {"dtype": v["dtype"], "shape": list(v["shape"])}
        for k, v in (record.arrays or {}).items()
    }
    doc = {
        "digest": record.object.text,
        "kind": record.kind,
        "members": manifest,
        "arrays": arrays_,
        "profile": {**profile.as_dict(), "name": None},
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def _marker(store: Store, record: Record, profile: limits.Limits | None = None) -> Path:
    key = _key(record, profile or profile_for(record))
    return store.state_dir / "content" / f"{key}.ok"


def check(
    store: Store, record: Record, *, full: bool = False, tighten: Mapping[str, int] | None = None
) -> UnsafeContentError | None:
    """None if the record's (already digest-verified) object passes its content rules."""
    profile = profile_for(record, tighten)  # a loosening is the caller's error: UsageError
    marker = _marker(store, record, profile)
    if not full and statecache.has_marker(marker, store.root):
        return None
    try:
        _check(store, record, profile)
    except UnsafeContentError as e:
        return e
    except FixtureStoreError as e:
        return UnsafeContentError(record.name, e.message, fix=e.fix)
    statecache.mark_passed(marker, store.root)
    return None


def _check(store: Store, record: Record, profile: limits.Limits) -> None:
    # The readers pull in numpy, lz4 and zstandard: imported here, when content is checked,
    # so a verify of plain objects (and every CLI start) does not pay for them.
    from fixture_store.readers import archives
    from fixture_store.readers import npy as arrays

    path = store.object_path(record.object)
    fmt = sniff(path)
    if record.kind is Kind.ARRAY:
        if fmt == "npy":
            spec = None
            if record.arrays is not None:
                if len(record.arrays) != 1:
                    raise UnsafeContentError(
                        record.name,
                        f"an NPY holds one array; the manifest lists {len(record.arrays)}",
                        fix="list exactly one array in 'arrays'",
                    )
                spec = next(iter(record.arrays.values()))
            arrays.read_npy(path, profile, spec, artifact=record.name)
        elif fmt == "zip":
            arrays.read_npz(path, profile, record.arrays, artifact=record.name)
        else:
            raise UnsafeContentError(
                record.name,
                "an array record's object is not NPY or NPZ",
                fix="register .npy or .npz bytes as kind 'array'",
            )
        return
    if record.members is None:
        raise UnsafeContentError(
            record.name,
            "an archive record needs its member manifest ('members')",
            fix="record the manifest that fixture_store.readers.archives.scan(path) returns",
        )
    if fmt not in ("zip", "tar", "tar.lz4", "tar.zst"):
        raise UnsafeContentError(
            record.name,
            "the object is not a tar, tar.lz4, tar.zst or zip",
            fix="register a supported archive format",
        )
    archives.scan(path, profile, record.members, artifact=record.name, fmt=fmt)  # type: ignore[arg-type]


def extract(store: Store, record: Record, tighten: Mapping[str, int] | None = None) -> Path:
    """Extract a verified archive record into the store; return the members folder."""
    from fixture_store.readers import archives

    if record.kind is not Kind.ARCHIVE or record.members is None or record.digest is None:
        raise UnsafeContentError(record.name, "is not an archive record with a member manifest")
    path = store.object_path(record.digest)
    fmt = sniff(path)
    return archives.extract(
        store,
        path,
        record.members,
        profile_for(record, tighten),
        archive_digest=record.digest,
        artifact=record.name,
        fmt=fmt,  # type: ignore[arg-type]
    )


__all__ = ["CONTENT_KINDS", "check", "extract", "needs_check", "sniff"]
