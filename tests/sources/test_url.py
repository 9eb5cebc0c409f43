"""The url source against a loopback HTTPS server with a certificate made at test time."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from fixture_store.fetch import Outcome, fetch_names
from fixture_store.objects import digests
from fixture_store.objects.store import Store
from fixture_store.registry import UrlSource
from fixture_store.sources import FetchContext, SourceError
from fixture_store.sources import url as url_source
from fixture_store.sources.transfer import DEADLINE_ENV, MIN_RATE_ENV, Deadline, DownloadPolicy
from tests.support.fetchutil import file_record, make_registry, online_env  # noqa: F401 - autouse
from tests.support.served import https_server

DATA = b"clip-bytes-" * 1000
BIG = bytes(range(256)) * 1024  # 256 KiB: takes a while at a trickle
TRICKLE_FOR_S = 8.0  # a trickling server gives up after this; every test must end well before


@dataclass
class Behaviour:
    body: bytes = DATA
    fail_first: int = 0  # answer 503 this many times first
    drop_first: int = 0  # close mid-body this many times first
    status: int = 200
    fault: str | None = None  # "trickle_headers", "trickle_body", "stall", "gzip"
    redirect: str | None = None  # answer 302 to this location instead of the body
    requests: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def trickle(self, write: Any, data: bytes, chunk: int) -> None:
        """Send ``data`` ``chunk`` bytes every 20 ms until done, the client left or time is up."""
        ends = time.monotonic() + TRICKLE_FOR_S
        for i in range(0, len(data), chunk):
            if self.stop.wait(0.02) or time.monotonic() > ends:
                return
            try:
                write(data[i : i + chunk])
            except OSError:
                return  # the client gave up: what the test wants


@pytest.fixture
def https(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Behaviour]]:
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
            if behaviour.fault == "trickle_headers":
                self.wfile.write(b"HTTP/1.1 200 OK\r\n")
                behaviour.trickle(self.wfile.write, b"X-Padding: " + b"a" * 10_000, 1)
                self.close_connection = True
                return
            body = behaviour.body
            self.send_response(behaviour.status)
            if behaviour.fault == "gzip":
                body = gzip.compress(body)
                self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if behaviour.fault == "trickle_body":
                behaviour.trickle(self.wfile.write, body, 64)
                self.close_connection = True
                return
            if behaviour.fault == "stall":
                self.wfile.write(body[: len(body) // 2])
                behaviour.stop.wait(TRICKLE_FOR_S)
                self.close_connection = True
                return
            if n <= behaviour.fail_first + behaviour.drop_first:
                self.wfile.write(behaviour.body[: len(behaviour.body) // 2])
                self.close_connection = True
                return
            self.wfile.write(body)

    monkeypatch.setattr(url_source, "BACKOFF_S", 0.01)
    with https_server(tmp_path, monkeypatch, Handler) as base:
        try:
            yield base, behaviour
        finally:
            behaviour.stop.set()  # a trickling or stalled answer ends before the server stops


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
    assert f"the body ended after 100 of {len(DATA):,} bytes" in result.message
    assert len(behaviour.requests) == url_source.ATTEMPTS
    assert list(store.iter_objects()) == []


# -- downloads that cannot hang ------------------------------------------------------------------
def leftovers(store: Store) -> list[Path]:
    return list(store.tmp_dir.iterdir()) if store.tmp_dir.is_dir() else []


def fetch_with(
    store: Store, registry: Any, policy: DownloadPolicy, backoff: float = 0.01, **kwargs: Any
) -> tuple[SourceError, float]:
    """Fetch clips/a directly under ``policy``; the error it ends in and how long it took."""
    ctx = FetchContext(store, store.root, policy=policy)
    started = time.monotonic()
    with pytest.raises(SourceError) as info:
        url_source.fetch(ctx, registry.get("clips/a"), backoff=backoff, **kwargs)
    assert ctx.downloaded == 0
    return info.value, time.monotonic() - started


def test_trickled_headers_end_at_the_deadline(
    https: tuple[str, Behaviour], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base, behaviour = https
    behaviour.fault = "trickle_headers"
    monkeypatch.setenv(DEADLINE_ENV, "1.5")  # the way a user sets it, read when fetch starts
    store, registry = setup(tmp_path, base)
    started = time.monotonic()
    result = fetch_one(store, registry)
    assert time.monotonic() - started < 5
    assert result.outcome is Outcome.FAILED
    # The result names its artifact; its message says only what went wrong.
    assert result.message.startswith(f"{base}/a.bin: no complete download within the deadline")
    assert "nothing was stored" in result.message
    assert result.fix is not None and DEADLINE_ENV in result.fix
    assert "fixture-store fetch clips/a" in result.fix
    assert list(store.iter_objects()) == [] and leftovers(store) == []


def test_trickled_body_fails_below_the_minimum_rate(
    https: tuple[str, Behaviour], tmp_path: Path
) -> None:
    base, behaviour = https
    behaviour.fault, behaviour.body = "trickle_body", BIG
    store, registry = setup(tmp_path, base, BIG)
    policy = DownloadPolicy(deadline=30, rate_window=0.5)
    error, took = fetch_with(store, registry, policy)
    assert took < 6
    assert f"{base}/a.bin: gave up after 4 attempts: too slow after" in error.message
    assert "below the minimum rate of 16.0 KiB/s" in error.message
    assert error.fix is not None and MIN_RATE_ENV in error.fix
    assert len(behaviour.requests) == url_source.ATTEMPTS
    assert list(store.iter_objects()) == [] and leftovers(store) == []


def test_trickled_body_ends_at_the_deadline_whatever_the_attempts(
    https: tuple[str, Behaviour], tmp_path: Path
) -> None:
    base, behaviour = https
    behaviour.fault, behaviour.body = "trickle_body", BIG
    store, registry = setup(tmp_path, base, BIG)
    policy = DownloadPolicy(deadline=1.5, min_rate=1)  # the rate alone would never trip
    error, took = fetch_with(store, registry, policy, attempts=100)
    assert took < 5
    assert "no complete download within the deadline of 1.5s (1 attempt" in error.message
    assert list(store.iter_objects()) == [] and leftovers(store) == []


def test_stalled_body_ends_at_the_deadline(https: tuple[str, Behaviour], tmp_path: Path) -> None:
    base, behaviour = https
    behaviour.fault = "stall"
    store, registry = setup(tmp_path, base)
    error, took = fetch_with(store, registry, DownloadPolicy(deadline=1.5))
    assert took < 5
    assert "no complete download within the deadline of 1.5s (1 attempt" in error.message
    assert list(store.iter_objects()) == [] and leftovers(store) == []


def test_stall_retries_are_bounded_in_total_time(
    https: tuple[str, Behaviour], tmp_path: Path
) -> None:
    base, behaviour = https
    behaviour.fault = "stall"
    store, registry = setup(tmp_path, base)
    # Each attempt times out after 0.4s: 100 attempts would take 40s, the deadline stops them
    # (with no pause between attempts, so only the deadline can).
    policy = DownloadPolicy(deadline=2)
    error, took = fetch_with(store, registry, policy, backoff=0, attempts=100, timeout=0.4)
    assert took < 5
    assert "no complete download within the deadline of 2s" in error.message
    made = re.search(r"\((\d+) attempts[;)]", error.message)
    assert made is not None and 2 <= int(made.group(1)) <= 6
    assert len(behaviour.requests) <= int(made.group(1))
    assert list(store.iter_objects()) == [] and leftovers(store) == []


def test_gzip_body_is_reported_as_such_and_not_retried(
    https: tuple[str, Behaviour], tmp_path: Path
) -> None:
    base, behaviour = https
    behaviour.fault = "gzip"
    store, registry = setup(tmp_path, base)
    result = fetch_one(store, registry)
    assert result.outcome is Outcome.FAILED
    assert f"{base}/a.bin: the server sent a gzip-encoded body" in result.message
    assert "Accept-Encoding: identity" in result.message
    assert "connection closed" not in result.message
    assert result.fix is not None and "without a content encoding" in result.fix
    assert behaviour.requests == ["/a.bin"]
    assert list(store.iter_objects()) == [] and leftovers(store) == []


def test_a_download_within_its_bounds_is_unaffected(
    https: tuple[str, Behaviour], tmp_path: Path
) -> None:
    base, behaviour = https
    behaviour.body = BIG
    store, registry = setup(tmp_path, base, BIG)
    ctx = FetchContext(store, tmp_path, policy=DownloadPolicy(deadline=10, rate_window=1.0))
    url_source.fetch(ctx, registry.get("clips/a"))
    assert ctx.downloaded == len(BIG) and len(list(store.iter_objects())) == 1


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

    def opener(url: str, _deadline: Deadline) -> Any:
        opened.append(url)
        raise AssertionError("a plain-http url must not be opened")

    with pytest.raises(SourceError, match="is not https; only https sources are fetched"):
        url_source.fetch(FetchContext(store, tmp_path), forged, opener)
    assert opened == []
    with pytest.raises(url_source.SourceFailure, match="only https URLs are fetched"):
        url_source.default_opener(
            "http://127.0.0.1:9/a.bin", DownloadPolicy().start(0, read_timeout=1)
        )


# -- a gap known by its digest alone: a body of no recorded size -------------------------------
def _gap(tmp_path: Path, base: str, awaited: str) -> tuple[Store, Any]:
    gap = {"kind": "video", "gap": {"reason": "absent"}, "digest": awaited}
    registry = make_registry(
        tmp_path / "p", {"clips/a": {**gap, "source": {"type": "url", "url": f"{base}/a.bin"}}}
    )
    return Store.at(tmp_path / "store"), registry


def test_a_gap_is_filled_from_a_body_of_no_known_size_and_a_cut_one_is_retried(
    https: tuple[str, Behaviour], tmp_path: Path
) -> None:
    """A body whose size no record gives ends where the server ends it; one that ends short of
    the Content-Length its answer announced is a cut transfer, tried again (taken whole, it
    would be refused as bytes without the digest awaited)."""
    base, behaviour = https
    behaviour.drop_first = 1
    store, registry = _gap(tmp_path, base, f"md5:{hashlib.md5(DATA).hexdigest()}")
    ctx = FetchContext(store, tmp_path)
    stored = url_source.fill(ctx, registry.get("clips/a"), backoff=0)
    assert stored.digest == digests.of_bytes(DATA) and store.has(stored.digest)
    assert len(behaviour.requests) == 2
    assert (ctx.downloads, ctx.downloaded, ctx.refused) == (1, len(DATA), 0)


def test_a_body_of_no_known_size_past_the_download_cap_is_refused_and_not_stored(
    https: tuple[str, Behaviour], tmp_path: Path
) -> None:
    base, behaviour = https
    store, registry = _gap(tmp_path, base, f"sha256:{hashlib.sha256(DATA).hexdigest()}")
    cap = len(DATA) - 10
    ctx = FetchContext(store, tmp_path, policy=DownloadPolicy(unsized_cap=cap))
    with pytest.raises(SourceError, match=f"sent more than {cap:,} bytes") as caught:
        url_source.fill(ctx, registry.get("clips/a"), backoff=0)
    assert "fixture-store add" in (caught.value.fix or "")
    assert behaviour.requests == ["/a.bin"]  # the server answered: never tried again
    assert (ctx.refused, ctx.refused_bytes) == (1, cap + 1)  # read no further than cap + 1
    assert list(store.iter_objects()) == [] and leftovers(store) == []
