"""Push and pull: the objects records reference, between the store and a remote.

Which objects: :meth:`Record.referenced` (a record's :meth:`~Record.objects`, a tree's members
and manifest included, and the distribution a package source points into), each object once
however many records share it. A plan (:func:`plan`) is made from the registry alone, then run
by :func:`push` or :func:`pull` over a bounded pool of threads; every transfer streams, so
memory stays flat whatever the sizes.

Push sends only objects that verify in the store; an object already on the remote is recognised
by its size and SHA-256 (S3: a HEAD), before sending it (large objects) or when the write-once
write is refused (small ones). Pull stages each object through the store's
:class:`~fixture_store.objects.store.Staging` with the digest the record expects: the bytes are
hashed as they land in the store's temp folder and kept only on a match, whatever the remote
claimed; what was kept is published a batch at a time (:class:`Batching`), with one batched sync
for the bytes and one for the renames instead of two fsyncs per object. A transient
failure (5xx, throttling, a cut or short body) is retried within :class:`Retry`'s bounds; other
bytes than expected, a 4xx, a missing object are not.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum

from fixture_store.errors import ArtifactError, FixtureStoreError, IntegrityError
from fixture_store.limits import MiB
from fixture_store.objects.digests import Digest
from fixture_store.objects.store import Staged, Staging, Store
from fixture_store.registry import PackageSource, Record, Registry
from fixture_store.remotes import packed as packed_part
from fixture_store.remotes import packs
from fixture_store.remotes.base import (
    CommittingRemote,
    GuardedBody,
    MissingRemoteObject,
    ReadOnlyRemote,
    Remote,
    RemoteError,
    RemoteObject,
    Retry,
    TransientRemoteError,
)
from fixture_store.sources.transfer import DownloadPolicy
from fixture_store.verify import Status, Verifier, repair_command

DEFAULT_JOBS = 8
# Below this size push writes first (write-once: an object already at the key refuses it) and
# looks only when refused: one request for each new object instead of two. From it on, push
# looks first, so that bytes the remote already holds are not sent again.
PUT_FIRST_BELOW = 1 << 20


class Outcome(StrEnum):
    PUSHED = "pushed"  # sent now
    PULLED = "pulled"  # received now, verified
    PRESENT = "present"  # already there: nothing sent
    MISSING = "missing"  # not where it should come from (the store for push, the remote for pull)
    FAILED = "failed"
    GAP = "gap"
    INVALID_RECORD = "invalid-record"
    UNKNOWN = "unknown"


OK = frozenset({Outcome.PUSHED, Outcome.PULLED, Outcome.PRESENT, Outcome.GAP})


@dataclass(frozen=True)
class SyncResult:
    name: str
    outcome: Outcome
    message: str = ""
    fix: str | None = None
    objects: int = 0
    size: int = 0

    @property
    def ok(self) -> bool:
        return self.outcome in OK

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "outcome": str(self.outcome),
            "message": self.message,
            "fix": self.fix,
            "objects": self.objects,
            "size": self.size,
        }


@dataclass(frozen=True)
class SyncPlan:
    """What a push or pull of some names moves: each artifact's objects, and each object once.

    ``decided`` holds the artifacts settled from the registry alone (unknown names, invalid
    records, gaps with no digest).
    """

    names: tuple[str, ...]
    wants: Mapping[str, tuple[Digest, ...]]
    objects: Mapping[str, Digest]
    decided: Mapping[str, SyncResult] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return sum(d.size for d in self.objects.values())


@dataclass(frozen=True)
class SyncReport:
    remote: str
    results: list[SyncResult]
    moved_objects: int
    moved_bytes: int
    # A committing remote (the Hub): the commits a push made, and the commit the objects were
    # read or checked at.
    commits: tuple[str, ...] = ()
    at: str | None = None

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "remote": self.remote,
            "moved_objects": self.moved_objects,
            "moved_bytes": self.moved_bytes,
            "results": [r.to_json() for r in self.results],
        }
        if self.at is not None:
            out["commits"] = list(self.commits)
            out["at"] = self.at
        return out


def referenced_objects(record: Record) -> tuple[Digest, ...]:
    """The record's :meth:`~Record.referenced` objects, each with its size: its objects, then a
    package source's distribution when the record gives that file's size."""
    found = [ref.digest for ref in record.objects()]
    source = record.source
    if isinstance(source, PackageSource) and source.file_size is not None:
        extra = Digest(source.file_hex, source.file_size)
        if extra not in found:
            found.append(extra)
    assert {d.hex for d in found} <= record.referenced()
    return tuple(found)


def plan(registry: Registry, names: Iterable[str]) -> SyncPlan:
    """The objects ``names`` reference, from the registry alone (no store, no remote)."""
    invalid = dict(registry.invalid())
    wants: dict[str, tuple[Digest, ...]] = {}
    objects: dict[str, Digest] = {}
    decided: dict[str, SyncResult] = {}
    chosen = tuple(names)
    for name in chosen:
        if name in invalid:
            err = invalid[name]
            fix = err.fix or "edit the record so it validates"
            decided[name] = SyncResult(name, Outcome.INVALID_RECORD, err.about(name), fix)
            continue
        try:
            record = registry.get(name)
        except ArtifactError as e:
            decided[name] = SyncResult(name, Outcome.UNKNOWN, e.about(name), e.fix)
            continue
        if record.digest is None:
            reason = record.gap.reason if record.gap else "no digest"
            decided[name] = SyncResult(name, Outcome.GAP, reason)
            continue
        wants[name] = referenced_objects(record)
        for digest in wants[name]:
            objects.setdefault(digest.hex, digest)
    return SyncPlan(chosen, wants, objects, decided)


@dataclass(frozen=True)
class Batching:
    """When pull publishes what it received: once ``objects`` objects, or ``size`` bytes, wait
    in checked temp files (see :class:`~fixture_store.objects.store.Staging`).

    One publish costs one batched sync of the bytes and one of the renames, instead of an fsync
    of each object and of its shard folder; a crash loses at most one batch's transfers, never
    an object published before.
    """

    objects: int = 256
    size: int = 256 * MiB

    def due(self, objects: int, size: int) -> bool:
        return objects >= self.objects or size >= self.size


@dataclass(frozen=True)
class _Moved:
    """How one object went: moved now, already there, staged (received and checked, not yet
    published), or the error that stopped it."""

    moved: bool = False
    error: FixtureStoreError | None = None
    staged: Staged | None = None


ObjectCallback = Callable[[Digest], None]
# What push or pull does with one object of the plan, given its status in the local store.
Transfer = Callable[[Digest, Status], _Moved]


def push(
    store: Store,
    registry: Registry,
    remote: Remote,
    the_plan: SyncPlan,
    *,
    jobs: int = DEFAULT_JOBS,
    retry: Retry | None = None,
    on_object: ObjectCallback | None = None,
    packing: packs.Packing | None = None,
) -> SyncReport:
    """Send the plan's objects that the remote lacks; only objects that verify in the store go.
    Those under ``packing``'s threshold go in packs (see :mod:`~fixture_store.remotes.packs`),
    the others one per key."""
    if not remote.writable and isinstance(remote, CommittingRemote):
        raise ReadOnlyRemote(
            f"the remote {remote.label} names a commit: it is read at that commit, never pushed to",
            fix="push to the repo's branch: hf://datasets/ORG/NAME (main) or @BRANCH",
        )
    if not remote.writable:
        raise ReadOnlyRemote(
            f"the remote {remote.label} is read-only (an https mirror serves bytes, it does "
            "not take them)",
            fix="push to the S3 bucket or folder the mirror serves, with --remote",
        )
    policy = retry or Retry()
    rate = DownloadPolicy.from_env()
    packing = packing or packs.Packing()
    packed = packed_part.push(
        store, remote, the_plan.objects, packing=packing, retry=policy, jobs=jobs
    )

    def send(digest: Digest, status: Status) -> _Moved:
        if status is not Status.VERIFIED:
            return _Moved(error=_NotInStore(f"{digest} is {status} in the store"))
        if (done := packed.get(digest.hex)) is not None:
            return _Moved(error=done) if isinstance(done, FixtureStoreError) else _Moved(done)
        # One deadline for all of the object's requests and their attempts.
        deadline = policy.deadline(digest.size, rate)
        if digest.size >= PUT_FIRST_BELOW:  # ask first: its bytes are worth not resending
            claim = policy.run(lambda: remote.stat(digest), deadline=deadline)
            if claim is not None:
                return _already_there(remote, digest, claim)
        if policy.run(lambda: remote.upload(store.object_path(digest), digest), deadline=deadline):
            return _Moved(moved=True)
        claim = policy.run(lambda: remote.stat(digest), deadline=deadline)
        return _already_there(remote, digest, claim)

    if isinstance(remote, CommittingRemote):
        remote.prepare(list(the_plan.objects.values()))
    moved = dict(_each_object(store, the_plan, send, jobs, on_object))
    if not isinstance(remote, CommittingRemote):
        return _report(remote, registry, the_plan, moved, Outcome.PUSHED, push=True)
    # The staged objects land in commits; only what the remote then holds is claimed.
    ok = [d for h, d in the_plan.objects.items() if moved[h].error is None]
    landed = remote.land(ok)
    for hexpart, error in landed.errors.items():
        moved[hexpart] = _Moved(error=error)
    report = _report(remote, registry, the_plan, moved, Outcome.PUSHED, push=True)
    return dataclasses.replace(report, commits=landed.commits, at=landed.head)


def pull(  # noqa: PLR0913 - the pull command's options, each keyword-only
    store: Store,
    registry: Registry,
    remote: Remote,
    the_plan: SyncPlan,
    *,
    jobs: int = DEFAULT_JOBS,
    retry: Retry | None = None,
    on_object: ObjectCallback | None = None,
    rate: DownloadPolicy | None = None,
    batching: Batching | None = None,
) -> SyncReport:
    """Bring the plan's objects that do not verify in the store from the remote, verified, and
    publish them a batch at a time (see :class:`Batching`)."""
    policy = retry or Retry()
    rate = rate or DownloadPolicy.from_env()

    with store.writing(), store.staging(replace=True) as staging:
        packed = packed_part.pull(
            store, staging, remote, the_plan.objects, retry=policy, rate=rate, jobs=jobs
        )

        def receive(digest: Digest, status: Status) -> _Moved:
            if status is Status.VERIFIED:
                return _Moved()
            got = packed.get(digest.hex)
            if isinstance(got, Staged):
                return _Moved(staged=got)
            return _Moved(
                staged=pull_one(staging, remote, digest, retry=policy, rate=rate, from_packs=got)
            )

        batch = _Batch(staging, batching or Batching())
        moved: dict[str, _Moved] = {}
        for hexpart, result in _each_object(store, the_plan, receive, jobs, on_object):
            moved[hexpart] = result
            moved.update(batch.add(hexpart, result))
        moved.update(batch.publish())
    report = _report(remote, registry, the_plan, moved, Outcome.PULLED, push=False)
    if isinstance(remote, CommittingRemote):
        return dataclasses.replace(report, at=remote.at)
    return report


def pull_object(
    staging: Staging,
    remote: Remote,
    digest: Digest,
    retry: Retry,
    rate: DownloadPolicy | None = None,
) -> Staged:
    """Stream one object from the remote into a staged temp file, kept only if it is
    ``digest`` (the caller publishes it, see :class:`~fixture_store.objects.store.Staging`).

    The body must keep ``rate``'s minimum rate (default: the download policy of the
    environment, as for fetch), and every attempt ends by ``retry``'s deadline for the object.
    """
    policy = rate or DownloadPolicy.from_env()

    def attempt() -> Staged:
        stream = remote.open(digest)
        try:
            what = f"remote {remote.label}: {digest.short}"
            body = GuardedBody(stream, digest.size, what, policy.meter())
            return staging.stream(body, digest)  # type: ignore[arg-type]
        except IntegrityError as e:
            raise RemoteError(
                f"the remote {remote.label} holds other bytes under {digest.text}: {e.message}",
                fix="remove that object from the remote and push it again from a store where "
                "it verifies (fixture-store push NAME --remote REMOTE)",
            ) from e
        finally:
            stream.close()

    return retry.run(attempt, deadline=retry.deadline(digest.size, policy))


def pull_one(
    staging: Staging,
    remote: Remote,
    digest: Digest,
    *,
    retry: Retry,
    rate: DownloadPolicy | None,
    from_packs: packs.Got | None,
) -> Staged:
    """The object from its own key; if its pack failed and the remote has no such key, the
    pack's error (a remote may hold an object both ways)."""
    try:
        return pull_object(staging, remote, digest, retry, rate)
    except MissingRemoteObject:
        if isinstance(from_packs, FixtureStoreError):
            raise from_packs from None
        raise


