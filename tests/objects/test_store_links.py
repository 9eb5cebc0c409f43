"""The store is plain folders (DESIGN 11): no code path follows a link out of it, and deletion
never descends through one. The root itself may be a link the user chose; it is resolved once."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from fixture_store.errors import StoreError
from fixture_store.objects import digests, fsutil
from fixture_store.objects.store import Store


def _user_folder(tmp_path: Path) -> Path:
    user = tmp_path / "user"
    user.mkdir(exist_ok=True)
    (user / "notes.txt").write_text("the user's own file")
    return user


def _replace_with_link(path: Path, target: Path) -> None:
    fsutil.remove_tree(path)
    path.symlink_to(target, target_is_directory=True)


def _assert_refused(info: pytest.ExceptionInfo[StoreError], link: Path) -> None:
    assert str(link) in info.value.message and "plain folders" in info.value.message
    assert info.value.fix is not None and f"remove the link {link}" in info.value.fix


@pytest.mark.parametrize("folder", ["tmp", "objects", "objects/sha256", "locks", "state"])
def test_a_store_folder_that_is_a_link_is_refused_before_any_write(
    tmp_path: Path, folder: str
) -> None:
    store = Store.at(tmp_path / "store").ensure()
    user = _user_folder(tmp_path)
    _replace_with_link(store.root / folder, user)
    with pytest.raises(StoreError) as info:
        store.put_bytes(b"payload")
    _assert_refused(info, store.root / folder)
    assert sorted(p.name for p in user.iterdir()) == ["notes.txt"]  # nothing written through it


def test_a_shard_that_is_a_link_is_refused(tmp_path: Path) -> None:
    store = Store.at(tmp_path / "store").ensure()
    user = _user_folder(tmp_path)
    d = digests.of_bytes(b"payload")
    shard = store.objects_dir / d.hex[:2]
    shard.symlink_to(user, target_is_directory=True)
    with pytest.raises(StoreError) as info:
        store.put_bytes(b"payload")
    _assert_refused(info, shard)
    with pytest.raises(StoreError):
        list(store.iter_objects())
    assert sorted(p.name for p in user.iterdir()) == ["notes.txt"]


def test_a_file_where_a_store_folder_belongs_is_refused(tmp_path: Path) -> None:
    store = Store.at(tmp_path / "store").ensure()
    fsutil.remove_tree(store.tmp_dir)
    store.tmp_dir.write_text("not a folder")
    with pytest.raises(StoreError, match="not a folder"):
        store.put_bytes(b"payload")


def test_the_store_root_may_be_a_link_and_is_resolved_once(tmp_path: Path) -> None:
    real = tmp_path / "real-store"
    real.mkdir()
    (tmp_path / "chosen").symlink_to(real, target_is_directory=True)
    store = Store.at(tmp_path / "chosen")
    assert store.root == real.resolve()
    d = store.put_bytes(b"through the root link")
    assert store.has(d) and store.object_path(d).is_relative_to(real.resolve())


def test_has_does_not_trust_an_object_file_that_is_a_link(tmp_path: Path) -> None:
    store = Store.at(tmp_path / "store").ensure()
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"payload")
    d = digests.of_bytes(b"payload")
    path = store.object_path(d)
    path.parent.mkdir(parents=True)
    path.symlink_to(outside)
    assert not store.has(d)


def test_a_write_replaces_an_object_file_that_is_a_link_never_its_target(tmp_path: Path) -> None:
    store = Store.at(tmp_path / "store").ensure()
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"payload")
    d = digests.of_bytes(b"payload")
    path = store.object_path(d)
    path.parent.mkdir(parents=True)
    path.symlink_to(outside)
    store.put_bytes(b"payload", d)
    assert not path.is_symlink() and path.read_bytes() == b"payload" and store.has(d)
    assert outside.read_bytes() == b"payload" and os.access(outside, os.W_OK)


def test_clean_tmp_removes_a_link_but_never_what_it_points_to(tmp_path: Path) -> None:
    store = Store.at(tmp_path / "store").ensure()
    user = _user_folder(tmp_path)
    link = store.tmp_dir / "old-link"
    link.symlink_to(user, target_is_directory=True)
    old = time.time() - 7200
    os.utime(user / "notes.txt", (old, old))
    os.utime(link, (old, old), follow_symlinks=False)
    assert store.clean_tmp() == 1
    assert not os.path.lexists(link) and (user / "notes.txt").exists()


def test_remove_tree_of_a_link_removes_only_the_link(tmp_path: Path) -> None:
    user = _user_folder(tmp_path)
    os.chmod(user / "notes.txt", 0o600)
    os.chmod(user, 0o700)
    link = tmp_path / "link"
    link.symlink_to(user, target_is_directory=True)
    fsutil.remove_tree(link)
    assert not os.path.lexists(link)
    assert (user / "notes.txt").exists()
    assert (user.stat().st_mode & 0o777, (user / "notes.txt").stat().st_mode & 0o777) == (
        0o700,
        0o600,
    )


def test_remove_tree_never_descends_through_a_link_inside(tmp_path: Path) -> None:
    user = _user_folder(tmp_path)
    os.chmod(user / "notes.txt", 0o600)
    folder = tmp_path / "checkout"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "a.bin").write_bytes(b"a")
    (folder / "sub" / "to-user").symlink_to(user, target_is_directory=True)
    (folder / "sub" / "to-notes").symlink_to(user / "notes.txt")
    os.chmod(folder / "sub", 0o555)
    fsutil.remove_tree(folder)
    assert not folder.exists()
    assert (user / "notes.txt").read_text() == "the user's own file"
    assert (user / "notes.txt").stat().st_mode & 0o777 == 0o600
