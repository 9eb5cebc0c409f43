"""moto's threaded S3 server on loopback, and a fault-injecting proxy to put in front of it.

moto speaks the S3 protocol to the real boto3 client but checks no checksums itself, so the
failures a remote must survive (a flipped byte, a truncated body, a slow drip of the body or of
the headers, 5xx answers with huge bodies, a 403, a 429 with ``Retry-After``, a lying
``Content-Length``, ranges answered short or long or said to be another range, an upload
forwarded short, a listing forwarded without its prefix, uploads listed a few a page) are made by
:class:`FaultProxy`: it forwards every request to the server and spoils the answers to object
requests as told. Its upstream may be any HTTP server, and it may
speak TLS itself: in front of a plain file server it is a hostile https mirror.
"""

from __future__ import annotations

import http
import http.client
import re
import ssl
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from xml.etree import ElementTree

from moto.server import ThreadedMotoServer

FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing-key-id",
    "AWS_SECRET_ACCESS_KEY": "testing-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def _shifted(name: str, value: str, by: int) -> tuple[str, str]:
    """A Content-Range header said of the range ``by`` bytes further on (others as they are)."""
    if not by or name.lower() != "content-range":
        return name, value
    unit, _, rest = value.partition(" ")
    span, _, size = rest.partition("/")
    first, _, last = span.partition("-")
    return name, f"{unit} {int(first) + by}-{int(last) + by}/{size}"


def _paged(data: bytes, query: str, size: int) -> bytes:
    """A ListMultipartUploads answer cut to one page of ``size`` uploads after the query's
    ``key-marker`` and ``upload-id-marker``, with the markers of the next page."""
    ns = "{http://s3.amazonaws.com/doc/2006-03-01/}"
    ElementTree.register_namespace("", ns[1:-1])
    root = ElementTree.fromstring(data)
    args = urllib.parse.parse_qs(query)
    after = (args.get("key-marker", [""])[0], args.get("upload-id-marker", [""])[0])
    uploads = sorted(
        root.findall(f"{ns}Upload"),
        key=lambda u: (u.findtext(f"{ns}Key") or "", u.findtext(f"{ns}UploadId") or ""),
    )
    for upload in uploads:
        root.remove(upload)
    left = [
        u
        for u in uploads
        if (u.findtext(f"{ns}Key") or "", u.findtext(f"{ns}UploadId") or "") > after
    ]
    page, rest = left[:size], left[size:]
    root.extend(page)
    truncated = root.find(f"{ns}IsTruncated")
    if truncated is not None:
        truncated.text = "true" if rest else "false"
    if rest:
        for tag, child in (("NextKeyMarker", "Key"), ("NextUploadIdMarker", "UploadId")):
            ElementTree.SubElement(root, f"{ns}{tag}").text = page[-1].findtext(f"{ns}{child}")
    return bytes(ElementTree.tostring(root, xml_declaration=True, encoding="utf-8"))


def _unprefixed(path: str) -> str:
    """``path`` without its ``prefix=`` query parameter."""
    base, _, query = path.partition("?")
    kept = [p for p in query.split("&") if p and not p.startswith("prefix=")]
    return f"{base}?{'&'.join(kept)}" if kept else base


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
    """What the proxy does to the answers of object requests (paths holding ``match``, and
    ``only`` in them when it is set)."""

    match: str = "/objects/"  # what makes a request an object request

    flip: bool = False  # flip one byte of every GET body
    truncate: bool = False  # send half of every GET body, then close the connection
    drip: float = 0.0  # send every GET body one byte at a time, this many seconds apart
    errors: int = 0  # answer this many object requests (any method) with 500 first
    forbid: bool = False  # answer every object request with 403
    error_size: int = 0  # the injected 500s carry an XML body of this many bytes
    drip_headers: float = 0.0  # send the status line and headers of object GETs a byte at a time
    announce: int | None = None  # object GETs announce this Content-Length (a lie), then ...
    extra: int = 0  # ... send this many bytes of filler after the body, and close
    ranges: int = 0  # answer this many ranged GETs (then pass them) ...
    range_delta: int = 0  # ... with this many bytes fewer (< 0) or more (> 0) than asked
    redirect: bool = False  # answer object GETs with a 302 to the same path (its body: error_size)
    whole: bool = False  # forward object GETs without their Range: the whole object, a 200
    shift_range: int = 0  # answer ranged GETs with a Content-Range this many bytes further on
    cut: int = 0  # close the connection, unanswered, on this many object PUTs and POSTs
    throttle: int = 0  # answer this many object requests with 429 first ...
    retry_after: int = 1  # ... saying Retry-After: this many seconds
    short_put: int = 0  # forward object PUTs with this many bytes fewer than the client sent
    sent: int = 0  # spoiled bytes (error bodies, filler, dripped bytes) written to clients
    seen: list[tuple[str, str, int]] = field(
        default_factory=list
    )  # object requests: method, path, status
    requests: int = 0  # every request, object or not (a listing of keys)
    only: str = ""  # spoil only object requests whose path holds this (e.g. ".pack")
    from_byte: int = 0  # spoil only ranged GETs from this byte on (1: a header read is honest)
    ignore_prefix: bool = False  # forward listings without their prefix= (a server ignoring it)
    upload_pages: int = 0  # list multipart uploads this many a page (moto ignores max-uploads)
    lock: threading.Lock = field(default_factory=threading.Lock)


