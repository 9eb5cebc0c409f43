"""The one path primitive (DESIGN 13): folders and files opened component by component from a
trusted directory, refusing links and non-regular files at every step."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fixture_store.errors import StoreError, UsageError
from fixture_store.objects import anchored, fsutil
from fixture_store.objects.store import Store


def _outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir(exist_ok=True)
    (out / "victim").write_bytes(b"the user's own file")
    return out


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f").write_bytes(b"inside")
    return root


@pytest.mark.parametrize("level", ["a", "a/b"])
def test_a_link_at_any_level_is_refused_never_followed(tmp_path: Path, level: str) -> None:
    root, out = _tree(tmp_path), _outside(tmp_path)
    fsutil.remove_tree(root / level)
    (root / level).symlink_to(out, target_is_directory=True)
    with anchored.Folder.root(root) as base:
        with pytest.raises(StoreError, match="symbolic link") as info:
            base.folder("a", "b", create=True)
        assert str(root / level) in info.value.message
        with pytest.raises(StoreError, match="symbolic link"):
            base.folder("a", "b")
    assert sorted(p.name for p in out.iterdir()) == ["victim"]


def test_a_file_where_a_folder_belongs_is_refused(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    with anchored.Folder.root(root) as base, pytest.raises(StoreError, match="not a folder"):
        base.folder("a", "b", "f")


def test_missing_folders_are_made_or_reported_missing(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    with anchored.Folder.root(root) as base:
        assert base.find("x", "y") is None
        with pytest.raises(FileNotFoundError):
            base.folder("x")
        with base.folder("x", "y", create=True) as made:
            made.write_atomically("z", b"new")
    assert (root / "x" / "y" / "z").read_bytes() == b"new"


@pytest.mark.parametrize("kind", ["link", "fifo", "folder"])
def test_open_refuses_what_is_not_a_regular_file(tmp_path: Path, kind: str) -> None:
    root, out = _tree(tmp_path), _outside(tmp_path)
    target = root / "a" / "g"
    if kind == "link":
        target.symlink_to(out / "victim")
    elif kind == "fifo":
        os.mkfifo(target)  # no writer: a blocking open would wait forever
    else:
        target.mkdir()
    with anchored.opened(root, "a") as folder, pytest.raises(StoreError) as info:
        folder.open("g")
    assert str(target) in info.value.message
    assert {"link": "symbolic link", "fifo": "FIFO", "folder": "a folder"}[kind] in str(info.value)


def test_an_opened_file_reads_blocking(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    with anchored.opened(root, "a", "b") as folder, folder.open("f") as f:
        assert os.get_blocking(f.fileno())
        assert f.read() == b"inside"


def test_write_atomically_replaces_a_link_never_its_target(tmp_path: Path) -> None:
    root, out = _tree(tmp_path), _outside(tmp_path)
    (root / "a" / "w").symlink_to(out / "victim")
    with anchored.opened(root, "a") as folder:
        folder.write_atomically("w", b"written")
    assert (out / "victim").read_bytes() == b"the user's own file"
    assert not (root / "a" / "w").is_symlink() and (root / "a" / "w").read_bytes() == b"written"
    assert sorted(p.name for p in (root / "a").iterdir()) == ["b", "w"]  # no temp file left


def test_write_atomically_refuses_a_folder_at_the_name(tmp_path: Path) -> None:
    """A folder where a file belongs (a dump's ``<stem>.candidate.npz`` made a folder) was an
    ``IsADirectoryError`` traceback: it is the caller's refusal, naming the path, nothing left."""
    root = _tree(tmp_path)

    def refuse(path: str, what: str) -> UsageError:
        return UsageError(f"mine: {path} is {what}")

    with anchored.Folder.root(root, refuse=refuse) as base, pytest.raises(UsageError) as info:
        base.write_atomically("a", b"written")
    assert info.value.message == f"mine: {root / 'a'} is a folder"
    assert sorted(p.name for p in root.iterdir()) == ["a"]  # no temp file left
    assert sorted(p.name for p in (root / "a").iterdir()) == ["b"]


def test_create_never_opens_an_existing_name_or_a_link(tmp_path: Path) -> None:
    root, out = _tree(tmp_path), _outside(tmp_path)
    (root / "a" / "l").symlink_to(out / "new")
    with anchored.opened(root, "a") as folder:
        with pytest.raises(FileExistsError):
            folder.create("l")
        with pytest.raises(FileExistsError):
            folder.create("b")
    assert not (out / "new").exists()


def test_remove_tree_never_follows_a_link_inside(tmp_path: Path) -> None:
    root, out = _tree(tmp_path), _outside(tmp_path)
    (root / "a" / "b" / "l").symlink_to(out, target_is_directory=True)
    (root / "a" / "b" / "f").chmod(0o444)
    (root / "a" / "b").chmod(0o555)
    with anchored.Folder.root(root) as base:
        base.remove_tree("a")
    assert not (root / "a").exists()
    assert sorted(p.name for p in out.iterdir()) == ["victim"]
    assert (out / "victim").stat().st_mode & 0o777 != 0o700


def test_a_refusal_is_the_callers_error(tmp_path: Path) -> None:
    root, out = _tree(tmp_path), _outside(tmp_path)
    (root / "l").symlink_to(out, target_is_directory=True)

    def refuse(path: str, what: str) -> UsageError:
        return UsageError(f"mine: {path} is {what}")

    with anchored.Folder.root(root, refuse=refuse) as base, pytest.raises(UsageError, match="mine"):
        base.folder("l")


def test_components_are_single_names(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    with anchored.Folder.root(root) as base:
        for bad in ("..", ".", "", "a/b"):
            with pytest.raises(ValueError, match="one path component"):
                base.folder(bad)


@pytest.mark.parametrize("level", ["tmp", "objects", "objects/sha256", "shard"])
def test_a_store_link_planted_after_its_check_is_still_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, level: str
) -> None:
    """A check by name and a write by name race: a link planted between them was followed. The
    write itself now opens every folder without following a link, so a check that passed
    (here: one that always says "plain", as a lost race does) protects nothing it has to."""
    from fixture_store.objects import digests

    store = Store.at(tmp_path / "store").ensure()
    out = _outside(tmp_path)
    shard = digests.of_bytes(b"payload").hex[:2]
    folder = store.objects_dir / shard if level == "shard" else store.root / level
    if folder.exists():
        fsutil.remove_tree(folder)
    folder.symlink_to(out, target_is_directory=True)
    monkeypatch.setattr(Store, "plain", lambda *_, **__: True)
    with pytest.raises(StoreError, match="symbolic link"):
        store.put_bytes(b"payload")
    assert sorted(p.name for p in out.iterdir()) == ["victim"]


def test_append_never_writes_through_a_link_at_its_name(tmp_path: Path) -> None:
    """A link at the name an append targets (the parity run log) is refused by the append
    itself, whatever its caller checked before: the file it points at is never written."""
    root = tmp_path / "root"
    root.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(b"")
    (root / "log").symlink_to(elsewhere)
    with anchored.Folder.root(root) as base, pytest.raises(StoreError, match="symbolic link"):
        base.append("log", b"a line\n")
    assert elsewhere.read_bytes() == b""
