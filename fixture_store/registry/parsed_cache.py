"""The parsed-registry cache: a registry file whose exact bytes parsed with every record valid,
remembered per user, so loading it again builds its records without checking them again.

Parsing a large registry is mostly :func:`.records.parse_record` checking every field of every
record (10^5 records: seconds). What the cache keeps is that *verdict*, never records: an entry
says "this family's file (or shard) with these exact bytes (their SHA-256), read by this code
(fixture-store's version and the size and mtime of each of its modules and data files), parsed
with all its records valid". A load that reads a file hashes the bytes it read (a fraction of
a parse) and, if an entry holds for them, keeps the file's own JSON and builds each record from
it when it is first used (:mod:`.lazy_records`) by a constructor that skips the checks
(:func:`rebuild`); anything else is parsed in full.

So nothing in the cache can become a record: the records always come from the bytes read now,
and the digest of those bytes is the key (a stale entry cannot match). What an entry could do
is vouch for bytes that would not parse: entries are therefore named by an HMAC of their key
under a per-user secret (32 random bytes in the cache folder, readable only by the user), so an
entry edited, copied to another name or written by someone without the secret is simply not
found, and the file is parsed. The folder (under ``platformdirs.user_state_dir``, beside the
verify snapshots, never in the store that other users may share and write) and every file read
from it must be owned by the user and writable by nobody else; otherwise the cache is not used.
Entries are JSON, written atomically through the path primitive; a damaged or foreign entry is a
miss (the cache is not data: deleting it costs one parse). ``verify --full`` never reads it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import hmac
import json
import os
import stat
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

import platformdirs

from fixture_store import bounded_json
from fixture_store._version import __version__, files_state
from fixture_store.errors import FixtureStoreError, RegistryError
from fixture_store.objects import anchored, trees
from fixture_store.objects.digests import PREFIX, Digest
from fixture_store.registry.records import Kind, Record
from fixture_store.registry.sources import LocalSource, PackageSource, Source, parse_source
from fixture_store.registry.where import Where

# An entry is a few hundred bytes; anything longer is not one (a miss, never parsed).
_ENTRY_CAP = 64 * bounded_json.KiB

FORMAT = 1
_FOLDER = "parsed-registry"
_SECRET = "secret"
_PACKAGE = Path(__file__).resolve().parent.parent
# The record fields :func:`rebuild` builds itself; a record with any other field is parsed.
_SIMPLE = frozenset(
    {"kind", "source", "digest", "size", "media_type", "blake3", "members", "license"}
    | {"profile", "description", "lineage"}
)


def folder() -> Path:
    """Where this user's entries live (``$XDG_STATE_HOME`` on Linux)."""
    return Path(platformdirs.user_state_dir("fixture-store", appauthor=False)) / _FOLDER


@cache
def code_state() -> str:
    """fixture-store's version and the size and mtime of each of its modules and data files:
    a changed parser or schema (an upgrade, an edited checkout) makes every entry a miss."""
    h = hashlib.sha256(f"format {FORMAT}\0fixture-store {__version__}\0".encode())
    for line in files_state(str(_PACKAGE), (".py", ".json")):
        h.update(f"{line}\0".encode())
    return h.hexdigest()


def _refuse(path: str, what: str) -> FixtureStoreError:
    return RegistryError(f"not used as the parsed-registry cache: {what}", file=path)


def _private(st: os.stat_result, *, readable: bool = True) -> bool:
    """Owned by this user, writable by nobody else (and, for the secret, readable by nobody)."""
    others = (stat.S_IWGRP | stat.S_IWOTH) | (0 if readable else stat.S_IRWXG | stat.S_IRWXO)
    return st.st_uid == os.geteuid() and not st.st_mode & others


class Cache:
    """The entries of this user, opened once per load (see the module's docstring)."""

    def __init__(self, secret: bytes, base: anchored.Folder | None) -> None:
        self._secret = secret
        self._folder = base

    @classmethod
    def open(cls) -> Cache | None:
        """This user's cache; ``None`` where it cannot be used (no private folder or secret)."""
        try:
            base = _open_folder(create=True)
        except (OSError, FixtureStoreError):
            return None
        try:
            secret = _secret(base)
        except (OSError, FixtureStoreError, ValueError):
            base.close()
            return None
        return cls(secret, base)

    def close(self) -> None:
        if self._folder is not None:
            self._folder.close()
            self._folder = None

    @functools.cached_property
    def _code(self) -> str:
        """:func:`code_state`, walked once per opened cache, not once per file it names."""
        return code_state()

    def _name(self, role: str, digest: str) -> str:
        key = f"{FORMAT}\0{self._code}\0{role}\0{digest}".encode()
        return hmac.new(self._secret, key, hashlib.sha256).hexdigest() + ".json"

    def holds(self, role: str, digest: str) -> bool:
        """Whether an entry says the file of ``role`` (``family`` or ``family/ab``) whose bytes
        have this SHA-256 parsed with its records all valid."""
        if self._folder is None:
            return False
        try:
            fd = self._folder.open_fd(self._name(role, digest))
        except (OSError, FixtureStoreError):
            return False
        try:
            with os.fdopen(fd, "rb") as f:
                if not _private(os.fstat(f.fileno())):
                    return False
                raw = bounded_json.loads(f.read(_ENTRY_CAP + 1), cap=_ENTRY_CAP)
        except (OSError, ValueError):
            return False
        return bool(raw == _entry(digest))

    def remember(self, role: str, digest: str) -> None:
        """Keep the verdict that the file parsed with all its records valid (a failure to write
        loses only the shortcut)."""
        if self._folder is None:
            return
        data = json.dumps(_entry(digest), sort_keys=True).encode()
        with contextlib.suppress(OSError, FixtureStoreError):
            self._folder.write_atomically(self._name(role, digest), data, mode=0o600, temp=".")


