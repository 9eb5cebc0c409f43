"""What every remote kind is: the layout of its objects, the small interface, its errors, the
retry loop and the guarded body reader (DESIGN decision 9).

A remote is a cache of bytes laid out by digest, never a source of trust: whatever it answers
(a listing, a size, a checksum) only decides what to *try*; what it sends is hashed while it is
written into the store and published only if it matches the record.

The layout, the same for every kind and stable (other tools read it as plain files)::

    <prefix>/objects/sha256/ab/<62 hex>     the object whose SHA-256 hex starts with "ab"
"""

from __future__ import annotations

import base64
import http.client
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Protocol, TypeVar, runtime_checkable

from fixture_store.errors import FixtureStoreError, UsageError
from fixture_store.objects.digests import Digest
from fixture_store.objects.store import SHARD_LEN
from fixture_store.sources.transfer import (
    DEADLINE_ENV,
    MIN_RATE_ENV,
    BelowMinimumRate,
    BodyCut,
    BoundedBody,
    Deadline,
    DeadlineExceeded,
    DownloadPolicy,
    RateMeter,
    bounded_by,
    current_deadline,
    deadline_in,
)

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

_T = TypeVar("_T")
OBJECTS_PREFIX = "objects/sha256"
MORE_TIME_FIX = f"check the network and the remote, or allow more time ({DEADLINE_ENV}=SECONDS)"
# What reading a body may fail with that another attempt could get past (a remote's stream turns
# its client's own errors into one of these, or into TransientRemoteError).
BODY_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    http.client.HTTPException,
    DeadlineExceeded,
)


def object_key(digest: Digest) -> str:
    """The object's key under a remote's prefix, the store's own: ``objects/sha256/ab/<62 hex>``."""
    return f"{OBJECTS_PREFIX}/{digest.hex[:SHARD_LEN]}/{digest.hex[SHARD_LEN:]}"


def checksum_sha256(digest: Digest) -> str:
    """The digest as S3 spells a SHA-256 checksum: base64 of the 32 bytes."""
    return base64.b64encode(bytes.fromhex(digest.hex)).decode("ascii")


class RemoteError(FixtureStoreError):
    """A remote could not do what was asked; nothing partial was left in the store."""


class TransientRemoteError(RemoteError):
    """Worth another attempt: a 5xx, throttling, a cut connection, a short body."""


class MissingRemoteObject(RemoteError):
    """The remote does not hold the object."""


class RangeRefused(RemoteError):
    """A ranged read answered with something else than the range asked (the whole object, a
    200, another Content-Range): refused before its body is read, never retried."""


class ReadOnlyRemote(UsageError):
    """A push to a remote that only serves bytes (an https mirror)."""


@dataclass(frozen=True, slots=True)
class RemoteObject:
    """What a remote says it holds under an object's key: a claim, checked only against itself.

    ``sha256`` is the full object's digest hex where the remote keeps one (S3: the object's
    SHA-256 checksum or its ``sha256`` metadata), else ``None``; ``git_blob`` is the file's git
    blob id where the remote names it by one (a Hub file that is not in LFS), else ``None``: it
    is checked against the bytes the claim is about, by who holds them (the Hub's push).
    """

    size: int
    sha256: str | None = None
    git_blob: str | None = None

    def holds(self, digest: Digest) -> bool:
        """Whether the claim is that of ``digest``: same size, and same SHA-256 if one is kept."""
        return self.size == digest.size and self.sha256 in (None, digest.hex)


class Remote(Protocol):
    """One remote kind: a folder, an S3 bucket and prefix, an https mirror."""

    @property
    def label(self) -> str:
        """How messages name the remote: its configured name and URL."""
        ...

    @property
    def writable(self) -> bool: ...

    def stat(self, digest: Digest) -> RemoteObject | None:
        """What the remote holds under the object's key, or ``None`` if nothing."""
        ...

    def upload(self, path: Path, digest: Digest) -> bool:
        """Put the store's object at ``path`` under its key, write-once: an object already there
        is left as it is, and the answer is False (True: written now)."""
        ...

    def open(self, digest: Digest) -> BinaryIO:
        """A stream of the object's bytes; :class:`MissingRemoteObject` if it is not there."""
        ...


@dataclass(frozen=True)
class Landed:
    """What a push's commits did: the commits made, in order; ``head``, the commit every
    claimed object was checked at; ``errors``, the objects (by hex) not claimed, and why."""

    commits: tuple[str, ...]
    head: str
    errors: Mapping[str, FixtureStoreError]


