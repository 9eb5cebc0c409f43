"""The hub source: one file of a Hugging Face Hub repo at a full 40-hex commit.

The real ``huggingface_hub`` client speaks the protocol (HEAD for metadata with its redirects and
commit/etag headers, then a streamed GET that resumes with ranges); it honours ``HF_ENDPOINT``,
the token from ``HF_TOKEN`` or the saved login, and ``HF_HUB_DOWNLOAD_TIMEOUT`` /
``HF_HUB_ETAG_TIMEOUT``. The client checks no sha256, so this module does: the commit the server
answers for must be the pinned one, the announced size and LFS sha256 must match the record before
any body is downloaded, and the downloaded bytes must match the record before they enter the store.
The Hub cache is not used: the store is the cache.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from fixture_store._extras import require
from fixture_store.registry import HubSource, Record
from fixture_store.sources import FetchContext, SourceError, put_object, source_as

_COMMIT = re.compile(r"[0-9a-f]{40}")
_SHA256 = re.compile(r"[0-9a-f]{64}")


def _quiet_tqdm() -> Any:
    require("hub", for_what="fetching a hub source", modules=("tqdm",))
    from tqdm import tqdm  # type: ignore[import-untyped]

    class Quiet(tqdm):  # type: ignore[misc]
        """fetch draws one progress bar of its own; one bar per file would bury it."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["disable"] = True
            super().__init__(*args, **kwargs)

    return Quiet


def endpoint() -> str | None:
    """``$HF_ENDPOINT`` read at fetch time (the client reads it only at import)."""
    value = os.environ.get("HF_ENDPOINT", "").strip().rstrip("/")
    return value or None


def fetch(ctx: FetchContext, record: Record, *, etag_timeout: float | None = None) -> None:
    source = source_as(record, HubSource)
    repo_id, path, revision = source.repo_id, source.path, source.revision
    repo_type = source.resolved_repo_type
    where = source.describe()
    if _COMMIT.fullmatch(revision) is None:
        # The registry refuses such records already; a fetch never trusts that it ran.
        raise SourceError(
            record.name,
            f"revision {revision!r} is not a full 40-hex commit; "
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
    from huggingface_hub import constants, file_download, get_hf_file_metadata, hf_hub_url
    from huggingface_hub.utils import build_hf_headers  # type: ignore[attr-defined]

    url = hf_hub_url(repo_id, path, repo_type=repo_type, revision=revision, endpoint=endpoint())
    timeout = etag_timeout if etag_timeout is not None else constants.HF_HUB_ETAG_TIMEOUT
    try:
        meta = get_hf_file_metadata(url, timeout=timeout, endpoint=endpoint())
    except Exception as e:
        raise SourceError(
            record.name, f"{where}: metadata request failed: {_describe(e)}", fix=_fix(record)
        ) from e
    if meta.commit_hash != revision:
        raise SourceError(
            record.name,
            f"{where}: the server answered for commit "
            f"{meta.commit_hash!r}, not the pinned {revision}; nothing was stored",
        )
    if meta.size is not None and meta.size != expected.size:
        raise SourceError(
            record.name,
            f"{where}: the server announces {meta.size} bytes, the "
            f"record expects {expected}; nothing was downloaded",
        )
    etag = (meta.etag or "").lower()
    if _SHA256.fullmatch(etag) and etag != expected.hex:
        raise SourceError(
            record.name,
            f"{where}: the server's LFS sha256 is {etag}, the record "
            f"expects {expected}; nothing was downloaded",
        )

    headers = build_hf_headers()
    if urlsplit(meta.location).netloc != urlsplit(url).netloc:
        headers.pop("authorization", None)  # a signed CDN url: never send the token elsewhere
    ctx.store.ensure()
    fd, tmp_name = tempfile.mkstemp(dir=ctx.store.temp_folder(), prefix="hub-")
    tmp = Path(tmp_name)
    try:
        try:
            with os.fdopen(fd, "wb") as out:
                file_download.http_get(
                    meta.location,
                    out,
                    headers=headers,
                    expected_size=expected.size,
                    displayed_filename=path,
                    tqdm_class=_quiet_tqdm(),
                )
        except Exception as e:
            raise SourceError(
                record.name,
                f"{where}: download failed: {_describe(e)}; nothing was stored",
                fix=_fix(record),
            ) from e
        received = tmp.stat().st_size
        try:
            with open(tmp, "rb") as stream:
                put_object(ctx, record, stream, expected)
        except SourceError:
            ctx.count_refused(received)
            raise
        ctx.count_download(received)
    finally:
        tmp.unlink(missing_ok=True)


def _describe(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(e).__name__}: {first}" if first else type(e).__name__


def _fix(record: Record) -> str:
    return (
        f"check HF_ENDPOINT, your token (HF_TOKEN) and network access, then: "
        f"fixture-store fetch {record.name}"
    )
