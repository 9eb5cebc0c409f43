"""fetch tries configured remotes before a record's pinned source; the record stays the truth."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fixture_store import registry as registry_mod
from fixture_store.objects.store import Store
from fixture_store.remotes.folder import FolderRemote
from fixture_store.remotes.sync import plan, push
from tests.support.cli import add_file_and_case, run


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
    push(store, registry, remote, plan(registry, registry.names()))
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
