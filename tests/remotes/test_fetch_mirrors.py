"""fetch tries configured remotes before a record's pinned source; the record stays the truth."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fixture_store import registry as registry_mod
from fixture_store.objects.store import Store
from fixture_store.remotes.folder import FolderRemote
from fixture_store.remotes.packs import ONE_PER_KEY
from fixture_store.remotes.sync import plan, push
from tests.support.cli import add_file_and_case, run
from tests.support.s3server import FaultProxy


@pytest.fixture
def shared(
    project: Path,
    store: Store,
    tmp_path: Path,
    isolated_config: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> FolderRemote:
    """fam/a and fam/case pushed to a default folder remote; then the local copies of their
    pinned (local) sources are gone and the store is empty: only the remote has the bytes."""
    add_file_and_case(project)
    registry = registry_mod.load(project)
    remote = FolderRemote("shared", tmp_path / "remote")
    push(store, registry, remote, plan(registry, registry.names()), packing=ONE_PER_KEY)
    isolated_config.write_text(
        f'default-remote = "shared"\n[remotes.shared]\nurl = "{remote.root}"\n'
    )
    monkeypatch.setenv("FIXTURE_STORE_DIR", str(tmp_path / "empty-store"))
    return remote


def _move_sources(project: Path) -> None:
    (project / "data").rename(project / "moved")


def test_fetch_takes_the_bytes_from_the_default_remote(shared: FolderRemote, project: Path) -> None:
    _move_sources(project)
    code, out, _ = run("fetch", "--all", "--json")
    assert code == 0
    doc = json.loads(out)
    assert {r["outcome"] for r in doc["results"]} == {"fetched"}
    assert {r["source"] for r in doc["results"]} == {f"remote shared ({shared.root})"}
    assert run("verify")[0] == 0


@pytest.mark.usefixtures("shared")
def test_no_remote_goes_to_the_pinned_source_only(project: Path) -> None:
    _move_sources(project)
    code, _, err = run("fetch", "--all", "--no-remote")
    assert code == 1 and "failed: fam/a" in err


def test_a_remote_with_other_bytes_falls_back_to_the_pinned_source(shared: FolderRemote) -> None:
    for path in (shared.root / "objects").rglob("*"):
        if path.is_file():
            os.chmod(path, 0o644)
            path.write_bytes(b"\0" * path.stat().st_size)
    code, out, _ = run("fetch", "fam/a", "--json")
    assert code == 0
    (result,) = json.loads(out)["results"]
    assert result["outcome"] == "fetched" and result["source"].startswith("local")


def test_a_remote_that_lacks_the_record_is_no_warning(shared: FolderRemote) -> None:
    """A cache that lacks an object is its normal answer: the pinned source serves the record
    with no warning (a project remote holding a few records would warn for every other one)."""
    for path in (shared.root / "objects").rglob("*"):
        if path.is_file():
            path.unlink()
    code, out, err = run("fetch", "fam/a", "--json")
    assert code == 0, err
    (result,) = json.loads(out)["results"]
    assert result["outcome"] == "fetched" and result["source"].startswith("local")
    assert result["message"] == "" and "warning" not in err


def test_when_both_fail_the_message_says_what_the_remote_answered(
    shared: FolderRemote, project: Path
) -> None:
    _move_sources(project)
    for path in (shared.root / "objects").rglob("*"):
        if path.is_file():
            path.unlink()
    code, _, err = run("fetch", "fam/a")
    assert code == 1 and "remotes tried first" in err and "does not hold" in err


@pytest.mark.usefixtures("shared")
def test_remote_and_no_remote_together_is_a_usage_error() -> None:
    assert run("fetch", "--all", "--remote", "shared", "--no-remote")[0] == 2


# -- a remote that fails in any way is a warning: the pinned source serves the record -----------


@pytest.fixture
def s3_shared(
    project: Path,
    tmp_path: Path,
    proxy: FaultProxy,
    bucket: str,
    monkeypatch: pytest.MonkeyPatch,
) -> FaultProxy:
    """fam/a and fam/case pushed to an S3 bucket, the default remote reached through the fault
    proxy; the store is empty, the pinned (local) sources are still there."""
    add_file_and_case(project)
    url = f"s3://{bucket}/x"
    assert run("remote", "add", "team", url, "--endpoint-url", proxy.url, "--default")[0] == 0
    assert run("push", "--all")[0] == 0
    monkeypatch.setenv("FIXTURE_STORE_DIR", str(tmp_path / "empty-store"))
    return proxy


def test_an_s3_remote_dripping_its_headers_is_left_at_the_deadline_for_the_pinned_source(
    s3_shared: FaultProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    s3_shared.faults.drip_headers = 0.05  # the headers alone take half a minute
    monkeypatch.setenv("FIXTURE_STORE_DOWNLOAD_DEADLINE", "1")
    code, out, err = run("fetch", "fam/a", "--json")
    assert code == 0, err
    (result,) = json.loads(out)["results"]
    assert result["outcome"] == "fetched" and result["source"].startswith("local")
    assert "warning: fam/a: remotes tried first" in err and "deadline of 1s" in err
    assert run("verify", "fam/a")[0] == 0


def test_an_s3_remote_answering_a_huge_error_body_is_left_for_the_pinned_source(
    s3_shared: FaultProxy,
) -> None:
    s3_shared.faults.errors, s3_shared.faults.error_size = 100, 64 * 1024 * 1024
    code, out, err = run("fetch", "fam/a", "--json")
    assert code == 0, err
    (result,) = json.loads(out)["results"]
    assert result["outcome"] == "fetched" and result["source"].startswith("local")
    assert "answered 500" in err
    assert s3_shared.faults.sent < 2 * 16 * 1024 * 1024  # never read past its first KiB


@pytest.mark.parametrize("plant", ["folder", "link", "fifo"])
def test_a_folder_remote_with_no_object_at_its_key_is_left_for_the_pinned_source(
    shared: FolderRemote, project: Path, plant: str
) -> None:
    registry = registry_mod.load(project)
    (digest,) = plan(registry, ["fam/a"]).objects.values()
    path = shared.path(digest)
    os.chmod(path, 0o644)
    path.unlink()
    if plant == "folder":
        path.mkdir()
    elif plant == "fifo":
        os.mkfifo(path)  # no writer: opening it for reading would wait forever
    else:
        path.symlink_to(project / "data" / "a.bin")
    code, out, err = run("fetch", "fam/a", "--json")
    assert code == 0, err
    assert "Traceback" not in err
    (result,) = json.loads(out)["results"]
    assert result["outcome"] == "fetched" and result["source"].startswith("local")
