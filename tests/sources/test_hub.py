"""The hub source against a loopback server speaking the Hub protocol, with the real client."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import huggingface_hub.constants
import pytest

from fixture_store.errors import StoreError
from fixture_store.fetch import Outcome, fetch_names
from fixture_store.objects.store import Store
from fixture_store.registry import HubSource, Registry
from fixture_store.sources import FetchContext, SourceError
from fixture_store.sources import hub as hub_source
from fixture_store.sources.transfer import DEADLINE_ENV, DownloadPolicy
from fixture_store.verify import Verifier
from tests.support.fetchutil import file_record, make_registry, online_env  # noqa: F401 - autouse
from tests.support.hubserver import HubState, hub_server

COMMIT = "0123456789abcdef0123456789abcdef01234567"
WEIGHTS = bytes(range(256)) * 64
CONFIG = b'{"hidden_size": 8}\n'


def hub_src(path: str, repo_type: str = "model", revision: str = COMMIT) -> dict[str, str]:
    return {
        "type": "hub",
        "repo_id": "org/tiny",
        "repo_type": repo_type,
        "revision": revision,
        "path": path,
    }


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[HubState]:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_ETAG_TIMEOUT", 1)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DOWNLOAD_TIMEOUT", 1)
    with hub_server(COMMIT) as (endpoint, state):
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        yield state


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store.at(tmp_path / "store")


def objects(store: Store) -> list[str]:
    return [h for h, _ in store.iter_objects()]


def leftovers(store: Store) -> list[Path]:
    return list(store.tmp_dir.iterdir()) if store.tmp_dir.is_dir() else []


def test_pinned_lfs_and_git_files_download_verify_and_are_not_fetched_twice(
    hub: HubState, store: Store, tmp_path: Path
) -> None:
    hub.add("org/tiny", "model.bin", WEIGHTS, lfs=True)
    hub.add("org/tiny", "config.json", CONFIG, lfs=False)
    registry = make_registry(
        tmp_path,
        {
            "ckpt/tiny-weights": file_record(hub_src("model.bin"), WEIGHTS, "checkpoint"),
            "ckpt/tiny-config": file_record(hub_src("config.json"), CONFIG),
        },
    )
    report = fetch_names(store, registry, registry.names())
    assert [r.outcome for r in report.results] == [Outcome.FETCHED, Outcome.FETCHED]
    assert report.downloaded_bytes == len(WEIGHTS) + len(CONFIG)
    assert all(Verifier(store, full=True).verify(r).ok for r in registry.records())
    # The LFS file went through the redirect to the CDN, which served the bytes.
    assert any(m == "GET" and p.startswith("/cdn/") for m, p, _ in hub.requests)

    before = len(hub.requests)
    again = fetch_names(store, registry, registry.names())
    assert [r.outcome for r in again.results] == [Outcome.PRESENT, Outcome.PRESENT]
    assert again.downloaded_bytes == 0 and len(hub.requests) == before


def test_dataset_repo_and_token_stays_on_the_hub(
    hub: HubState, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_loopbacktesttoken")
    hub.add("org/tiny", "clips/a.bin", WEIGHTS, repo_type="dataset")
    registry = make_registry(
        tmp_path, {"clips/a": file_record(hub_src("clips/a.bin", "dataset"), WEIGHTS, "video")}
    )
    assert fetch_names(store, registry, ["clips/a"]).results[0].outcome is Outcome.FETCHED
    resolve = [h for m, p, h in hub.requests if p.startswith("/datasets/org/tiny/resolve/")]
    cdn = [h for m, p, h in hub.requests if p.startswith("/cdn/")]
    assert resolve and resolve[0].get("authorization") == "Bearer hf_loopbacktesttoken"
    assert cdn and all("authorization" not in h for h in cdn)


def test_different_bytes_at_the_pinned_revision_are_refused_before_download(
    hub: HubState, store: Store, tmp_path: Path
) -> None:
    hub.add("org/tiny", "model.bin", WEIGHTS[::-1])
    registry = make_registry(
        tmp_path, {"ckpt/tiny": file_record(hub_src("model.bin"), WEIGHTS, "checkpoint")}
    )
    result = fetch_names(store, registry, ["ckpt/tiny"]).results[0]
    assert result.outcome is Outcome.FAILED
    assert "LFS sha256" in result.message and "nothing was downloaded" in result.message
    assert objects(store) == [] and leftovers(store) == []
    assert not any(p.startswith("/cdn/") for _, p, _ in hub.requests)


def test_another_size_at_the_pinned_revision_is_refused_before_download(
    hub: HubState, store: Store, tmp_path: Path
) -> None:
    hub.add("org/tiny", "model.bin", WEIGHTS + b"more")
    registry = make_registry(
        tmp_path, {"ckpt/tiny": file_record(hub_src("model.bin"), WEIGHTS, "checkpoint")}
    )
    result = fetch_names(store, registry, ["ckpt/tiny"]).results[0]
    assert result.outcome is Outcome.FAILED
    assert f"the server announces {len(WEIGHTS) + 4} bytes" in result.message
    assert "nothing was downloaded" in result.message
    assert objects(store) == [] and leftovers(store) == []
    assert not any(p.startswith("/cdn/") for _, p, _ in hub.requests)


def test_server_lying_about_the_digest_is_caught_after_download_and_nothing_is_stored(
    hub: HubState, store: Store, tmp_path: Path
) -> None:
    hub.add("org/tiny", "model.bin", WEIGHTS[::-1], fault="lie", announce=WEIGHTS)
    registry = make_registry(
        tmp_path, {"ckpt/tiny": file_record(hub_src("model.bin"), WEIGHTS, "checkpoint")}
    )
    report = fetch_names(store, registry, ["ckpt/tiny"])
    result = report.results[0]
    assert result.outcome is Outcome.FAILED
    assert "does not match the record" in result.message
    assert "nothing was stored" in result.message
    assert objects(store) == [] and leftovers(store) == []
    # Received whole and refused: counted as refused, not as downloaded.
    assert (report.downloads, report.downloaded_bytes) == (0, 0)
    assert (report.refused, report.refused_bytes) == (1, len(WEIGHTS))


@pytest.mark.parametrize("lfs", [True, False])
def test_an_answer_for_another_commit_is_refused_and_nothing_is_stored(
    hub: HubState, store: Store, tmp_path: Path, lfs: bool
) -> None:
    # The server serves the right bytes but says they are those of another commit.
    other = "f" * 40
    hub.answered_commit = other
    hub.add("org/tiny", "model.bin", WEIGHTS, lfs=lfs)
    registry = make_registry(
        tmp_path, {"ckpt/tiny": file_record(hub_src("model.bin"), WEIGHTS, "checkpoint")}
    )
    result = fetch_names(store, registry, ["ckpt/tiny"]).results[0]
    assert result.outcome is Outcome.FAILED
    assert f"answered for commit {other!r}, not the pinned {COMMIT}" in result.message
    assert "nothing was stored" in result.message
    assert objects(store) == [] and leftovers(store) == []
    assert [m for m, _, _ in hub.requests] == ["HEAD"]  # no body was requested


def test_moving_revision_is_refused_before_any_request(
    hub: HubState, store: Store, tmp_path: Path
) -> None:
    hub.add("org/tiny", "model.bin", WEIGHTS)
    registry = make_registry(
        tmp_path,
        {"ckpt/tiny": file_record(hub_src("model.bin", revision="main"), WEIGHTS, "checkpoint")},
    )
    result = fetch_names(store, registry, ["ckpt/tiny"]).results[0]
    assert result.outcome is Outcome.INVALID_RECORD
    assert "moving reference" in result.message
    # Even a record that skipped registry validation is refused by the source itself.
    valid = make_registry(
        tmp_path / "ok", {"ckpt/tiny": file_record(hub_src("model.bin"), WEIGHTS, "checkpoint")}
    ).get("ckpt/tiny")
    for moving in ("main", f"{COMMIT}-wip", f"{COMMIT}0"):  # a commit that goes on is no pin
        forged = dataclasses.replace(
            valid,
            source=dataclasses.replace(cast(HubSource, valid.source), revision=moving),
        )
        with pytest.raises(SourceError, match="not a full 40-hex commit"):
            hub_source.fetch(FetchContext(store, tmp_path), forged)
    assert hub.requests == []


def test_offline_mode_fails_clearly_without_a_request_and_serves_what_is_stored(
    hub: HubState, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub.add("org/tiny", "model.bin", WEIGHTS)
    registry = make_registry(
        tmp_path, {"ckpt/tiny": file_record(hub_src("model.bin"), WEIGHTS, "checkpoint")}
    )
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = fetch_names(store, registry, ["ckpt/tiny"]).results[0]
    assert result.outcome is Outcome.FAILED
    assert "offline mode is on" in result.message and hub.requests == []
    assert result.fix == "fixture-store fetch ckpt/tiny  (with network access)"

    monkeypatch.delenv("HF_HUB_OFFLINE")
    assert fetch_names(store, registry, ["ckpt/tiny"]).results[0].outcome is Outcome.FETCHED
    again = fetch_names(store, registry, ["ckpt/tiny"], offline=True).results[0]
    assert again.outcome is Outcome.PRESENT


def test_truncated_response_fails_and_stores_nothing(
    hub: HubState, store: Store, tmp_path: Path
) -> None:
    hub.add("org/tiny", "model.bin", WEIGHTS, fault="truncate")
    registry = make_registry(
        tmp_path, {"ckpt/tiny": file_record(hub_src("model.bin"), WEIGHTS, "checkpoint")}
    )
    result = fetch_names(store, registry, ["ckpt/tiny"]).results[0]
    assert result.outcome is Outcome.FAILED
    assert "download failed" in result.message and "nothing was stored" in result.message
    assert objects(store) == [] and leftovers(store) == []


@pytest.mark.parametrize("fault", ["hang", "hang_head"])
def test_hanging_server_times_out_with_a_clear_error(
    hub: HubState, store: Store, tmp_path: Path, fault: str
) -> None:
    hub.add("org/tiny", "model.bin", WEIGHTS, fault=fault)
    registry = make_registry(
        tmp_path, {"ckpt/tiny": file_record(hub_src("model.bin"), WEIGHTS, "checkpoint")}
    )
    started = time.monotonic()
    result = fetch_names(store, registry, ["ckpt/tiny"]).results[0]
    assert time.monotonic() - started < 60
    assert result.outcome is Outcome.FAILED
    assert "Timeout" in result.message
    assert "hub model org/tiny@0123456789ab:model.bin" in result.message
    assert result.fix is not None and "fixture-store fetch ckpt/tiny" in result.fix
    assert objects(store) == [] and leftovers(store) == []


def _fetch_under(store: Store, registry: Registry, policy: DownloadPolicy) -> tuple[str, float]:
    ctx = FetchContext(store, store.root, policy=policy)
    started = time.monotonic()
    with pytest.raises(SourceError) as caught:
        hub_source.fetch(ctx, registry.get("ckpt/tiny"))
    return str(caught.value), time.monotonic() - started


def test_a_trickling_body_is_cut_at_the_minimum_rate(
    hub: HubState, store: Store, tmp_path: Path
) -> None:
    """One byte every 50 ms: each read is in time, so only the minimum rate can stop it (the
    client alone would take 14 minutes for these 16 KiB)."""
    hub.add("org/tiny", "model.bin", WEIGHTS, fault="trickle")
    registry = make_registry(
        tmp_path, {"ckpt/tiny": file_record(hub_src("model.bin"), WEIGHTS, "checkpoint")}
    )
    message, took = _fetch_under(store, registry, DownloadPolicy(deadline=60, rate_window=0.5))
    assert took < 20, took
    assert "below the minimum rate" in message and "nothing was stored" in message
    assert "hub model org/tiny@0123456789ab:model.bin" in message
    assert "fixture-store fetch ckpt/tiny" in message and DEADLINE_ENV in message
    assert objects(store) == [] and leftovers(store) == []


def test_a_slow_body_is_bounded_by_the_deadline_across_its_retries(
    hub: HubState, store: Store, tmp_path: Path
) -> None:
    """A byte every 0.9 s: in time for every 1 s read, above a 1 B/s minimum rate, and the
    client's retries start afresh whenever a byte arrives; only the deadline can stop it."""
    hub.add("org/tiny", "model.bin", WEIGHTS, fault="trickle", trickle_s=0.9)
    registry = make_registry(
        tmp_path, {"ckpt/tiny": file_record(hub_src("model.bin"), WEIGHTS, "checkpoint")}
    )
    policy = DownloadPolicy(deadline=3, min_rate=1)  # the rate alone would never trip
    message, took = _fetch_under(store, registry, policy)
    assert took < 3 + 2 * huggingface_hub.constants.HF_HUB_DOWNLOAD_TIMEOUT + 1, took
    assert "deadline of 3s" in message and "nothing was stored" in message
    assert "hub model org/tiny@0123456789ab:model.bin" in message
    assert objects(store) == [] and leftovers(store) == []


