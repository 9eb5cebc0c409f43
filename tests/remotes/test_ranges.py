"""Verified partial fetch from remotes: one tensor's range from a folder, an S3 bucket (moto,
behind the fault proxy) and the loopback Hub, verified like a source's; a lying remote is
refused for exactly that tensor, and nothing is written to the store."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from fixture_store.access import Fixtures, RemoteRefusedWarning
from fixture_store.errors import FixtureStoreError, IntegrityError
from fixture_store.limits import MiB
from fixture_store.objects.store import Store
from fixture_store.registry import HubRepo
from fixture_store.remotes.base import Remote, Retry, object_key
from fixture_store.remotes.config import RemoteSpec
from fixture_store.remotes.folder import FolderRemote
from fixture_store.remotes.hub import HubRemote
from fixture_store.remotes.packs import PACKS, Packing
from fixture_store.remotes.s3 import S3Remote
from fixture_store.remotes.sync import plan, push
from tests.remotes.test_hub import (
    COMMIT,
    hub,  # noqa: F401 - the loopback Hub fixture
)
from tests.sources.test_ranges import (
    HEADER,
    WEIGHTS,
    Server,
    _project,
    https,  # noqa: F401 - the loopback HTTPS fixture
)
from tests.support.fetchutil import online_env  # noqa: F401 - autouse
from tests.support.hubserver import HubState
from tests.support.s3server import FaultProxy

FAST = Retry(attempts=2, backoff=0.01, total=10.0)
FIX = "fixture-store fetch ckpt/big"
SMALL = WEIGHTS["small"].nbytes


# What a lying remote does (a fault of the proxy in front of it) and what the refusal says.
LIES = pytest.mark.parametrize(
    ("fault", "said"),
    [
        ({"whole": True}, r"answered 200 to a range request .*not 206"),
        ({"shift_range": 8}, r"with Content-Range 'bytes \d+-\d+/\d+'"),
        ({"ranges": 1, "range_delta": -16}, rf"sent {SMALL - 16} bytes for a range of {SMALL}"),
        ({"flip": True}, r"do not have the tensor's sha256"),
    ],
    ids=["ignores-range", "wrong-content-range", "short-body", "wrong-bytes"],
)


def _only_remote(tmp_path: Path) -> tuple[Fixtures, bytes]:
    """The safetensors record whose local source is gone: only a remote can serve it."""
    fixtures, data = _project(tmp_path, {"type": "local", "path": "model.safetensors"})
    (tmp_path / "p" / "model.safetensors").unlink()
    return fixtures, data


def _pushed(tmp_path: Path, fixtures: Fixtures, data: bytes, remote: Remote, **kw: object) -> None:
    """Push the record's object to ``remote`` from another store (as a colleague did)."""
    pusher = Store.at(tmp_path / "pusher").ensure()
    pusher.put_bytes(data)
    the_plan = plan(fixtures.registry, ["ckpt/big"])
    report = push(pusher, fixtures.registry, remote, the_plan, retry=FAST, **kw)  # type: ignore[arg-type]
    assert all(r.ok for r in report.results), report.results


def _with(fixtures: Fixtures, *remotes: Remote) -> Fixtures:
    return Fixtures(fixtures.store, fixtures.registry, remotes=remotes)


def _empty(fixtures: Fixtures) -> bool:
    """Nothing of the record was written to the store: partial bytes are never an object."""
    objects = fixtures.store.root / "objects"
    return not fixtures.store.has(fixtures.record("ckpt/big").object) and not any(
        p.is_file() for p in objects.rglob("*")
    )


def _s3(endpoint: str, bucket: str) -> S3Remote:
    return S3Remote.connect(
        RemoteSpec("team", f"s3://{bucket}/fx", endpoint_url=endpoint), retry=FAST
    )


# -- folder ----------------------------------------------------------------------------------
def test_a_folder_remote_serves_the_tensor_before_the_source_is_asked(
    https: tuple[str, Server],  # noqa: F811 - the fixture imported above
    tmp_path: Path,
) -> None:
    base, server = https
    fixtures, data = _project(tmp_path, {"type": "url", "url": f"{base}/model.safetensors"})
    server.body = data
    remote = FolderRemote("team", tmp_path / "remote")
    _pushed(tmp_path, fixtures, data, remote)
    got = _with(fixtures, remote).tensor_read("ckpt/big", "small")
    np.testing.assert_array_equal(got.array, WEIGHTS["small"])
    assert got.read is not None and got.read.remote and "team" in got.read.where
    assert server.sent == []  # the remote first, as a fetch tries them: the source is not asked
    assert _empty(fixtures)


