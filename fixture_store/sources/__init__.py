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
from typing import BinaryIO

from fixture_store.errors import ArtifactError, IntegrityError
from fixture_store.objects.digests import Digest
from fixture_store.objects.store import Store
from fixture_store.registry import Record
from fixture_store.verify import Status, Verifier, repair_command

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

    ``downloaded`` counts bytes received from the network in this run (the idempotence check:
    a second fetch of verified artifacts leaves it at zero).
    """

    store: Store
    root: Path
    offline: bool = False
    verifier: Verifier = field(default=None)  # type: ignore[assignment]
    downloaded: int = 0
    downloads: int = 0
    shared: dict[str, object] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _key_locks: dict[str, threading.Lock] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.verifier is None:
            self.verifier = Verifier(self.store)

    def needs(self, digest: Digest) -> bool:
        """Whether the object is missing or damaged (a verified object is never re-fetched)."""
        return self.verifier.check_object(digest).status is not Status.VERIFIED

    def count_download(self, nbytes: int) -> None:
        with self._lock:
            self.downloaded += nbytes
            self.downloads += 1

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
                fix=f"fixture-store fetch {record.name}  (with network access)",
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


def put_tree(ctx: FetchContext, record: Record, open_member: Callable[[str], BinaryIO]) -> None:
    """Put every missing or damaged member of a tree record, then its manifest."""
    assert record.members is not None and record.digest is not None
    for member, digest in record.members:
        if ctx.needs(digest):
            with open_member(member) as stream:
                put_object(ctx, record, stream, digest, f"member {member!r}")
    if ctx.needs(record.digest):
        manifest = record.members.canonical_bytes()
        put_object(ctx, record, io.BytesIO(manifest), record.digest, "member manifest")


Fetcher = Callable[[FetchContext, Record], None]


def fetcher_for(record: Record) -> Fetcher:
    from fixture_store.sources import hub, local, package, url

    table: dict[str, Fetcher] = {
        "hub": hub.fetch,
        "package": package.fetch,
        "url": url.fetch,
        "local": local.fetch,
    }
    kind = record.source.type
    if kind == "generator":
        stage = record.source.fields.get("stage")
        raise SourceError(
            record.name,
            f"is produced by the generator stage {stage!r}, not downloaded",
            fix=f"{repair_command(record)}  (or: uv run dvc repro {stage})",
        )
    if kind not in table:
        raise SourceError(record.name, f"unknown source type {kind!r}")
    return table[kind]


def fetch_record(ctx: FetchContext, record: Record) -> None:
    """Bring the record's bytes into the store from its pinned source, verified."""
    fetcher_for(record)(ctx, record)