def test_a_download_temp_file_is_never_made_through_a_link_planted_at_tmp(
    hub: HubState, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The download's temp file is created from the temp folder's descriptor (the path
    primitive): ``tmp/`` swapped for a link once the store's folders were checked, just before
    the temp file is made, is refused, and no byte lands where the link points."""
    import os
    import shutil

    hub.add("org/tiny", "model.bin", WEIGHTS, lfs=True)
    registry = make_registry(
        tmp_path, {"ckpt/tiny-weights": file_record(hub_src("model.bin"), WEIGHTS, "checkpoint")}
    )
    outside = tmp_path / "outside"
    temp_folder = Store.temp_folder

    def swap_then_name(self: Store) -> Path:  # the swap lands after every earlier check
        if not outside.exists():
            shutil.move(self.tmp_dir, outside)
            os.symlink(outside, self.tmp_dir)
        return temp_folder(self)

    monkeypatch.setattr(Store, "temp_folder", swap_then_name)
    written_outside: list[Path] = []
    download = hub_source._download

    def watched(*args: object, **kwargs: object) -> object:
        result = download(*args, **kwargs)  # type: ignore[arg-type]
        written_outside.extend(p for p in outside.rglob("*") if p.is_file())
        return result

    monkeypatch.setattr(hub_source, "_download", watched)
    with pytest.raises(StoreError) as info:
        fetch_names(store, registry, registry.names())
    assert str(store.tmp_dir) in info.value.message and "symbolic link" in info.value.message
    assert written_outside == [] and not [p for p in outside.rglob("*") if p.is_file()]
