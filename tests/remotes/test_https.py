"""The https mirror: the same layout served by a plain web server, read through the url
source's machinery, and checked like any download."""

from __future__ import annotations

import functools
import os
import re
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from fixture_store import registry as registry_mod
from fixture_store.objects.store import Store
from fixture_store.registry import Registry
from fixture_store.remotes import packs
from fixture_store.remotes.base import ReadOnlyRemote, Retry
from fixture_store.remotes.folder import FolderRemote
from fixture_store.remotes.https import HttpsRemote
from fixture_store.remotes.keys import keys_of
from fixture_store.remotes.packs import ONE_PER_KEY
from fixture_store.remotes.sync import Outcome, SyncPlan, plan, pull, push
from tests.support.cli import add_file_and_case
from tests.support.s3server import FaultProxy
from tests.support.served import https_server, trusted_tls

FAST = Retry(attempts=2, backoff=0.01, total=5.0)


class _Quiet(SimpleHTTPRequestHandler):
    """A plain file server that answers ``Range: bytes=A-B`` as nginx or Apache do (the
    standard library's answers every GET whole)."""

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        asked = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range") or "")
        path = Path(self.translate_path(self.path))
        if asked is None or not path.is_file():
            super().do_GET()
            return
        data = path.read_bytes()
        first, last = int(asked[1]), min(int(asked[2]), len(data) - 1)
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {first}-{last}/{len(data)}")
        self.send_header("Content-Length", str(last - first + 1))
        self.end_headers()
        self.wfile.write(data[first : last + 1])


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path]]:
    """A TLS web server on loopback serving the folder ``served/`` (its certificate trusted
    through $SSL_CERT_FILE); yields its base URL and the folder."""
    folder = tmp_path / "served"
    folder.mkdir()
    handler = functools.partial(_Quiet, directory=str(folder))
    with https_server(tmp_path, monkeypatch, handler) as base:
        yield f"{base}/mirror", folder


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


# -- a mirror of a folder remote that holds packs (push's default) --------------------------------


@pytest.fixture
def packed(
    project: Path, store: Store, served: tuple[str, Path]
) -> tuple[Registry, SyncPlan, HttpsRemote, FolderRemote]:
    """Every object pushed in packs to the folder the mirror serves, none at its own key."""
    add_file_and_case(project)
    registry = registry_mod.load(project)
    the_plan = plan(registry, registry.names())
    base, folder = served
    build = FolderRemote("build", folder / "mirror")
    push(store, registry, build, the_plan)
    assert not any(build.path(d).exists() for d in the_plan.objects.values())
    assert (folder / "mirror" / packs.LIST_KEY).is_file()
    return registry, the_plan, HttpsRemote("mirror", base), build


def test_a_mirror_of_a_packed_remote_serves_every_object_from_its_packs(
    packed: tuple[Registry, SyncPlan, HttpsRemote, FolderRemote], tmp_path: Path
) -> None:
    registry, the_plan, mirror, _ = packed
    fresh = Store.at(tmp_path / "fresh").ensure()
    report = pull(fresh, registry, mirror, the_plan, retry=FAST)
    assert {r.outcome for r in report.results} == {Outcome.PULLED}
    assert report.moved_objects == len(the_plan.objects) > 2
    assert all(fresh.has(d) for d in the_plan.objects.values())


def test_a_damaged_object_in_a_mirrored_pack_is_refused_by_name_and_its_neighbours_land(
    packed: tuple[Registry, SyncPlan, HttpsRemote, FolderRemote], tmp_path: Path
) -> None:
    registry, the_plan, mirror, build = packed
    (damaged,) = plan(registry, ["fam/a"]).objects.values()
    slot = packs.load_index(keys_of(build), FAST, 1).slot(damaged)  # type: ignore[arg-type]
    assert slot is not None
    pack = build.root / packs.pack_key(slot.pack.hex)
    os.chmod(pack, 0o644)
    data = bytearray(pack.read_bytes())
    data[slot.offset] ^= 0xFF
    pack.write_bytes(bytes(data))
    fresh = Store.at(tmp_path / "fresh").ensure()
    results = {r.name: r for r in pull(fresh, registry, mirror, the_plan, retry=FAST).results}
    refused = results.pop("fam/a")
    assert refused.outcome is Outcome.FAILED
    assert "other bytes" in refused.message and packs.pack_key(slot.pack.hex) in refused.message
    assert "the folder or bucket the mirror serves" in (refused.fix or "")
    assert not fresh.object_path(damaged).exists()
    assert {r.outcome for r in results.values()} == {Outcome.PULLED}


def test_a_mirror_serving_no_list_of_indexes_says_so_and_proposes_no_push_to_itself(
    packed: tuple[Registry, SyncPlan, HttpsRemote, FolderRemote], tmp_path: Path
) -> None:
    registry, _, mirror, build = packed
    (build.root / packs.LIST_KEY).unlink()  # a remote packed by a fixture-store without lists
    the_plan = plan(registry, ["fam/a"])
    (result,) = pull(Store.at(tmp_path / "f").ensure(), registry, mirror, the_plan).results
    assert result.outcome is Outcome.MISSING
    assert packs.LIST_KEY in result.message and "pack" in result.message
    assert "--remote mirror" not in (result.fix or "")
    assert "the folder or bucket the mirror serves" in (result.fix or "")


def test_a_mirror_answering_a_range_with_the_whole_pack_is_refused_before_its_body_is_read(
    packed: tuple[Registry, SyncPlan, HttpsRemote, FolderRemote],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registry, the_plan, mirror, _ = packed
    monkeypatch.setattr(_Quiet, "do_GET", SimpleHTTPRequestHandler.do_GET)  # ignores Range
    fresh = Store.at(tmp_path / "fresh").ensure()
    results = pull(fresh, registry, mirror, the_plan, retry=FAST).results
    assert not any(r.ok for r in results)
    assert all("not 206 Partial Content" in r.message for r in results)
    assert not any(fresh.has(d) for d in the_plan.objects.values())


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
    context = trusted_tls(tmp_path, monkeypatch)
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


def test_a_fetch_through_a_mirror_of_a_packed_remote_takes_its_objects_from_the_packs(
    packed: tuple[Registry, SyncPlan, HttpsRemote, FolderRemote], tmp_path: Path
) -> None:
    from fixture_store.remotes.mirrors import Mirrors

    registry, the_plan, mirror, _ = packed
    fresh = Store.at(tmp_path / "fresh").ensure()
    mirrors = Mirrors(fresh, [mirror], retry=FAST)
    for name in the_plan.wants:
        got, _, failed = mirrors.pull(registry.get(name), lambda _d: True, lambda _n: None)
        assert got is mirror and failed == [], failed
    assert all(fresh.has(d) for d in the_plan.objects.values())
