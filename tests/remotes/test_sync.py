"""push and pull through the folder remote: the objects records reference, verified on arrival."""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import sys
from pathlib import Path

import pytest

from fixture_store import registry as registry_mod
from fixture_store.objects import fsutil
from fixture_store.objects.digests import Digest
from fixture_store.objects.store import Store
from fixture_store.registry import Registry
from fixture_store.remotes.base import Retry, object_key
from fixture_store.remotes.folder import FolderRemote
from fixture_store.remotes.mirrors import Mirrors
from fixture_store.remotes.packs import ONE_PER_KEY
from fixture_store.remotes.sync import Batching, Outcome, plan, pull, push
from fixture_store.verify import verify_names
from tests.support.cli import add_file_and_case, run

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
    pushed = push(store, registry, remote, the_plan, retry=FAST, packing=ONE_PER_KEY)
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
    push(store, registry, remote, the_plan, retry=FAST, packing=ONE_PER_KEY)
    again = push(store, registry, remote, the_plan, retry=FAST, packing=ONE_PER_KEY)
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
    push(store, registry, remote, the_plan, retry=FAST, packing=ONE_PER_KEY)
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
    push(store, registry, remote, the_plan, retry=FAST, packing=ONE_PER_KEY)
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
    remote.root.mkdir()
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
    (result,) = push(store, registry, remote, the_plan, retry=FAST, packing=ONE_PER_KEY).results
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
    (result,) = push(store, registry, remote, the_plan, retry=FAST, packing=ONE_PER_KEY).results
    assert result.outcome is Outcome.FAILED
    assert "write-once" in result.message
    assert remote.path(digest).read_bytes() == b"short"


def _many(project: Path, count: int, seed: int = 3) -> Registry:
    """``fam/many``: a tree of ``count`` random members (its objects: the members and its
    manifest), added through the CLI."""
    folder = project / "data" / "many"
    folder.mkdir(parents=True)
    rng = random.Random(seed)
    for i in range(count):
        (folder / f"m{i:03d}.bin").write_bytes(rng.randbytes(64 + i))
    assert run("add", "data/many", "--name", "fam/many", "--kind", "tree")[0] == 0
    return registry_mod.load(project)


def test_pull_publishes_a_batch_at_a_time_and_no_object_before_its_batch(
    project: Path, store: Store, tmp_path: Path
) -> None:
    registry = _many(project, 7)
    remote = FolderRemote("shared", tmp_path / "remote")
    the_plan = plan(registry, ["fam/many"])
    push(store, registry, remote, the_plan, retry=FAST, packing=ONE_PER_KEY)
    other = _empty_store(tmp_path)
    every = list(the_plan.objects.values())
    visible: list[int] = []

    def arrived(_digest: Digest) -> None:  # called as each object's transfer is done
        visible.append(sum(other.has(d) for d in every))

    report = pull(
        other, registry, remote, the_plan, retry=FAST, on_object=arrived, batching=Batching(3)
    )
    assert [r.outcome for r in report.results] == [Outcome.PULLED]
    assert len(every) == 8
    assert visible == [0, 0, 0, 3, 3, 3, 6, 6]  # the last two with the final publish
    assert all(r.ok for r in verify_names(other, registry, ["fam/many"]))
    assert list(other.tmp_dir.iterdir()) == []


