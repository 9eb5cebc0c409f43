"""The S3 remote: S3-compatible object storage through boto3 (the ``s3`` extra).

Objects are plain S3 objects at ``<prefix>/objects/sha256/ab/<62 hex>``, readable by any S3 tool.
Each upload carries the object's SHA-256 as its S3 checksum (``x-amz-checksum-sha256``, base64
of the digest: a server that checks checksums refuses bytes that differ) and its hex as the
``sha256`` user metadata, and is write-once (``If-None-Match: *``). Objects from
``MULTIPART_THRESHOLD`` on go up in parts sent in parallel, each with its own SHA-256; S3 then
keeps a checksum of the parts' checksums, so the ``sha256`` metadata is what names the whole
object.

Credentials come only from the standard AWS chain (environment, shared config and credentials
files, the remote's ``profile``); the endpoint from the remote's ``endpoint_url`` or
``$AWS_ENDPOINT_URL``. Retries are this package's (:class:`~fixture_store.remotes.base.Retry`),
not botocore's, so one bound covers each object.

Every answer is read through the one bounded reader (DESIGN 14): the answers that are not an
object's body by :mod:`~fixture_store.remotes.s3_answers` (botocore's hooks), an object's body
by this module through :class:`~fixture_store.sources.transfer.BoundedBody`, at most the size
asked for and one byte.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import hashlib
import os
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from fixture_store import display
from fixture_store._extras import require
from fixture_store.errors import UsageError
from fixture_store.limits import MiB
from fixture_store.objects.digests import Digest
from fixture_store.remotes.base import (
    MissingRemoteObject,
    RemoteError,
    RemoteObject,
    Retry,
    TransientRemoteError,
    checksum_sha256,
    object_key,
)
from fixture_store.remotes.config import RemoteSpec
from fixture_store.remotes.s3_answers import AnswerTooLong, bound_answers
from fixture_store.sources.transfer import (
    BelowMinimumRate,
    BodyCut,
    BoundedBody,
    Deadline,
    DeadlineExceeded,
    current_deadline,
)

MULTIPART_THRESHOLD = 16 * MiB
PART_SIZE = 8 * MiB
# A large download: ranges of RANGE_SIZE, RANGE_JOBS in flight; memory is at most
# (RANGE_JOBS + 1) * RANGE_SIZE. Fewer, larger ranges: a server may read the whole object for
# each range (moto does), and 7 * 8 MiB stays under 64 MiB.
RANGE_SIZE = 8 * MiB
RANGE_JOBS = 6
# Parts in flight for one upload: each is read from the store's file as it is sent, so memory
# does not grow with them.
UPLOAD_JOBS = 8
CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 60.0
METADATA_KEY = "sha256"
_TRANSIENT_CODES = frozenset(
    {"SlowDown", "Throttling", "ThrottlingException", "RequestTimeout", "InternalError",
     "ServiceUnavailable", "RequestTimeTooSkewed", "ConditionalRequestConflict"}
)  # fmt: skip
_DENIED_CODES = frozenset(
    {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken",
     "InvalidToken", "AllAccessDisabled"}
)  # fmt: skip
_HTTP_FORBIDDEN = 403
_HTTP_NOT_FOUND = 404
_HTTP_PRECONDITION_FAILED = 412
_HTTP_TOO_MANY = 429
_HTTP_SERVER_ERROR = 500


@dataclass(frozen=True)
class S3Remote:
    """A bucket and a prefix, and the client that reaches them."""

    name: str
    bucket: str
    prefix: str
    client: Any = field(repr=False)
    endpoint: str | None = None
    retry: Retry = field(default_factory=Retry)
    multipart_threshold: int = MULTIPART_THRESHOLD
    part_size: int = PART_SIZE
    range_size: int = RANGE_SIZE
    range_jobs: int = RANGE_JOBS
    upload_jobs: int = UPLOAD_JOBS

    @classmethod
    def connect(cls, spec: RemoteSpec, *, jobs: int = 8, **kwargs: Any) -> S3Remote:
        """The remote ``spec`` names, with a client from the AWS chain (nothing is sent yet)."""
        require("s3", for_what=f"the S3 remote {spec.name}")
        import boto3
        import botocore.config
        import botocore.exceptions

        bucket, _, prefix = spec.url.removeprefix("s3://").partition("/")
        prefix = prefix.strip("/")
        config = botocore.config.Config(
            retries={"total_max_attempts": 1},
            connect_timeout=CONNECT_TIMEOUT_S,
            read_timeout=READ_TIMEOUT_S,
            max_pool_connections=max(10, jobs * max(UPLOAD_JOBS, RANGE_JOBS)),
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        )
        try:
            session = boto3.session.Session(profile_name=spec.profile)
            client = session.client(
                "s3", endpoint_url=spec.endpoint_url, region_name=spec.region, config=config
            )
        except botocore.exceptions.ProfileNotFound as e:
            raise UsageError(
                f"remote {spec.name}: the AWS profile {spec.profile!r} is not configured",
                fix="add it to ~/.aws/config (aws configure --profile NAME), or change the "
                "remote's profile",
            ) from e
        except botocore.exceptions.BotoCoreError as e:
            raise UsageError(f"remote {spec.name}: cannot make an S3 client: {e}") from e
        bound_answers(client)
        endpoint = spec.endpoint_url or os.environ.get("AWS_ENDPOINT_URL")
        return cls(spec.name, bucket, f"{prefix}/" if prefix else "", client, endpoint, **kwargs)

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")

    @property
    def label(self) -> str:
        at = f" at {display.url(self.endpoint)}" if self.endpoint else ""  # $AWS_ENDPOINT_URL too
        return f"{self.name} ({self.url}{at})" if self.name != self.url else f"{self.url}{at}"

    @property
    def writable(self) -> bool:
        return True

    def key(self, digest: Digest) -> str:
        return self.prefix + object_key(digest)

    # -- the interface ------------------------------------------------------------------------
    def stat(self, digest: Digest) -> RemoteObject | None:
        try:
            head = self.client.head_object(
                Bucket=self.bucket, Key=self.key(digest), ChecksumMode="ENABLED"
            )
        except Exception as e:
            error = self._error(e, digest)
            if isinstance(error, MissingRemoteObject):
                return None
            raise error from e
        return RemoteObject(int(head["ContentLength"]), _full_sha256(head))

    def upload(self, path: Path, digest: Digest, *, key: str | None = None) -> bool:
        """Write-once upload of the file at ``path`` (whose bytes are ``digest``) under the
        object's key, or under ``key`` (below the prefix: a pack, a pack index)."""
        key = self.prefix + key if key is not None else self.key(digest)
        try:
            if digest.size >= self.multipart_threshold:
                self._upload_parts(path, digest, key)
            else:
                with open(path, "rb") as body:
                    self.client.put_object(
                        Bucket=self.bucket,
                        Key=key,
                        Body=body,
                        ContentLength=digest.size,
                        ChecksumAlgorithm="SHA256",
                        ChecksumSHA256=checksum_sha256(digest),
                        Metadata={METADATA_KEY: digest.hex},
                        IfNoneMatch="*",
                    )
        except RemoteError:
            raise
        except Exception as e:
            if _status(e) == _HTTP_PRECONDITION_FAILED:
                return False  # an object is at the key already: write-once holds
            raise self._error(e, digest, key) from e
        return True

    def open(self, digest: Digest) -> BinaryIO:
        """The object's bytes: one GET, or for a large object ranges of ``range_size`` fetched
        ``range_jobs`` at a time and handed out in order (so the store still hashes the bytes as
        it writes them)."""
        if digest.size >= self.multipart_threshold:
            return _RangedBody(self, digest)  # type: ignore[return-value]
        try:
            got = self.client.get_object(Bucket=self.bucket, Key=self.key(digest))
        except Exception as e:
            raise self._error(e, digest) from e
        return _Body(got["Body"], self, digest)  # type: ignore[return-value]

    def get_range(
        self, digest: Digest, start: int, end: int, deadline: Deadline | None = None
    ) -> memoryview:
        """Bytes ``start`` to ``end`` (inclusive) of the object, retried within :attr:`retry`
        and by ``deadline`` (the whole object's) if it ends sooner; a range that comes back
        short or long is a transient error (a cut transfer), never read past its length + 1."""
        length = end - start + 1

        def once() -> memoryview:
            try:
                got = self.client.get_object(
                    Bucket=self.bucket, Key=self.key(digest), Range=f"bytes={start}-{end}"
                )
            except Exception as e:
                raise self._error(e, digest) from e
            raw = _Body(got["Body"], self, digest)
            body = BoundedBody(raw.read1, length, current_deadline(), errors=())
            buf = bytearray(length + 1)
            view = memoryview(buf)
            n = 0
            try:
                while k := body.readinto(view[n:]):
                    n += k
            except (BodyCut, DeadlineExceeded) as e:
                raise TransientRemoteError(
                    f"remote {self.label}: {digest.short}: bytes {start}-{end}: {e}"
                ) from e
            finally:
                raw.close()
            if n != length:
                raise TransientRemoteError(
                    f"remote {self.label}: {digest.short}: bytes {start}-{end} came back as "
                    f"more than {length:,} bytes"
                )
            return view[:n]

        own = self.retry.deadline(length)
        if deadline is not None and deadline.ends_at < own.ends_at:
            own = deadline
        try:
            return self.retry.run(once, deadline=own)
        except TransientRemoteError as e:  # retried here already: the whole object is not
            raise RemoteError(e.message, fix=e.fix) from e

    # -- multipart ----------------------------------------------------------------------------
    def _upload_parts(self, path: Path, digest: Digest, key: str) -> None:
        upload_id = self.client.create_multipart_upload(
            Bucket=self.bucket,
            Key=key,
            ChecksumAlgorithm="SHA256",
            Metadata={METADATA_KEY: digest.hex},
        )["UploadId"]
        done = False
        try:
            offsets = range(0, digest.size, self.part_size)
            fd = os.open(path, os.O_RDONLY)
            try:
                with ThreadPoolExecutor(max_workers=self.upload_jobs) as pool:
                    parts = list(
                        pool.map(
                            lambda n: self._part(fd, key, upload_id, n, digest),
                            range(1, len(offsets) + 1),
                        )
                    )
            finally:
                os.close(fd)
            self.client.complete_multipart_upload(
                Bucket=self.bucket,
                Key=key,
                UploadId=upload_id,
                MultipartUpload={"Parts": parts},
                IfNoneMatch="*",
            )
            done = True
        finally:
            if not done:
                with contextlib.suppress(Exception):
                    self.client.abort_multipart_upload(
                        Bucket=self.bucket, Key=key, UploadId=upload_id
                    )

    def _part(
        self, fd: int, key: str, upload_id: str, number: int, digest: Digest
    ) -> dict[str, Any]:
        offset = (number - 1) * self.part_size
        data = _Window(fd, offset, min(self.part_size, digest.size - offset))
        checksum = base64.b64encode(data.sha256()).decode("ascii")

        def send() -> dict[str, Any]:
            try:
                sent = self.client.upload_part(
                    Bucket=self.bucket,
                    Key=key,
                    UploadId=upload_id,
                    PartNumber=number,
                    Body=data,
                    ContentLength=data.length,
                    ChecksumAlgorithm="SHA256",
                    ChecksumSHA256=checksum,
                )
            except Exception as e:
                raise self._error(e, digest, key) from e
            return {"ETag": sent["ETag"], "PartNumber": number, "ChecksumSHA256": checksum}

        try:
            return self.retry.run(send)
        except TransientRemoteError as e:  # retried here already: the whole object is not
            raise RemoteError(f"part {number}: {e.message}", fix=e.fix) from e

    # -- errors -------------------------------------------------------------------------------
    def _error(self, e: BaseException, digest: Digest, key: str | None = None) -> RemoteError:
        """botocore's error for ``digest``'s object (at ``key`` if not its own) as this
        package's, naming the remote and the fix; transient ones (5xx, throttling, connection
        trouble) as TransientRemoteError."""
        require("s3", for_what=f"the S3 remote {self.name}", modules=("botocore",))
        import botocore.exceptions as bx

        where = f"remote {self.label}, object {key or self.key(digest)}"
        if isinstance(e, bx.NoCredentialsError | bx.PartialCredentialsError):
            return RemoteError(
                f"{where}: no AWS credentials found",
                fix="set AWS_PROFILE (or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), or add "
                "credentials to ~/.aws/credentials; they are never read from the project",
            )
        if isinstance(e, bx.EndpointConnectionError | bx.ConnectTimeoutError):
            return TransientRemoteError(
                f"{where}: cannot reach the endpoint: {e}",
                fix=f"check the remote's endpoint_url (or $AWS_ENDPOINT_URL) and the network, "
                f"then run the command again (fixture-store remote list shows {self.name})",
            )
        if isinstance(e, bx.ReadTimeoutError | bx.ConnectionError | bx.HTTPClientError):
            return TransientRemoteError(f"{where}: connection failed: {e}")
        if (bounded := _bounds_error(e, where)) is not None:
            return bounded
        if not isinstance(e, bx.ClientError):
            return RemoteError(f"{where}: {e}")
        return self._answer_error(e, digest, where)

    def _answer_error(self, e: Any, digest: Digest, where: str) -> RemoteError:
        """The error for an answer of the server (a botocore ClientError)."""
        code = str(e.response.get("Error", {}).get("Code", ""))
        status = _status(e)
        if code == "NoSuchBucket":
            return RemoteError(
                f"{where}: the bucket {self.bucket!r} does not exist",
                fix=f"create it (aws s3 mb s3://{self.bucket}), or fix the remote's URL",
            )
        if code in _DENIED_CODES or status == _HTTP_FORBIDDEN:
            return RemoteError(
                f"{where}: access denied ({code or status})",
                fix="check the credentials the AWS chain finds (AWS_PROFILE, "
                "~/.aws/credentials) and that they may read and write this bucket and prefix",
            )
        if code in ("NoSuchKey", "404", "NotFound") or status == _HTTP_NOT_FOUND:
            return MissingRemoteObject(f"{self.label} does not hold {digest}")
        if code in _TRANSIENT_CODES or status == _HTTP_TOO_MANY or status >= _HTTP_SERVER_ERROR:
            return TransientRemoteError(f"{where}: the server answered {code or status}")
        return RemoteError(f"{where}: the server refused the request: {code or status}: {e}")


