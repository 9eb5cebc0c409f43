"""The S3 remote against moto's threaded server on loopback (the real boto3 client, the real
protocol), with a fault-injecting proxy in front for the failures moto never makes itself."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fixture_store import registry as registry_mod
from fixture_store.limits import MiB
from fixture_store.objects.store import Store
from fixture_store.registry import Registry
from fixture_store.remotes.base import Retry, checksum_sha256, object_key
from fixture_store.remotes.config import RemoteSpec
from fixture_store.remotes.packs import ONE_PER_KEY
from fixture_store.remotes.s3 import METADATA_KEY, S3Remote
from fixture_store.remotes.sync import Outcome, SyncPlan, plan, pull, push
from fixture_store.sources.transfer import DownloadPolicy
from fixture_store.verify import verify_names
from tests.remotes.conftest import s3_client
from tests.support.cli import add_file_and_case, run
from tests.support.s3server import FaultProxy

FAST = Retry(attempts=3, backoff=0.01, total=10.0)


def _remote(endpoint: str, bucket: str, **kwargs: Any) -> S3Remote:
    spec = RemoteSpec("team", f"s3://{bucket}/fixtures", endpoint_url=endpoint)
    return S3Remote.connect(spec, retry=FAST, **kwargs)


@pytest.fixture
def remote(s3_endpoint: str, bucket: str) -> S3Remote:
    """The remote ``team`` on a fresh bucket, straight to moto."""
    return _remote(s3_endpoint, bucket)


@pytest.fixture
def proxied(proxy: FaultProxy, bucket: str) -> S3Remote:
    """The same remote through the fault-injecting proxy."""
    return _remote(proxy.url, bucket)


@pytest.fixture
def fresh(tmp_path: Path) -> Store:
    """An empty store to pull into."""
    return Store.at(tmp_path / "fresh").ensure()


@pytest.fixture
def corpus(project: Path, store: Store) -> tuple[Registry, SyncPlan]:
    """``fam/a`` and ``fam/case`` added to the test's store: the registry and their plan."""
    add_file_and_case(project)
    registry = registry_mod.load(project)
    the_plan = plan(registry, registry.names())
    assert all(store.has(d) for d in the_plan.objects.values())
    return registry, the_plan


@pytest.fixture
def pushed(
    corpus: tuple[Registry, SyncPlan], store: Store, remote: S3Remote
) -> tuple[Registry, SyncPlan]:
    """``fam/a`` pushed to the bucket (straight to moto): the registry and its plan."""
    registry, _ = corpus
    the_plan = plan(registry, ["fam/a"])
    push(store, registry, remote, the_plan, retry=FAST, packing=ONE_PER_KEY)
    return registry, the_plan


@dataclass(frozen=True)
class Big:
    """``fam/big``, a checkpoint of 11 MiB and a bit, added; a remote through the proxy that
    sends it in 5 MiB parts."""

    data: bytes
    registry: Registry
    plan: SyncPlan
    remote: S3Remote


@pytest.fixture
def big(project: Path, bucket: str, proxy: FaultProxy, store: Store) -> Big:
    data = os.urandom(11 * 1024 * 1024 + 12345)
    (project / "big.bin").write_bytes(data)
    assert run("add", "big.bin", "--name", "fam/big", "--kind", "checkpoint")[0] == 0
    registry = registry_mod.load(project)
    the_plan = plan(registry, ["fam/big"])
    assert all(store.has(d) for d in the_plan.objects.values())  # added to the test's store
    remote = _remote(proxy.url, bucket, multipart_threshold=6 << 20, part_size=5 << 20)
    return Big(data, registry, the_plan, remote)


def test_what_push_wrote_is_read_back_by_plain_boto3_at_the_documented_keys(
    s3_endpoint: str,
    bucket: str,
    store: Store,
    corpus: tuple[Registry, SyncPlan],
    remote: S3Remote,
) -> None:
    registry, the_plan = corpus
    report = push(store, registry, remote, the_plan, retry=FAST, packing=ONE_PER_KEY)
    assert {r.outcome for r in report.results} == {Outcome.PUSHED}
    client = s3_client(s3_endpoint)
    listed = client.list_objects_v2(Bucket=bucket)["Contents"]
    expected = {f"fixtures/{object_key(d)}" for d in the_plan.objects.values()}
    assert {o["Key"] for o in listed} == expected
    for digest in the_plan.objects.values():
        key = f"fixtures/objects/sha256/{digest.hex[:2]}/{digest.hex[2:]}"
        got = client.get_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
        assert got["Body"].read() == store.object_path(digest).read_bytes()
        assert got["ChecksumSHA256"] == base64.b64encode(bytes.fromhex(digest.hex)).decode()
        assert got["Metadata"][METADATA_KEY] == digest.hex


