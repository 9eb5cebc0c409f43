"""Fetching artifacts from their pinned sources (DESIGN decision 5: the only network door).

Idempotent: an artifact whose objects already verify is not touched, a missing or damaged object
is (re)fetched, and every artifact is verified again after its fetch. Parallel across artifacts;
the store's shard locks and atomic renames make concurrent fetches (threads or processes) safe.
A fetch holds the store's writer lock while it publishes (see
:mod:`fixture_store.objects.store`), so ``gc`` never runs in the middle of one.

Gaps lift when their bytes arrive. A gap that kept its digest and size is fetched as any
record; once its bytes verify in the store (fetched now, or already there) its gap is lifted,
the record keeping its digest. A gap known by its digest alone (a SHA-256 without its size, or
a weak md5 or sha1 a manifest stated) whose source can deliver it is filled: its bytes are
checked against that digest as they are stored, verified as the record they make, and their
SHA-256 and size become its digest. Once every download has ended, every gap lifted is
recorded in one registry transaction (:func:`fixture_store.registry.record_fills`). A gap with
no source stays one: lifted, it would have nowhere to come from.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from fixture_store._extras import MissingExtraError
from fixture_store.errors import ArtifactError, FixtureStoreError
from fixture_store.objects import names as names_mod
from fixture_store.objects.store import Store, holding_writer_lock
from fixture_store.registry import Fill, NoSource, Record, Registry, family_of, record_fills
from fixture_store.remotes.base import Remote
from fixture_store.remotes.mirrors import Mirrors
from fixture_store.sources import (
    FetchContext,
    fetch_record,
    fill_record,
    filler_for,
    offline_from_env,
)


class Outcome(StrEnum):
    PRESENT = "present"  # already verified: nothing downloaded
    FETCHED = "fetched"  # fetched now and verified
    GAP = "gap"
    FAILED = "failed"
    INVALID_RECORD = "invalid-record"
    UNKNOWN = "unknown"
    NEEDS_EXTRA = "needs-extra"  # its source needs an extra this environment lacks: exit 2


@dataclass(frozen=True)
class FetchResult:
    name: str
    outcome: Outcome
    source: str = ""
    message: str = ""  # why it failed, or for one fetched, what the remotes tried first answered
    fix: str | None = None
    size: int = 0
    # A gap whose bytes arrived, its gap lifted once recorded (:func:`_recorded`): for one known
    # by its digest alone, the SHA-256 and size recorded for it and the digest its bytes were
    # checked against; for one that kept its digest and size, that digest.
    fill: Fill | None = None

    @property
    def ok(self) -> bool:
        return self.outcome in (Outcome.PRESENT, Outcome.FETCHED, Outcome.GAP)

    @property
    def recorded(self) -> Fill | None:
        """The fill of a gap known by its digest alone: its SHA-256 and size, now its digest."""
        fill = self.fill
        return fill if fill is not None and fill.proved is not None else None

    def to_json(self) -> dict[str, object]:
        recorded = self.recorded
        return {
            "name": self.name,
            "outcome": str(self.outcome),
            "source": self.source,
            "message": self.message,
            "fix": self.fix,
            "size": self.size,
            "recorded": {
                "digest": recorded.digest.text,
                "size": recorded.digest.size,
                "checked_against": str(recorded.proved),
            }
            if recorded is not None
            else None,
            "lifted": self.fill is not None,
        }


@dataclass(frozen=True)
class FetchReport:
    results: list[FetchResult]
    downloaded_bytes: int
    downloads: int
    refused: int = 0  # downloads received whole whose bytes did not match: nothing stored
    refused_bytes: int = 0

    @property
    def lifted(self) -> list[FetchResult]:
        """The gaps this fetch lifted: those that kept their digest and size, and those of
        :attr:`recorded`."""
        return [r for r in self.results if r.fill is not None]

    @property
    def recorded(self) -> list[FetchResult]:
        """The gaps known by their digest alone that this fetch filled: their SHA-256 and size
        are now their records' digests."""
        return [r for r in self.results if r.recorded is not None]

    def summary(self, registry: Registry) -> dict[str, Any]:
        """What is now verified in the store, per family, and the pinned sources it came from.

        The same on every machine that fetched the same records: no timings, no store path, and
        no difference between fetched now and already present.
        """
        families: dict[str, Counter[str]] = defaultdict(Counter)
        sources: dict[str, dict[str, object]] = {}
        for r in self.results:
            fam = families[family_of(r.name)]
            fam["artifacts"] += 1
            fam[
                "verified" if r.outcome in (Outcome.PRESENT, Outcome.FETCHED) else str(r.outcome)
            ] += 1
            fam["bytes"] += r.size
            if r.outcome in (Outcome.PRESENT, Outcome.FETCHED):
                fields = registry.get(r.name).source.to_json()
                fields.pop("path", None)  # one distribution serves many artifacts
                sources.setdefault(json.dumps(fields, sort_keys=True), fields)
        return {
            "ok": all(r.ok for r in self.results),
            "families": {f: dict(sorted(c.items())) for f, c in sorted(families.items())},
            "sources": [sources[s] for s in sorted(sources)],
        }


