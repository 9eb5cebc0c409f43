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
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol, TypeVar

from fixture_store.errors import FixtureStoreError, UsageError
from fixture_store.objects.digests import Digest
from fixture_store.objects.store import SHARD_LEN
from fixture_store.sources.transfer import (
    MIN_RATE_ENV,
    BelowMinimumRate,
    DeadlineExceeded,
    RateMeter,
)

_T = TypeVar("_T")
OBJECTS_PREFIX = "objects/sha256"
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


class ReadOnlyRemote(UsageError):
    """A push to a remote that only serves bytes (an https mirror)."""


@dataclass(frozen=True, slots=True)
class RemoteObject:
    """What a remote says it holds under an object's key: a claim, checked only against itself.

    ``sha256`` is the full object's digest hex where the remote keeps one (S3: the object's
    SHA-256 checksum or its ``sha256`` metadata), else ``None``.
    """

    size: int
    sha256: str | None = None

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
class Retry:
    """How often and how long one object's transfer is retried after a transient failure.

    ``total`` bounds all attempts and pauses of one object; pauses double from ``backoff``.
    4xx answers and digest mismatches are never retried: the remote answered, and retrying
    would get the same answer.
    """

    attempts: int = 5
    backoff: float = 0.25
    total: float = 300.0

    def run(self, fn: Callable[[], _T], *, sleep: Callable[[float], None] = time.sleep) -> _T:
        started = time.monotonic()
        for attempt in range(1, self.attempts + 1):
            try:
                return fn()
            except TransientRemoteError as e:
                wait = self.backoff * 2 ** (attempt - 1)
                spent = time.monotonic() - started
                if attempt == self.attempts or spent + wait >= self.total:
                    raise TransientRemoteError(
                        f"{e.message} (gave up after {attempt} attempt"
                        f"{'s' if attempt > 1 else ''} in {spent:.1f}s)",
                        fix=e.fix,
                    ) from e
                sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover


@dataclass
class GuardedBody:
    """A remote's response body as the store reads it: at most ``size + 1`` bytes (so a longer
    body is seen, never slurped), a body that ends early is a :class:`TransientRemoteError`
    (a cut transfer), and so are the read errors of the transport (``transient``) and a body
    slower than the ``meter``'s minimum rate (a slow drip: each read succeeds, the whole never
    ends)."""

    raw: BinaryIO
    size: int
    what: str
    meter: RateMeter | None = None
    transient: tuple[type[BaseException], ...] = BODY_ERRORS
    read_so_far: int = 0

    def readinto(self, buf: memoryview) -> int:
        want = min(len(buf), self.size + 1 - self.read_so_far)
        if want <= 0:
            return 0
        # read1: at most one read of the connection, so the rate is measured as bytes come; a
        # plain read would wait until the whole buffer is filled.
        read = getattr(self.raw, "read1", None) or self.raw.read
        try:
            data = read(want)
        except self.transient as e:
            raise TransientRemoteError(
                f"{self.what}: connection failed after {self.read_so_far:,} bytes: {e}"
            ) from e
        n = len(data)
        if not n and self.read_so_far < self.size:
            raise TransientRemoteError(
                f"{self.what}: the body ended after {self.read_so_far:,} of {self.size:,} bytes"
            )
        buf[:n] = data
        self.read_so_far += n
        if self.meter is not None:
            try:
                self.meter.add(n)
            except BelowMinimumRate as e:
                raise TransientRemoteError(
                    f"{self.what}: too slow after {self.read_so_far:,} bytes: {e}",
                    fix="check the network and the remote, or allow a slower transfer "
                    f"({MIN_RATE_ENV}=BYTES_PER_SECOND)",
                ) from e
        return n

    def read(self, n: int = -1) -> bytes:
        buf = bytearray(max(n, 0) if n >= 0 else self.size + 1)
        got = self.readinto(memoryview(buf))
        return bytes(buf[:got])