def test_pull_into_an_empty_store_verifies_and_a_second_push_sends_nothing(
    store: Store, corpus: tuple[Registry, SyncPlan], remote: S3Remote, fresh: Store
) -> None:
    registry, the_plan = corpus
    push(store, registry, remote, the_plan, retry=FAST, packing=ONE_PER_KEY)
    again = push(store, registry, remote, the_plan, retry=FAST, packing=ONE_PER_KEY)
    assert again.moved_objects == 0 and {r.outcome for r in again.results} == {Outcome.PRESENT}
    pulled = pull(fresh, registry, remote, the_plan, retry=FAST)
    assert {r.outcome for r in pulled.results} == {Outcome.PULLED}
    assert all(r.ok for r in verify_names(fresh, registry, registry.names()))


def test_a_large_object_goes_up_in_parallel_parts_and_comes_back_whole(
    s3_endpoint: str, bucket: str, proxy: FaultProxy, store: Store, big: Big, fresh: Store
) -> None:
    data, registry, the_plan, remote = big.data, big.registry, big.plan, big.remote
    assert (
        push(store, registry, remote, the_plan, retry=FAST, packing=ONE_PER_KEY).moved_objects == 1
    )
    (digest,) = the_plan.objects.values()
    head = s3_client(s3_endpoint).head_object(
        Bucket=bucket, Key=remote.key(digest), ChecksumMode="ENABLED"
    )
    assert head["ContentLength"] == len(data)
    assert head["Metadata"][METADATA_KEY] == hashlib.sha256(data).hexdigest()
    parts = [p for m, p, _ in proxy.faults.seen if m == "PUT" and "partNumber=" in p]
    assert len(parts) == 3  # 5 + 5 + 1 MiB
    again = push(store, registry, remote, the_plan, retry=FAST, packing=ONE_PER_KEY)
    assert again.moved_objects == 0  # HEAD: size and sha256 compared
    assert pull(fresh, registry, remote, the_plan, retry=FAST).results[0].outcome is Outcome.PULLED
    assert fresh.object_path(digest).read_bytes() == data


def test_push_refuses_a_remote_object_whose_checksum_is_of_other_bytes(
    s3_endpoint: str,
    bucket: str,
    store: Store,
    corpus: tuple[Registry, SyncPlan],
    remote: S3Remote,
) -> None:
    registry, _ = corpus
    the_plan = plan(registry, ["fam/a"])
    (digest,) = the_plan.objects.values()
    other = b"b" * digest.size
    s3_client(s3_endpoint).put_object(
        Bucket=bucket,
        Key=remote.key(digest),
        Body=other,
        ChecksumAlgorithm="SHA256",
        ChecksumSHA256=base64.b64encode(hashlib.sha256(other).digest()).decode(),
    )
    (result,) = push(store, registry, remote, the_plan, retry=FAST, packing=ONE_PER_KEY).results
    assert result.outcome is Outcome.FAILED and "write-once" in result.message
    body = s3_client(s3_endpoint).get_object(Bucket=bucket, Key=remote.key(digest))["Body"]
    assert body.read() == other


def test_pull_refuses_a_flipped_byte_without_retrying_and_stores_nothing(
    proxy: FaultProxy, pushed: tuple[Registry, SyncPlan], proxied: S3Remote, fresh: Store
) -> None:
    registry, the_plan = pushed
    proxy.faults.flip = True
    (result,) = pull(fresh, registry, proxied, the_plan, retry=FAST).results
    assert result.outcome is Outcome.FAILED
    assert "team (s3://" in result.message and "other bytes" in result.message
    assert result.fix is not None and "push" in result.fix
    assert [m for m, _, _ in proxy.faults.seen] == ["GET"]  # a mismatch is not retried
    (digest,) = the_plan.objects.values()
    assert not fresh.object_path(digest).exists()
    assert list(fresh.tmp_dir.iterdir()) == []