def test_a_folder_remote_holding_other_bytes_is_refused_and_the_source_serves_with_a_warning(
    https: tuple[str, Server],  # noqa: F811 - the fixture imported above
    tmp_path: Path,
) -> None:
    base, server = https
    fixtures, data = _project(tmp_path, {"type": "url", "url": f"{base}/model.safetensors"})
    server.body = data
    remote = FolderRemote("team", tmp_path / "remote")
    _pushed(tmp_path, fixtures, data, remote)
    held = remote.path(fixtures.record("ckpt/big").object)
    held.chmod(0o644)
    damaged = bytearray(held.read_bytes())
    damaged[-1] ^= 0xFF  # the last tensor's last byte
    held.write_bytes(bytes(damaged))
    arrays = fixtures.record("ckpt/big").arrays
    assert arrays is not None
    last = max(WEIGHTS, key=lambda k: int(arrays[k]["offset"]))
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        got = _with(fixtures, remote).tensor("ckpt/big", last)
    np.testing.assert_array_equal(got, WEIGHTS[last])
    (warning,) = [w for w in said if issubclass(w.category, RemoteRefusedWarning)]
    assert f"ckpt/big: tensor '{last}'" in str(warning.message) and "team" in str(warning.message)
    assert server.sent == [WEIGHTS[last].nbytes]  # then the source, for that tensor alone
    assert _empty(fixtures)


def test_a_folder_remote_short_of_the_range_is_refused_naming_the_tensor(tmp_path: Path) -> None:
    fixtures, data = _only_remote(tmp_path)
    remote = FolderRemote("team", tmp_path / "remote")
    _pushed(tmp_path, fixtures, data, remote)
    held = remote.path(fixtures.record("ckpt/big").object)
    held.chmod(0o644)
    held.write_bytes(data[:-100])  # cut: the last tensor's range runs past its end
    arrays = fixtures.record("ckpt/big").arrays
    assert arrays is not None
    last = max(WEIGHTS, key=lambda k: int(arrays[k]["offset"]))
    with pytest.raises(
        IntegrityError, match=rf"ckpt/big: tensor '{last}': remote team .*sent"
    ) as e:
        _with(fixtures, remote).tensor("ckpt/big", last)
    assert e.value.fix is not None and FIX in e.value.fix
    assert _empty(fixtures)


def test_a_link_at_the_objects_name_in_a_folder_remote_is_never_followed(tmp_path: Path) -> None:
    fixtures, data = _only_remote(tmp_path)
    remote = FolderRemote("team", tmp_path / "remote")
    elsewhere = tmp_path / "elsewhere.safetensors"
    elsewhere.write_bytes(data)  # the right bytes, but behind a link
    held = remote.path(fixtures.record("ckpt/big").object)
    held.parent.mkdir(parents=True)
    held.symlink_to(elsewhere)
    with pytest.raises(FixtureStoreError, match=r"ckpt/big.*remotes tried first: .*link"):
        _with(fixtures, remote).tensor("ckpt/big", "small")
    assert _empty(fixtures)


def test_a_tensor_of_an_object_a_remote_keeps_in_a_pack_is_read_at_its_slot(
    tmp_path: Path,
) -> None:
    fixtures, data = _only_remote(tmp_path)
    remote = FolderRemote("team", tmp_path / "remote")
    _pushed(tmp_path, fixtures, data, remote, packing=Packing(threshold=4 * MiB))
    assert not remote.path(fixtures.record("ckpt/big").object).exists()
    assert any((tmp_path / "remote" / PACKS).glob("*.pack"))
    np.testing.assert_array_equal(
        _with(fixtures, remote).tensor("ckpt/big", "small"), WEIGHTS["small"]
    )
    assert _empty(fixtures)


