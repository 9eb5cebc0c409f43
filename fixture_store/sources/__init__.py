"""Pinned sources: how the bytes of a record enter the store (DESIGN decisions 2 and 5).

Each source kind is one module with one function, ``fetch(ctx, record) -> None``, that obtains the
record's bytes from its pinned origin and puts them into the store through :func:`put_object`,
which checks every object against the digest the record expects: bytes that differ are refused
and nothing partial is left. Only objects that do not already verify are written, so a fetch of
something already present downloads nothing, and a damaged object is replaced.
"""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, TypeVar

from fixture_store.errors import ArtifactError, IntegrityError
from fixture_store.objects import names
from fixture_store.objects.digests import Awaited, Digest
from fixture_store.objects.store import Store, Stored
from fixture_store.objects.trees import Tree
from fixture_store.registry import (
    GeneratorSource,
    HubSource,
    LocalSource,
    NoSource,
    PackageSource,
    Record,
    UrlSource,
)
from fixture_store.sources.transfer import DownloadPolicy
from fixture_store.verify import Verifier, repair_command

OFFLINE_ENV_VARS = ("FIXTURE_STORE_OFFLINE", "HF_HUB_OFFLINE")


class SourceError(ArtifactError):
    """The pinned source could not deliver the record's bytes; nothing was stored."""

    status = "failed"


class OfflineError(SourceError):
    """Offline mode is on and the bytes are not in the store."""

    status = "offline"


def offline_from_env() -> bool:
    """``HF_HUB_OFFLINE=1`` (or ``FIXTURE_STORE_OFFLINE=1``) means: never touch the network."""
    return any(
        os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on")
        for var in OFFLINE_ENV_VARS
    )


@dataclass
class FetchContext:
    """What every source needs during one fetch run: the store, the project root, the mode.

    ``downloaded`` counts bytes received from the network in this run and stored (the
    idempotence check: a second fetch of verified artifacts leaves it at zero); ``refused``
    counts the downloads whose bytes did not match their record, which nothing stored.
    ``policy`` bounds every download in time (see :mod:`fixture_store.sources.transfer`); by
    default it is read from the environment.
    """

    store: Store
    root: Path
    offline: bool = False
    policy: DownloadPolicy = field(default_factory=DownloadPolicy.from_env)
    verifier: Verifier = field(default=None)  # type: ignore[assignment]
    downloaded: int = 0
    downloads: int = 0
    refused: int = 0
    refused_bytes: int = 0
    shared: dict[str, object] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _key_locks: dict[str, threading.Lock] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.verifier is None:
            self.verifier = Verifier(self.store)

    def needs(self, digest: Digest) -> bool:
        """Whether the object is missing or damaged (a verified object is never re-fetched)."""
        return self.verifier.lacks(digest)

    def count_download(self, nbytes: int) -> None:
        with self._lock:
            self.downloaded += nbytes
            self.downloads += 1

    def count_refused(self, nbytes: int) -> None:
        """A download received whole but refused: its bytes were not its record's."""
        with self._lock:
            self.refused_bytes += nbytes
            self.refused += 1

    def key_lock(self, key: str) -> threading.Lock:
        """One lock per shared resource (a distribution), so threads download it once."""
        with self._lock:
            return self._key_locks.setdefault(key, threading.Lock())

    def require_online(self, record: Record, what: str) -> None:
        if self.offline:
            raise OfflineError(
                record.name,
                f"{what} is not in the store {self.store.root} and offline mode is on "
                f"(--offline or HF_HUB_OFFLINE=1); source: {record.source.describe()}",
                fix=f"fixture-store fetch {names.shell(record.name)}  (with network access)",
            )


def put_object(
    ctx: FetchContext, record: Record, stream: BinaryIO, expected: Digest, what: str = "object"
) -> None:
    """Copy ``stream`` into the store if it has exactly ``expected``; refuse it otherwise."""
    try:
        ctx.store.write_stream(stream, expected, replace=True)
    except IntegrityError as e:
        raise SourceError(
            record.name,
            f"{what} from {record.source.describe()} does not match the record: {e.message}",
            fix="the source changed or the download was damaged; if the source is right, "
            "the record is wrong: review it before re-registering",
        ) from e


