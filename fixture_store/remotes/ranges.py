"""Verified partial fetch from remotes: where the bytes of one span come from.

A span (:class:`~fixture_store.sources.ranges.Span`: a range of a record's object and the sha256
of exactly those bytes, whatever the format calls it) whose object is not in the store is read
from the places a whole fetch tries, in the same order (:func:`fixture_store.fetch.fetch_names`):
the remotes first, as mirrors (the default remote, then the others as declared; none offline),
then the record's pinned source. Each place reads the range with the one ranged read of its
kind:

- a folder or an S3 remote: :meth:`~fixture_store.remotes.keys.Keys.open_range`, the read packs
  use (a ``pread`` through the path primitive, never through a link; a ``GetObject`` with
  ``Range`` whose answer must be exactly that range of an object of the record's size, else
  :class:`~fixture_store.remotes.base.RangeRefused` before its body is read). An object a
  remote keeps in a pack (only under a ``pack_threshold`` raised above the 1 MiB from which
  records carry ranges) is read at its slot of the pack, by the same read;
- a Hub remote: :meth:`~fixture_store.remotes.hub.HubRemote.read_range`, the hub source's
  checks and ranged GET at the commit the remote is read at;
- an https mirror: the url source's ranged GET.

Whatever answered, the bytes pass one verification: exactly the span's length, then its sha256
(:func:`~fixture_store.sources.ranges.verified`); a lie (a server that ignores ``Range``, a
wrong Content-Range, a short body, other bytes) is an
:class:`~fixture_store.errors.IntegrityError` naming the record and the span. As in a whole
fetch, a remote that lacks the object, is down or lies leaves the next place to try, and what
it answered is reported (``tried``); if no place serves the span, a remote's refusal is raised
before the source's failure (it is the one to act on). Nothing is written to the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fixture_store.errors import FixtureStoreError, IntegrityError
from fixture_store.objects.digests import Digest
from fixture_store.registry import Record
from fixture_store.remotes import packs
from fixture_store.remotes.base import (
    BODY_ERRORS,
    MissingRemoteObject,
    RangeRefused,
    Remote,
    RemoteError,
    TransientRemoteError,
    object_key,
)
from fixture_store.remotes.keys import Keys, keys_of
from fixture_store.remotes.mirrors import MIRROR_RETRY
from fixture_store.sources import FetchContext
from fixture_store.sources.ranges import (
    SAFETENSORS_MEDIA_TYPE,
    Span,
    as_array,
    check_placed,
    counted,
    header_span,
    http_range,
    source_bytes,
    tensor_span,
    verified,
)
from fixture_store.sources.transfer import BodyCut, BoundedBody, Deadline, current_deadline

if TYPE_CHECKING:
    import numpy as np

# Where a ranged read of a remote's key starts: the key, the digest of its whole, the offset.
_At = tuple[str, Digest, int]


@dataclass(frozen=True)
class SpanRead:
    """A span's verified bytes, where they came from (a remote, or the record's source), and
    what the places tried first said."""

    data: bytes
    where: str
    remote: bool
    tried: tuple[str, ...] = ()
    refused: tuple[IntegrityError, ...] = field(default=(), repr=False)


@dataclass(frozen=True)
class TensorRead:
    """A tensor read by its range: the read-only array, and its :class:`SpanRead` (``None``:
    no rows were asked, nothing was read)."""

    array: np.ndarray[Any, Any]
    read: SpanRead | None


def read_tensor(
    ctx: FetchContext,
    record: Record,
    key: str,
    remotes: Sequence[Remote],
    rows: tuple[int, int] | None = None,
) -> TensorRead:
    """Tensor ``key`` of ``record`` (or ``rows`` of its first axis) from the bytes of that
    tensor alone (of the chunks that cover those rows; see the module's doc)."""
    span, dtype, shape = tensor_span(record, key, rows)
    if span is None:  # no rows: nothing to read
        return TensorRead(as_array(b"", dtype, shape), None)
    placing = header_span(record)
    if placing is not None:  # the header, verified, must place the range before it is read
        check_placed(record, key, read_span(ctx, placing, remotes).data)
    elif record.media_type == SAFETENSORS_MEDIA_TYPE:  # the registry refuses one: never served
        raise IntegrityError(
            f"{record.name}: tensor {key!r}: the record carries no header to place its range",
            fix=span.whole_fix,
        )
    got = read_span(ctx, span, remotes)
    return TensorRead(as_array(got.data, dtype, shape), got)


def read_span(ctx: FetchContext, span: Span, remotes: Sequence[Remote]) -> SpanRead:
    """The span's verified bytes from the first place that serves them: ``remotes`` in order
    (the caller gives none offline, as a fetch tries none), then the record's source."""
    tried: list[str] = []
    refused: list[IntegrityError] = []
    for remote in remotes:
        where = f"remote {remote.label}"
        try:
            data = verified(span, where, remote_bytes(ctx, remote, span))
        except IntegrityError as e:
            refused.append(e)
            tried.append(e.message)
            continue
        except FixtureStoreError as e:  # lacks it, is down, or cannot read ranges
            tried.append(e.message)
            continue
        return SpanRead(data, where, True, tuple(tried), tuple(refused))
    where = span.record.source.describe()
    try:
        data = verified(span, where, source_bytes(ctx, span))
    except FixtureStoreError as e:
        if refused:  # a remote sent bytes that are not the span's: the error to act on
            first = refused[0]
            raise IntegrityError(
                f"{first.message} (then the source: {e.message})", fix=first.fix
            ) from e
        if tried:
            e.message = f"{e.message} (remotes tried first: {'; '.join(tried)})"
        raise
    return SpanRead(data, where, False, tuple(tried), tuple(refused))


def remote_bytes(ctx: FetchContext, remote: Remote, span: Span) -> bytes:
    """The span's bytes from ``remote`` by its kind's one ranged read, checked for length (the
    caller checks the digest); :class:`MissingRemoteObject` if it does not hold the object."""
    from fixture_store.remotes.https import HttpsRemote
    from fixture_store.remotes.hub import HubRemote

    where = f"remote {remote.label}"
    if isinstance(remote, HubRemote):
        return remote.read_range(ctx, span)
    if isinstance(remote, HttpsRemote):
        return http_range(ctx, span, remote.url(span.record.object))
    keys = keys_of(remote)
    if keys is None:
        raise RemoteError(f"{where} reads no byte ranges")
    digest = span.record.object
    # One deadline for every request of the span: its own key, then the pack indexes and the
    # pack (never one deadline each, which would add up).
    overall = MIRROR_RETRY.deadline(span.length, ctx.policy)
    try:
        own: _At = (object_key(digest), digest, span.offset)
        return _keyed(ctx, keys, span, where, own, overall=overall)
    except MissingRemoteObject:
        slot = _pack_slot(keys, span, overall)
        if slot is None:
            raise
        return _keyed(ctx, keys, span, where, slot, overall=overall)


def _pack_slot(keys: Keys, span: Span, overall: Deadline) -> _At | None:
    """Where a pack of the remote holds the span's bytes, if an index places its object."""
    slot = packs.load_index(keys, MIRROR_RETRY, 1, overall).slot(span.record.object)
    if slot is None:
        return None
    return packs.pack_key(slot.pack.hex), slot.pack, slot.offset + span.offset


def _keyed(
    ctx: FetchContext, keys: Keys, span: Span, where: str, at: _At, *, overall: Deadline
) -> bytes:
    """``span.length`` bytes of a key of the remote from an offset (``at``: the key, the digest
    of its whole, the offset), read by the keys' ranged read through the one bounded reader; a
    cut transfer is retried within the mirrors' bounds, a body that ends early is read to its
    end and refused as short."""
    key, whole, start = at

    def attempt() -> bytes:
        try:
            stream = keys.open_range(key, whole, start, span.length)
        except RangeRefused as e:
            raise IntegrityError(
                f"{span.name}: {span.part}: {e.message}", fix=span.whole_fix
            ) from e
        try:
            read1 = getattr(stream, "read1", None) or stream.read
            meter = ctx.policy.meter()
            deadline = current_deadline()
            body = BoundedBody(read1, span.length, deadline, meter, errors=BODY_ERRORS, exact=False)
            data = body.read_all()
        except BodyCut as e:
            raise TransientRemoteError(f"{where}: {key}: {e}") from e
        finally:
            stream.close()
        return counted(ctx, span, where, data)

    own = MIRROR_RETRY.deadline(span.length, ctx.policy)
    return MIRROR_RETRY.run(attempt, deadline=packs.sooner(own, overall))


__all__ = ["SpanRead", "TensorRead", "read_span", "read_tensor", "remote_bytes"]
