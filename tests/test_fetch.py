"""fetch: every artifact is verified again after its fetch, and only then counts as fetched.

The sources check the bytes they put (see tests/sources/); these tests break that first line on
purpose, or give it bytes that pass it, and check that fetch's own verification still refuses.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from fixture_store import fetch as fetch_mod
from fixture_store.access import Fixtures
from fixture_store.errors import DigestMismatchError, UnsafeContentError
from fixture_store.fetch import Outcome, fetch_names
from fixture_store.objects import digests, trees
from fixture_store.objects.store import Store
from fixture_store.readers.archives import extraction_path
from fixture_store.registry import Record
from fixture_store.sources import FetchContext
from tests.support.fetchutil import file_record, make_registry, online_env  # noqa: F401 - autouse
from tests.support.hostile import manifest, tar_bytes, tar_info

GOOD = {"data/a.bin": b"alpha" * 100, "b.txt": b"bravo\n"}


def _objects(store: Store) -> list[str]:
    return [h for h, _ in store.iter_objects()]


def test_an_object_that_does_not_verify_after_its_fetch_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A source that skipped its own check (here: one that writes other bytes of the right
    size straight to the object's address) is caught by the verification after the fetch."""
    root = tmp_path / "p"
    (root / "data").mkdir(parents=True)
    (root / "data" / "a.bin").write_bytes(b"alpha")
    registry = make_registry(
        root, {"loc/a": file_record({"type": "local", "path": "data/a.bin"}, b"alpha")}
    )
    store = Store.at(tmp_path / "store").ensure()

    def careless(ctx: FetchContext, record: Record) -> None:
        assert record.digest is not None
        path = ctx.store.object_path(record.digest)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"omega")  # five bytes, as the record says; not its SHA-256

    monkeypatch.setattr(fetch_mod, "fetch_record", careless)
    report = fetch_names(store, registry, ["loc/a"])
    [result] = report.results
    assert result.outcome is Outcome.FAILED and not result.ok
    assert result.message.startswith("fetched but does not verify: object does not match")
    assert result.fix is not None and "fixture-store fetch loc/a" in result.fix
    summary = report.summary(registry)
    assert summary["ok"] is False and "verified" not in summary["families"]["loc"]
    assert summary["sources"] == []
    with pytest.raises(DigestMismatchError, match="loc/a"):
        Fixtures(store, registry).path("loc/a")


def _hostile_archive_project(tmp_path: Path) -> tuple[Any, bytes]:
    """An archive record whose digest is right but whose content breaks the archive rules."""
    evil = tar_bytes(
        [(tar_info(n, len(d)), d) for n, d in GOOD.items()] + [(tar_info("../evil", 4), b"evil")]
    )
    root = tmp_path / "p"
    root.mkdir(parents=True)
    (root / "w.tar").write_bytes(evil)
    d = digests.of_bytes(evil)
    registry = make_registry(
        root,
        {
            "arc/w": {
                "kind": "archive",
                "digest": d.text,
                "size": d.size,
                "members": trees.to_json(trees.Tree(manifest(GOOD))),
                "source": {"type": "local", "path": "w.tar"},
            }
        },
    )
    return registry, evil


def test_a_fetched_hostile_archive_is_refused_and_not_published(tmp_path: Path) -> None:
    registry, evil = _hostile_archive_project(tmp_path)
    store = Store.at(tmp_path / "store")
    report = fetch_names(store, registry, ["arc/w"])
    [result] = report.results
    assert result.outcome is Outcome.FAILED
    assert result.message.startswith("fetched but does not verify:")
    assert "[traversal]" in result.message and "'../evil'" in result.message
    assert report.summary(registry)["ok"] is False
    # Its bytes are the record's, but nothing hands them out: no access, no extraction, no pass.
    with pytest.raises(UnsafeContentError, match="traversal"):
        Fixtures(store, registry).path("arc/w")
    digest = registry.get("arc/w").digest
    assert digest is not None
    assert not extraction_path(store, digest).exists()
    assert not list((store.state_dir / "content").glob("*.ok"))
    # A second fetch does not take the stored bytes as present: still refused.
    again = fetch_names(store, registry, ["arc/w"]).results[0]
    assert again.outcome is Outcome.FAILED and "[traversal]" in again.message
    assert _objects(store) == [digests.of_bytes(evil).hex]


def test_a_tree_member_with_other_bytes_is_refused_and_nothing_is_stored(tmp_path: Path) -> None:
    root = tmp_path / "p"
    (root / "case").mkdir(parents=True)
    for name, data in GOOD.items():
        (root / "case" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "case" / name).write_bytes(data)
    tree, _ = trees.hash_folder(root / "case")
    (root / "case" / "b.txt").write_bytes(b"BRAVO\n")  # same size, other bytes
    registry = make_registry(
        root,
        {
            "loc/case": {
                "kind": "tree",
                "source": {"type": "local", "path": "case"},
                "digest": tree.digest.text,
                "size": tree.digest.size,
                "members": trees.to_json(tree),
            }
        },
    )
    store = Store.at(tmp_path / "store")
    result = fetch_names(store, registry, ["loc/case"]).results[0]
    assert result.outcome is Outcome.FAILED
    assert "member 'b.txt'" in result.message and "does not match the record" in result.message
    # The good member may be stored (it verified); the bad one and the manifest are not.
    assert set(_objects(store)) <= {digests.of_bytes(GOOD["data/a.bin"]).hex}
    assert digests.of_bytes(b"BRAVO\n").hex not in _objects(store)


def test_present_records_are_settled_without_the_pool_and_results_keep_their_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A warm fetch answers what the verified-state cache vouches for in one loop; only the
    records that need reading or downloading go to the threads, and the results come back
    in the order of the names asked for."""
    root = tmp_path / "p"
    (root / "data").mkdir(parents=True)
    raw = {}
    for i in range(6):
        (root / "data" / f"{i}.bin").write_bytes(f"bytes {i}".encode())
        raw[f"loc/r{i}"] = file_record(
            {"type": "local", "path": f"data/{i}.bin"}, f"bytes {i}".encode()
        )
    registry = make_registry(root, raw)
    store = Store.at(tmp_path / "store").ensure()
    names = [f"loc/r{i}" for i in (3, 0, 5, 1, 4, 2)]
    assert all(r.ok for r in fetch_names(store, registry, names[:4]).results)

    pooled: list[str] = []

    class Counting(ThreadPoolExecutor):
        def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
            pooled.extend(a for a in args if isinstance(a, str))
            return super().submit(fn, *args, **kwargs)

    monkeypatch.setattr(fetch_mod, "ThreadPoolExecutor", Counting)
    report = fetch_names(store, registry, names)
    assert [r.name for r in report.results] == names
    assert [r.outcome for r in report.results] == [Outcome.PRESENT] * 4 + [Outcome.FETCHED] * 2
    assert pooled == names[4:]  # the two not yet in the store, and nothing else