def test_pull_retries_a_truncated_body_and_gives_up_with_nothing_stored(
    proxy: FaultProxy, pushed: tuple[Registry, SyncPlan], proxied: S3Remote, fresh: Store
) -> None:
    registry, the_plan = pushed
    proxy.faults.truncate = True
    (result,) = pull(fresh, registry, proxied, the_plan, retry=FAST).results
    assert result.outcome is Outcome.FAILED
    assert "3 attempts" in result.message
    assert [m for m, _, _ in proxy.faults.seen] == ["GET"] * 3
    (digest,) = the_plan.objects.values()
    assert not fresh.object_path(digest).exists()


def test_a_slow_drip_fails_below_the_minimum_rate_with_nothing_stored(
    proxy: FaultProxy, pushed: tuple[Registry, SyncPlan], proxied: S3Remote, fresh: Store
) -> None:
    registry, the_plan = pushed
    proxy.faults.drip = 0.01  # 100 bytes a second: each read succeeds, the body never ends
    rate = DownloadPolicy(min_rate=10_000, rate_window=0.5)
    retry = Retry(attempts=2, backoff=0.01, total=10.0)
    (result,) = pull(fresh, registry, proxied, the_plan, retry=retry, rate=rate).results
    assert result.outcome is Outcome.FAILED and "too slow" in result.message
    assert result.fix is not None and "FIXTURE_STORE_DOWNLOAD_MIN_RATE" in result.fix
    (digest,) = the_plan.objects.values()
    assert not fresh.object_path(digest).exists()


def test_server_errors_are_retried_until_the_transfer_succeeds(
    proxy: FaultProxy,
    store: Store,
    corpus: tuple[Registry, SyncPlan],
    proxied: S3Remote,
    fresh: Store,
) -> None:
    registry, _ = corpus
    the_plan = plan(registry, ["fam/a"])
    proxy.faults.errors = 2  # the HEAD of push, then its first PUT
    (pushed,) = push(store, registry, proxied, the_plan, retry=FAST, packing=ONE_PER_KEY).results
    assert pushed.outcome is Outcome.PUSHED
    proxy.faults.errors = 2
    assert pull(fresh, registry, proxied, the_plan, retry=FAST).results[0].outcome is Outcome.PULLED
    assert [s for _, _, s in proxy.faults.seen].count(500) == 4


def test_a_403_is_not_retried_and_names_the_remote_and_the_fix(
    proxy: FaultProxy, pushed: tuple[Registry, SyncPlan], proxied: S3Remote, fresh: Store
) -> None:
    registry, the_plan = pushed
    proxy.faults.forbid = True
    (result,) = pull(fresh, registry, proxied, the_plan).results
    assert result.outcome is Outcome.FAILED
    assert "access denied" in result.message and "team" in result.message
    assert result.fix is not None and "credentials" in result.fix
    assert len(proxy.faults.seen) == 1


def test_a_bucket_that_does_not_exist_is_named(
    s3_endpoint: str, store: Store, corpus: tuple[Registry, SyncPlan]
) -> None:
    registry, the_plan = corpus
    report = push(
        store,
        registry,
        _remote(s3_endpoint, "no-such-bucket"),
        the_plan,
        retry=FAST,
        packing=ONE_PER_KEY,
    )
    result = report.results[0]
    assert result.outcome is Outcome.FAILED
    assert "the bucket 'no-such-bucket' does not exist" in result.message
    assert result.fix is not None and "aws s3 mb s3://no-such-bucket" in result.fix


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_endpoint_is_retried_briefly_then_named(
    store: Store, corpus: tuple[Registry, SyncPlan]
) -> None:
    registry, the_plan = corpus
    remote = _remote(f"http://127.0.0.1:{_closed_port()}", "bucket")
    result = push(store, registry, remote, the_plan, retry=FAST, packing=ONE_PER_KEY).results[0]
    assert result.outcome is Outcome.FAILED
    assert "cannot reach the endpoint" in result.message and "3 attempts" in result.message
    assert result.fix is not None and "endpoint_url" in result.fix


