"""push and pull through the folder remote: the objects records reference, verified on arrival."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fixture_store import registry as registry_mod
from fixture_store.objects.store import Store
from fixture_store.registry import Registry
from fixture_store.remotes.base import Retry, object_key
from fixture_store.remotes.folder import FolderRemote
from fixture_store.remotes.sync import Outcome, plan, pull, push
from fixture_store.verify import verify_names
from tests.support.cli import add_file_and_case

FAST = Retry(attempts=3, backoff=0.01, total=5.0)


def _setup(project: Path, tmp_path: Path) -> tuple[Registry, FolderRemote]:
    add_file_and_case(project)
    return registry_mod.load(project), FolderRemote("shared", tmp_path / "remote")


def _empty_store(tmp_path: Path) -> Store:
    return Store.at(tmp_path / "other-store").ensure()


def test_push_then_pull_into_an_empty_store_brings_every_referenced_object(
    project: Path, store: Store, tmp_path: Path
) -> None:
    registry, remote = _setup(project, tmp_path)
    the_plan = plan(registry, registry.names())
    pushed = push(store, registry, remote, the_plan, retry=FAST)
    assert [r.outcome for r in pushed.results] == [Outcome.PUSHED, Outcome.PUSHED]
    # fam/a: one object; fam/case: its member and its manifest
    assert pushed.moved_objects == len(the_plan.objects) == 3
    for digest in the_plan.objects.values():
        assert (remote.root / object_key(digest)).read_bytes() == store.object_path(
            digest
        ).read_bytes()
    other = _empty_store(tmp_path)
    pulled = pull(other, registry, remote, the_plan, retry=FAST)
    assert [r.outcome for r in pulled.results] == [Outcome.PULLED, Outcome.PULLED]
    assert all(r.ok for r in verify_names(other, registry, registry.names()))


def test_a_second_push_and_pull_move_nothing(project: Path, store: Store, tmp_path: Path) -> None:
    registry, remote = _setup(project, tmp_path)
    the_plan = plan(registry, registry.names())
    push(store, registry, remote, the_plan, retry=FAST)
    again = push(store, registry, remote, the_plan, retry=FAST)
    assert again.moved_objects == 0
    assert {r.outcome for r in again.results} == {Outcome.PRESENT}
    assert pull(store, registry, remote, the_plan, retry=FAST).moved_objects == 0


def _replace_on_remote(key_of: Path, data: bytes) -> None:
    os.chmod(key_of, 0o644)
    key_of.write_bytes(data)


def test_pull_refuses_other_bytes_and_stores_nothing(
    project: Path, store: Store, tmp_path: Path
) -> None:
    registry, remote = _setup(project, tmp_path)
    the_plan = plan(registry, ["fam/a"])
    push(store, registry, remote, the_plan, retry=FAST)
    (digest,) = the_plan.objects.values()
    original = store.object_path(digest).read_bytes()
    _replace_on_remote(remote.path(digest), b"X" + original[1:])  # same size
    other = _empty_store(tmp_path)
    (result,) = pull(other, registry, remote, the_plan, retry=FAST).results
    assert result.outcome is Outcome.FAILED
    assert result.name == "fam/a"
    assert "shared" in result.message and "other bytes" in result.message
    assert result.fix is not None and "push" in result.fix
    assert not other.has(digest)
    assert list(other.tmp_dir.iterdir()) == []


def test_pull_of_a_short_object_retries_then_fails_with_nothing_stored(
    project: Path, store: Store, tmp_path: Path
) -> None:
    registry, remote = _setup(project, tmp_path)
    the_plan = plan(registry, ["fam/a"])
    push(store, registry, remote, the_plan, retry=FAST)
    (digest,) = the_plan.objects.values()
    _replace_on_remote(remote.path(digest), store.object_path(digest).read_bytes()[:-7])
    other = _empty_store(tmp_path)
    (result,) = pull(other, registry, remote, the_plan, retry=FAST).results
    assert result.outcome is Outcome.FAILED
    assert "ended after" in result.message and "3 attempts" in result.message
    assert not other.object_path(digest).exists()


@pytest.mark.usefixtures("store")
def test_pull_of_an_object_the_remote_lacks_is_missing_with_the_push_fix(
    project: Path, tmp_path: Path
) -> None:
    registry, remote = _setup(project, tmp_path)
    (result,) = pull(_empty_store(tmp_path), registry, remote, plan(registry, ["fam/a"])).results
    assert result.outcome is Outcome.MISSING
    assert result.fix is not None and "fixture-store push fam/a --remote shared" in result.fix


def test_push_sends_nothing_for_an_object_that_does_not_verify(
    project: Path, store: Store, tmp_path: Path
) -> None:
    registry, remote = _setup(project, tmp_path)
    the_plan = plan(registry, ["fam/a"])
    (digest,) = the_plan.objects.values()
    path = store.object_path(digest)
    os.chmod(path, 0o644)
    path.write_bytes(b"Y" * digest.size)
    (result,) = push(store, registry, remote, the_plan, retry=FAST).results
    assert result.outcome is Outcome.MISSING
    assert result.fix == "fixture-store fetch fam/a"
    assert not remote.path(digest).exists()


def test_push_leaves_a_remote_object_of_another_size_as_it_is(
    project: Path, store: Store, tmp_path: Path
) -> None:
    registry, remote = _setup(project, tmp_path)
    the_plan = plan(registry, ["fam/a"])
    (digest,) = the_plan.objects.values()
    remote.path(digest).parent.mkdir(parents=True)
    remote.path(digest).write_bytes(b"short")
    (result,) = push(store, registry, remote, the_plan, retry=FAST).results
    assert result.outcome is Outcome.FAILED
    assert "write-once" in result.message
    assert remote.path(digest).read_bytes() == b"short"