def put_awaited(
    ctx: FetchContext, record: Record, stream: BinaryIO, awaited: Awaited, cap: int
) -> Stored:
    """Copy ``stream`` (at most ``cap`` bytes) into the store if it has the digest a gap awaits
    (``awaited``: its SHA-256, or a weak md5 or sha1, checked as the bytes are hashed); its
    SHA-256 and size are those of the same bytes. Refused otherwise (:class:`SourceError`),
    and nothing is stored: the bytes wait in a temp file until they are proved."""
    check = awaited.hasher() if awaited.weak else None
    with ctx.store.staging(replace=True) as staging:  # whatever is not published is removed
        staged = staging.stream(stream, tap=check.update if check is not None else None)
        stored = staged.stored
        if stored.digest.size > cap:
            raise SourceError(
                record.name,
                f"{record.source.describe()} sent more than {cap:,} bytes, the most a download "
                "of no recorded size may be; nothing was stored",
                fix="record the file's size with its digest (its manifest's size, or fixture-store "
                f"add PATH --name {names.shell(record.name)} --replace once you have the file)",
            )
        got = check.hexdigest() if check is not None else stored.digest.hex
        if got != awaited.hex:
            raise SourceError(
                record.name,
                f"the bytes from {record.source.describe()} do not have the {awaited.algorithm} "
                f"the gap awaits: expected {awaited}, got {awaited.algorithm}:{got} "
                f"({stored.digest.size:,} bytes); nothing was stored",
                fix="the server sends other bytes than the manifest listed: check the record's "
                "source.url and the digest it awaits (its manifest's), then: fixture-store fetch "
                f"{names.shell(record.name)}",
            )
        staging.publish([staged])
    return stored


def put_tree(
    ctx: FetchContext, record: Record, tree: Tree, open_member: Callable[[str], BinaryIO]
) -> None:
    """Put every missing or damaged member of a tree record, then its manifest."""
    for member, digest in tree:
        if ctx.needs(digest):
            with open_member(member) as stream:
                put_object(ctx, record, stream, digest, f"member {member!r}")
    if ctx.needs(record.object):
        manifest = tree.canonical_bytes()
        put_object(ctx, record, io.BytesIO(manifest), record.object, "member manifest")


_S = TypeVar("_S", HubSource, PackageSource, UrlSource, LocalSource)


def source_as(record: Record, kind: type[_S]) -> _S:
    """The record's source, which a fetcher for ``kind`` sources needs; SourceError otherwise."""
    if not isinstance(record.source, kind):
        raise SourceError(
            record.name, f"has a {record.source.type} source, not a {kind.type} source"
        )
    return record.source


Fetcher = Callable[[FetchContext, Record], None]


def fetcher_for(record: Record) -> Fetcher:
    from fixture_store.sources import hub, local, package, url

    match record.source:
        case HubSource():
            return hub.fetch
        case PackageSource():
            return package.fetch
        case UrlSource():
            return url.fetch
        case LocalSource():
            return local.fetch
        case GeneratorSource(stage=stage):
            raise SourceError(
                record.name,
                f"is not in the store yet, and it is made by the generator stage {stage!r}, "
                f"not downloaded: run {repair_command(record)}",
                fix=f"{repair_command(record)}  (or: fixture-store fetch --regenerate ..., "
                f"uv run dvc repro {stage})",
            )
        case NoSource():
            raise SourceError(
                record.name,
                "is a declared gap with no source yet: there is nothing to fetch",
                fix=f"register its bytes: fixture-store add PATH --name {record.name} "
                f"--kind {record.kind} --replace",
            )


def fetch_record(ctx: FetchContext, record: Record) -> None:
    """Bring the record's bytes into the store from its pinned source, verified."""
    fetcher_for(record)(ctx, record)


Filler = Callable[[FetchContext, Record], Stored]


def filler_for(record: Record) -> Filler | None:
    """How a gap known by its digest alone (no size: :attr:`Gap.expected`) is filled from its
    source, checked against that digest; ``None`` for a record that is no such gap, or whose
    source cannot deliver bytes of no recorded size. A url does: one file, read by the bounded
    reader under the download cap of no known size. A Hub file, a package member and a local
    file are registered with their size (an import lifts a gap of its local file)."""
    from fixture_store.sources import url

    gap = record.gap
    if gap is None or gap.expected is None or record.digest is not None:
        return None
    return url.fill if isinstance(record.source, UrlSource) else None


def fill_record(ctx: FetchContext, record: Record) -> Stored:
    """Bring the bytes a gap awaits into the store from its source, checked against the digest
    it awaits (see :func:`filler_for`, :func:`put_awaited`): their stored SHA-256 and size."""
    filler = filler_for(record)
    if filler is None:
        raise SourceError(
            record.name,
            f"is a declared gap that its {record.source.type} source cannot fill",
            fix=f"register its bytes: fixture-store add PATH --name {names.shell(record.name)} "
            f"--kind {record.kind} --replace",
        )
    return filler(ctx, record)


__all__ = [
    "OFFLINE_ENV_VARS",
    "FetchContext",
    "OfflineError",
    "SourceError",
    "fetch_record",
    "fetcher_for",
    "fill_record",
    "filler_for",
    "offline_from_env",
    "put_awaited",
    "put_object",
    "put_tree",
    "source_as",
]