def _fetch_one(
    ctx: FetchContext, record: Record, source: str, size: int, mirrors: Mirrors
) -> FetchResult:
    """Fetch a record's bytes, from a mirror if one has them, else from the pinned source, and
    verify them again: only then do they count as fetched."""
    name = record.name
    remote, tried, failures = mirrors.pull(record, ctx.needs, ctx.count_download)
    if remote is not None and ctx.verifier.verify(record).ok:
        via = f"remote {remote.label}"
        return FetchResult(name, Outcome.FETCHED, via, size=size, fill=_lift(record))
    try:
        fetch_record(ctx, record)
    except FixtureStoreError as e:
        also = f" (remotes tried first: {'; '.join(tried)})" if tried else ""
        return _refused(name, source, e, size, also)
    # A remote that merely lacks the record is a cache's normal answer, not a warning.
    warning = f"remotes tried first: {'; '.join(failures)}" if failures else ""
    return _verified_after(ctx, record, source, warning, fill=_lift(record))


def _refused(
    name: str, source: str, e: FixtureStoreError, size: int, also: str = ""
) -> FetchResult:
    # A missing extra is the environment's, not the download's: the same exit code (2) as
    # every other command that needs it.
    failed = Outcome.NEEDS_EXTRA if isinstance(e, MissingExtraError) else Outcome.FAILED
    return FetchResult(name, failed, source, e.about(name) + also, e.fix, size)


def _verified_after(
    ctx: FetchContext, record: Record, source: str, warning: str = "", fill: Fill | None = None
) -> FetchResult:
    """The result of a fetch of ``record`` (for a filled gap: the record it makes), verified
    again: only then does it count as fetched, and its ``fill`` stand to be recorded."""
    name, size = record.name, _size(record)
    after = ctx.verifier.verify(record)
    if not after.ok:
        return FetchResult(
            name,
            Outcome.FAILED,
            source,
            f"fetched but does not verify: {after.message}",
            after.fix,
            size,
        )
    # A remote that failed is a warning: the pinned source served the record.
    return FetchResult(name, Outcome.FETCHED, source, warning, size=size, fill=fill)


def _fill_one(ctx: FetchContext, record: Record, source: str) -> FetchResult:
    """Fill a gap known by its digest alone from its source (checked against that digest as
    stored), and verify the record its bytes make; its SHA-256 is recorded later, with the
    others (:func:`_recorded`)."""
    gap = record.gap
    assert gap is not None  # filler_for said so
    assert gap.expected is not None
    try:
        stored = fill_record(ctx, record)
    except FixtureStoreError as e:
        return _refused(record.name, source, e, 0)
    filled = record.filled(stored.digest, proved=gap.expected)
    assert filled is not None  # the bytes were proved to have the digest it awaits
    fill = Fill(record.name, gap.expected, stored.digest, stored.blake3)
    return _verified_after(ctx, filled, source, fill=fill)


def _gap_outcome(
    ctx: FetchContext, record: Record, source: str, *, settle_only: bool
) -> FetchResult | None:
    """A gap without a digest and size: filled if its source can deliver the bytes it awaits
    (``None`` when only settling: the pool's work), else a gap, as declared."""
    if filler_for(record) is not None:
        return None if settle_only else _fill_one(ctx, record, source)
    assert record.gap is not None
    return FetchResult(record.name, Outcome.GAP, source, record.gap.reason)


def _lift(record: Record) -> Fill | None:
    """What lifts a gap that kept its digest and size, once its bytes verify in the store: that
    digest. ``None`` for a record that is no such gap, or that has no source (lifted, it would
    have nowhere to come from: its bytes are registered with ``add --replace``)."""
    if record.gap is None or record.digest is None or isinstance(record.source, NoSource):
        return None
    return Fill(record.name, None, record.digest)