def test_missing_credentials_say_where_credentials_come_from(
    s3_endpoint: str,
    bucket: str,
    store: Store,
    corpus: tuple[Registry, SyncPlan],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registry, the_plan = corpus
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    remote = _remote(s3_endpoint, bucket)  # connected without credentials
    result = push(store, registry, remote, the_plan, retry=FAST, packing=ONE_PER_KEY).results[0]
    assert result.outcome is Outcome.FAILED
    assert "no AWS credentials found" in result.message
    assert result.fix is not None and "AWS_PROFILE" in result.fix


def test_the_endpoint_can_come_from_aws_endpoint_url(
    s3_endpoint: str,
    bucket: str,
    store: Store,
    corpus: tuple[Registry, SyncPlan],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registry, the_plan = corpus
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    remote = S3Remote.connect(RemoteSpec("team", f"s3://{bucket}"), retry=FAST)
    assert (
        push(store, registry, remote, the_plan, retry=FAST, packing=ONE_PER_KEY).moved_objects == 3
    )
    keys = {o["Key"] for o in s3_client(s3_endpoint).list_objects_v2(Bucket=bucket)["Contents"]}
    assert keys == {object_key(d) for d in the_plan.objects.values()}
    assert checksum_sha256(next(iter(the_plan.objects.values())))  # the documented spelling


def test_an_upload_never_replaces_an_object_already_at_its_key(
    s3_endpoint: str,
    bucket: str,
    store: Store,
    corpus: tuple[Registry, SyncPlan],
    remote: S3Remote,
) -> None:
    _, the_plan = corpus
    digest = next(iter(the_plan.objects.values()))
    client = s3_client(s3_endpoint)
    client.put_object(Bucket=bucket, Key=remote.key(digest), Body=b"first writer")
    remote.upload(store.object_path(digest), digest)  # If-None-Match: * -> 412, kept as it is
    assert client.get_object(Bucket=bucket, Key=remote.key(digest))["Body"].read() == (
        b"first writer"
    )


def test_a_new_small_object_costs_one_request_and_a_present_one_is_compared_by_head(
    proxy: FaultProxy, store: Store, corpus: tuple[Registry, SyncPlan], proxied: S3Remote
) -> None:
    registry, the_plan = corpus
    push(store, registry, proxied, the_plan, retry=FAST, packing=ONE_PER_KEY)
    assert sorted(m for m, _, _ in proxy.faults.seen) == ["PUT"] * 3
    proxy.faults.seen.clear()
    again = push(store, registry, proxied, the_plan, retry=FAST, packing=ONE_PER_KEY)
    assert {r.outcome for r in again.results} == {Outcome.PRESENT}
    assert sorted(m for m, _, _ in proxy.faults.seen) == ["HEAD"] * 3 + ["PUT"] * 3


def test_a_large_object_pulled_in_ranges_is_refused_if_any_range_has_other_bytes(
    proxy: FaultProxy, store: Store, big: Big, fresh: Store
) -> None:
    data, registry, the_plan, remote = big.data, big.registry, big.plan, big.remote
    push(store, registry, remote, the_plan, retry=FAST, packing=ONE_PER_KEY)
    proxy.faults.seen.clear()
    proxy.faults.flip = True
    (result,) = pull(fresh, registry, remote, the_plan, retry=FAST).results
    assert result.outcome is Outcome.FAILED and "other bytes" in result.message
    ranges = -(-len(data) // remote.range_size)
    assert ranges > 1
    assert [m for m, _, _ in proxy.faults.seen] == ["GET"] * ranges  # each range once: no retry
    (digest,) = the_plan.objects.values()
    assert not fresh.object_path(digest).exists()
    assert list(fresh.tmp_dir.iterdir()) == []


@pytest.mark.usefixtures("corpus")
def test_the_cli_pushes_and_pulls_a_configured_s3_remote_and_never_prints_a_secret(
    s3_endpoint: str,
    bucket: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.support.s3server import FAKE_CREDENTIALS

    secret = FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"]
    url = f"s3://{bucket}/team"
    add = run("remote", "add", "team", url, "--endpoint-url", s3_endpoint, "--default")
    assert add[0] == 0
    code, out, err = run("push", "--all")
    assert code == 0 and "2 pushed" in out
    monkeypatch.setenv("FIXTURE_STORE_DIR", str(tmp_path / "fresh"))
    code, out, err = run("pull", "--all", "--json")
    assert code == 0 and json.loads(out)["counts"] == {"pulled": 2}
    monkeypatch.setenv("FIXTURE_STORE_DIR", str(tmp_path / "fresh-again"))
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)  # a URL remote: the endpoint from env
    code, out, err = run("pull", "fam/a", "--remote", "s3://no-such-bucket-here/x")
    assert code == 1
    assert "failed: fam/a" in err and "does not exist" in err and "aws s3 mb" in err
    outputs = [add, (code, out, err), run("remote", "list"), run("remote", "list", "--json")]
    assert all(secret not in o and secret not in e for _, o, e in outputs)


# -- hostile answers: every byte through the one bounded reader (DESIGN 14) -------------------


def test_headers_dripped_a_byte_at_a_time_are_cut_at_the_objects_deadline(
    proxy: FaultProxy, pushed: tuple[Registry, SyncPlan], proxied: S3Remote, fresh: Store
) -> None:
    """Each header byte comes well within the per-read timeout; the object's deadline ends it."""
    registry, the_plan = pushed
    proxy.faults.drip_headers = 0.05  # the headers alone take half a minute
    retry = Retry(attempts=3, backoff=0.01, total=1.0)
    (result,) = pull(fresh, registry, proxied, the_plan, retry=retry).results
    assert result.outcome is Outcome.FAILED
    assert "the deadline of 1s for this object passed" in result.message
    # Cut while the headers came (at about 20 bytes a second), not read to their end.
    assert proxy.faults.sent < 100
    assert result.fix is not None and "FIXTURE_STORE_DOWNLOAD_DEADLINE" in result.fix
    (digest,) = the_plan.objects.values()
    assert not fresh.object_path(digest).exists()


def test_a_huge_error_body_is_read_no_further_than_its_first_kib(
    proxy: FaultProxy, pushed: tuple[Registry, SyncPlan], proxied: S3Remote, fresh: Store
) -> None:
    registry, the_plan = pushed
    proxy.faults.errors, proxy.faults.error_size = 3, 64 * MiB
    (result,) = pull(fresh, registry, proxied, the_plan, retry=FAST).results
    assert result.outcome is Outcome.FAILED
    assert "answered 500" in result.message and "3 attempts" in result.message
    # What the kernel's socket buffers took before the client closed (a few MiB each), not the
    # 192 MiB the server had to send.
    assert proxy.faults.sent < 3 * 16 * MiB


def test_a_range_announcing_gigabytes_is_read_no_further_than_its_length(
    proxy: FaultProxy, store: Store, big: Big, fresh: Store
) -> None:
    registry, the_plan, remote = big.registry, big.plan, big.remote
    push(store, registry, remote, the_plan, retry=FAST, packing=ONE_PER_KEY)
    proxy.faults.announce, proxy.faults.extra = 6 << 30, 64 * MiB
    (result,) = pull(fresh, registry, remote, the_plan, retry=FAST).results
    assert result.outcome is Outcome.FAILED
    assert "more than" in result.message and "other bytes" not in result.message
    ranges = -(-len(big.data) // remote.range_size)
    # Each answer cut after its length + 1 (the socket buffers took a few MiB more), never
    # drained: not the 64 MiB of filler behind each.
    assert proxy.faults.sent < ranges * 3 * 16 * MiB
    (digest,) = the_plan.objects.values()
    assert not fresh.object_path(digest).exists()


def test_a_petabyte_content_length_on_the_right_bytes_is_read_and_verified(
    proxy: FaultProxy, store: Store, big: Big, fresh: Store
) -> None:
    """The length is a claim like any other: the bytes that came are checked, nothing is
    allocated for the claim."""
    registry, the_plan, remote = big.registry, big.plan, big.remote
    push(store, registry, remote, the_plan, retry=FAST, packing=ONE_PER_KEY)
    proxy.faults.announce = 10**15
    (result,) = pull(fresh, registry, remote, the_plan, retry=FAST).results
    assert result.outcome is Outcome.PULLED, result.message
    assert fresh.object_path(next(iter(the_plan.objects.values()))).read_bytes() == big.data


@pytest.mark.parametrize("delta", [-1, 1, 4096])
def test_a_range_answered_short_or_long_is_a_cut_transfer_retried(
    proxy: FaultProxy, store: Store, big: Big, fresh: Store, delta: int
) -> None:
    registry, the_plan, remote = big.registry, big.plan, big.remote
    push(store, registry, remote, the_plan, retry=FAST, packing=ONE_PER_KEY)
    proxy.faults.seen.clear()
    proxy.faults.ranges, proxy.faults.range_delta = 1, delta
    (result,) = pull(fresh, registry, remote, the_plan, retry=FAST).results
    assert result.outcome is Outcome.PULLED, result.message
    ranges = -(-len(big.data) // remote.range_size)
    assert [m for m, _, _ in proxy.faults.seen] == ["GET"] * (ranges + 1)  # one retried
    proxy.faults.ranges = 1000  # every answer: retried, then a cut transfer, never other bytes
    again = Store.at(fresh.root.parent / "again").ensure()
    (result,) = pull(again, registry, remote, the_plan, retry=FAST).results
    assert result.outcome is Outcome.FAILED
    assert "3 attempts" in result.message and "other bytes" not in result.message