@dataclass
class _Batch:
    """Pull's objects received and checked, waiting to be published together."""

    staging: Staging
    batching: Batching
    waiting: dict[str, Staged] = field(default_factory=dict)
    size: int = 0

    def add(self, hexpart: str, result: _Moved) -> dict[str, _Moved]:
        """Wait with ``result``'s staged file, if any; what a publish settled, if one is due."""
        if result.staged is None:
            return {}
        self.waiting[hexpart] = result.staged
        self.size += result.staged.stored.digest.size
        return self.publish() if self.batching.due(len(self.waiting), self.size) else {}

    def publish(self) -> dict[str, _Moved]:
        """Publish every waiting object: each moved now, or all failed with the store's error."""
        waiting, self.waiting, self.size = self.waiting, {}, 0
        if not waiting:
            return {}
        try:
            self.staging.publish(list(waiting.values()))
        except FixtureStoreError as e:
            return dict.fromkeys(waiting, _Moved(error=e))
        return dict.fromkeys(waiting, _Moved(moved=True))


def _each_object(
    store: Store,
    the_plan: SyncPlan,
    transfer: Transfer,
    jobs: int,
    on_object: ObjectCallback | None,
) -> Iterator[tuple[str, _Moved]]:
    """Each object of the plan (its hex) with what ``transfer`` made of it, in the plan's order,
    run over a bounded pool of threads; an error stops that object only."""
    verifier = Verifier(store)

    def one(digest: Digest) -> _Moved:
        try:
            return transfer(digest, verifier.check_object(digest).status)
        except FixtureStoreError as e:
            return _Moved(error=e)

    digests = list(the_plan.objects.values())
    workers = max(1, min(jobs, len(digests), (os.cpu_count() or 1) * 8))
    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for digest, result in zip(digests, pool.map(one, digests), strict=True):
                if on_object is not None:
                    on_object(digest)
                yield digest.hex, result
    finally:
        verifier.cache.flush()