def _recorded(registry: Registry, results: list[FetchResult]) -> list[FetchResult]:
    """``results`` once every gap whose bytes arrived is lifted (the SHA-256 of those known by
    their digest alone recorded), in one transaction; a gap whose record changed during the
    fetch is not, and fails, saying so."""
    fills = [r.fill for r in results if r.fill is not None]
    if not fills:
        return results
    written = record_fills(registry, fills)

    def after(r: FetchResult) -> FetchResult:
        if r.fill is None or r.name in written:
            return r
        proved = r.fill.proved
        arrived = (
            f"its bytes arrived and matched {proved}, but its record changed while they were "
            "fetched: their SHA-256 was not recorded"
            if proved is not None
            else "its bytes are in the store and verify, but its record changed during the "
            "fetch: its gap was not lifted"
        )
        return dataclasses.replace(
            r,
            outcome=Outcome.FAILED,
            message=arrived,
            fix=f"fixture-store fetch {names_mod.shell(r.name)}  (again, against the record as "
            "it is now)",
            fill=None,
        )

    return [after(r) for r in results]


@holding_writer_lock
def fetch_names(
    store: Store,
    registry: Registry,
    names: Iterable[str],
    *,
    offline: bool | None = None,
    jobs: int | None = None,
    on_result: Callable[[FetchResult], None] | None = None,
    root: Path | None = None,
    remotes: Sequence[Remote] = (),
) -> FetchReport:
    """Fetch and verify ``names``; results in the order of ``names``.

    ``remotes`` are mirrors tried in order before each record's pinned source (never offline):
    the first that has all of a record's missing objects, verified, serves it. The record stays
    the truth: what a remote sends is checked against it like any download.
    ``offline=None`` follows the environment (``HF_HUB_OFFLINE=1`` means offline).
    """
    if offline is None:
        offline = offline_from_env()
    ctx = FetchContext(store, root or registry.root, offline=offline)
    mirrors = Mirrors(store, () if offline else tuple(remotes))
    invalid = dict(registry.invalid())

    def one(name: str) -> FetchResult:
        with store.writing():  # this thread's temp files in the command's writer folder
            result = outcome(name)
        assert result is not None  # outcome answers every name unless asked to settle only
        return result

    def settled(name: str) -> FetchResult | None:
        """The outcome if it needs no thread: an invalid, unknown or gap record, or one whose
        objects the verified-state cache vouches for (one lstat each); ``None`` otherwise."""
        return outcome(name, settle_only=True)

    def outcome(name: str, *, settle_only: bool = False) -> FetchResult | None:
        if name in invalid:
            err = invalid[name]
            return FetchResult(
                name,
                Outcome.INVALID_RECORD,
                message=err.about(name),
                fix=err.fix or "edit the record so it validates",
            )
        try:
            record = registry.get(name)
        except ArtifactError as e:
            return FetchResult(name, Outcome.UNKNOWN, message=e.about(name), fix=e.fix)
        source, size = record.source.describe(), _size(record)
        if record.gap is not None and record.digest is None:
            return _gap_outcome(ctx, record, source, settle_only=settle_only)
        verify = ctx.verifier.verify_cached if settle_only else ctx.verifier.verify
        found = verify(record)
        if found is not None and found.ok:  # a gap whose bytes are here is lifted
            return FetchResult(name, Outcome.PRESENT, source, size=size, fill=_lift(record))
        if settle_only:
            return None  # missing, or to read: the pool's work
        return _fetch_one(ctx, record, source, size, mirrors)

    workers = jobs or min(8, (os.cpu_count() or 1) * 2)
    try:
        results = _settle_then_pool(list(names), settled, one, workers, on_result)
    finally:
        ctx.verifier.cache.flush()
    results = _recorded(registry, results)  # under the writer lock: gc waits for the records
    return FetchReport(results, ctx.downloaded, ctx.downloads, ctx.refused, ctx.refused_bytes)


def _size(record: Record) -> int:
    tree = record.tree
    return tree.total_size if tree is not None else (record.digest.size if record.digest else 0)


def _settle_then_pool(
    names: list[str],
    settled: Callable[[str], FetchResult | None],
    one: Callable[[str], FetchResult],
    workers: int,
    on_result: Callable[[FetchResult], None] | None,
) -> list[FetchResult]:
    """Each name's result, in order: what ``settled`` answers in one loop first, then the rest
    by ``one`` in a pool of threads. A future for each of 10^5 present records cost more in
    the pool's locks than the checks did (16 s against about 1 s), and the pool is for the
    records that need reading or fetching."""
    results: list[FetchResult | None] = []
    for name in names:
        result = settled(name)
        results.append(result)
        if result is not None and on_result is not None:
            on_result(result)
    pending = [i for i, r in enumerate(results) if r is None]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for i, result in zip(pending, pool.map(one, [names[i] for i in pending]), strict=True):
            results[i] = result
            if on_result is not None:
                on_result(result)
    return [r for r in results if r is not None]
