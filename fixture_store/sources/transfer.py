"""How much a server may send and how long it may take: the one bounded reader (DESIGN 14).

A per-read socket timeout alone never trips on a server that trickles one byte a second, in its
headers or its body: each read succeeds. So every download also gets a deadline (its total time,
all attempts included) and, once its body streams, a minimum rate averaged over a sliding window.
Both are configured by environment variables, read when a fetch starts, and injectable in code.

Every byte of every answer, from every client (url, Hub, S3, an https mirror), is read through
:class:`BoundedBody`: at most the bytes that were asked for and one more (so a longer body is
seen, never slurped), before the deadline, at the minimum rate; an error answer's body through
:func:`error_body`, of which at most :data:`ERROR_BODY_CAP` bytes are read. While the headers
arrive no body reader runs yet: :func:`bounded_by` makes a deadline the current one of a thread,
and a client registers the sockets it reads with :func:`watch`, which shuts them down when the
deadline passes (a server dripping its headers is cut there, whatever its per-read pace).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from fixture_store.errors import UsageError
from fixture_store.limits import GiB, KiB
from fixture_store.objects import names

DEADLINE_ENV = "FIXTURE_STORE_DOWNLOAD_DEADLINE"
MIN_RATE_ENV = "FIXTURE_STORE_DOWNLOAD_MIN_RATE"
# Room for name resolution, TLS, headers and a few retries, on top of the body at the minimum rate.
DEADLINE_FLOOR_S = 120.0
MIN_RATE = 16 * KiB
RATE_WINDOW_S = 10.0

# An error answer's body is read for its message only: its first bytes, never more.
ERROR_BODY_CAP = 4 * KiB
# What a body of no known size may be: a gap known only by a digest (no size) is filled by a
# download of at most this many bytes. The largest member a package source reads is as large.
UNSIZED_CAP = 1 * GiB

Clock = Callable[[], float]
Read1 = Callable[[int], bytes]


class DeadlineExceeded(Exception):
    """The download's deadline passed.

    Not an OSError, so no handler of socket or disk errors mistakes it for one of those.
    """


class BelowMinimumRate(Exception):
    """The body arrived slower than the minimum rate over the last window (not an OSError)."""


class BodyCut(Exception):
    """The body ended before what was asked, or its connection failed: a cut transfer, worth
    another attempt (not an OSError)."""


@dataclass(frozen=True)
class DownloadPolicy:
    """The time bounds of every download in one fetch run.

    ``deadline`` is the total time one artifact's download may take, all attempts and pauses
    included; ``None`` derives it from the size: ``deadline_floor`` plus the size at ``min_rate``,
    so a download that keeps the minimum rate always fits. ``unsized_cap`` is the size a body
    no record gives the size of may reach (a gap known by its digest alone): its cap, and the
    size its deadline is derived from.
    """

    deadline: float | None = None
    min_rate: float = MIN_RATE
    rate_window: float = RATE_WINDOW_S
    deadline_floor: float = DEADLINE_FLOOR_S
    unsized_cap: int = UNSIZED_CAP

    def __post_init__(self) -> None:
        for name in ("min_rate", "rate_window", "deadline_floor", "deadline", "unsized_cap"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, int | float) and _positive(value)):
                raise UsageError(f"download {name} must be a positive number, got {value!r}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> DownloadPolicy:
        """The policy ``$FIXTURE_STORE_DOWNLOAD_DEADLINE`` and ``..._MIN_RATE`` ask for."""
        env = os.environ if environ is None else environ
        deadline = _env_number(env, DEADLINE_ENV, "seconds", "600")
        min_rate = _env_number(env, MIN_RATE_ENV, "bytes per second", "4096")
        return cls(deadline=deadline, min_rate=MIN_RATE if min_rate is None else min_rate)

    def deadline_for(self, size: int) -> float:
        if self.deadline is not None:
            return self.deadline
        return self.deadline_floor + size / self.min_rate

    def start(self, size: int, *, read_timeout: float, clock: Clock = time.monotonic) -> Deadline:
        """The deadline of one artifact's download of ``size`` bytes, starting now."""
        seconds = self.deadline_for(size)
        return Deadline(seconds, clock() + seconds, read_timeout, clock)

    def meter(self, clock: Clock = time.monotonic) -> RateMeter:
        """A fresh rate meter for one response body, starting now."""
        return RateMeter(self.min_rate, self.rate_window, clock)


