"""Loading a project's registry: every ``provenance/<family>.json``, and the shards
``provenance/<family>/<ab>.json`` of a sharded family (see :mod:`.shards`), each file opened
through the path primitive from ``provenance/`` and parsed by :mod:`.documents`; the digests of
the files as read, which transactions and verify snapshots compare without parsing."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from fixture_store import bounded_json
from fixture_store.errors import RegistryError, UsageError
from fixture_store.objects.gcpause import cyclic_gc_paused
from fixture_store.registry import nesting, shards
from fixture_store.registry.documents import (
    SchemaPasses,
    parse_document,
    parse_records,
)
from fixture_store.registry.family import FamilyFile, Registry
from fixture_store.registry.known_failures import parse as parse_known_failure
from fixture_store.registry.lazy_records import LazyRecords
from fixture_store.registry.parsed_cache import Cache
from fixture_store.registry.raw_files import (
    DIRNAME,
    project_root,
    read_listed,
    read_text,
)
from fixture_store.registry.records import Record, check_family, parse_record


def text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def load_file(path: str | os.PathLike[str], cache: Cache | None = None) -> FamilyFile:
    """Parse one family's file, and its shards if it has them. File-level problems raise; a bad
    record is kept in ``invalid``. ``cache``: the parsed-registry cache to ask (and tell) about
    each file's verdict (see :mod:`.parsed_cache`)."""
    p = Path(path)
    shown = str(p)
    try:
        family = check_family(p.stem)
    except UsageError as e:
        raise RegistryError(e.message, file=shown, field="file name") from e
    text = read_text(p)
    digests = {p.name: text_digest(text)}
    doc, records, invalid = _parsed(text, digests[p.name], p, family, cache=cache)
    if "shards" in doc:
        records, invalid, stated = _load_shards(p, family, digests, cache)
    else:
        stated = {name: doc["records"][name] for name in invalid}
        _check_leftover(p, doc["records"], records, digests)
    known = tuple(
        parse_known_failure(kf, file=shown, index=i)
        for i, kf in enumerate(doc.get("known_failures") or [])
    )
    return FamilyFile(
        p,
        family,
        records,
        invalid,
        known,
        doc.get("description"),
        shards.combined_digest(digests),
        MappingProxyType(stated),
        MappingProxyType(digests),
        sharded="shards" in doc,
    )


def _parsed(
    text: str,
    digest: str,
    path: Path,
    family: str,
    *,
    cache: Cache | None,
    shard: str | None = None,
) -> tuple[Mapping[str, Any], Mapping[str, Record], dict[str, RegistryError]]:
    """A family file's (or a shard's) document, its valid records and the error of each invalid
    one. When the cache holds that these very bytes, in this place, parsed with every record
    valid, the records are the text's JSON, each built without checking it again when it is
    first used (:class:`.lazy_records.LazyRecords`); else parsed in full (and, if every record
    was valid, the cache is told)."""
    shown, role = str(path), family if shard is None else f"{family}/{shard}"
    if cache is not None and cache.holds(role, digest):
        try:
            doc = bounded_json.loads(text, cap=nesting.TEXT_CAP)
            lazy = LazyRecords.of_json(doc.get("records", {}), shown)
        except (ValueError, TypeError, AttributeError):
            pass  # not what the entry said: parse in full
        else:
            return doc, lazy, {}
    doc = parse_document(text, shown, shard=family if shard is not None else None)
    if "shards" in doc:
        return doc, {}, {}
    passed = SchemaPasses.for_text(text)
    records, invalid = parse_records(
        doc["records"], path, family, passed, shard=shard, suspect=doc.suspect
    )
    if cache is not None and not invalid:
        cache.remember(role, digest)
    return doc, records, invalid


def _load_shards(
    head: Path, family: str, digests: dict[str, str], cache: Cache | None
) -> tuple[Mapping[str, Record], dict[str, RegistryError], dict[str, Any]]:
    """The records of a sharded family, from every shard file (each file's digest is added to
    ``digests``)."""
    parts: list[Mapping[str, Record]] = []
    invalid: dict[str, RegistryError] = {}
    stated: dict[str, Any] = {}
    for path in shards.shard_files(head):
        shown = str(path)
        if not shards.is_shard_name(path.stem):
            raise RegistryError(
                f"is not a shard of family {family!r}: shards are named by two hex digits, "
                "00.json to ff.json",
                file=shown,
                fix=f"move it out of {shards.folder(head)}",
            )
        text = read_listed(path, read_text)
        if text is None:
            continue
        digest = digests[shards.relative(head, path)] = text_digest(text)
        doc, found, bad = _parsed(text, digest, path, family, cache=cache, shard=path.stem)
        parts.append(found)
        invalid.update(bad)
        stated.update({name: doc["records"][name] for name in bad})
    return _combined(parts), dict(sorted(invalid.items())), stated


