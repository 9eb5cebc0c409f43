"""Loopback HTTPS servers for tests of url sources and https mirrors: one helper that serves a
request handler over TLS (:func:`https_server`), and a server of files held in memory built on
it (:func:`https_files`), for tests that need more than one file (a manifest's gaps, each at its
own URL). The certificate is made at test time (the benchmarks'
:func:`bench.harness.make_cert`) and trusted through ``$SSL_CERT_FILE`` (:func:`trusted_tls`)."""

from __future__ import annotations

import contextlib
import ssl
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from socketserver import BaseRequestHandler
from typing import Any

import pytest

from bench.harness import make_cert


def trusted_tls(folder: Path, monkeypatch: pytest.MonkeyPatch) -> ssl.SSLContext:
    """A server's TLS context whose certificate, made in ``folder``, clients trust through
    ``$SSL_CERT_FILE`` for the rest of the test."""
    cert, key = make_cert(folder)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    return context


@contextlib.contextmanager
def https_server(
    folder: Path, monkeypatch: pytest.MonkeyPatch, handler: Callable[..., BaseRequestHandler]
) -> Iterator[str]:
    """Serve ``handler`` over TLS on 127.0.0.1 (a free port), a thread for each request, until
    the block ends; yields the base URL (``https://127.0.0.1:PORT``). Its certificate is made in
    ``folder`` and trusted (:func:`trusted_tls`)."""
    context = trusted_tls(folder, monkeypatch)
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@dataclass
class Served:
    """What the server answers: ``files`` by path (``/a.bin``), 404 for any other path; and
    the paths asked for, in order."""

    base: str
    files: dict[str, bytes] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)

    def url(self, path: str) -> str:
        return f"{self.base}/{path.lstrip('/')}"


@contextlib.contextmanager
def https_files(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    """Serve :attr:`Served.files` over TLS on 127.0.0.1 (a free port) until the block ends."""
    served = Served("")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            served.requests.append(self.path)
            body = served.files.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

    with https_server(folder, monkeypatch, Handler) as base:
        served.base = base
        yield served
