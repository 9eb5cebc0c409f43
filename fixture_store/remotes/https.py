"""The https mirror: a read-only remote, the same layout served by any web server.

Downloads go through the url source's machinery (:func:`fixture_store.sources.url.default_opener`:
https only, the system trust store, no content encoding, every read bounded by the download's
deadline or the object's, whichever ends sooner, a redirect's body read no further than its first
KiB), so a mirror is held to the same rules as a pinned URL; its body is read by pull through the
one bounded reader like every remote's.

A mirror of a folder or bucket that holds packs serves them too (:class:`MirrorReads`): the
list of pack indexes push writes (a mirror lists nothing), each index, and byte ranges of the
packs, each ranged GET checked as every ranged read is
(:func:`~fixture_store.sources.ranges.range_problem`) and read through the bounded reader.
"""

from __future__ import annotations

import urllib.error
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from fixture_store import display
from fixture_store.objects.digests import Digest
from fixture_store.remotes import packs
from fixture_store.remotes.base import (
    MissingRemoteObject,
    RangeRefused,
    ReadOnlyRemote,
    RemoteError,
    RemoteObject,
    TransientRemoteError,
    object_key,
)
from fixture_store.sources import url as url_source
from fixture_store.sources.ranges import range_problem, read1_of
from fixture_store.sources.transfer import (
    BodyCut,
    DeadlineExceeded,
    DownloadPolicy,
    current_deadline,
    read_answer,
    sooner,
)


@dataclass(frozen=True)
class HttpsRemote:
    """A mirror at ``base`` (``https://host/prefix``)."""

    name: str
    base: str
    policy: DownloadPolicy = field(default_factory=DownloadPolicy.from_env)
    opener: url_source.Opener = url_source.default_opener

    @property
    def label(self) -> str:
        base = display.url(self.base)
        return f"{self.name} ({base})" if self.name.rstrip("/") != self.base else base

    @property
    def writable(self) -> bool:
        return False

    def url(self, digest: Digest) -> str:
        return f"{self.base}/{object_key(digest)}"

    def stat(self, digest: Digest) -> RemoteObject | None:  # noqa: ARG002
        """A mirror is only read: what it holds is learnt by downloading it."""
        return None

    def upload(self, path: Path, digest: Digest) -> bool:  # noqa: ARG002
        raise ReadOnlyRemote(f"the remote {self.label} is a read-only https mirror")

    def open(self, digest: Digest) -> BinaryIO:
        return self.open_key(object_key(digest), digest.size, missing=f"{digest}")

    def open_key(
        self, key: str, size: int, *, missing: str, headers: Mapping[str, str] | None = None
    ) -> BinaryIO:
        """The answer to a GET of ``key`` (``size``: the bytes asked, for the deadline);
        :class:`MissingRemoteObject` saying the mirror does not hold ``missing`` on a 404."""
        where = f"{self.base}/{key}"
        # The download's own deadline, or the object's (its retries') if that ends sooner.
        deadline = sooner(self.policy.start(size, read_timeout=url_source.TIMEOUT_S))
        try:
            stream = (
                self.opener(where, deadline)
                if headers is None
                else url_source.default_opener(where, deadline, headers=headers)
            )
        except (url_source.TransientError, DeadlineExceeded) as e:
            raise TransientRemoteError(f"remote {self.label}: {display.url(where)}: {e}") from e
        except url_source.SourceFailure as e:
            cause = e.__cause__
            if isinstance(cause, urllib.error.HTTPError) and cause.code in (404, 410):
                raise MissingRemoteObject(f"{self.label} does not hold {missing}") from e
            raise RemoteError(
                f"remote {self.label}: {display.url(where)}: {e}",
                fix=e.fix
                if e.fix and "source.url" not in e.fix
                else "check the mirror's URL "
                "and that it serves <prefix>/objects/sha256/ab/<62 hex>",
            ) from e
        return stream


@dataclass(frozen=True)
class MirrorReads:
    """The packs an https mirror serves: the pack reads of
    :class:`~fixture_store.remotes.keys.RangeReads`, by GETs of the mirror."""

    remote: HttpsRemote
    read_only: bool = True

    @property
    def label(self) -> str:
        return self.remote.label

    def listing(self, folder: str) -> dict[str, int]:
        """The pack indexes the mirror's list names (the only folder a mirror can tell)."""
        if folder != packs.INDEXES:
            raise RemoteError(f"the https mirror {self.label} lists nothing but its pack indexes")
        stream = self.remote.open_key(
            packs.LIST_KEY,
            packs.LIST_CAP,
            missing=f"{packs.LIST_KEY}, the list of its pack indexes that a push to the folder "
            "or bucket it serves writes (so no pack of it is read)",
        )
        what = f"remote {self.label}: {packs.LIST_KEY}"
        try:
            data, whole = read_answer(read1_of(stream), packs.LIST_CAP, deadline=current_deadline())
        except (BodyCut, DeadlineExceeded) as e:
            raise TransientRemoteError(f"{what}: {e}") from e
        finally:
            stream.close()
        if not whole:
            raise RemoteError(f"{what}: longer than the {packs.LIST_CAP:,} bytes read")
        try:
            return packs.parse_list(data)
        except ValueError as e:
            raise RemoteError(f"{what}: {e}") from e

    def open_range(self, key: str, digest: Digest, start: int, length: int) -> BinaryIO:
        last = start + length - 1
        stream = self.remote.open_key(
            key, length, missing=key, headers={"Range": f"bytes={start}-{last}"}
        )
        answer: Any = stream  # an http.client response
        problem = range_problem(
            getattr(answer, "status", None),
            str(answer.headers.get("Content-Range") or ""),
            start,
            last,
            digest.size,
        )
        if problem is not None:  # the whole pack, or another range: its body is never read
            stream.close()
            raise RangeRefused(
                f"remote {self.label}: {key} {problem}",
                fix="serve the mirror with a web server that answers byte ranges (Range: "
                "bytes=A-B), as nginx, Apache and Caddy do",
            )
        return stream