def _bounds_error(e: BaseException, where: str) -> RemoteError | None:
    """The error for a bound of the bounded reader that an answer broke, if it is one."""
    if isinstance(e, BodyCut | DeadlineExceeded | BelowMinimumRate):
        return TransientRemoteError(f"{where}: {e}")
    if isinstance(e, AnswerTooLong):
        return RemoteError(
            f"{where}: {e}", fix="check the remote's endpoint_url: it is not an S3 server"
        )
    return None


def _status(e: BaseException) -> int:
    response = getattr(e, "response", None)
    if not isinstance(response, dict):
        return 0
    return int(response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)


def _full_sha256(head: dict[str, Any]) -> str | None:
    """The whole object's SHA-256 hex as the remote claims it: the metadata, else a single-part
    checksum (a multipart one, ``<b64>-<parts>``, is of the parts' checksums)."""
    meta = head.get("Metadata") or {}
    if isinstance(meta.get(METADATA_KEY), str):
        return str(meta[METADATA_KEY])
    checksum = head.get("ChecksumSHA256")
    if isinstance(checksum, str) and "-" not in checksum:
        with contextlib.suppress(ValueError):
            return base64.b64decode(checksum, validate=True).hex()
    return None


@dataclass
class _Body:
    """An S3 object's body as the connection gives it, one read at a time (the transport under
    a :class:`~fixture_store.sources.transfer.BoundedBody`, which alone reads it), its
    transport errors as transient remote errors."""

    raw: Any
    remote: S3Remote
    digest: Digest

    def read1(self, n: int) -> bytes:
        """What the connection has now, up to ``n`` bytes (urllib3's ``read1``; botocore's body
        only offers a ``read`` that waits for all ``n``)."""
        read = self.raw._raw_stream.read1
        try:
            data: bytes = read(n)
        except Exception as e:
            error = self.remote._error(e, self.digest)
            if isinstance(error, TransientRemoteError) or _is_cut(e):
                raise TransientRemoteError(f"{error.message}") from e
            raise error from e
        return data

    def close(self) -> None:
        self.raw.close()


