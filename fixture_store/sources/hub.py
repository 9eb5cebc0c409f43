"""The hub source: one file of a Hugging Face Hub repo at a full 40-hex commit.

The real ``huggingface_hub`` client speaks the protocol (HEAD for metadata with its redirects and
commit/etag headers); the body is a GET on the client's own session, streamed here so that it is
bounded like every download: the fetch's deadline covers all attempts and pauses, the body must
keep the minimum rate (:mod:`fixture_store.sources.transfer`), and a transient error resumes
with a range. The client's ``HF_ENDPOINT``, token (``HF_TOKEN`` or the saved login),
``HF_HUB_DOWNLOAD_TIMEOUT`` (one read) and ``HF_HUB_ETAG_TIMEOUT`` are honoured.
The client checks no sha256, so this module does: the commit the server
answers for must be the pinned one, the announced size and LFS sha256 must match the record before
any body is downloaded, and the downloaded bytes must match the record before they enter the store.
The Hub cache is not used: the store is the cache.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any, BinaryIO
from urllib.parse import urlsplit

from fixture_store import display
from fixture_store._extras import require
from fixture_store.objects import names
from fixture_store.registry import HubSource, Record
from fixture_store.registry.pins import revision_problem
from fixture_store.sources import FetchContext, SourceError, answers, put_object, source_as
from fixture_store.sources.transfer import (
    BelowMinimumRate,
    BoundedBody,
    Chunks,
    Deadline,
    DeadlineExceeded,
    DownloadPolicy,
    slow_download_fix,
)

_SHA256 = re.compile(r"[0-9a-f]{64}")


def endpoint() -> str | None:
    """``$HF_ENDPOINT`` read at fetch time (the client reads it only at import)."""
    value = os.environ.get("HF_ENDPOINT", "").strip().rstrip("/")
    return value or None


def fetch(ctx: FetchContext, record: Record, *, etag_timeout: float | None = None) -> None:
    source = source_as(record, HubSource)
    repo_id, path, revision = source.repo_id, source.path, source.revision
    repo_type = source.resolved_repo_type
    where = source.describe()
    problem = revision_problem(revision)  # the one pin rule (a full match of 40 hex digits)
    if problem is not None:
        # The registry refuses such records already; a fetch never trusts that it ran.
        raise SourceError(
            record.name,
            f"revision {revision!r} is not a full 40-hex commit ({problem}); "
            "refusing to download a moving reference",
            fix="pin the record's source.revision to the full commit sha",
        )
    if record.is_tree:
        raise SourceError(
            record.name,
            "a hub source delivers one file, not a tree",
            fix="register each file of the repo as its own record",
        )
    expected = record.object
    if not ctx.needs(expected):
        return
    ctx.require_online(record, "the object")

    require("hub", for_what="fetching a hub source")
    from huggingface_hub import constants, get_hf_file_metadata, hf_hub_url

    url = hf_hub_url(repo_id, path, repo_type=repo_type, revision=revision, endpoint=endpoint())
    timeout = etag_timeout if etag_timeout is not None else constants.HF_HUB_ETAG_TIMEOUT
    try:
        meta = get_hf_file_metadata(url, timeout=timeout, endpoint=endpoint())
    except Exception as e:
        raise SourceError(
            record.name, f"{where}: metadata request failed: {_describe(e)}", fix=_fix(record)
        ) from e
    problem = announced_problem(meta, revision, expected.size, expected.hex)
    if problem is not None:
        raise SourceError(record.name, f"{where}: {problem}")
    headers = download_headers(url, meta.location)
    ctx.store.ensure()
    # The temp file is made from the temp folder's descriptor (the path primitive, DESIGN 13):
    # never through a link planted in tmp/, and read back from the folder's descriptor.
    with ctx.store.folder_of(ctx.store.temp_folder()) as temps:
        fd, name = temps.create_temp("hub-")
        try:
            with os.fdopen(fd, "wb") as out:
                _download(ctx, record, meta.location, headers, out)
            with temps.open(name) as stream:  # read back through the primitive too
                received = os.fstat(stream.fileno()).st_size
                try:
                    put_object(ctx, record, stream, expected)
                except SourceError:
                    ctx.count_refused(received)
                    raise
            ctx.count_download(received)
        finally:
            temps.unlink(name)


def announced_problem(meta: Any, revision: str, size: int, hexdigest: str) -> str | None:
    """What the Hub's metadata of a file (``get_hf_file_metadata``) says that cannot be the
    expected object at the pinned commit, or ``None``: checked before any body is downloaded."""
    if answers.commit_id(meta.commit_hash) != revision:  # checked at the door, then compared
        return (
            f"the server answered for commit {display.escape(repr(meta.commit_hash)[:80])}, "
            f"not the pinned {revision}; nothing was stored"
        )
    if meta.size is not None and meta.size != size:
        return (
            f"the server announces {meta.size} bytes, the record expects {size:,} bytes; "
            "nothing was downloaded"
        )
    etag = (meta.etag or "").lower()
    if _SHA256.fullmatch(etag) and etag != hexdigest:
        return (
            f"the server's LFS sha256 is {etag}, the record expects sha256:{hexdigest}; "
            "nothing was downloaded"
        )
    return None


def download_headers(url: str, location: str) -> dict[str, str]:
    """The client's headers for the body's GET at ``location``: the token only if that is
    the Hub's own host (a signed CDN URL never gets it)."""
    require("hub", for_what="fetching a hub source")
    from huggingface_hub.utils import build_hf_headers  # type: ignore[attr-defined]

    headers: dict[str, str] = build_hf_headers()
    if urlsplit(location).netloc != urlsplit(url).netloc:
        headers.pop("authorization", None)
    return headers


