"""How an S3 client's answers are read: every one through the one bounded reader (DESIGN 14).

botocore's own hooks do it: a ``before-send`` handler sends each request on the client's
session with the body left unread, then reads an error answer's body
(:func:`~fixture_store.sources.transfer.error_body`: its first few KiB, which is all botocore
parses a message from) and a small answer's (HEAD, PUT, DELETE, the multipart calls: at most
:data:`ANSWER_CAP`) itself; an object's body is handed to :mod:`~fixture_store.remotes.s3`,
which reads it bounded. The client's connections register their sockets with the current
deadline (:func:`~fixture_store.sources.transfer.watch`), so a server dripping its headers is
cut when the object's deadline passes.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from fixture_store._extras import require
from fixture_store.limits import MiB
from fixture_store.sources.transfer import ERROR_BODY_CAP, current_deadline, read_answer, watch

# The most an answer that is not an object's body may hold (a HEAD, a PUT's or a multipart
# call's XML: a few hundred bytes from any real server).
ANSWER_CAP = 1 * MiB


class AnswerTooLong(Exception):
    """An answer that is not an object's body was longer than :data:`ANSWER_CAP`."""


def bound_answers(client: Any) -> None:
    """Make every answer of ``client`` go through the bounded reader (see the module's doc).

    botocore's session reads a body it does not stream, and the body of every error answer,
    whole into memory (a 300 MiB error body was 300 MiB and more); here each request is sent by
    a ``before-send`` handler that leaves the body unread and reads what is needed, bounded.
    The session's pools make connections that register their sockets with the current deadline.
    """
    require("s3", for_what="an S3 remote", modules=("botocore",))
    import botocore.awsrequest as aws

    session = client._endpoint.http_session  # the client's own: its proxies, TLS, pool size
    pool, tls = _pools()
    session._pool_classes_by_scheme.update(http=pool, https=tls)

    def send(request: Any, **_: Any) -> Any:
        streamed = request.stream_output
        request.stream_output = True  # the session hands the body over unread
        response = session.send(request)
        status = response.status_code
        if streamed and status < _HTTP_REDIRECT:
            return response  # an object's body: read by this module, bounded (_Body)
        raw = response.raw
        deadline = current_deadline()
        ended = False
        try:
            if status >= _HTTP_REDIRECT:  # botocore parses its message from the first bytes
                data, ended = read_answer(
                    raw.read1, ERROR_BODY_CAP, deadline=deadline, lenient=True
                )
            else:
                data, ended = read_answer(raw.read1, ANSWER_CAP, deadline=deadline)
                if not ended:
                    raise AnswerTooLong(
                        f"the server answered {request.method} with more than {ANSWER_CAP:,} bytes"
                    )
        finally:
            if ended:
                raw.release_conn()  # read to its end: the connection is reused
            else:
                raw.close()  # the rest is never read: the connection goes
        return aws.AWSResponse(response.url, status, response.headers, _Read(data))

    client.meta.events.register("before-send.s3", send)


_HTTP_REDIRECT = 300


@dataclass
class _Read:
    """An answer's body already read (bounded), as botocore's response reads it."""

    data: bytes

    def stream(self, *_: Any, **__: Any) -> Iterator[bytes]:
        yield self.data

    def close(self) -> None:
        pass


def _watched(base: type) -> type:
    """``base`` (a connection class of botocore) whose socket is watched by the current
    deadline while it connects, sends and reads an answer's headers."""

    class Watched(base):  # type: ignore[misc]
        def connect(self) -> None:
            super().connect()
            watch(self.sock)

        def request(self, *args: Any, **kwargs: Any) -> None:
            watch(self.sock)
            super().request(*args, **kwargs)

        def getresponse(self, *args: Any, **kwargs: Any) -> Any:
            watch(self.sock)
            return super().getresponse(*args, **kwargs)

    Watched.__name__ = Watched.__qualname__ = f"Watched{base.__name__}"
    return Watched


@functools.cache
def _pools() -> tuple[type, type]:
    require("s3", for_what="an S3 remote", modules=("botocore",))
    import botocore.awsrequest as aws

    class Pool(aws.AWSHTTPConnectionPool):
        ConnectionCls = _watched(aws.AWSHTTPConnection)

    class TLSPool(aws.AWSHTTPSConnectionPool):
        ConnectionCls = _watched(aws.AWSHTTPSConnection)

    return Pool, TLSPool
