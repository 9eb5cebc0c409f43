"""The https mirror: the same layout served by a plain web server, read through the url
source's machinery, and checked like any download."""

from __future__ import annotations

import functools
import os
import ssl
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from bench.harness import make_cert
from fixture_store import registry as registry_mod
from fixture_store.objects.store import Store
from fixture_store.registry import Registry
from fixture_store.remotes.base import ReadOnlyRemote, Retry
from fixture_store.remotes.folder import FolderRemote
from fixture_store.remotes.https import HttpsRemote
from fixture_store.remotes.packs import ONE_PER_KEY
from fixture_store.remotes.sync import Outcome, SyncPlan, plan, pull, push
from tests.support.cli import add_file_and_case
from tests.support.s3server import FaultProxy

FAST = Retry(attempts=2, backoff=0.01, total=5.0)


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path]]:
    """A TLS web server on loopback serving the folder ``served/`` (its certificate trusted
    through $SSL_CERT_FILE); yields its base URL and the folder."""
    folder = tmp_path / "served"
    folder.mkdir()
    cert, key = make_cert(tmp_path)
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(folder)))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}/mirror", folder
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def pushed(
    project: Path, store: Store, served: tuple[str, Path]
) -> tuple[Registry, SyncPlan, HttpsRemote]:
    add_file_and_case(project)
    registry = registry_mod.load(project)
    the_plan = plan(registry, registry.names())
    base, folder = served
    push(store, registry, FolderRemote("build", folder / "mirror"), the_plan, packing=ONE_PER_KEY)
    return registry, the_plan, HttpsRemote("mirror", base)


def test_pull_from_a_mirror_verifies_every_object(
    pushed: tuple[Registry, SyncPlan, HttpsRemote], tmp_path: Path
) -> None:
    registry, the_plan, mirror = pushed
    fresh = Store.at(tmp_path / "fresh").ensure()
    report = pull(fresh, registry, mirror, the_plan, retry=FAST)
    assert {r.outcome for r in report.results} == {Outcome.PULLED}
    assert all(fresh.has(d) for d in the_plan.objects.values())


def test_a_mirror_serving_other_bytes_is_refused(
    pushed: tuple[Registry, SyncPlan, HttpsRemote], served: tuple[str, Path], tmp_path: Path
) -> None:
    registry, _, mirror = pushed
    the_plan = plan(registry, ["fam/a"])
    (digest,) = the_plan.objects.values()
    path = FolderRemote("build", served[1] / "mirror").path(digest)
    os.chmod(path, 0o644)
    path.write_bytes(b"Z" * digest.size)
    fresh = Store.at(tmp_path / "fresh").ensure()
    (result,) = pull(fresh, registry, mirror, the_plan, retry=FAST).results
    assert result.outcome is Outcome.FAILED and "other bytes" in result.message
    assert not fresh.object_path(digest).exists()


def test_an_object_the_mirror_lacks_is_missing(
    pushed: tuple[Registry, SyncPlan, HttpsRemote], served: tuple[str, Path], tmp_path: Path
) -> None:
    registry, _, mirror = pushed
    the_plan = plan(registry, ["fam/a"])
    (digest,) = the_plan.objects.values()
    FolderRemote("build", served[1] / "mirror").path(digest).unlink()
    (result,) = pull(Store.at(tmp_path / "f").ensure(), registry, mirror, the_plan).results
    assert result.outcome is Outcome.MISSING


def test_a_mirror_takes_no_push(
    pushed: tuple[Registry, SyncPlan, HttpsRemote], store: Store
) -> None:
    registry, the_plan, mirror = pushed
    with pytest.raises(ReadOnlyRemote):
        push(store, registry, mirror, the_plan, packing=ONE_PER_KEY)


# -- a hostile mirror: the fault proxy speaking TLS in front of a plain file server ------------


@pytest.fixture
def hostile(
    project: Path, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Registry, SyncPlan, HttpsRemote, FaultProxy]]:
    """fam/a pushed to a folder that a plain HTTP server serves, and a mirror of it reached
    through the fault proxy over TLS (its certificate trusted through $SSL_CERT_FILE)."""
    add_file_and_case(project)
    registry = registry_mod.load(project)
    the_plan = plan(registry, ["fam/a"])
    folder = tmp_path / "served"
    push(store, registry, FolderRemote("build", folder / "mirror"), the_plan, packing=ONE_PER_KEY)
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    cert, key = make_cert(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    try:
        with FaultProxy(f"http://127.0.0.1:{server.server_address[1]}", tls=context) as proxy:
            yield registry, the_plan, HttpsRemote("mirror", f"{proxy.url}/mirror"), proxy
    finally:
        server.shutdown()
        server.server_close()


def test_a_mirror_dripping_its_headers_is_cut_at_the_objects_deadline(
    hostile: tuple[Registry, SyncPlan, HttpsRemote, FaultProxy], tmp_path: Path
) -> None:
    registry, the_plan, mirror, proxy = hostile
    proxy.faults.drip_headers = 0.05  # the headers alone take several seconds
    retry = Retry(attempts=2, backoff=0.01, total=1.0)
    fresh = Store.at(tmp_path / "fresh").ensure()
    (result,) = pull(fresh, registry, mirror, the_plan, retry=retry).results
    assert result.outcome is Outcome.FAILED and "deadline" in result.message


def test_a_mirror_redirecting_with_huge_bodies_is_read_no_further_than_their_first_kib(
    hostile: tuple[Registry, SyncPlan, HttpsRemote, FaultProxy], tmp_path: Path
) -> None:
    registry, the_plan, mirror, proxy = hostile
    proxy.faults.redirect, proxy.faults.error_size = True, 32 * 1024 * 1024
    fresh = Store.at(tmp_path / "fresh").ensure()
    (result,) = pull(fresh, registry, mirror, the_plan, retry=FAST).results
    assert result.outcome is Outcome.FAILED and "302" in result.message
    answers = len(proxy.faults.seen)
    assert answers > 2  # urllib follows the redirect a few times, then gives up
    assert proxy.faults.sent < answers * 8 * 1024 * 1024  # each cut early, not read whole


def test_a_mirror_announcing_gigabytes_is_read_no_further_than_the_objects_size(
    hostile: tuple[Registry, SyncPlan, HttpsRemote, FaultProxy], tmp_path: Path
) -> None:
    registry, the_plan, mirror, proxy = hostile
    proxy.faults.announce, proxy.faults.extra = 6 << 30, 32 * 1024 * 1024
    fresh = Store.at(tmp_path / "fresh").ensure()
    (result,) = pull(fresh, registry, mirror, the_plan, retry=FAST).results
    assert result.outcome is Outcome.FAILED and "other bytes" in result.message
    assert proxy.faults.sent < 16 * 1024 * 1024
    (digest,) = the_plan.objects.values()
    assert not fresh.object_path(digest).exists()
