"""A loopback HTTPS server of files held in memory, for tests of url sources that need more than
one file (a manifest's gaps, each at its own URL): its certificate is made at test time (the
benchmarks' :func:`bench.harness.make_cert`) and trusted through ``$SSL_CERT_FILE``, as the url
source tests do with theirs."""

from __future__ import annotations

import contextlib
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from bench.harness import make_cert


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
    cert, key = make_cert(folder)
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

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    served.base = f"https://127.0.0.1:{server.server_address[1]}"
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
