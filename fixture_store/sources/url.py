"""The url source: https only, streamed under a size cap, retried on transient errors only.

A digest or size mismatch is never retried: the server answered, with the wrong bytes. Every
download is bounded in total time: each socket read (connect and TLS included) waits at most
until the download's deadline, the body must keep the minimum rate, and retries stop when the
deadline has passed (see :mod:`fixture_store.sources.transfer`).
"""

from __future__ import annotations

import http.client
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, BinaryIO, TypeVar

from fixture_store.objects import names
from fixture_store.objects.store import Stored
from fixture_store.registry import Record, UrlSource
from fixture_store.sources import FetchContext, SourceError, put_awaited, put_object, source_as
from fixture_store.sources.transfer import (
    BelowMinimumRate,
    BodyCut,
    BoundedBody,
    Deadline,
    DeadlineExceeded,
    RateMeter,
    error_body,
    slow_download_fix,
)

TIMEOUT_S = 30.0  # one read; the deadline bounds them all
ATTEMPTS = 4
BACKOFF_S = 0.5
# Besides a server error (5xx), the answers that say "try again later".
_RETRIED = (HTTPStatus.REQUEST_TIMEOUT, HTTPStatus.TOO_MANY_REQUESTS)

Opener = Callable[[str, Deadline], BinaryIO]


class TransientError(Exception):
    """A failure worth retrying: connection trouble, a timeout, a 5xx answer, a slow body.

    Deliberately not an OSError, so the store's I/O error handling does not mistake a network
    failure for a disk one while it copies the stream.
    """


class SourceFailure(Exception):
    """A permanent failure (4xx, TLS trust, an encoding not asked for): retrying would not help."""

    def __init__(self, message: str, fix: str | None = None) -> None:
        super().__init__(message)
        self.fix = fix


def default_opener(
    url: str, deadline: Deadline, headers: Mapping[str, str] | None = None
) -> BinaryIO:
    """Open ``url`` (https only) with the system trust store (honours ``$SSL_CERT_FILE``),
    sending ``headers`` besides ``Accept-Encoding: identity`` (a ``Range``, for partial fetch).

    Every read of the connection, from the TLS handshake to the last body byte, waits at most
    until ``deadline``.
    """
    if not url.startswith("https://"):
        raise SourceFailure("only https URLs are fetched")
    context = ssl.create_default_context()
    context.sslsocket_class = _DeadlineSocket
    sent = {**(headers or {}), "Accept-Encoding": "identity"}
    request = urllib.request.Request(url, headers=sent)
    handler = _DeadlineHTTPSHandler(context, deadline)
    opener = urllib.request.build_opener(handler, _NoPlainRedirect())
    try:
        response = opener.open(request, timeout=deadline.next_read_timeout())
    except urllib.error.HTTPError as e:
        e.close()  # its body is never read: the status says what failed
        if e.code >= HTTPStatus.INTERNAL_SERVER_ERROR or e.code in _RETRIED:
            raise TransientError(f"HTTP {e.code} {e.reason}") from e
        raise SourceFailure(f"HTTP {e.code} {e.reason}", fix="check the record's source.url") from e
    except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
        reason = getattr(e, "reason", e)
        if isinstance(reason, ssl.SSLCertVerificationError):
            raise SourceFailure(
                f"TLS certificate not trusted: {reason.verify_message}",
                fix="install the server's CA in the system trust store (or $SSL_CERT_FILE)",
            ) from e
        raise TransientError(f"no response: {reason or type(reason).__name__}") from e
    _refuse_content_encoding(response)
    stream: BinaryIO = response
    return stream


def _refuse_content_encoding(response: Any) -> None:
    """The record's digest is of the bytes as published: an encoded body is not them."""
    encoding = str(response.headers.get("Content-Encoding") or "identity").strip().lower()
    if encoding in ("", "identity"):
        return
    response.close()
    raise SourceFailure(
        f"the server sent a {encoding}-encoded body (Content-Encoding: {encoding}) although "
        "the client asked for the bytes as published (Accept-Encoding: identity); "
        "nothing was stored",
        fix="the record's digest is of the file as published: register a URL that serves it "
        "without a content encoding (or a mirror that honours Accept-Encoding: identity)",
    )


class _DeadlineSocket(ssl.SSLSocket):
    """A TLS socket whose every read waits at most until its download's deadline.

    Without this a server sending one byte a second, in its headers or its body, would hold a
    fetch for as long as it likes: each read succeeds within the per-read timeout.
    """

    deadline: Deadline | None = None

    def recv_into(self, buffer: Any, nbytes: int | None = None, flags: int = 0) -> int:
        if self.deadline is not None:
            self.settimeout(self.deadline.next_read_timeout())
        return super().recv_into(buffer, nbytes, flags)


