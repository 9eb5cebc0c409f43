"""The url source: https only, streamed under a size cap, retried on transient errors only.

A digest or size mismatch is never retried: the server answered, with the wrong bytes.
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
from typing import BinaryIO

from fixture_store.registry import Record, UrlSource
from fixture_store.sources import FetchContext, SourceError, put_object, source_as

TIMEOUT_S = 30.0
ATTEMPTS = 4
BACKOFF_S = 0.5
# Besides a server error (5xx), the answers that say "try again later".
_RETRIED = (HTTPStatus.REQUEST_TIMEOUT, HTTPStatus.TOO_MANY_REQUESTS)

Opener = Callable[[str, float], BinaryIO]


class TransientError(Exception):
    """A failure worth retrying: connection trouble, a timeout, a 5xx answer.

    Deliberately not an OSError, so the store's I/O error handling does not mistake a network
    failure for a disk one while it copies the stream.
    """


class SourceFailure(Exception):
    """A permanent failure (4xx, TLS trust): retrying would not help."""


def default_opener(url: str, timeout: float) -> BinaryIO:
    """Open ``url`` (https only) with the system trust store (honours ``$SSL_CERT_FILE``)."""
    if not url.startswith("https://"):
        raise SourceFailure("only https URLs are fetched")
    context = ssl.create_default_context()
    request = urllib.request.Request(url, headers={"Accept-Encoding": "identity"})
    handler = urllib.request.HTTPSHandler(context=context)
    opener = urllib.request.build_opener(handler, _NoPlainRedirect())
    try:
        response: BinaryIO = opener.open(request, timeout=timeout)
    except urllib.error.HTTPError as e:
        if e.code >= HTTPStatus.INTERNAL_SERVER_ERROR or e.code in _RETRIED:
            raise TransientError(f"HTTP {e.code} {e.reason}") from e
        raise SourceFailure(f"HTTP {e.code} {e.reason}") from e
    except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
        reason = getattr(e, "reason", e)
        if isinstance(reason, ssl.SSLCertVerificationError):
            raise SourceFailure(f"TLS certificate not trusted: {reason.verify_message}") from e
        raise TransientError(str(reason)) from e
    return response


class _NoPlainRedirect(urllib.request.HTTPRedirectHandler):
    # urllib calls this override with its own signature.
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]  # noqa: PLR0917
        if not newurl.startswith("https://"):
            raise SourceFailure(f"refusing a redirect from https to {newurl.split(':')[0]}")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


@dataclass
class _Guarded:
    """A response stream whose network errors surface as TransientError, with a size cap."""

    raw: BinaryIO
    cap: int
    read_so_far: int = 0

    def readinto(self, buf: memoryview) -> int:
        want = min(len(buf), self.cap + 1 - self.read_so_far)
        if want <= 0:
            return 0
        try:
            n = self.raw.readinto(buf[:want])  # type: ignore[attr-defined]
        except (TimeoutError, OSError, http.client.HTTPException) as e:
            raise TransientError(f"connection failed after {self.read_so_far} bytes: {e}") from e
        if not n and self.read_so_far < self.cap:
            # A short body is a cut transfer as far as anyone can tell: worth another attempt.
            raise TransientError(f"connection closed after {self.read_so_far} of {self.cap} bytes")
        self.read_so_far += n or 0
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
    last = ""
    for attempt in range(1, attempts + 1):
        try:
            stream = open_url(url, timeout)
            try:
                guarded = _Guarded(stream, expected.size)
                put_object(ctx, record, guarded, expected)  # type: ignore[arg-type]
                ctx.count_download(guarded.read_so_far)
                return
            finally:
                stream.close()
        except TransientError as e:
            last = str(e)
            if attempt < attempts:
                time.sleep(pause * 2 ** (attempt - 1))
        except SourceFailure as e:
            raise SourceError(record.name, f"{url}: {e}") from e
    raise SourceError(
        record.name,
        f"{url}: gave up after {attempts} attempts: {last}",
        fix=f"check the network, then: fixture-store fetch {record.name}",
    )
