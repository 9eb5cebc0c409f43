"""Named files on a remote, beside its objects: what packs need of a folder or an S3 bucket.

An object's key is its digest (``base.object_key``); a pack and a pack index are named by the
digest of their own bytes too, under ``objects/packs/`` (see ``packs``). Packs need three things
of a remote that objects do not: a listing of a folder of keys (which pack indexes exist, which
objects the remote holds one per key), a write-once upload under a given key, and a read of a
byte range of a key. :func:`keys_of` gives them for the kinds that have them (a folder, S3); an
https mirror has only the reads (:class:`RangeReads`, in ``https``), its listing of the pack
indexes being the list push writes beside them. A remote's gc
(``remotes.gc``) needs two more: a listing that says when each key was written, and a delete;
and of S3, the multipart uploads a cut push left open (``remotes.uploads``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from fixture_store.errors import FixtureStoreError
from fixture_store.objects import digests
from fixture_store.objects.digests import Digest
from fixture_store.remotes import uploads as uploads_mod
from fixture_store.remotes.base import (
    OBJECTS_PREFIX,
    RangeRefused,
    Remote,
    RemoteError,
    checksum_sha256,
)
from fixture_store.remotes.folder import TEMPS
from fixture_store.remotes.uploads import Upload
from fixture_store.sources.ranges import range_problem
from fixture_store.sources.transfer import DeadlineExceeded, current_deadline

# S3 deletes at most 1,000 keys a request.
DELETE_BATCH = 1000


@dataclass(frozen=True, slots=True)
class Entry:
    """A key as a listing shows it: its size, and when it was written (seconds since the epoch:
    a folder's mtime, S3's LastModified)."""

    size: int
    written: float


class RangeReads(Protocol):
    """What reading packs needs of a remote: which keys a folder of it holds, and byte ranges of
    a key. A folder and an S3 remote list their folders; an https mirror, which lists nothing,
    says what its pack index folder holds through the list push writes beside it
    (:data:`~fixture_store.remotes.packs.LIST_KEY`)."""

    @property
    def label(self) -> str: ...

    @property
    def read_only(self) -> bool:
        """Whether the remote only serves what is pushed elsewhere (an https mirror)."""
        ...

    def listing(self, folder: str) -> dict[str, int]:
        """The keys directly in ``folder`` (their last part) and their sizes."""
        ...

    def open_range(self, key: str, digest: Digest, start: int, length: int) -> BinaryIO:
        """A stream of ``length`` bytes of ``key`` (whose whole is ``digest``) from ``start``;
        the caller reads it through a bounded reader and closes it. An answer that is not that
        range of an object of ``digest.size`` bytes (a server that ignores ``Range``, another
        Content-Range) is :class:`~fixture_store.remotes.base.RangeRefused` before its body is
        read (:func:`~fixture_store.sources.ranges.range_problem`, the check of every ranged
        read)."""
        ...


class Keys(RangeReads, Protocol):
    """The named files of one remote (keys below its prefix, ``/``-separated)."""

    @property
    def temps(self) -> str | None:
        """The folder where pushes write temp files before naming them (a folder remote's
        ``tmp``; ``None``: the kind writes none)."""
        ...

    def objects(self) -> dict[str, int]:
        """The objects held one per key: digest hex → size."""
        ...

    def put(self, key: str, path: Path, digest: Digest) -> bool:
        """Upload the file at ``path`` (its bytes are ``digest``) under ``key``, write-once:
        False if something is there already."""
        ...

    def replace(self, key: str, data: bytes) -> None:
        """Write ``data`` under ``key``, replacing what is there at once (a reader sees the old
        bytes or the new ones): the one key that is not write-once, the list of pack indexes an
        https mirror reads (it is a hint; every index it names is checked on its own)."""
        ...

    def stamped(self, folder: str) -> dict[str, Entry]:
        """:meth:`listing`, each key with when it was written."""
        ...

    def stamped_objects(self) -> dict[str, Entry]:
        """:meth:`objects`, each with when it was written."""
        ...

    def delete(self, keys: Sequence[str]) -> dict[str, FixtureStoreError]:
        """Remove ``keys`` (at most :data:`DELETE_BATCH`; one gone already is removed): the
        ones that could not be, and why. A transient failure of the whole request raises."""
        ...

    def uploads(self) -> list[Upload]:
        """The multipart uploads in progress under the remote's ``objects/`` (none for a kind
        that writes no parts)."""
        ...

    def upload_size(self, upload: Upload) -> int:
        """The bytes of the upload's parts so far."""
        ...

    def abort(self, upload: Upload) -> None:
        """Abort the upload (its parts go); one gone already is done."""
        ...


