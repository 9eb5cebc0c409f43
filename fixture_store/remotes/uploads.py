"""Incomplete multipart uploads of an S3 remote: the parts a cut push leaves behind.

An object or a pack from ``MULTIPART_THRESHOLD`` on goes up in parts (:mod:`~fixture_store.
remotes.s3`); a push that dies between its first part and its completion leaves the upload
open, and S3 keeps its parts, and bills them, until it is aborted. A listing of keys does not
show them. A remote's gc (:mod:`~fixture_store.remotes.gc`) lists them here, through the
remote's own client (every answer read bounded, errors as the remote's), and aborts the old
ones.

Only uploads of keys fixture-store writes are ever listed or aborted: below the remote's prefix,
under ``objects/`` (objects and packs). A remote at the root of a bucket shared with other tools
leaves their uploads alone, and an upload a server lists outside that prefix (one that ignores
``Prefix``) is never taken for the remote's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fixture_store.objects.digests import Digest
from fixture_store.remotes.base import MissingRemoteObject

# Every key a push writes is under it (objects/sha256/, objects/packs/).
UPLOADS_UNDER = "objects/"
_NO_DIGEST = Digest("0" * 64, 0)


@dataclass(frozen=True, slots=True)
class Upload:
    """An upload in progress: its key (below the remote's prefix), its id, when it was written
    (initiated: seconds since the epoch, the server's clock, as a key's ``LastModified``), and
    the bytes of its parts (``None``: not asked)."""

    key: str
    upload_id: str
    written: float
    size: int | None = None


def listed(remote: Any) -> list[Upload]:
    """The uploads in progress under the remote's ``objects/`` (ListMultipartUploads, a
    thousand a request, every page)."""
    under = remote.prefix + UPLOADS_UNDER
    found: list[Upload] = []
    marker: dict[str, str] = {}
    while True:
        try:
            page = remote.client.list_multipart_uploads(
                Bucket=remote.bucket, Prefix=under, **marker
            )
        except Exception as e:
            raise remote._error(e, _NO_DIGEST, under) from e
        for item in page.get("Uploads", ()):
            key = str(item.get("Key", ""))
            if not key.startswith(under):  # a server that ignores Prefix: not the remote's
                continue
            written = item["Initiated"].timestamp()
            found.append(Upload(key[len(remote.prefix) :], str(item["UploadId"]), written))
        after = {
            "KeyMarker": str(page.get("NextKeyMarker") or ""),
            "UploadIdMarker": str(page.get("NextUploadIdMarker") or ""),
        }
        if not page.get("IsTruncated") or not after["KeyMarker"] or after == marker:
            return found
        marker = after


def parts_size(remote: Any, upload: Upload) -> int:
    """The bytes of the upload's parts (ListParts, a thousand parts a request); 0 if it is
    gone meanwhile (completed or aborted)."""
    key = remote.prefix + upload.key
    total = 0
    marker: dict[str, int] = {}
    while True:
        try:
            page = remote.client.list_parts(
                Bucket=remote.bucket, Key=key, UploadId=upload.upload_id, **marker
            )
        except Exception as e:
            error = remote._error(e, _NO_DIGEST, key)
            if isinstance(error, MissingRemoteObject):  # NoSuchUpload
                return total
            raise error from e
        total += sum(int(part.get("Size") or 0) for part in page.get("Parts", ()))
        after = int(page.get("NextPartNumberMarker") or 0)
        if not page.get("IsTruncated") or after <= marker.get("PartNumberMarker", 0):
            return total
        marker = {"PartNumberMarker": after}


def abort(remote: Any, upload: Upload) -> None:
    """Abort the upload: S3 drops its parts. One gone already (completed, or aborted by another
    gc) is done."""
    key = remote.prefix + upload.key
    try:
        remote.client.abort_multipart_upload(
            Bucket=remote.bucket, Key=key, UploadId=upload.upload_id
        )
    except Exception as e:
        error = remote._error(e, _NO_DIGEST, key)
        if not isinstance(error, MissingRemoteObject):
            raise error from e