def _entry(digest: str) -> dict[str, Any]:
    """An entry's text (its place is in its name, with the digest: :meth:`Cache._name`)."""
    return {"format": FORMAT, "sha256": digest, "valid": True}


def _open_folder(*, create: bool) -> anchored.Folder:
    """The cache folder, made private if missing; refused unless it and its parent are this
    user's folders that nobody else can write."""
    where = folder()
    if create and not where.parent.is_dir():
        where.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
    with anchored.Folder.root(where.parent, refuse=_refuse) as parent:
        if not _private(os.fstat(parent.fd)):
            raise _refuse(str(where.parent), "writable by other users")
        base = parent.folder(_FOLDER, create=create, mode=0o700)
    if not _private(os.fstat(base.fd)):
        base.close()
        raise _refuse(str(where), "writable by other users")
    return base


def _secret(base: anchored.Folder) -> bytes:
    """This user's secret, made on first use (published once: a racing writer's is kept)."""
    if base.regular_size(_SECRET) is None:
        fd, temp = base.create_temp(".secret.", mode=0o600)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(os.urandom(32).hex().encode())
                out.flush()
                os.fsync(out.fileno())
            with contextlib.suppress(FileExistsError):
                base.link(temp, base, _SECRET)
        finally:
            base.unlink(temp)
    fd = base.open_fd(_SECRET)
    with os.fdopen(fd, "rb") as f:
        if not _private(os.fstat(f.fileno()), readable=False):
            raise ValueError("the secret is readable by other users")
        secret = bytes.fromhex(f.read().decode("ascii"))
    if len(secret) != 32:  # noqa: PLR2004 - the secret's length
        raise ValueError("not a secret")
    return secret


def rebuild(name: str, raw: Mapping[str, Any], file: str, parse: Callable[..., Record]) -> Record:
    """The record ``parse`` (:func:`.records.parse_record`) makes of ``raw``, which it was seen
    to accept (an entry holds for the bytes it comes from): built without checking the common
    fields again (a frozen dataclass's ``__init__`` costs more than the fields' values); a
    record with a field not built here is parsed."""
    if not _SIMPLE.issuperset(raw) or "digest" not in raw:
        return parse(name, raw, file=file)
    member_blake3: dict[str, str] = {}
    fields = {
        **_RECORD_DEFAULTS,
        "name": name,
        "kind": _KINDS[raw["kind"]],
        "source": _source(name, raw["source"], file),
        "digest": _digest(raw),
        "member_blake3": MappingProxyType(member_blake3),
    }
    for key in _OPTIONAL_TEXT.intersection(raw):
        fields[key] = raw[key]
    if "lineage" in raw:
        fields["lineage"] = tuple(raw["lineage"])
    if "members" in raw:
        entries = raw["members"]
        checked = {}
        for path in sorted(entries):
            entry = entries[path]
            checked[path] = _digest(entry)
            if "blake3" in entry:
                member_blake3[path] = entry["blake3"]
        tree = object.__new__(trees.Tree)
        object.__setattr__(tree, "members", MappingProxyType(checked))
        fields["members"] = tree
    record = object.__new__(Record)
    record.__dict__.update(fields)
    return record


_KINDS = {kind.value: kind for kind in Kind}
_OPTIONAL_TEXT = frozenset({"media_type", "blake3", "license", "profile", "description"})
_RECORD_DEFAULTS = {
    f.name: f.default if f.default is not dataclasses.MISSING else None
    for f in dataclasses.fields(Record)
}
_PREFIX = len(PREFIX)


def _digest(raw: Mapping[str, Any]) -> Digest:
    return Digest.unchecked(raw["digest"][_PREFIX:], raw["size"])


# The source types whose ``from_json`` copies each field as it is (then checks them).
_PLAIN_SOURCES: dict[str, tuple[type[LocalSource | PackageSource], dict[str, Any]]] = {
    cls.type: (cls, {f.name: f.default for f in dataclasses.fields(cls)})
    for cls in (LocalSource, PackageSource)
}


def _source(name: str, raw: Mapping[str, Any], file: str) -> Source:
    """A source of a type its parser copies field by field, built as it is; any other parsed."""
    plain = _PLAIN_SOURCES.get(raw.get("type"))  # type: ignore[arg-type]
    if plain is not None and plain[1].keys() >= raw.keys() - {"type"}:
        cls, defaults = plain
        source: Source = object.__new__(cls)
        fields = {**defaults, **raw}
        del fields["type"]  # a class variable, not a field
        object.__setattr__(source, "__dict__", fields)
        return source
    return parse_source(raw, Where(file, name))