def keys_of(remote: Remote) -> Keys | None:
    """The named files of ``remote``, or ``None`` for a kind without them (an https mirror)."""
    from fixture_store.remotes.folder import FolderRemote

    if isinstance(remote, FolderRemote):
        return _FolderKeys(remote)
    if type(remote).__name__ == "S3Remote":  # no import of boto3's module for other kinds
        return _S3Keys(remote)
    return None


class _FolderKeys:
    temps = TEMPS
    read_only = False

    def __init__(self, remote: Any) -> None:
        self.remote = remote

    @property
    def label(self) -> str:
        return str(self.remote.label)

    def listing(self, folder: str) -> dict[str, int]:
        return dict(self.remote.files(*folder.split("/")))

    def objects(self) -> dict[str, int]:
        return {k: v.size for k, v in self.stamped_objects().items()}

    def stamped(self, folder: str) -> dict[str, Entry]:
        found = self.remote.entries(*folder.split("/"))
        return {k: Entry(st.st_size, st.st_mtime) for k, st in found.items()}

    def stamped_objects(self) -> dict[str, Entry]:
        found: dict[str, Entry] = {}
        for shard in self.remote.files(*OBJECTS_PREFIX.split("/"), folders=True):
            if len(shard) == 2:  # noqa: PLR2004 - a shard is two hex digits
                for name, entry in self.stamped(f"{OBJECTS_PREFIX}/{shard}").items():
                    found[shard + name] = entry
        return found

    def delete(self, keys: Sequence[str]) -> dict[str, FixtureStoreError]:
        failed: dict[str, FixtureStoreError] = {}
        for key in keys:
            *parts, name = key.split("/")
            try:
                self.remote.remove(tuple(parts), name)
            except RemoteError as e:
                failed[key] = e
        return failed

    def uploads(self) -> list[Upload]:
        return []  # a folder remote writes no parts: a cut copy is a temp file (``temps``)

    def upload_size(self, upload: Upload) -> int:  # noqa: ARG002
        return 0

    def abort(self, upload: Upload) -> None:
        pass

    def put(self, key: str, path: Path, digest: Digest) -> bool:
        *parts, name = key.split("/")
        return bool(self.remote.put(tuple(parts), name, path, digest))

    def replace(self, key: str, data: bytes) -> None:
        *parts, name = key.split("/")
        self.remote.replace(tuple(parts), name, data)

    def open_range(self, key: str, digest: Digest, start: int, length: int) -> BinaryIO:  # noqa: ARG002
        *parts, name = key.split("/")
        stream: BinaryIO = self.remote.read_range(tuple(parts), name, start, length)
        return stream


