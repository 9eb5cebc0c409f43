"""How long a download may take: a deadline for all of it and a minimum rate while it streams.

A per-read socket timeout alone never trips on a server that trickles one byte a second, in its
headers or its body: each read succeeds. So every download also gets a deadline (its total time,
all attempts included) and, once its body streams, a minimum rate averaged over a sliding window.
Both are configured by environment variables, read when a fetch starts, and injectable in code.
"""

from __future__ import annotations

import math
import os
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from fixture_store.errors import UsageError
from fixture_store.limits import KiB

DEADLINE_ENV = "FIXTURE_STORE_DOWNLOAD_DEADLINE"
MIN_RATE_ENV = "FIXTURE_STORE_DOWNLOAD_MIN_RATE"
# Room for name resolution, TLS, headers and a few retries, on top of the body at the minimum rate.
DEADLINE_FLOOR_S = 120.0
MIN_RATE = 16 * KiB
RATE_WINDOW_S = 10.0

Clock = Callable[[], float]


class DeadlineExceeded(Exception):
    """The download's deadline passed.

    Not an OSError, so no handler of socket or disk errors mistakes it for one of those.
    """


class BelowMinimumRate(Exception):
    """The body arrived slower than the minimum rate over the last window (not an OSError)."""


@dataclass(frozen=True)
class DownloadPolicy:
    """The time bounds of every download in one fetch run.

    ``deadline`` is the total time one artifact's download may take, all attempts and pauses
    included; ``None`` derives it from the size: ``deadline_floor`` plus the size at ``min_rate``,
    so a download that keeps the minimum rate always fits.
    """

    deadline: float | None = None
    min_rate: float = MIN_RATE
    rate_window: float = RATE_WINDOW_S
    deadline_floor: float = DEADLINE_FLOOR_S

    def __post_init__(self) -> None:
        for name in ("min_rate", "rate_window", "deadline_floor", "deadline"):
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
        f"lower {MIN_RATE_ENV}=BYTES_PER_SECOND), then: fixture-store fetch {name}"
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
