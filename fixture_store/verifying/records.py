"""One record's result from the checks of its objects: :func:`assemble`, the failure it names,
and the command that repairs it."""

from __future__ import annotations

from collections.abc import Callable

from fixture_store.objects import names
from fixture_store.objects.digests import Digest
from fixture_store.objects.store import Store
from fixture_store.readers import content
from fixture_store.registry import GeneratorSource, Record
from fixture_store.verifying.results import ObjectCheck, Result, Status


def repair_command(record: Record) -> str:
    """The command that brings a record's bytes back: fetch, or rerun the generator stage."""
    if isinstance(record.source, GeneratorSource):
        return f"fixture-store regenerate {record.source.stage} --fetch"
    return f"fixture-store fetch {names.shell(record.name)}"


def assemble(
    record: Record,
    store: Store,
    check: Callable[[Digest, str | None], ObjectCheck],
    *,
    full: bool = False,
) -> Result:
    """One record's Result from the checks of its objects (see :meth:`Record.objects`), then
    the content check of a record of one object (an archive or arrays against its manifest;
    other bytes must not be either)."""
    name = record.name
    if record.gap is not None and record.digest is None:
        return Result(name, Status.GAP, record.gap.reason, kind=record.kind)
    fetch = repair_command(record)
    hashed = 0
    all_cached = True
    for ref in record.objects():
        c = check(ref.digest, ref.blake3)
        hashed += c.hashed
        all_cached = all_cached and c.cached
        if c.status is not Status.VERIFIED:
            return _failure(
                record, store, c, member=ref.member, expected=ref.digest, fetch=fetch, hashed=hashed
            )
    if not record.is_tree:
        failure = content.check(store, record, full=full)
        if failure is not None:
            return Result(
                name,
                Status.UNSAFE,
                failure.about(name),
                expected=record.digest,
                actual=record.digest,
                fix=failure.fix,
                kind=record.kind,
                hashed_bytes=hashed,
            )
    return Result(
        name,
        Status.VERIFIED,
        expected=record.digest,
        actual=record.digest,
        hashed_bytes=hashed,
        cached=all_cached,
        kind=record.kind,
    )


def _failure(
    record: Record,
    store: Store,
    check: ObjectCheck,
    *,
    member: str | None,
    expected: Digest,
    fetch: str,
    hashed: int,
) -> Result:
    what = f"member {member!r}" if member else "object"
    if record.is_tree and member is None:
        what = "tree manifest"
    if check.status is Status.MISSING:
        msg = f"{what} {expected.text} is not in the store {store.root}"
        if record.gap is not None:
            return Result(
                record.name, Status.GAP, record.gap.reason, expected=expected, kind=record.kind
            )
        return Result(
            record.name,
            Status.MISSING,
            msg,
            expected=expected,
            member=member,
            fix=fetch,
            hashed_bytes=hashed,
            kind=record.kind,
        )
    if check.note is not None:
        return Result(
            record.name,
            Status.MISMATCH,
            f"{what}: {check.note}",
            expected=expected,
            actual=check.actual,
            member=member,
            kind=record.kind,
            hashed_bytes=hashed,
            fix=f"{check.fix}, then {fetch}"
            if check.fix
            else f"fixture-store rehash {names.shell(record.name)}  (rewrites the record's BLAKE3 "
            "after a SHA-256 check)",
        )
    msg = (
        f"{what} does not match its record: expected {expected}, "
        f"got {check.actual if check.actual else 'unreadable bytes'}"
    )
    return Result(
        record.name,
        Status.MISMATCH,
        msg,
        expected=expected,
        actual=check.actual,
        member=member,
        fix=f"{fetch}  (re-fetches and replaces the damaged object)",
        hashed_bytes=hashed,
        kind=record.kind,
    )
