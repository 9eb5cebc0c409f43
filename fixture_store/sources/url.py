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
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, BinaryIO

from fixture_store.registry import Record, UrlSource
from fixture_store.sources import FetchContext, SourceError, put_object, source_as
from fixture_store.sources.transfer import (
    BelowMinimumRate,
    Deadline,
    DeadlineExceeded,
    RateMeter,
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


def default_opener(url: str, deadline: Deadline) -> BinaryIO:
    """Open ``url`` (https only) with the system trust store (honours ``$SSL_CERT_FILE``).

    Every read of the connection, from the TLS handshake to the last body byte, waits at most
    until ``deadline``.
    """
    if not url.startswith("https://"):
        raise SourceFailure("only https URLs are fetched")
    context = ssl.create_default_context()
    context.sslsocket_class = _DeadlineSocket
    request = urllib.request.Request(url, headers={"Accept-Encoding": "identity"})
    handler = _DeadlineHTTPSHandler(context, deadline)
    opener = urllib.request.build_opener(handler, _NoPlainRedirect())
    try:
        response = opener.open(request, timeout=deadline.next_read_timeout())
    except urllib.error.HTTPError as e:
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
    # urllib calls this override with its own signature.
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]  # noqa: PLR0917
        if not newurl.startswith("https://"):
            raise SourceFailure(f"refusing a redirect from https to {newurl.split(':')[0]}")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


@dataclass
class _Guarded:
    """A response stream whose network errors surface as TransientError, with a size cap and a
    minimum rate."""

    raw: BinaryIO
    cap: int
    meter: RateMeter
    read_so_far: int = 0

    def readinto(self, buf: memoryview) -> int:
        want = min(len(buf), self.cap + 1 - self.read_so_far)
        if want <= 0:
            return 0
        # readinto1: at most one read of the connection, so the rate is measured as bytes come;
        # a buffered readinto would wait for the whole buffer.
        read = getattr(self.raw, "readinto1", None) or self.raw.readinto  # type: ignore[attr-defined]
        try:
            n = read(buf[:want])
        except (TimeoutError, OSError, http.client.HTTPException) as e:
            raise TransientError(f"connection failed after {self.read_so_far} bytes: {e}") from e
        if not n and self.read_so_far < self.cap:
            # A short body is a cut transfer as far as anyone can tell: worth another attempt.
            raise TransientError(f"connection closed after {self.read_so_far} of {self.cap} bytes")
        self.read_so_far += n or 0
        try:
            self.meter.add(n or 0)
        except BelowMinimumRate as e:
            raise TransientError(f"too slow after {self.read_so_far:,} bytes: {e}") from e
        return n or 0


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
    pause = BACKOFF_S if backoff is None else backoff
    if record.is_tree:
        raise SourceError(
            record.name,
            "a url source delivers one file, not a tree",
            fix="register the archive itself, or each file with its own url",
        )
    expected = record.object
    if not ctx.needs(expected):
        return
    if not url.startswith("https://"):
        raise SourceError(record.name, f"{url!r} is not https; only https sources are fetched")
    ctx.require_online(record, "the object")
    open_url = opener or default_opener
    deadline = ctx.policy.start(expected.size, read_timeout=timeout)
    last: Exception | None = None
    for attempt in range(1, attempts + 1):
        try:
            stream = open_url(url, deadline)
            try:
                guarded = _Guarded(stream, expected.size, ctx.policy.meter())
                try:
                    put_object(ctx, record, guarded, expected)  # type: ignore[arg-type]
                except SourceError:
                    ctx.count_refused(guarded.read_so_far)
                    raise
                ctx.count_download(guarded.read_so_far)
                return
            finally:
                stream.close()
        except (TransientError, DeadlineExceeded) as e:
            last = e
        except SourceFailure as e:
            raise SourceError(
                record.name, f"{url}: {e}", fix=e.fix or f"fixture-store fetch {record.name}"
            ) from e
        wait = pause * 2 ** (attempt - 1)
        if attempt == attempts or wait >= deadline.remaining():
            break
        time.sleep(wait)
    if attempt < attempts or deadline.expired:
        tried = f"{attempt} attempt{'s' if attempt > 1 else ''}"
        if not isinstance(last, DeadlineExceeded):
            tried += f"; last: {last}"
        raise SourceError(
            record.name,
            f"{url}: no complete download within the deadline of {deadline.seconds:g}s "
            f"({tried}); nothing was stored",
            fix=slow_download_fix(record.name),
        )
    slow = isinstance(last, TransientError) and isinstance(last.__cause__, BelowMinimumRate)
    raise SourceError(
        record.name,
        f"{url}: gave up after {attempts} attempts: {last}",
        fix=slow_download_fix(record.name)
        if slow
        else f"check the network, then: fixture-store fetch {record.name}",
    )
