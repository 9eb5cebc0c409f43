"""The local source: files and folders inside the project, verified like any other source."""

from __future__ import annotations

from pathlib import Path

from fixture_store import registry as registry_mod
from fixture_store.fetch import Outcome, fetch_names
from fixture_store.objects import trees
from fixture_store.objects.store import Store
from fixture_store.sources.local import orphans
from tests.support.fetchutil import file_record, make_registry, online_env  # noqa: F401 - autouse


def test_local_file_and_folder_are_fetched_and_verified(tmp_path: Path) -> None:
    root = tmp_path / "p"
    (root / "data" / "case" / "sub").mkdir(parents=True)
    (root / "data" / "a.bin").write_bytes(b"alpha")
    (root / "data" / "case" / "x.pb").write_bytes(b"x" * 10)
    (root / "data" / "case" / "sub" / "y.pb").write_bytes(b"y" * 20)
    tree, _ = trees.hash_folder(root / "data" / "case")
    registry = make_registry(
        root,
        {
            "loc/a": file_record({"type": "local", "path": "data/a.bin"}, b"alpha"),
            "loc/case": {
                "kind": "tree",
                "source": {"type": "local", "path": "data/case"},
                "digest": tree.digest.text,
                "size": tree.digest.size,
                "members": trees.to_json(tree),
            },
        },
    )
    store = Store.at(tmp_path / "store")
    report = fetch_names(store, registry, registry.names(), offline=True)
    assert [r.outcome for r in report.results] == [Outcome.FETCHED, Outcome.FETCHED]
    assert report.downloads == 0


def test_changed_local_file_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "p"
    (root / "data").mkdir(parents=True)
    (root / "data" / "a.bin").write_bytes(b"edited")
    registry = make_registry(
        root, {"loc/a": file_record({"type": "local", "path": "data/a.bin"}, b"alpha")}
    )
    store = Store.at(tmp_path / "store")
    result = fetch_names(store, registry, ["loc/a"]).results[0]
    assert result.outcome is Outcome.FAILED
    assert "local data/a.bin does not match the record" in result.message
    assert list(store.iter_objects()) == []


def test_missing_local_file_says_how_to_restore_it(tmp_path: Path) -> None:
    registry = make_registry(
        tmp_path / "p", {"loc/a": file_record({"type": "local", "path": "data/a.bin"}, b"alpha")}
    )
    result = fetch_names(Store.at(tmp_path / "s"), registry, ["loc/a"]).results[0]
    assert result.outcome is Outcome.FAILED and "is missing" in result.message
    assert result.fix is not None and "git checkout" in result.fix


def test_local_source_through_a_link_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "p"
    (root / "data").mkdir(parents=True)
    (tmp_path / "outside.bin").write_bytes(b"alpha")
    (root / "data" / "a.bin").symlink_to(tmp_path / "outside.bin")
    registry = make_registry(
        root, {"loc/a": file_record({"type": "local", "path": "data/a.bin"}, b"alpha")}
    )
    result = fetch_names(Store.at(tmp_path / "s"), registry, ["loc/a"]).results[0]
    assert result.outcome is Outcome.FAILED and "through a link" in result.message


def _orphan_project(tmp_path: Path) -> tuple[Path, list[str]]:
    root = tmp_path / "p"
    (root / "data" / "case" / "sub").mkdir(parents=True)
    (root / "data" / "other").mkdir()
    (root / "data" / "a.bin").write_bytes(b"alpha")
    (root / "data" / "case" / "x.pb").write_bytes(b"x" * 10)
    (root / "root-file.bin").write_bytes(b"at the root")
    tree, _ = trees.hash_folder(root / "data" / "case")
    registry = make_registry(
        root,
        {
            "loc/a": file_record({"type": "local", "path": "data/a.bin"}, b"alpha"),
            "loc/root": file_record({"type": "local", "path": "./root-file.bin"}, b"at the root"),
            "loc/case": {
                "kind": "tree",
                "source": {"type": "local", "path": "data/case"},
                "digest": tree.digest.text,
                "size": tree.digest.size,
                "members": trees.to_json(tree),
            },
        },
    )
    return root, [o.path for o in orphans(root, registry.records())]


def test_a_project_whose_source_folders_hold_only_named_files_has_no_orphans(
    tmp_path: Path,
) -> None:
    root, found = _orphan_project(tmp_path)
    (root / "data" / ".gitignore").write_text("*.tmp\n")  # housekeeping, not an orphan
    (root / "data" / "other" / "notes.txt").write_text("a subfolder with no sources of its own")
    (root / "pyproject.toml").write_text("")  # the root holds a source but is no source folder
    assert found == []
    assert orphans(root, make_registry(root, {}).records()) == []


def test_unnamed_files_beside_and_inside_local_sources_are_orphans(tmp_path: Path) -> None:
    root = tmp_path / "p"
    _orphan_project(tmp_path)
    (root / "data" / "stray.npz").write_bytes(b"s")
    (root / "data" / "case" / "sub" / "unlisted.pb").write_bytes(b"u")
    (root / "data" / "link.bin").symlink_to(root / "data" / "a.bin")
    registry = registry_mod.load(root)
    found = orphans(root, registry.records())
    assert [(o.path, o.folder) for o in found] == [
        ("data/case/sub/unlisted.pb", "data/case"),
        ("data/link.bin", "data"),
        ("data/stray.npz", "data"),
    ]
    assert "fixture-store add data/stray.npz --name FAMILY/NAME" in found[-1].fix
