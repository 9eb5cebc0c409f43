"""The url source against a loopback HTTPS server with a certificate made at test time."""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from fixture_store.fetch import Outcome, fetch_names
from fixture_store.objects.store import Store
from fixture_store.registry import UrlSource
from fixture_store.sources import FetchContext, SourceError
from fixture_store.sources import url as url_source
from tests.support.fetchutil import file_record, make_registry, online_env  # noqa: F401 - autouse

DATA = b"clip-bytes-" * 1000


def make_cert(folder: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@dataclass
class Behaviour:
    body: bytes = DATA
    fail_first: int = 0  # answer 503 this many times first
    drop_first: int = 0  # close mid-body this many times first
    status: int = 200
    redirect: str | None = None  # answer 302 to this location instead of the body
    requests: list[str] = field(default_factory=list)


@pytest.fixture
def https(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Behaviour]]:
    cert, key = make_cert(tmp_path)
    behaviour = Behaviour()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            behaviour.requests.append(self.path)
            n = len(behaviour.requests)
            if n <= behaviour.fail_first:
                self.send_response(503)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if behaviour.redirect is not None:
                self.send_response(302)
                self.send_header("Location", behaviour.redirect)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(behaviour.status)
            self.send_header("Content-Length", str(len(behaviour.body)))
            self.end_headers()
            if n <= behaviour.fail_first + behaviour.drop_first:
                self.wfile.write(behaviour.body[: len(behaviour.body) // 2])
                self.close_connection = True
                return
            self.wfile.write(behaviour.body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    monkeypatch.setattr(url_source, "BACKOFF_S", 0.01)
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", behaviour
    finally:
        server.shutdown()
        server.server_close()


def setup(tmp_path: Path, base: str, expected: bytes = DATA) -> tuple[Store, Any]:
    registry = make_registry(
        tmp_path / "p",
        {"clips/a": file_record({"type": "url", "url": f"{base}/a.bin"}, expected, "video")},
    )
    return Store.at(tmp_path / "store"), registry


def fetch_one(store: Store, registry: Any) -> Any:
    return fetch_names(store, registry, ["clips/a"]).results[0]


def test_https_download_verifies_and_is_not_repeated(
    https: tuple[str, Behaviour], tmp_path: Path
) -> None:
    base, behaviour = https
    store, registry = setup(tmp_path, base)
    assert fetch_one(store, registry).outcome is Outcome.FETCHED
    assert fetch_one(store, registry).outcome is Outcome.PRESENT
    assert behaviour.requests == ["/a.bin"]


def test_transient_errors_are_retried(https: tuple[str, Behaviour], tmp_path: Path) -> None:
    base, behaviour = https
    behaviour.fail_first, behaviour.drop_first = 1, 1
    store, registry = setup(tmp_path, base)
    assert fetch_one(store, registry).outcome is Outcome.FETCHED
    assert len(behaviour.requests) == 3


def test_giving_up_names_the_url_and_the_last_error(
    https: tuple[str, Behaviour], tmp_path: Path
) -> None:
    base, behaviour = https
    behaviour.fail_first = 99
    store, registry = setup(tmp_path, base)
    result = fetch_one(store, registry)
    assert result.outcome is Outcome.FAILED
    assert "gave up after 4 attempts: HTTP 503" in result.message
    assert len(behaviour.requests) == url_source.ATTEMPTS


def test_digest_mismatch_is_never_retried(https: tuple[str, Behaviour], tmp_path: Path) -> None:
    base, behaviour = https
    behaviour.body = DATA[::-1]
    store, registry = setup(tmp_path, base)
    result = fetch_one(store, registry)
    assert result.outcome is Outcome.FAILED and "does not match the record" in result.message
    assert behaviour.requests == ["/a.bin"]
    assert list(store.iter_objects()) == []


def test_longer_body_is_cut_at_the_size_cap(https: tuple[str, Behaviour], tmp_path: Path) -> None:
    base, behaviour = https
    behaviour.body = DATA + b"x" * 1_000_000
    store, registry = setup(tmp_path, base)
    ctx = FetchContext(store, tmp_path)
    with pytest.raises(SourceError, match="or more"):
        url_source.fetch(ctx, registry.get("clips/a"), backoff=0)
    assert ctx.downloaded == 0 and list(store.iter_objects()) == []


def test_untrusted_certificate_fails_without_retry(
    https: tuple[str, Behaviour], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base, behaviour = https
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "no-such-bundle.pem"))
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path / "no-such-dir"))
    store, registry = setup(tmp_path, base)
    result = fetch_one(store, registry)
    assert result.outcome is Outcome.FAILED and "certificate" in result.message
    assert behaviour.requests == []


def test_not_found_is_permanent(https: tuple[str, Behaviour], tmp_path: Path) -> None:
    base, behaviour = https
    behaviour.status = 404
    store, registry = setup(tmp_path, base)
    result = fetch_one(store, registry)
    assert result.outcome is Outcome.FAILED and "HTTP 404" in result.message
    assert len(behaviour.requests) == 1


def test_offline_refuses_before_connecting(https: tuple[str, Behaviour], tmp_path: Path) -> None:
    base, behaviour = https
    store, registry = setup(tmp_path, base)
    result = fetch_names(store, registry, ["clips/a"], offline=True).results[0]
    assert result.outcome is Outcome.FAILED and "offline" in result.message
    assert behaviour.requests == []


def test_short_body_is_retried_then_reported(https: tuple[str, Behaviour], tmp_path: Path) -> None:
    base, behaviour = https
    behaviour.body = DATA[:100]
    store, registry = setup(tmp_path, base)
    result = fetch_one(store, registry)
    assert result.outcome is Outcome.FAILED
    assert f"connection closed after 100 of {len(DATA)} bytes" in result.message
    assert len(behaviour.requests) == url_source.ATTEMPTS
    assert list(store.iter_objects()) == []


def test_a_redirect_to_plain_http_is_refused(https: tuple[str, Behaviour], tmp_path: Path) -> None:
    base, behaviour = https
    behaviour.body = DATA
    # The plain-http target would serve the right bytes: the scheme alone is the refusal.
    behaviour.redirect = base.replace("https://", "http://") + "/a.bin"
    store, registry = setup(tmp_path, base)
    result = fetch_one(store, registry)
    assert result.outcome is Outcome.FAILED
    assert "refusing a redirect from https to http" in result.message
    assert behaviour.requests == ["/a.bin"] and list(store.iter_objects()) == []


def test_a_plain_http_url_is_never_opened_even_if_the_record_skipped_validation(
    tmp_path: Path,
) -> None:
    store, registry = setup(tmp_path, "https://127.0.0.1:9")
    valid = registry.get("clips/a")
    forged = dataclasses.replace(
        valid,
        source=UrlSource("http://127.0.0.1:9/a.bin"),
    )
    opened: list[str] = []

    def opener(url: str, _timeout: float) -> Any:
        opened.append(url)
        raise AssertionError("a plain-http url must not be opened")

    with pytest.raises(SourceError, match="is not https; only https sources are fetched"):
        url_source.fetch(FetchContext(store, tmp_path), forged, opener)
    assert opened == []
    with pytest.raises(url_source.SourceFailure, match="only https URLs are fetched"):
        url_source.default_opener("http://127.0.0.1:9/a.bin", 1.0)