def test_a_pulled_batch_is_synced_at_once_before_any_of_it_is_visible(
    project: Path, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DESIGN 4 for pull: a batch's bytes are made durable (one syncfs) while none of it is
    visible, then its renames (one more), instead of two fsyncs per object."""
    registry = _many(project, 40)
    remote = FolderRemote("shared", tmp_path / "remote")
    the_plan = plan(registry, ["fam/many"])
    push(store, registry, remote, the_plan, retry=FAST, packing=ONE_PER_KEY)
    other = _empty_store(tmp_path)
    seen: list[tuple[str, int]] = []
    real_sync_all, real_fsync = fsutil.SyncBatch.sync_all, fsutil.fsync_path

    def sync_all(self: fsutil.SyncBatch) -> None:
        seen.append(("syncfs", len(list(other.iter_objects()))))
        real_sync_all(self)

    def fsync_path(path: Path) -> None:
        kind = "folder" if path.is_dir() else "file"
        seen.append((f"fsync {kind}", len(list(other.iter_objects()))))
        real_fsync(path)

    monkeypatch.setattr(fsutil.SyncBatch, "sync_all", sync_all)
    monkeypatch.setattr(fsutil, "fsync_path", fsync_path)
    (result,) = pull(other, registry, remote, the_plan, retry=FAST).results
    assert result.outcome is Outcome.PULLED
    assert len(list(other.iter_objects())) == len(the_plan.objects) == 41
    data_syncs = [n for what, n in seen if what in ("syncfs", "fsync file")]
    assert data_syncs and data_syncs[0] == 0, seen  # synced while nothing was visible yet
    assert seen[-1][0] in ("syncfs", "fsync folder"), seen  # the renames were synced last
    if sys.platform.startswith("linux"):
        assert [what for what, _ in seen] == ["syncfs", "syncfs"], seen  # bytes, then renames


def test_a_batch_that_cannot_be_published_fails_its_artifacts_and_keeps_earlier_ones(
    project: Path, store: Store, tmp_path: Path
) -> None:
    names = []
    (project / "data").mkdir()
    for i in range(6):
        (project / "data" / f"f{i}.bin").write_bytes(f"file {i}\n".encode() * (i + 1))
        names.append(f"fam/f{i}")
        assert run("add", f"data/f{i}.bin", "--name", names[-1], "--kind", "fixture")[0] == 0
    registry = registry_mod.load(project)
    remote = FolderRemote("shared", tmp_path / "remote")
    the_plan = plan(registry, names)
    push(store, registry, remote, the_plan, retry=FAST, packing=ONE_PER_KEY)
    other = _empty_store(tmp_path)
    blocker = other.object_path(the_plan.wants["fam/f4"][0])
    (blocker / "stray").mkdir(parents=True)  # the store is damaged where f4's object belongs
    report = pull(other, registry, remote, the_plan, retry=FAST, batching=Batching(2))
    outcomes = {r.name: r.outcome for r in report.results}
    assert outcomes == {
        **dict.fromkeys(names[:4], Outcome.PULLED),
        "fam/f4": Outcome.FAILED,
        "fam/f5": Outcome.FAILED,  # published with f4, in the batch that failed
    }
    failed = next(r for r in report.results if r.name == "fam/f4")
    assert "I/O error in the store" in failed.message and "Is a directory" in failed.message
    assert failed.fix is not None and str(blocker) in failed.fix
    assert all(r.ok for r in verify_names(other, registry, names[:4]))
    for hexpart, path in other.iter_objects():  # whatever is visible is whole
        if path == blocker:
            continue
        assert hashlib.sha256(path.read_bytes()).hexdigest() == hexpart
    assert list(other.tmp_dir.iterdir()) == []
    shutil.rmtree(blocker)
    again = pull(other, registry, remote, the_plan, retry=FAST, batching=Batching(2))
    assert all(r.ok for r in again.results)
    assert all(r.ok for r in verify_names(other, registry, names))


def test_a_remote_failing_with_an_error_of_no_known_kind_leaves_the_record_to_its_source(
    project: Path, store: Store, tmp_path: Path
) -> None:
    """A remote is a shortcut: whatever it fails with (here the file system's ValueError for a
    root holding a NUL, not a remote error), fetch's mirrors report it and stop, so the record's
    pinned source is tried next."""
    registry, good = _setup(project, tmp_path)
    push(store, registry, good, plan(registry, ["fam/a"]), packing=ONE_PER_KEY)
    broken = FolderRemote("broken", tmp_path / "re\0mote")
    mirrors = Mirrors(_empty_store(tmp_path), [broken, good])
    served, tried, failed = mirrors.pull(registry.get("fam/a"), lambda _d: True, lambda _n: None)
    assert served is good
    assert tried == failed == [f"remote {broken.label}: ValueError: embedded null byte"]