_CUT = -1  # the proxy's "status" for a connection closed without an answer


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that closed the connection mid-answer gave up: that is the point."""


class FaultProxy:
    """An HTTP proxy on 127.0.0.1 in front of ``upstream`` that injects :class:`Faults`."""

    def __init__(self, upstream: str, *, tls: ssl.SSLContext | None = None) -> None:
        self.upstream = upstream.removeprefix("http://")
        self.scheme = "https" if tls is not None else "http"
        self.faults = Faults()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _any(self) -> None:
                proxy.handle(self)

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _any

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"{self.scheme}://{host!s}:{port}"

    def __enter__(self) -> FaultProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()

    def _from_byte(self, req: BaseHTTPRequestHandler) -> bool:
        """Whether the request reaches ``from_byte`` (every request when it is 0)."""
        if not self.faults.from_byte:
            return True
        m = re.match(r"bytes=(\d+)-", req.headers.get("Range") or "")
        return m is not None and int(m[1]) >= self.faults.from_byte

    def handle(self, req: BaseHTTPRequestHandler) -> None:
        length = int(req.headers.get("Content-Length") or 0)
        body = req.rfile.read(length) if length else b""
        path = req.path.split("?", 1)[0]
        is_object = self.faults.match in path and self.faults.only in path
        is_object = is_object and self._from_byte(req)
        faults = self.faults
        status = self._injected(req, is_object)
        if status == _CUT:
            req.close_connection = True
            return
        if status:
            self._error(req, status)
            return
        shorten = is_object and req.command == "PUT" and faults.short_put
        conn = http.client.HTTPConnection(self.upstream, timeout=30)
        dropped = ("host", "range") if is_object and faults.whole else ("host",)
        headers = {k: v for k, v in req.headers.items() if k.lower() not in dropped}
        headers["Host"] = self.upstream
        if shorten:  # the upstream receives fewer bytes, and is told so
            body = body[: max(len(body) - faults.short_put, 0)]
            headers = {k: v for k, v in headers.items() if k.lower() != "content-length"}
            headers["Content-Length"] = str(len(body))
        conn.request(req.command, self._target(req.path), body=body, headers=headers)
        answer = conn.getresponse()
        data = self._listed(req.path, answer.status, answer.read())
        conn.close()
        spoil = is_object and req.command == "GET" and answer.status in (200, 206) and data
        if spoil and faults.flip:
            data = bytes([data[0] ^ 0x01]) + data[1:]
        if spoil and answer.status == 206 and self._take_range():
            data = self._reshape(data)
        announced: int | str = len(data)
        if spoil and faults.announce is not None:
            announced = faults.announce
        elif req.command == "HEAD":  # the length of the body a GET would get
            announced = answer.getheader("Content-Length") or 0
        shift = faults.shift_range if spoil and answer.status == 206 else 0
        kept = ("transfer-encoding", "connection", "server", "date", "content-length")
        head = [_shifted(k, v, shift) for k, v in answer.getheaders() if k.lower() not in kept]
        head.append(("Content-Length", str(announced)))
        self._head(req, answer.status, head, drip=faults.drip_headers if spoil else 0.0)
        if req.command == "HEAD":
            return
        if spoil and faults.truncate:
            req.wfile.write(data[: len(data) // 2])
            req.wfile.flush()
            req.close_connection = True
            return
        if spoil and faults.drip:
            self._drip(req, data, faults.drip)
            return
        req.wfile.write(data)
        if spoil and faults.announce is not None:
            self._filler(req, faults.extra)
            req.close_connection = True

    def _target(self, path: str) -> str:
        """The path forwarded upstream (without its ``prefix=`` if the server ignores it)."""
        return _unprefixed(path) if self.faults.ignore_prefix else path

    def _listed(self, path: str, status: int, data: bytes) -> bytes:
        """The answer's body, a listing of multipart uploads cut to a page if told."""
        query = path.partition("?")[2]
        if self.faults.upload_pages and "uploads" in query.split("&") and status == 200:
            return _paged(data, query, self.faults.upload_pages)
        return data

    def _injected(self, req: BaseHTTPRequestHandler, is_object: bool) -> int:
        """The status of an error answer to make instead of forwarding the request, or 0."""
        faults = self.faults
        with faults.lock:
            status = 0
            if is_object and faults.cut > 0 and req.command in ("PUT", "POST"):
                faults.cut -= 1
                status = _CUT
            elif is_object and faults.forbid:
                status = 403
            elif is_object and faults.throttle > 0:
                faults.throttle -= 1
                status = 429
            elif is_object and faults.errors > 0:
                faults.errors -= 1
                status = 500
            elif is_object and faults.redirect and req.command == "GET":
                status = 302
            faults.requests += 1
            if is_object:
                faults.seen.append((req.command, req.path, status or 200))
        return status

    def _take_range(self) -> bool:
        with self.faults.lock:
            if self.faults.ranges <= 0:
                return False
            self.faults.ranges -= 1
            return True

    def _reshape(self, data: bytes) -> bytes:
        delta = self.faults.range_delta
        return data[:delta] if delta < 0 else data + b"\xa5" * delta

    def _head(
        self,
        req: BaseHTTPRequestHandler,
        status: int,
        headers: list[tuple[str, str]],
        *,
        drip: float,
    ) -> None:
        """The status line and headers, at once or a byte every ``drip`` seconds."""
        lines = [f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}"]
        lines += [f"{k}: {v}" for k, v in headers]
        block = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        if not drip:
            req.wfile.write(block)
            return
        self._drip(req, block, drip)

    def _drip(self, req: BaseHTTPRequestHandler, data: bytes, pause: float) -> None:
        """``data`` a byte every ``pause`` seconds, each counted in ``sent``, until the client
        gives up."""
        for i in range(len(data)):
            try:
                req.wfile.write(data[i : i + 1])
                req.wfile.flush()
            except OSError:  # the client gave up
                req.close_connection = True
                return
            with self.faults.lock:
                self.faults.sent += 1
            time.sleep(pause)

    def _filler(self, req: BaseHTTPRequestHandler, size: int) -> None:
        """``size`` bytes of filler (never held in memory at once), counted in ``sent``."""
        chunk = b"<x>" * (64 * 1024 // 3)
        left = size
        try:
            while left > 0:
                part = chunk[:left]
                req.wfile.write(part)
                left -= len(part)
                with self.faults.lock:
                    self.faults.sent += len(part)
        except OSError:  # the client closed the connection: it read no more
            req.close_connection = True

    def _error(self, req: BaseHTTPRequestHandler, status: int) -> None:
        """An error answer whose body is a small S3 error, or ``error_size`` bytes of one."""
        code = {403: "AccessDenied", 500: "InternalError", 302: "Found", 429: "SlowDown"}[status]
        start = f"<Error><Code>{code}</Code><Message>injected ".encode()
        end = b"</Message></Error>"
        size = max(self.faults.error_size, len(start) + len(end))
        headers = [("Content-Type", "application/xml"), ("Content-Length", str(size))]
        if status == 302:
            headers.append(("Location", req.path))
        if status == 429:
            headers.append(("Retry-After", str(self.faults.retry_after)))
        self._head(req, status, headers, drip=0.0)
        if req.command == "HEAD":
            return
        req.wfile.write(start)
        self._filler(req, size - len(start) - len(end))
        if not req.close_connection:
            req.wfile.write(end)