# -- S3 --------------------------------------------------------------------------------------
def test_an_s3_remote_serves_one_tensor_by_one_ranged_get(
    tmp_path: Path, proxy: FaultProxy, bucket: str, s3_endpoint: str
) -> None:
    fixtures, data = _only_remote(tmp_path)
    _pushed(tmp_path, fixtures, data, _s3(s3_endpoint, bucket))
    got = _with(fixtures, _s3(proxy.url, bucket)).tensor_read("ckpt/big", "small")
    np.testing.assert_array_equal(got.array, WEIGHTS["small"])
    assert got.read is not None and got.read.remote
    # the header (which places the range), then the tensor: no HEAD, no listing
    assert [m for m, _p, _s in proxy.faults.seen] == ["GET", "GET"]
    assert _empty(fixtures)


@LIES
def test_a_lying_s3_remote_is_refused_for_exactly_that_tensor(
    tmp_path: Path,
    proxy: FaultProxy,
    bucket: str,
    s3_endpoint: str,
    fault: dict[str, object],
    said: str,
) -> None:
    fixtures, data = _only_remote(tmp_path)
    _pushed(tmp_path, fixtures, data, _s3(s3_endpoint, bucket))
    proxy.faults.from_byte = 1  # the header is read honestly: the tensor's range lies
    for name, value in fault.items():
        setattr(proxy.faults, name, value)
    with pytest.raises(
        IntegrityError, match=rf"ckpt/big: tensor 'small': .*remote team .*{said}"
    ) as e:
        _with(fixtures, _s3(proxy.url, bucket)).tensor("ckpt/big", "small")
    assert e.value.fix is not None and FIX in e.value.fix
    assert "then the source" in e.value.message  # the source was tried after, and is gone
    assert len(proxy.faults.seen) == 1  # refused at once: a lie is not retried
    assert _empty(fixtures)


# -- Hub -------------------------------------------------------------------------------------
@pytest.fixture
def cdn(
    hub: tuple[HubState, FaultProxy],  # noqa: F811 - the fixture imported above
) -> Iterator[tuple[HubState, FaultProxy]]:
    """The loopback Hub whose LFS bytes come through a fault proxy in front of its CDN."""
    state, _ = hub
    with FaultProxy(state.cdn_base) as proxy:
        proxy.faults.match = "/cdn/"
        state.cdn_base = proxy.url
        yield state, proxy


def _hub_remote(at: str = f"@{COMMIT}") -> HubRemote:
    return HubRemote("hubby", HubRepo.parse(f"hf://datasets/org/fixtures{at}"), retry=FAST)


def _on_hub(state: HubState, fixtures: Fixtures, data: bytes, **kw: object) -> None:
    key = object_key(fixtures.record("ckpt/big").object)
    state.add("org/fixtures", key, data, repo_type="dataset", lfs=True, **kw)


@pytest.mark.parametrize("at", [f"@{COMMIT}", ""], ids=["pinned", "branch"])
def test_a_hub_remote_serves_one_tensor_by_a_range_at_its_commit(
    cdn: tuple[HubState, FaultProxy], tmp_path: Path, at: str
) -> None:
    state, _proxy = cdn
    fixtures, data = _only_remote(tmp_path)
    _on_hub(state, fixtures, data)
    got = _with(fixtures, _hub_remote(at)).tensor_read("ckpt/big", "small")
    np.testing.assert_array_equal(got.array, WEIGHTS["small"])
    assert got.read is not None and got.read.remote
    gets = [h for m, p, h in state.requests if m == "GET" and not p.startswith("/api/")]
    assert len(gets) == 2  # the header, which places the range, then the tensor
    assert all(get.get("range", "").startswith("bytes=") for get in gets)
    resolved = [p for _m, p, _h in state.requests if "/resolve/" in p]
    assert resolved and all(f"/resolve/{COMMIT}/" in p for p in resolved)  # at the commit
    assert _empty(fixtures)


@LIES
def test_a_lying_hub_remote_is_refused_for_exactly_that_tensor(
    cdn: tuple[HubState, FaultProxy], tmp_path: Path, fault: dict[str, object], said: str
) -> None:
    state, proxy = cdn
    fixtures, data = _only_remote(tmp_path)
    _on_hub(state, fixtures, data)
    proxy.faults.from_byte = 1  # the header is read honestly: the tensor's range lies
    for name, value in fault.items():
        setattr(proxy.faults, name, value)
    with pytest.raises(IntegrityError, match=rf"ckpt/big: tensor 'small': .*remote hubby .*{said}"):
        _with(fixtures, _hub_remote()).tensor("ckpt/big", "small")
    assert _empty(fixtures)


