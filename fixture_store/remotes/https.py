"""The https mirror: a read-only remote, the same layout served by any web server.

Downloads go through the url source's machinery (:func:`fixture_store.sources.url.default_opener`:
https only, the system trust store, no content encoding, every read bounded by the download's
deadline or the object's, whichever ends sooner, a redirect's body read no further than its first
KiB), so a mirror is held to the same rules as a pinned URL; its body is read by pull through the
one bounded reader like every remote's.
"""

from __future__ import annotations

import urllib.error
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from fixture_store import display
from fixture_store.objects.digests import Digest
from fixture_store.remotes.base import (
    MissingRemoteObject,
    ReadOnlyRemote,
    RemoteError,
    RemoteObject,
    TransientRemoteError,
    object_key,
)
from fixture_store.sources import url as url_source
from fixture_store.sources.transfer import DeadlineExceeded, DownloadPolicy, sooner


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
        where = self.url(digest)
        # The download's own deadline, or the object's (its retries') if that ends sooner.
        deadline = sooner(self.policy.start(digest.size, read_timeout=url_source.TIMEOUT_S))
        try:
            stream = self.opener(where, deadline)
        except (url_source.TransientError, DeadlineExceeded) as e:
            raise TransientRemoteError(f"remote {self.label}: {where}: {e}") from e
        except url_source.SourceFailure as e:
            cause = e.__cause__
            if isinstance(cause, urllib.error.HTTPError) and cause.code in (404, 410):
                raise MissingRemoteObject(f"{self.label} does not hold {digest}") from e
            raise RemoteError(
                f"remote {self.label}: {where}: {e}",
                fix=e.fix
                if e.fix and "source.url" not in e.fix
                else "check the mirror's URL "
                "and that it serves <prefix>/objects/sha256/ab/<62 hex>",
            ) from e
        return stream