def _already_there(remote: Remote, digest: Digest, claim: RemoteObject | None) -> _Moved:
    """An object at the key already: present if it is the one expected, else an error (it stays,
    write-once)."""
    if claim is None:  # gone again between the write-once refusal and the look
        return _Moved(error=TransientRemoteError(f"{remote.label}: {digest} vanished; push again"))
    if claim.holds(digest):
        return _Moved()
    return _Moved(error=_other_bytes(remote, digest, claim.size))


class _NotInStore(FixtureStoreError):
    """Push: an object to send does not verify in the local store."""


def _other_bytes(remote: Remote, digest: Digest, size: int) -> RemoteError:
    return RemoteError(
        f"the remote {remote.label} already holds an object of {size:,} bytes under "
        f"{digest.text} that is not {digest}; objects there are write-once, so it was left as "
        "it is",
        fix="remove that object from the remote (it is damaged), then push again",
    )


def _report(
    remote: Remote,
    registry: Registry,
    the_plan: SyncPlan,
    moved: Mapping[str, _Moved],
    done: Outcome,
    *,
    push: bool,
) -> SyncReport:
    results = []
    for name in the_plan.names:
        if name in the_plan.decided:
            results.append(the_plan.decided[name])
            continue
        wants = the_plan.wants[name]
        size = sum(d.size for d in wants)
        errors = [m.error for d in wants if (m := moved[d.hex]).error is not None]
        if errors:
            results.append(
                _failure(
                    name,
                    registry,
                    remote=remote,
                    errors=errors,
                    size=size,
                    count=len(wants),
                    push=push,
                )
            )
            continue
        outcome = done if any(moved[d.hex].moved for d in wants) else Outcome.PRESENT
        results.append(SyncResult(name, outcome, objects=len(wants), size=size))
    sent = [d for h, d in the_plan.objects.items() if moved[h].moved]
    return SyncReport(remote.label, results, len(sent), sum(d.size for d in sent))