# The body is streamed here rather than by the client's http_get: its retries start afresh
# whenever a chunk arrives and its reads wait for 10 MiB chunks, so a server trickling a byte
# at a time held a fetch far past any deadline. Here every read is bounded by the policy's
# deadline and the body by its minimum rate, as for url sources (sources/transfer.py).
ATTEMPTS_WITHOUT_PROGRESS = 5
CHUNK = 1 << 20
PAUSE_S = 0.5


class _Refused(Exception):
    """The body cannot be the record's bytes (too long, or cleanly ended short)."""


def _download(
    ctx: FetchContext, record: Record, url: str, headers: dict[str, str], out: BinaryIO
) -> None:
    """Stream ``url`` into ``out``, resuming with ranges after transient errors, within the
    deadline of ``ctx.policy`` (all attempts and pauses included) and its minimum rate."""
    require("hub", for_what="fetching a hub source")
    import httpx2 as httpx  # the HTTP client huggingface_hub is built on (its session's errors)
    from huggingface_hub import constants, get_session

    where = record.source.describe()
    read_timeout = float(constants.HF_HUB_DOWNLOAD_TIMEOUT)
    deadline = ctx.policy.start(record.object.size, read_timeout=read_timeout)
    stalled = 0
    while True:
        before = out.tell()
        try:
            _attempt(
                get_session(),
                url,
                out,
                headers=headers,
                size=record.object.size,
                deadline=deadline,
                policy=ctx.policy,
            )
            return
        except (DeadlineExceeded, BelowMinimumRate) as e:
            raise _too_slow(record, f"{where}: {e}") from e
        except (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError) as e:
            stalled = 0 if out.tell() > before else stalled + 1
            if deadline.remaining() <= PAUSE_S:
                raise _too_slow(
                    record,
                    f"{where}: no complete download within the deadline of {deadline.seconds:g}s "
                    f"(last: {_describe(e)})",
                ) from e
            if stalled >= ATTEMPTS_WITHOUT_PROGRESS:
                raise SourceError(
                    record.name,
                    f"{where}: download failed: {_describe(e)}; nothing was stored",
                    fix=_fix(record),
                ) from e
        except (httpx.HTTPError, _Refused) as e:
            raise SourceError(
                record.name,
                f"{where}: download failed: {_describe(e)}; nothing was stored",
                fix=_fix(record),
            ) from e
        time.sleep(PAUSE_S)


def _too_slow(record: Record, message: str) -> SourceError:
    return SourceError(
        record.name, f"{message}; nothing was stored", fix=slow_download_fix(record.name)
    )


_PARTIAL_CONTENT = 206


def _attempt(
    session: Any,
    url: str,
    out: BinaryIO,
    *,
    headers: dict[str, str],
    size: int,
    deadline: Deadline,
    policy: DownloadPolicy,
) -> None:
    """One GET of the rest of the body (a range once some of it is in ``out``)."""
    got = out.tell()
    ranged = {**headers, "Range": f"bytes={got}-"} if got else headers
    with session.stream(
        "GET", url, headers=ranged, timeout=deadline.next_read_timeout(), follow_redirects=True
    ) as response:
        response.raise_for_status()
        if got and response.status_code != _PARTIAL_CONTENT:  # range ignored: start again
            out.seek(0)
            out.truncate()
        # The one bounded reader: the rest of the record's bytes and one more at most, the
        # deadline checked and the rate measured (from the first body byte) at every read.
        left = size - out.tell()
        chunks = Chunks(iter(response.iter_bytes()))
        body = BoundedBody(chunks.read1, left, deadline, policy.meter(), errors=(), exact=False)
        while chunk := body.read(CHUNK):
            if body.got > left:
                raise _Refused(f"the server sent more than the record's {size} bytes")
            out.write(chunk)
    if out.tell() != size:
        raise _Refused(f"the body ended after {out.tell()} of the record's {size} bytes")


def _describe(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(e).__name__}: {first}" if first else type(e).__name__


def _fix(record: Record) -> str:
    return (
        f"check HF_ENDPOINT, your token (HF_TOKEN) and network access, then: "
        f"fixture-store fetch {names.shell(record.name)}"
    )
