"""Loading a project's registry: every ``provenance/<family>.json``, and the shards
``provenance/<family>/<ab>.json`` of a sharded family (see :mod:`.shards`), each file opened
through the path primitive from ``provenance/`` and parsed by :mod:`.documents`; the digests of
the files as read, which transactions and verify snapshots compare without parsing."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

from fixture_store.errors import RegistryError, UsageError
from fixture_store.objects.gcpause import cyclic_gc_paused
from fixture_store.registry import shards
from fixture_store.registry.documents import (
    DIRNAME,
    ENV_VAR,
    SchemaPasses,
    parse_document,
    parse_records,
)
from fixture_store.registry.family import FamilyFile, Registry
from fixture_store.registry.known_failures import parse as parse_known_failure
from fixture_store.registry.parsed_cache import Cache, rebuild
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
) -> tuple[Mapping[str, Any], dict[str, Record], dict[str, RegistryError]]:
    """A family file's (or a shard's) document, its valid records and the error of each invalid
    one. Built from the text without checking it again when the cache holds that these very
    bytes, in this place, parsed with every record valid; else parsed in full (and, if every
    record was valid, the cache is told)."""
    shown, role = str(path), family if shard is None else f"{family}/{shard}"
    if cache is not None and cache.holds(role, digest):
        try:
            doc = json.loads(text)
            raw = doc.get("records", {})
            built = {n: rebuild(n, raw[n], shown, parse_record) for n in sorted(raw)}
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError, RegistryError):
            pass  # not what the entry said: parse in full
        else:
            return doc, built, {}
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
) -> tuple[dict[str, Record], dict[str, RegistryError], dict[str, Any]]:
    """The records of a sharded family, from every shard file (each file's digest is added to
    ``digests``)."""
    records: dict[str, Record] = {}
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
        records.update(found)
        invalid.update(bad)
        stated.update({name: doc["records"][name] for name in bad})
    return dict(sorted(records.items())), dict(sorted(invalid.items())), stated


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
            doc = json.loads(text)
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
_T = TypeVar("_T")


def read_listed(path: Path, read: Callable[[Path], _T]) -> _T | None:
    """``read(path)`` of a shard listed a moment ago; ``None`` if it is gone since: a writer
    removed it, emptied (readers take no lock, so one may list a folder while a writer
    changes it)."""
    try:
        return read(path)
    except RegistryError:
        if not os.path.lexists(path):
            return None
        raise


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


def read_text(path: Path) -> str:
    """The text of a registry file (see :func:`read_bytes`), which must be UTF-8."""
    try:
        return read_bytes(path).decode("utf-8")
    except UnicodeDecodeError as e:
        raise RegistryError(f"cannot read: {e}", file=str(path)) from e


def read_bytes(path: Path) -> bytes:
    """The bytes of a registry file, ``provenance/<family>.json`` or a shard
    ``provenance/<family>/<ab>.json``, opened through the path primitive from ``provenance/``:
    refused before reading unless it and its shard folder are plain (a FIFO would block the
    reader forever, a link to ``/dev/zero`` would never end, a link out of the project would be
    read as the family's records)."""
    shown = str(path)
    shard = shards.is_shard_name(path.stem) and _is_registry_dir(path.parent.parent)
    try:
        with (
            shards.registry_folder(path.parent.parent if shard else path.parent) as base,
            base.folder(path.parent.name) if shard else base as folder,
        ):
            fd = folder.open_fd(path.name)
    except OSError as e:
        raise RegistryError(f"cannot read: {e.strerror}", file=shown) from e
    with os.fdopen(fd, "rb") as f:
        try:
            return f.read()
        except OSError as e:
            raise RegistryError(f"cannot read: {e}", file=shown) from e


def _is_registry_dir(directory: Path) -> bool:
    """Whether ``directory`` is a project's ``provenance/`` (a shard's file lies one folder
    below it; a family file at ``<somewhere>/<ab>.json`` is not a shard)."""
    return directory.name == DIRNAME


def find_root(start: str | os.PathLike[str] | None = None) -> Path:
    """The project root: from ``$FIXTURE_STORE_REGISTRY``, else the nearest one with provenance/."""
    env = os.environ.get(ENV_VAR)
    if env:
        p = Path(env).expanduser().absolute()
        return p.parent if p.name == DIRNAME else p
    here = Path(start or Path.cwd()).absolute()
    for folder in (here, *here.parents):
        if (folder / DIRNAME).is_dir():
            return folder
    raise UsageError(
        f"no {DIRNAME}/ folder in {here} or any parent",
        fix="run 'fixture-store init' in your project, or pass --registry",
    )


def create_directory(project: str | os.PathLike[str]) -> tuple[Path, bool]:
    """Make ``provenance/`` in ``project``; returns it and whether it is new."""
    directory = Path(project) / DIRNAME
    created = not directory.exists()
    directory.mkdir(parents=True, exist_ok=True)
    return directory, created


def project_root(root: str | os.PathLike[str] | None = None) -> Path:
    """The folder holding ``provenance/``: ``root`` (that folder, or ``provenance/`` itself),
    else the nearest parent of the working directory with one."""
    base = Path(root).absolute() if root is not None else find_root()
    return base.parent if base.name == DIRNAME else base


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


def family_digests(directory: Path) -> list[tuple[str, str]]:
    """Each family's :attr:`FamilyFile.text_digest`, from the bytes of its files without
    parsing them, and one entry per shard folder without a family file (which loading
    refuses): a change to any registry file changes this list."""
    out = [(p.stem, family_digest(p)) for p in shards.family_files(directory)]
    for orphan in shards.orphan_folders(directory):
        out.append((f"{orphan.name}/", family_digest(shards.head_of(orphan))))
    return out


def family_digest(head: Path) -> str:
    """The :attr:`FamilyFile.text_digest` a family's files have now, from their bytes: its
    file's and those of every JSON file in its shard folder."""
    digests: dict[str, str] = {}
    if os.path.lexists(head):
        digests[head.name] = hashlib.sha256(read_bytes(head)).hexdigest()
    for path in shards.shard_files(head):
        data = read_listed(path, read_bytes)
        if data is not None:
            digests[shards.relative(head, path)] = hashlib.sha256(data).hexdigest()
    return shards.combined_digest(digests)


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
