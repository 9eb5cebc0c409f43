"""Garbage collection: a dry run by default, refused while a record is invalid."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from fixture_store import gc, ingest
from fixture_store import registry as registry_mod
from fixture_store.errors import StoreError, UsageError
from fixture_store.objects import fsutil
from fixture_store.objects.store import Store


def test_sweep_is_a_dry_run_unless_asked_to_delete(project: Path, store: Store) -> None:
    (project / "a.bin").write_bytes(b"kept")
    ingest.add(store, registry_mod.load(project), project / "a.bin", name="fam/a", kind="fixture")
    orphan = store.put_bytes(b"orphan")
    reg = registry_mod.load(project)
    dry = gc.sweep(store, reg, delete=False)
    assert [g.hex for g in dry.garbage] == [orphan.hex] and dry.size == 6 and dry.removed == 0
    assert store.has(orphan)
    done = gc.sweep(store, reg, delete=True)
    assert done.removed == 1 and not store.has(orphan)
    assert gc.sweep(store, reg, delete=True).garbage == []


def test_sweep_refuses_to_delete_while_a_record_is_invalid(project: Path, store: Store) -> None:
    (project / "provenance" / "fam.json").write_text(
        '{"format_version": 1, "records": {"fam/x": {"kind": "fixture"}}}'
    )
    orphan = store.put_bytes(b"orphan")
    reg = registry_mod.load(project)
    assert dict(reg.invalid())
    assert gc.sweep(store, reg, delete=False).garbage  # a dry run still lists
    with pytest.raises(UsageError, match="refusing to delete"):
        gc.sweep(store, reg, delete=True)
    assert store.has(orphan)


def _old(path: Path) -> None:
    old = time.time() - 7200
    os.utime(path, (old, old), follow_symlinks=False)


def test_gc_refuses_a_tmp_folder_that_is_a_link_and_deletes_nothing_through_it(
    project: Path, store: Store, tmp_path: Path
) -> None:
    user = tmp_path / "user"
    user.mkdir()
    (user / "thesis.tex").write_text("months of work")
    _old(user / "thesis.tex")
    orphan = store.put_bytes(b"orphan")
    fsutil.remove_tree(store.tmp_dir)
    store.tmp_dir.symlink_to(user, target_is_directory=True)
    with pytest.raises(StoreError, match="plain folders") as info:
        gc.sweep(store, registry_mod.load(project), delete=True)
    assert str(store.tmp_dir) in info.value.message
    assert (user / "thesis.tex").read_text() == "months of work"
    assert store.has(orphan)  # refused before anything was deleted


def test_gc_refuses_a_store_with_any_linked_folder_before_deleting_anything(
    project: Path, store: Store, tmp_path: Path
) -> None:
    user = tmp_path / "user"
    user.mkdir()
    orphan = store.put_bytes(b"orphan")
    (store.root / "trees").symlink_to(user, target_is_directory=True)  # not a folder gc writes
    with pytest.raises(StoreError, match="plain folders"):
        gc.sweep(store, registry_mod.load(project), delete=True)
    assert store.has(orphan)  # the whole layout is checked before anything is deleted


def test_gc_refuses_a_shard_that_is_a_link_and_deletes_nothing_through_it(
    project: Path, store: Store, tmp_path: Path
) -> None:
    user = tmp_path / "user"
    user.mkdir()
    victim = user / ("0" * 62)  # named like an object, but the user's
    victim.write_text("keep me")
    (store.objects_dir / "ab").symlink_to(user, target_is_directory=True)
    reg = registry_mod.load(project)
    with pytest.raises(StoreError, match="plain folders") as info:
        gc.sweep(store, reg, delete=True)
    assert str(store.objects_dir / "ab") in info.value.message
    with pytest.raises(StoreError):
        gc.sweep(store, reg, delete=False)
    assert victim.read_text() == "keep me"


def test_gc_never_trusts_an_object_file_that_is_a_link(
    project: Path, store: Store, tmp_path: Path
) -> None:
    (project / "a.bin").write_bytes(b"kept")
    ingest.add(store, registry_mod.load(project), project / "a.bin", name="fam/a", kind="fixture")
    reg = registry_mod.load(project)
    digest = reg.get("fam/a").object
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"kept")
    path = store.object_path(digest)
    os.chmod(path, 0o644)
    path.unlink()
    path.symlink_to(outside)
    dry = gc.sweep(store, reg, delete=False)
    # a link is not an object, referenced or not
    assert [g.hex for g in dry.garbage] == [digest.hex]
    done = gc.sweep(store, reg, delete=True)
    assert done.removed == 1 and not os.path.lexists(path)
    assert outside.read_bytes() == b"kept"