@dataclass(frozen=True)
class Deadline:
    """When one artifact's download must end; a read waits until then, ``read_timeout`` at most."""

    seconds: float
    ends_at: float
    read_timeout: float
    clock: Clock = time.monotonic

    def remaining(self) -> float:
        return self.ends_at - self.clock()

    @property
    def expired(self) -> bool:
        return self.remaining() <= 0

    def check(self) -> None:
        if self.expired:
            raise DeadlineExceeded(f"the download deadline of {self.seconds:g}s passed")

    def next_read_timeout(self) -> float:
        """How long the next read may wait: the per-read timeout, cut to the time left."""
        self.check()
        return min(self.read_timeout, self.remaining())


@dataclass
class RateMeter:
    """Bytes received, over a sliding window: refuses a body that falls below the minimum rate.

    Samples are merged into buckets of a twentieth of the window, so memory stays bounded
    whatever the read size.
    """

    min_rate: float
    window: float
    clock: Clock = time.monotonic
    total: int = 0
    _samples: deque[tuple[float, int]] = field(default_factory=deque)

    def __post_init__(self) -> None:
        self._samples.append((self.clock(), 0))

    def add(self, nbytes: int) -> None:
        """Count ``nbytes`` more; raise :class:`BelowMinimumRate` if the window is too slow."""
        now = self.clock()
        self.total += nbytes
        if now - self._samples[-1][0] < self.window / 20 and len(self._samples) > 1:
            self._samples[-1] = (self._samples[-1][0], self.total)
        else:
            self._samples.append((now, self.total))
        # Keep one sample at or before the window's start: the rate covers a full window.
        while len(self._samples) > 1 and self._samples[1][0] <= now - self.window:
            self._samples.popleft()
        since, base = self._samples[0]
        elapsed = now - since
        if elapsed < self.window:
            return
        got = self.total - base
        if got < self.min_rate * elapsed:
            raise BelowMinimumRate(
                f"received {got:,} bytes in the last {elapsed:.1f}s "
                f"({_rate(got / elapsed)}), below the minimum rate of {_rate(self.min_rate)}"
            )


def slow_download_fix(name: str) -> str:
    """What to do when a download ran out of time or was too slow."""
    return (
        f"check the network and the server, or allow more time ({DEADLINE_ENV}=SECONDS, or a "
        f"lower {MIN_RATE_ENV}=BYTES_PER_SECOND), then: fixture-store fetch {names.shell(name)}"
    )


def _rate(bytes_per_s: float) -> str:
    return f"{bytes_per_s / KiB:.1f} KiB/s"


def _positive(value: float) -> bool:
    return not isinstance(value, bool) and math.isfinite(value) and value > 0