class _DeadlineConnection(http.client.HTTPSConnection):
    deadline: Deadline

    def connect(self) -> None:
        # CPython bounds the TCP connect, and the whole TLS handshake, by the socket timeout.
        self.timeout = self.deadline.next_read_timeout()
        super().connect()
        if isinstance(self.sock, _DeadlineSocket):
            self.sock.deadline = self.deadline


class _DeadlineHTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, context: ssl.SSLContext, deadline: Deadline) -> None:
        super().__init__(context=context)
        self._tls = context
        self._deadline = deadline

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        def connection(host: str, **kwargs: Any) -> http.client.HTTPSConnection:
            conn = _DeadlineConnection(host, **kwargs)
            conn.deadline = self._deadline
            return conn

        return self.do_open(connection, req, context=self._tls)


class _NoPlainRedirect(urllib.request.HTTPRedirectHandler):
    # urllib calls these overrides with its own signature.
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]  # noqa: PLR0917
        if not newurl.startswith("https://"):
            raise SourceFailure(f"refusing a redirect from https to {newurl.split(':')[0]}")
        return super().redirect_request(req, fp, code, msg, headers, newurl)

    def http_error_302(self, req, fp, code, msg, headers):  # type: ignore[no-untyped-def]
        # urllib reads a redirect's body whole before following it: a server answering with a
        # huge one would fill memory. Its first bytes at most, through the bounded reader.
        return super().http_error_302(req, _ErrorBody(fp), code, msg, headers)  # type: ignore[arg-type]

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302


@dataclass
class _ErrorBody:
    """An answer's body that is read for its message only: its first few KiB, never more."""

    raw: Any

    def read(self, _n: int = -1) -> bytes:
        read1 = getattr(self.raw, "read1", None) or self.raw.read
        return error_body(read1)

    def close(self) -> None:
        self.raw.close()


@dataclass
class _Guarded:
    """A response body read through the one bounded reader
    (:class:`~fixture_store.sources.transfer.BoundedBody`): at most the record's size and one
    byte, the deadline checked before each read, at the minimum rate. A cut connection, a short
    body and a slow one are a TransientError (a short body is a cut transfer as far as anyone
    can tell: worth another attempt).

    With ``exact=False`` the body's size is not known (``cap`` only bounds it): a body that
    ends is whole, unless it ends short of the ``Content-Length`` its answer announced."""

    raw: BinaryIO
    cap: int
    meter: RateMeter
    deadline: Deadline | None = None
    exact: bool = True
    body: BoundedBody = field(init=False)

    def __post_init__(self) -> None:
        # read1: at most one read of the connection, so the rate is measured as bytes come; a
        # buffered read would wait for the whole buffer.
        read1 = getattr(self.raw, "read1", None) or self.raw.read
        errors = (TimeoutError, OSError, http.client.HTTPException)
        self.body = BoundedBody(read1, self.cap, self.deadline, self.meter, errors=errors)
        self.body.exact = self.exact

    @property
    def read_so_far(self) -> int:
        return self.body.got

    def readinto(self, buf: memoryview) -> int:
        try:
            n = self.body.readinto(buf)
        except BodyCut as e:
            raise TransientError(str(e)) from e
        except BelowMinimumRate as e:
            raise TransientError(f"too slow after {self.body.got:,} bytes: {e}") from e
        if n == 0 and not self.exact and self.body.got <= self.cap:
            # http.client counts down the announced length; its body ends early without a word.
            short = getattr(self.raw, "length", None)
            if isinstance(short, int) and short > 0:
                raise TransientError(
                    f"the body ended after {self.body.got:,} bytes, {short:,} short of its "
                    "Content-Length"
                )
        return n

    def read(self, n: int = -1) -> bytes:
        buf = bytearray(n if n >= 0 else self.cap + 1 - self.body.got)
        got = self.readinto(memoryview(buf))
        return bytes(buf[:got])


def fetch(
    ctx: FetchContext,
    record: Record,
    opener: Opener | None = None,
    *,
    attempts: int = ATTEMPTS,
    backoff: float | None = None,
    timeout: float = TIMEOUT_S,
) -> None:
    """Download the record's file, verified, within ``ctx.policy``'s deadline and minimum rate.

    ``timeout`` bounds one read; the deadline bounds the download, attempts and pauses included.
    """
    url = source_as(record, UrlSource).url
    if record.is_tree:
        raise SourceError(
            record.name,
            "a url source delivers one file, not a tree",
            fix="register the archive itself, or each file with its own url",
        )
    expected = record.object
    if not ctx.needs(expected):
        return
    _check_https(record, url)
    ctx.require_online(record, "the object")

    def put(body: _Guarded) -> None:
        put_object(ctx, record, body, expected)  # type: ignore[arg-type]

    tries = _Tries(opener or default_opener, attempts, backoff, timeout)
    _download(ctx, record, url, put, cap=expected.size, tries=tries, exact=True)