def _failure(
    name: str,
    registry: Registry,
    *,
    remote: Remote,
    errors: list[FixtureStoreError],
    size: int,
    count: int,
    push: bool,
) -> SyncResult:
    """One artifact's failed objects, as one result naming the artifact, the remote and the fix."""
    first = errors[0]
    more = f" (and {len(errors) - 1} more of its {count} objects)" if len(errors) > 1 else ""
    if isinstance(first, _NotInStore):
        return SyncResult(
            name,
            Outcome.MISSING,
            f"not pushed to {remote.label}: {first.message}{more}",
            repair_command(registry.get(name)),
            count,
            size,
        )
    if isinstance(first, MissingRemoteObject) and all(
        isinstance(e, MissingRemoteObject) for e in errors
    ):
        # A read-only mirror takes no push: what it serves is pushed to what it mirrors.
        push_to = (
            "REMOTE  (the folder or bucket the mirror serves, from a store that has it)"
            if not remote.writable
            else f"{_remote_arg(remote)}  (from a store that has it)"
        )
        return SyncResult(
            name,
            Outcome.MISSING,
            f"{first.message}{more}; nothing was stored",
            f"fixture-store push {name} --remote {push_to}, or: "
            f"{repair_command(registry.get(name))}",
            count,
            size,
        )
    verb = "push to" if push else "pull from"
    return SyncResult(
        name,
        Outcome.FAILED,
        f"{verb} {remote.label} failed: {first.message}{more}"
        + ("" if push else "; nothing partial was stored"),
        first.fix,
        count,
        size,
    )


def _remote_arg(remote: Remote) -> str:
    return remote.label.split(" ", 1)[0]