def _is_cut(e: BaseException) -> bool:
    require("s3", for_what="an S3 remote", modules=("botocore",))
    import botocore.exceptions as bx

    return isinstance(e, bx.IncompleteReadError | bx.ResponseStreamingError)


class _RangedBody:
    """A large object read as consecutive ranges fetched in parallel and handed out in order.

    At most ``range_jobs`` ranges are in flight and one is being read: memory stays at
    ``(range_jobs + 1) * range_size`` whatever the object's size.
    """

    def __init__(self, remote: S3Remote, digest: Digest) -> None:
        self.remote, self.digest = remote, digest
        self.deadline = current_deadline()  # the whole object's, for every range
        self.pool = ThreadPoolExecutor(max_workers=remote.range_jobs)
        self.starts = iter(range(0, digest.size, remote.range_size))
        self.pending: collections.deque[Future[memoryview]] = collections.deque()
        self.current = memoryview(b"")
        for _ in range(remote.range_jobs):
            self._submit()

    def _submit(self) -> None:
        start = next(self.starts, None)
        if start is not None:
            end = min(start + self.remote.range_size, self.digest.size) - 1
            self.pending.append(
                self.pool.submit(self.remote.get_range, self.digest, start, end, self.deadline)
            )

    def read1(self, n: int = -1) -> bytes:
        return self.read(n)

    def read(self, n: int = -1) -> bytes:
        if not self.current:
            if not self.pending:
                return b""
            wait = self.deadline.remaining() if self.deadline is not None else None
            try:
                self.current = self.pending.popleft().result(timeout=wait)
            except TimeoutError as e:  # the range's own deadline cuts it soon after
                seconds = self.deadline.seconds if self.deadline is not None else 0
                raise DeadlineExceeded(f"the deadline of {seconds:g}s passed") from e
            self._submit()
        size = len(self.current) if n < 0 else n
        data, self.current = self.current[:size], self.current[size:]
        return bytes(data)

    def close(self) -> None:
        for future in self.pending:
            future.cancel()
        self.pool.shutdown(wait=True, cancel_futures=True)


@dataclass
class _Window:
    """Bytes ``offset`` to ``offset + length`` of an open file, as a seekable body that reads
    from the file as it is sent (with ``pread``: windows of one file share its descriptor)."""

    fd: int
    offset: int
    length: int
    pos: int = 0

    def read(self, n: int = -1) -> bytes:
        left = self.length - self.pos
        want = left if n is None or n < 0 else min(n, left)
        if want <= 0:
            return b""
        data = os.pread(self.fd, want, self.offset + self.pos)
        self.pos += len(data)
        return data

    def seek(self, pos: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self.pos, os.SEEK_END: self.length}[whence]
        self.pos = max(0, min(self.length, base + pos))
        return self.pos

    def tell(self) -> int:
        return self.pos

    def sha256(self) -> bytes:
        h = hashlib.sha256()
        self.seek(0)
        while chunk := self.read(1 << 20):
            h.update(chunk)
        self.seek(0)
        return h.digest()