def _env_number(env: Mapping[str, str], var: str, unit: str, example: str) -> float | None:
    raw = env.get(var, "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not _positive(value):
        raise UsageError(
            f"${var}={raw!r} is not a positive number of {unit}",
            fix=f"unset {var} for the default, or set it like {var}={example}",
        )
    return value


@dataclass
class BoundedBody:
    """The one reader of a server's body: every byte a client takes from a server passes here.

    ``read1`` is one read of the connection of at most ``n`` bytes (the transport's own, e.g.
    ``http.client``'s ``read1``). At most ``cap + 1`` bytes are ever read, ``cap`` being what was
    asked for (an object's size, a range's length): a longer body shows as ``cap + 1`` bytes for
    the caller to refuse, and is never read further whatever its ``Content-Length`` says. Before
    each read the ``deadline`` is checked (:class:`DeadlineExceeded`); each read counts towards
    the ``meter``'s minimum rate (:class:`BelowMinimumRate`). A body that ends before ``cap``
    bytes (``exact``), and the transport's ``errors``, are a :class:`BodyCut`. None of these is
    an OSError: no handler of disk errors takes them for its own.
    """

    read1: Read1
    cap: int
    deadline: Deadline | None = None
    meter: RateMeter | None = None
    errors: tuple[type[BaseException], ...] = (OSError,)
    exact: bool = True
    got: int = 0

    def read(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes (all that is left of ``cap + 1`` if ``n < 0``), one read of the
        connection; ``b""`` at the end of the body or once ``cap + 1`` bytes were read."""
        left = self.cap + 1 - self.got
        want = left if n is None or n < 0 else min(n, left)
        if want <= 0:
            return b""
        if self.deadline is not None:
            self.deadline.check()
        try:
            data = bytes(self.read1(want))[:want]
        except self.errors as e:
            raise BodyCut(f"the connection failed after {self.got:,} bytes: {e}") from e
        if not data and self.exact and self.got < self.cap:
            raise BodyCut(f"the body ended after {self.got:,} of {self.cap:,} bytes")
        self.got += len(data)
        if self.meter is not None:
            self.meter.add(len(data))
        return data

    def readinto(self, buf: memoryview) -> int:
        data = self.read(len(buf))
        buf[: len(data)] = data
        return len(data)

    def read_all(self) -> bytes:
        """The whole body, ``cap + 1`` bytes at most (a longer one is cut there)."""
        chunks = []
        while chunk := self.read():
            chunks.append(chunk)
        return b"".join(chunks)


@dataclass
class Chunks:
    """A client's iterator of body chunks (httpx's ``iter_bytes``) as the ``read1`` of a
    :class:`BoundedBody`: a chunk larger than asked waits, the rest of it, for the next read."""

    chunks: Iterator[bytes]
    left: bytes = b""

    def read1(self, n: int) -> bytes:
        if not self.left:
            self.left = next(self.chunks, b"")
        data, self.left = self.left[:n], self.left[n:]
        return data


def read_answer(
    read1: Read1, cap: int, *, deadline: Deadline | None = None, lenient: bool = False
) -> tuple[bytes, bool]:
    """A short answer's body: at most ``cap`` bytes, and whether it ended there (False: it was
    longer, and the rest is never read). ``lenient``: a cut connection or the deadline ends it
    early (False) instead of raising."""
    body = BoundedBody(read1, cap, deadline=deadline, exact=False)
    chunks = []
    try:
        while chunk := body.read():
            chunks.append(chunk)
    except (BodyCut, DeadlineExceeded):
        if not lenient:
            raise
        return b"".join(chunks)[:cap], False
    data = b"".join(chunks)
    return data[:cap], len(data) <= cap


def error_body(
    read1: Read1, *, deadline: Deadline | None = None, cap: int = ERROR_BODY_CAP
) -> bytes:
    """The first ``cap`` bytes at most of an error answer's body (enough for its message); the
    rest is never read. A failing or slow connection ends it early: the message is a courtesy."""
    return read_answer(read1, cap, deadline=deadline, lenient=True)[0]


@dataclass
class _Scope:
    """A deadline made current by :func:`bounded_by`, and the sockets read under it."""

    deadline: Deadline
    sockets: list[socket.socket] = field(default_factory=list)
    timer: threading.Timer | None = None
    expired: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def watch(self, sock: socket.socket) -> None:
        with self.lock:
            if self.expired:
                _shut(sock)
                return
            self.sockets.append(sock)
            if self.timer is None:
                self.timer = threading.Timer(max(0.0, self.deadline.remaining()), self._expire)
                self.timer.daemon = True
                self.timer.start()

    def _expire(self) -> None:
        with self.lock:
            self.expired = True
            for sock in self.sockets:
                _shut(sock)

    def close(self) -> None:
        with self.lock:
            if self.timer is not None:
                self.timer.cancel()
            self.sockets.clear()


def _shut(sock: socket.socket) -> None:
    """Wake any read blocked on ``sock`` with an end of stream: the base class's shutdown, so a
    TLS socket's state stays whole for the thread that is reading it."""
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


_CURRENT: contextvars.ContextVar[_Scope | None] = contextvars.ContextVar(
    "fixture_store_deadline", default=None
)


@contextlib.contextmanager
def bounded_by(deadline: Deadline) -> Iterator[Deadline]:
    """Make ``deadline`` (or the current one, if it ends sooner) the deadline of every request
    this thread makes inside: its watched sockets are shut down when it passes. Yields the
    deadline in force."""
    outer = _CURRENT.get()
    if outer is not None and outer.deadline.ends_at <= deadline.ends_at:
        yield outer.deadline
        return
    scope = _Scope(deadline)
    token = _CURRENT.set(scope)
    try:
        yield deadline
    finally:
        _CURRENT.reset(token)
        scope.close()


def current_deadline() -> Deadline | None:
    """The deadline :func:`bounded_by` made current in this thread, if any."""
    scope = _CURRENT.get()
    return scope.deadline if scope is not None else None


def watch(sock: socket.socket | None) -> None:
    """Shut ``sock`` down when the current deadline passes (nothing if there is none)."""
    scope = _CURRENT.get()
    if scope is not None and sock is not None:
        scope.watch(sock)


def sooner(own: Deadline) -> Deadline:
    """``own``, or the current deadline (:func:`bounded_by`) if it ends sooner, with ``own``'s
    per-read timeout."""
    current = current_deadline()
    if current is None or current.ends_at >= own.ends_at:
        return own
    return Deadline(current.seconds, current.ends_at, own.read_timeout, own.clock)


def deadline_in(seconds: float, *, read_timeout: float | None = None) -> Deadline:
    """A deadline ``seconds`` from now."""
    return Deadline(seconds, time.monotonic() + seconds, read_timeout or seconds)
