"""The local source: files and folders inside the project, verified like any other source."""

from __future__ import annotations

from pathlib import Path

from fixture_store.fetch import Outcome, fetch_names
from fixture_store.objects import trees
from fixture_store.objects.store import Store
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