def _combined(parts: list[Mapping[str, Record]]) -> Mapping[str, Record]:
    """The records of every shard, sorted by name: built when first used if the cache vouched
    for a shard (see :mod:`.lazy_records`), else a dict of the parsed records."""
    if any(isinstance(part, LazyRecords) for part in parts):
        return LazyRecords.combined(parts)
    records: dict[str, Record] = {}
    for part in parts:
        records.update(part)
    return dict(sorted(records.items()))


def _check_leftover(
    head: Path,
    raw_records: Mapping[str, Any],
    records: Mapping[str, Record],
    digests: dict[str, str],
) -> None:
    """A family file without ``"shards"`` may have a shard folder beside it only as what a write
    interrupted while sharding the family left: copies of records the file holds as they are.
    Anything else there is refused, never skipped (its digest joins ``digests`` either way)."""
    for path in shards.shard_files(head):
        text = read_listed(path, read_text)
        if text is None:
            continue
        digests[shards.relative(head, path)] = text_digest(text)
        try:
            doc = bounded_json.loads(text, cap=nesting.TEXT_CAP)
        except ValueError:
            doc = None
        copies = (
            isinstance(doc, dict)
            and set(doc) <= {"format_version", "records"}
            and isinstance(doc.get("records"), dict)
            and all(_a_copy(n, raw, raw_records, records) for n, raw in doc["records"].items())
        )
        if not copies:
            raise RegistryError(
                f"holds shards of family {head.stem!r}, but {head.name} is not sharded (it has "
                'no "shards" field), so its records would be read from two places',
                file=str(path),
                fix=f"keep one layout: move the records of {shards.folder(head)} into "
                f"{head} and remove the folder (the next write shards the family again if "
                "it is large)",
            )


_ABSENT = object()


def _a_copy(
    name: str, raw: Any, raw_records: Mapping[str, Any], records: Mapping[str, Record]
) -> bool:
    """Whether a shard's record is the family file's record of that name: as written, or (as
    the copy is written from the parsed record) the same record once parsed."""
    if raw_records.get(name, _ABSENT) == raw:
        return True
    if name not in records:
        return False
    try:
        return parse_record(name, raw, file="<copy>") == records[name]
    except RegistryError:
        return False


@cyclic_gc_paused()
def load(root: str | os.PathLike[str] | None = None, *, cached: bool = True) -> Registry:
    """Load every ``provenance/*.json`` under the project root; ``cached``: with this user's
    parsed-registry cache (see :mod:`.parsed_cache`; ``verify --full`` loads without it)."""
    base = project_root(root)
    directory = base / DIRNAME
    if not directory.is_dir():
        raise UsageError(f"{directory} does not exist", fix="fixture-store init")
    refuse_orphans(directory)
    families = {}
    cache = Cache.open() if cached else None
    try:
        for path in shards.family_files(directory):
            fam = load_file(path, cache)
            families[fam.family] = fam
    finally:
        if cache is not None:
            cache.close()
    return Registry(base, families)


@cyclic_gc_paused()
def load_family(root: str | os.PathLike[str] | None, family: str) -> FamilyFile | None:
    """One family's file (and shards) of the project at ``root``, with the parsed-registry
    cache, without reading any other family's; ``None`` if the project has no such family.
    The checks :func:`load` makes of the folder come first (shards without their family's
    file are refused), so a family that loads alone loads the same in the whole registry."""
    directory = project_root(root) / DIRNAME
    if not directory.is_dir():
        raise UsageError(f"{directory} does not exist", fix="fixture-store init")
    refuse_orphans(directory)
    head = directory / f"{family}.json"
    if "/" in family or head not in shards.family_files(directory):
        return None
    cache = Cache.open()
    try:
        return load_file(head, cache)
    finally:
        if cache is not None:
            cache.close()


def family_names(root: str | os.PathLike[str] | None) -> list[str]:
    """The families of the project at ``root``, from its folder's listing (nothing parsed)."""
    return [p.stem for p in shards.family_files(project_root(root) / DIRNAME)]


def refuse_orphans(directory: Path) -> None:
    for orphan in shards.orphan_folders(directory):
        raise orphan_error(orphan)


def orphan_error(folder: Path) -> RegistryError:
    return RegistryError(
        f"holds registry shards, but there is no {folder.name}.json beside it to say they are "
        "the family's shards",
        file=str(folder),
        fix=f'restore {shards.head_of(folder)} (it holds "shards": {shards.COUNT}), or '
        "remove the folder",
    )