@runtime_checkable
class CommittingRemote(Remote, Protocol):
    """A remote whose uploads land together, in commits (the Hub): ``upload`` stages an object,
    ``land`` commits what was staged and says which objects the remote holds as pushed; reads
    are at one commit (``at``), resolved once."""

    @property
    def at(self) -> str | None:
        """The commit the remote is read at (``None`` until resolved)."""
        ...

    def prepare(self, digests: Collection[Digest]) -> None:
        """Learn which of ``digests`` the remote holds, in as few requests as it can."""
        ...

    def land(self, claimed: Collection[Digest]) -> Landed:
        """Commit the staged objects, and check ``claimed`` at the last commit."""
        ...


@dataclass(frozen=True)
class Retry:
    """How often and how long one object's transfer is retried after a transient failure.

    ``total`` bounds all attempts and pauses of one object, the attempt in flight included: it
    is the deadline (:meth:`deadline`) that every request and body read of the attempts honours
    (:func:`~fixture_store.sources.transfer.bounded_by`), so a server dripping its headers is cut
    there. A large object gets the time its bytes take at the minimum rate if that is longer;
    ``$FIXTURE_STORE_DOWNLOAD_DEADLINE``, when set, replaces both. Pauses double from
    ``backoff``. 4xx answers and digest mismatches are never retried: the remote answered, and
    retrying would get the same answer.
    """

    attempts: int = 5
    backoff: float = 0.25
    total: float = 300.0

    def deadline(self, size: int = 0, policy: DownloadPolicy | None = None) -> Deadline:
        """When every attempt at an object of ``size`` bytes must have ended, from now."""
        rate = policy or DownloadPolicy()
        seconds = (
            rate.deadline if rate.deadline is not None else max(self.total, size / rate.min_rate)
        )
        return deadline_in(seconds)

    def run(
        self,
        fn: Callable[[], _T],
        *,
        deadline: Deadline | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> _T:
        """``fn`` until it succeeds, within ``attempts`` and ``deadline`` (default: ``total``
        from now), which every request ``fn`` makes is bounded by."""
        started = time.monotonic()
        with bounded_by(deadline or self.deadline()) as bound:
            for attempt in range(1, self.attempts + 1):
                try:
                    return fn()
                except TransientRemoteError as e:
                    wait = self.backoff * 2 ** (attempt - 1)
                    if attempt == self.attempts or wait >= bound.remaining():
                        raise self._gave_up(e, attempt, time.monotonic() - started, bound) from e
                    sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    def _gave_up(
        self, e: TransientRemoteError, attempt: int, spent: float, bound: Deadline
    ) -> TransientRemoteError:
        attempts = self.attempts
        tried = f"{attempt} attempt{'s' if attempt > 1 else ''} in {spent:.1f}s"
        if bound.remaining() <= 0:
            why = "passed"
        elif attempt < attempts:
            why = "leaves no time for another attempt"
        else:
            return TransientRemoteError(f"{e.message} (gave up after {tried})", fix=e.fix)
        return TransientRemoteError(
            f"{e.message} (gave up after {tried}: the deadline of {bound.seconds:g}s for this "
            f"object {why})",
            fix=MORE_TIME_FIX,
        )


@dataclass
class GuardedBody:
    """A remote's response body as the store reads it, through the one bounded reader
    (:class:`~fixture_store.sources.transfer.BoundedBody`): at most ``size + 1`` bytes (so a
    longer body is seen, never slurped), before the current deadline, at the ``meter``'s
    minimum rate. A body that ends early, a read error of the transport (``transient``), a
    slow drip (each read succeeds, the whole never ends) and the deadline passing are a
    :class:`TransientRemoteError`: a cut transfer, retried within :class:`Retry`'s bounds."""

    raw: BinaryIO
    size: int
    what: str
    meter: RateMeter | None = None
    transient: tuple[type[BaseException], ...] = BODY_ERRORS
    body: BoundedBody = field(init=False)

    def __post_init__(self) -> None:
        # read1: at most one read of the connection, so the rate is measured as bytes come; a
        # plain read would wait until the whole buffer is filled.
        read1 = getattr(self.raw, "read1", None) or self.raw.read
        self.body = BoundedBody(
            read1, self.size, current_deadline(), self.meter, errors=self.transient
        )

    @property
    def read_so_far(self) -> int:
        return self.body.got

    def read(self, n: int = -1) -> bytes:
        try:
            return self.body.read(n)
        except BodyCut as e:
            raise TransientRemoteError(f"{self.what}: {e}") from e
        except DeadlineExceeded as e:
            raise TransientRemoteError(
                f"{self.what}: {e} after {self.body.got:,} bytes",
                fix=MORE_TIME_FIX,
            ) from e
        except BelowMinimumRate as e:
            raise TransientRemoteError(
                f"{self.what}: too slow after {self.body.got:,} bytes: {e}",
                fix="check the network and the remote, or allow a slower transfer "
                f"({MIN_RATE_ENV}=BYTES_PER_SECOND)",
            ) from e

    def readinto(self, buf: memoryview) -> int:
        data = self.read(len(buf))
        buf[: len(data)] = data
        return len(data)
