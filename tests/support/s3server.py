"""moto's threaded S3 server on loopback, and a fault-injecting proxy to put in front of it.

moto speaks the S3 protocol to the real boto3 client but checks no checksums itself, so the
failures a remote must survive (a flipped byte, a truncated body, a slow drip, 5xx answers, a
403) are made
by :class:`FaultProxy`: it forwards every request to the server and spoils the answers to
object GETs as told.
"""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from moto.server import ThreadedMotoServer

FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing-key-id",
    "AWS_SECRET_ACCESS_KEY": "testing-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@contextmanager
def moto_server() -> Iterator[str]:
    """Start moto on 127.0.0.1 on a free port; yields its endpoint URL; stops it after."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@dataclass
class Faults:
    """What the proxy does to the answers of object requests (keys with ``/objects/``)."""

    flip: bool = False  # flip one byte of every GET body
    truncate: bool = False  # send half of every GET body, then close the connection
    drip: float = 0.0  # send every GET body one byte at a time, this many seconds apart
    errors: int = 0  # answer this many object requests (any method) with 500 first
    forbid: bool = False  # answer every object request with 403
    seen: list[tuple[str, str, int]] = field(default_factory=list)  # method, path, status
    lock: threading.Lock = field(default_factory=threading.Lock)


class FaultProxy:
    """An HTTP proxy on 127.0.0.1 in front of ``upstream`` that injects :class:`Faults`."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.removeprefix("http://")
        self.faults = Faults()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _any(self) -> None:
                proxy.handle(self)

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> FaultProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()

    def handle(self, req: BaseHTTPRequestHandler) -> None:
        length = int(req.headers.get("Content-Length") or 0)
        body = req.rfile.read(length) if length else b""
        is_object = "/objects/" in req.path
        faults = self.faults
        with faults.lock:
            status = 0
            if is_object and faults.forbid:
                status = 403
            elif is_object and faults.errors > 0:
                faults.errors -= 1
                status = 500
            faults.seen.append((req.command, req.path, status or 200))
        if status:
            self._answer(req, status, b"<Error><Code>Injected</Code></Error>")
            return
        conn = http.client.HTTPConnection(self.upstream, timeout=30)
        headers = {k: v for k, v in req.headers.items() if k.lower() != "host"}
        headers["Host"] = self.upstream
        conn.request(req.command, req.path, body=body, headers=headers)
        answer = conn.getresponse()
        data = answer.read()
        conn.close()
        spoil = is_object and req.command == "GET" and answer.status in (200, 206) and data
        if spoil and faults.flip:
            data = bytes([data[0] ^ 0x01]) + data[1:]
        req.send_response(answer.status)
        for key, value in answer.getheaders():
            if key.lower() not in ("transfer-encoding", "connection", "server", "date"):
                req.send_header(key, value)
        req.end_headers()
        if req.command == "HEAD":
            return
        if spoil and faults.truncate:
            req.wfile.write(data[: len(data) // 2])
            req.wfile.flush()
            req.close_connection = True
            return
        if spoil and faults.drip:
            for i in range(len(data)):
                try:
                    req.wfile.write(data[i : i + 1])
                    req.wfile.flush()
                except OSError:  # the client gave up
                    return
                time.sleep(faults.drip)
            return
        req.wfile.write(data)

    @staticmethod
    def _answer(req: BaseHTTPRequestHandler, status: int, body: bytes) -> None:
        req.send_response(status)
        req.send_header("Content-Type", "application/xml")
        req.send_header("Content-Length", str(len(body)) if req.command != "HEAD" else "0")
        req.end_headers()
        if req.command != "HEAD":
            req.wfile.write(body)