class _S3Keys:
    temps = None
    read_only = False

    def __init__(self, remote: Any) -> None:
        self.remote = remote

    @property
    def label(self) -> str:
        return str(self.remote.label)

    def _list(self, prefix: str) -> dict[str, Entry]:
        remote = self.remote
        found: dict[str, Entry] = {}
        token: dict[str, str] = {}
        while True:
            try:
                page = remote.client.list_objects_v2(
                    Bucket=remote.bucket, Prefix=remote.prefix + prefix, **token
                )
            except Exception as e:
                raise remote._error(e, _NO_DIGEST, remote.prefix + prefix) from e
            for item in page.get("Contents", ()):
                written = item["LastModified"].timestamp()
                found[str(item["Key"])[len(remote.prefix + prefix) :]] = Entry(
                    int(item["Size"]), written
                )
            if not page.get("IsTruncated") or not page.get("NextContinuationToken"):
                return found
            token = {"ContinuationToken": str(page["NextContinuationToken"])}

    def listing(self, folder: str) -> dict[str, int]:
        return {k: v.size for k, v in self.stamped(folder).items()}

    def objects(self) -> dict[str, int]:
        return {k: v.size for k, v in self.stamped_objects().items()}

    def stamped(self, folder: str) -> dict[str, Entry]:
        return {k: v for k, v in self._list(folder + "/").items() if "/" not in k}

    def stamped_objects(self) -> dict[str, Entry]:
        return {
            k.replace("/", ""): v
            for k, v in self._list(OBJECTS_PREFIX + "/").items()
            if len(k) == 65 and k[2] == "/"  # noqa: PLR2004 - "ab/<62 hex>"
        }

    def delete(self, keys: Sequence[str]) -> dict[str, FixtureStoreError]:
        remote = self.remote
        if not keys:
            return {}
        try:
            got = remote.client.delete_objects(
                Bucket=remote.bucket,
                Delete={"Objects": [{"Key": remote.prefix + k} for k in keys], "Quiet": True},
            )
        except Exception as e:
            raise remote._error(e, _NO_DIGEST, remote.prefix + keys[0]) from e
        failed: dict[str, FixtureStoreError] = {}
        for error in got.get("Errors", ()):
            key = str(error.get("Key", ""))[len(remote.prefix) :]
            failed[key] = RemoteError(
                f"remote {remote.label}: cannot remove {remote.prefix + key}: "
                f"{error.get('Code')}: {error.get('Message')}",
                fix="check that the credentials may delete in this bucket and prefix",
            )
        return failed

    def uploads(self) -> list[Upload]:
        return uploads_mod.listed(self.remote)

    def upload_size(self, upload: Upload) -> int:
        return uploads_mod.parts_size(self.remote, upload)

    def abort(self, upload: Upload) -> None:
        uploads_mod.abort(self.remote, upload)

    def put(self, key: str, path: Path, digest: Digest) -> bool:
        return bool(self.remote.upload(path, digest, key=key))

    def replace(self, key: str, data: bytes) -> None:
        remote = self.remote
        digest = digests.of_bytes(data)
        try:
            remote.client.put_object(
                Bucket=remote.bucket,
                Key=remote.prefix + key,
                Body=data,
                ContentLength=len(data),
                ChecksumAlgorithm="SHA256",
                ChecksumSHA256=checksum_sha256(digest),
            )
        except Exception as e:
            raise remote._error(e, digest, remote.prefix + key) from e

    def open_range(self, key: str, digest: Digest, start: int, length: int) -> BinaryIO:
        from fixture_store.remotes.s3 import _Body

        remote = self.remote
        try:
            got = remote.client.get_object(
                Bucket=remote.bucket,
                Key=remote.prefix + key,
                Range=f"bytes={start}-{start + length - 1}",
            )
        except Exception as e:
            raise remote._error(e, digest, remote.prefix + key) from e
        status = int(got.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        problem = range_problem(
            status, str(got.get("ContentRange") or ""), start, start + length - 1, digest.size
        )
        if problem is not None:  # the whole object, or another range: its body is never read
            got["Body"].close()
            _deadline_passed(remote, digest, remote.prefix + key)  # headers cut short by it
            raise RangeRefused(
                f"remote {remote.label}: {remote.prefix + key} {problem}",
                fix="check the remote's endpoint_url: the server (or a proxy before it) does "
                "not answer byte ranges as S3 does",
            )
        return _Body(got["Body"], remote, digest)  # type: ignore[return-value]


_NO_DIGEST = Digest("0" * 64, 0)


def _deadline_passed(remote: Any, digest: Digest, key: str) -> None:
    """The remote's transient error if the current deadline has passed (an answer whose headers
    it cut is not a lie about the range: another attempt, or the next place, may succeed)."""
    deadline = current_deadline()
    if deadline is None:
        return
    try:
        deadline.check()
    except DeadlineExceeded as e:
        raise remote._error(e, digest, key) from e