def fill(
    ctx: FetchContext,
    record: Record,
    opener: Opener | None = None,
    *,
    attempts: int = ATTEMPTS,
    backoff: float | None = None,
    timeout: float = TIMEOUT_S,
) -> Stored:
    """Download the file a gap awaits, known by its digest alone (:attr:`Gap.expected`: a
    SHA-256 without its size, or a weak md5 or sha1): read by the bounded reader under
    ``ctx.policy.unsized_cap`` (its deadline derived from that cap), checked against that
    digest as it is stored (:func:`~fixture_store.sources.put_awaited`), retried as
    :func:`fetch` is. Returns the SHA-256, size and BLAKE3 of the bytes stored."""
    url = source_as(record, UrlSource).url
    awaited = record.gap.expected if record.gap is not None else None
    if awaited is None or record.digest is not None:
        raise SourceError(record.name, "is no gap known by its digest alone: fetch it instead")
    _check_https(record, url)
    ctx.require_online(record, "the file the gap awaits")
    cap = ctx.policy.unsized_cap

    def put(body: _Guarded) -> Stored:
        return put_awaited(ctx, record, body, awaited, cap)  # type: ignore[arg-type]

    tries = _Tries(opener or default_opener, attempts, backoff, timeout)
    return _download(ctx, record, url, put, cap=cap, tries=tries, exact=False)


def _check_https(record: Record, url: str) -> None:
    if not url.startswith("https://"):
        raise SourceError(record.name, f"{url!r} is not https; only https sources are fetched")


@dataclass(frozen=True)
class _Tries:
    """How a download is opened and tried again: the opener, the attempts, the first pause
    (``None``: :data:`BACKOFF_S`) and the timeout of one read."""

    opener: Opener
    attempts: int
    backoff: float | None
    timeout: float


_T = TypeVar("_T")


def _download(
    ctx: FetchContext,
    record: Record,
    url: str,
    put: Callable[[_Guarded], _T],
    *,
    cap: int,
    tries: _Tries,
    exact: bool,
) -> _T:
    """``put`` the body of ``url`` (read by the bounded reader: at most ``cap`` bytes and one,
    exactly ``cap`` if ``exact``) within the deadline of a download of ``cap`` bytes, trying
    again on transient errors only: a refusal by ``put`` (the server answered, with the wrong
    bytes) is counted and never retried."""
    pause = BACKOFF_S if tries.backoff is None else tries.backoff
    attempts = tries.attempts
    deadline = ctx.policy.start(cap, read_timeout=tries.timeout)
    last: Exception | None = None
    for attempt in range(1, attempts + 1):
        try:
            stream = tries.opener(url, deadline)
            try:
                guarded = _Guarded(stream, cap, ctx.policy.meter(), deadline, exact=exact)
                try:
                    done = put(guarded)
                except SourceError:
                    ctx.count_refused(guarded.read_so_far)
                    raise
                ctx.count_download(guarded.read_so_far)
                return done
            finally:
                stream.close()
        except (TransientError, DeadlineExceeded) as e:
            last = e
        except SourceFailure as e:
            raise SourceError(
                record.name,
                f"{url}: {e}",
                fix=e.fix or f"fixture-store fetch {names.shell(record.name)}",
            ) from e
        wait = pause * 2 ** (attempt - 1)
        if attempt == attempts or wait >= deadline.remaining():
            break
        time.sleep(wait)
    raise _gave_up(record, url, deadline, last, attempt=attempt, attempts=attempts)


def _gave_up(
    record: Record,
    url: str,
    deadline: Deadline,
    last: Exception | None,
    *,
    attempt: int,
    attempts: int,
) -> SourceError:
    """Why a download that never completed stopped: its deadline, or its attempts."""
    if attempt < attempts or deadline.expired:
        tried = f"{attempt} attempt{'s' if attempt > 1 else ''}"
        if not isinstance(last, DeadlineExceeded):
            tried += f"; last: {last}"
        return SourceError(
            record.name,
            f"{url}: no complete download within the deadline of {deadline.seconds:g}s "
            f"({tried}); nothing was stored",
            fix=slow_download_fix(record.name),
        )
    slow = isinstance(last, TransientError) and isinstance(last.__cause__, BelowMinimumRate)
    return SourceError(
        record.name,
        f"{url}: gave up after {attempts} attempts: {last}",
        fix=slow_download_fix(record.name)
        if slow
        else f"check the network, then: fixture-store fetch {names.shell(record.name)}",
    )