def test_a_hub_remote_announcing_other_bytes_reads_no_range(
    hub: tuple[HubState, FaultProxy],  # noqa: F811 - the fixture imported above
    tmp_path: Path,
) -> None:
    state, _ = hub
    fixtures, data = _only_remote(tmp_path)
    _on_hub(state, fixtures, b"x" * len(data))  # another object under the key: its LFS sha256
    with pytest.raises(FixtureStoreError, match=r"ckpt/big.*LFS sha256"):
        _with(fixtures, _hub_remote()).tensor("ckpt/big", "small")
    assert not [m for m, _p, _h in state.requests if m == "GET"]
    assert _empty(fixtures)


# -- https mirror, and the command -----------------------------------------------------------
def test_an_https_mirror_serves_the_tensor_by_the_url_sources_ranged_get(
    https: tuple[str, Server],  # noqa: F811 - the fixture imported above
    tmp_path: Path,
) -> None:
    from fixture_store.remotes.https import HttpsRemote

    base, server = https
    fixtures, data = _only_remote(tmp_path)
    server.body = data
    got = _with(fixtures, HttpsRemote("mirror", base)).tensor_read("ckpt/big", "small")
    np.testing.assert_array_equal(got.array, WEIGHTS["small"])
    assert server.sent == [HEADER, SMALL]
    server.mode = "ignore-range"
    with pytest.raises(IntegrityError, match=r"ckpt/big: tensor 'small': .*not 206"):
        _with(fixtures, HttpsRemote("mirror", base)).tensor("ckpt/big", "small")
    assert _empty(fixtures)


def test_offline_no_remote_is_asked_for_a_range(
    tmp_path: Path,
    proxy: FaultProxy,
    bucket: str,
    s3_endpoint: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fixtures, data = _only_remote(tmp_path)
    _pushed(tmp_path, fixtures, data, _s3(s3_endpoint, bucket))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(FixtureStoreError, match=r"ckpt/big: local source"):
        _with(fixtures, _s3(proxy.url, bucket)).tensor("ckpt/big", "small")
    assert proxy.faults.seen == []  # offline: as in a fetch, no remote is tried


def test_npy_rows_come_from_a_remote_by_the_chunks_that_cover_them_each_verified(
    tmp_path: Path, proxy: FaultProxy, bucket: str, s3_endpoint: str
) -> None:
    from tests.sources.test_ranges_arrays import BIG, ROWS_PER_CHUNK
    from tests.sources.test_ranges_arrays import _project as npy_project

    fixtures, data = npy_project(
        tmp_path, "npy", {"type": "local", "path": "big.npy"}, {"big": BIG}
    )
    (tmp_path / "p" / "big.npy").unlink()
    record = fixtures.record("ref/big.npy")
    pusher = Store.at(tmp_path / "pusher").ensure()
    pusher.put_bytes(data)
    the_plan = plan(fixtures.registry, ["ref/big.npy"])
    assert all(
        r.ok for r in push(pusher, fixtures.registry, _s3(s3_endpoint, bucket), the_plan).results
    )
    rows = (ROWS_PER_CHUNK - 5, ROWS_PER_CHUNK + 5)  # across a chunk boundary: two chunks
    got = _with(fixtures, _s3(proxy.url, bucket)).tensor("ref/big.npy", "big", rows=rows)
    np.testing.assert_array_equal(got, BIG[rows[0] : rows[1]])
    (get,) = proxy.faults.seen
    assert get[0] == "GET"
    proxy.faults.seen.clear()
    proxy.faults.flip = True  # the first byte of the first chunk read
    with pytest.raises(
        IntegrityError, match=r"ref/big.npy: tensor 'big' chunk 0 of 3: .*remote team"
    ):
        _with(fixtures, _s3(proxy.url, bucket)).tensor("ref/big.npy", "big", rows=(0, 10))
    assert not fixtures.store.has(record.object)
