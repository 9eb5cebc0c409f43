"""Each pack index entry stands alone (DESIGN decision 20, issue 34 classes 5 and 6): an entry
that overlaps another or leaves its pack is refused or read by itself and named; the honest
objects of the same pack and index still land; a hostile index never stops a pull."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from fixture_store.objects import digests
from fixture_store.objects.digests import Digest
from fixture_store.objects.store import Store
from fixture_store.remotes.folder import FolderRemote
from fixture_store.remotes.packs import INDEXES, index_bytes, index_key, parse_entries
from fixture_store.remotes.sync import Outcome, pull, push
from fixture_store.verify import verify_names
from tests.remotes.test_packs import FAST, _fresh, _project


def _rewrite_index(root: Path, edit: dict[str, list[int]]) -> None:
    """Replace the remote's one index by one whose entries ``edit`` changes (object hex ->
    [pack, offset, length]), named by the digest of its new bytes."""
    (old,) = (root / INDEXES).iterdir()
    doc = json.loads(old.read_bytes())
    doc["objects"].update(edit)
    data = json.dumps(doc, separators=(",", ":")).encode()
    os.chmod(old, 0o644)
    old.unlink()
    (root / index_key(digests.of_bytes(data).hex)).write_bytes(data)


def _entries(root: Path) -> dict[str, list[int]]:
    (index,) = (root / INDEXES).iterdir()
    objects: dict[str, list[int]] = json.loads(index.read_bytes())["objects"]
    return objects


def _pulled(
    project: Path, store: Store, tmp_path: Path, edit_of: object
) -> tuple[dict[str, Any], Store]:
    registry, the_plan = _project(project, store)
    root = tmp_path / "remote"
    push(store, registry, FolderRemote("shared", root), the_plan, retry=FAST)
    entries = _entries(root)
    assert callable(edit_of)
    _rewrite_index(root, edit_of(the_plan, entries))
    other = _fresh(tmp_path)
    report = pull(other, registry, FolderRemote("shared", root), the_plan, retry=FAST)
    good = [r.name for r in report.results if r.ok]
    assert all(r.ok for r in verify_names(other, registry, good))
    return {r.name: r for r in report.results}, other


def test_an_entry_shifted_over_its_neighbour_is_blamed_alone(
    project: Path, store: Store, tmp_path: Path
) -> None:
    def shift(the_plan, entries):  # type: ignore[no-untyped-def]
        r04, r05 = (the_plan.wants[n][0].hex for n in ("fam/r04", "fam/r05"))
        pack, _, length = entries[r05]
        return {r05: [pack, entries[r04][1] + 1, length]}  # starts inside fam/r04

    results, _ = _pulled(project, store, tmp_path, shift)
    failed = {n: r for n, r in results.items() if not r.ok}
    assert set(failed) == {"fam/r05"}  # not fam/r06 and the rest of the run
    assert "where its pack index entry places it" in failed["fam/r05"].message
    assert {r.outcome for n, r in results.items() if n != "fam/r05"} == {Outcome.PULLED}


def test_an_entry_past_the_end_of_its_pack_is_refused_alone_and_named(
    project: Path, store: Store, tmp_path: Path
) -> None:
    def past(the_plan, entries):  # type: ignore[no-untyped-def]
        r03 = the_plan.wants["fam/r03"][0].hex
        pack, _, length = entries[r03]
        return {r03: [pack, 10**6, length]}

    results, _ = _pulled(project, store, tmp_path, past)
    failed = {n: r for n, r in results.items() if not r.ok}
    assert set(failed) == {"fam/r03"}
    message = failed["fam/r03"].message
    assert "pack index entry was refused" in message and "reach past the end" in message
    assert {r.outcome for n, r in results.items() if n != "fam/r03"} == {Outcome.PULLED}


def test_an_index_nested_100000_deep_beside_a_good_one_stops_nothing(
    project: Path, store: Store, tmp_path: Path
) -> None:
    registry, the_plan = _project(project, store)
    root = tmp_path / "remote"
    push(store, registry, FolderRemote("shared", root), the_plan, retry=FAST)
    deep = b"[" * 100_000 + b"]" * 100_000
    (root / index_key(digests.of_bytes(deep).hex)).write_bytes(deep)
    report = pull(_fresh(tmp_path), registry, FolderRemote("shared", root), the_plan, retry=FAST)
    assert {r.outcome for r in report.results} == {Outcome.PULLED}


# Every way one entry of an index can be wrong: its key, its value's shape, each number.
BAD_ENTRIES = {
    "key not a digest": ("zz", [0, 0, 1]),
    "key upper case": ("A" * 64, [0, 0, 1]),
    "not a list": (None, "0,0,1"),
    "two numbers": (None, [0, 0]),
    "pack not a count": (None, [-1, 0, 1]),
    "pack past the list": (None, [5, 0, 1]),
    "offset not a count": (None, [0, "0", 1]),
    "offset negative": (None, [0, -1, 1]),
    "length a float": (None, [0, 0, 1.0]),
    "length a bool": (None, [0, 0, True]),
    "past the end": (None, [0, 3, 1]),
    "far past the end": (None, [0, 10**30, 1]),
}


@pytest.mark.parametrize("bad", list(BAD_ENTRIES), ids=list(BAD_ENTRIES))
def test_each_way_an_entry_can_be_wrong_refuses_that_entry_alone(bad: str) -> None:
    """The walk: whatever is wrong with one entry, it is refused by itself (named), and every
    other entry of the same index is used."""
    pack = Digest(digests.of_bytes(b"abc").hex, 3)
    members = [(Digest(digests.of_bytes(c).hex, 1), i) for i, c in enumerate((b"a", b"b", b"c"))]
    doc = json.loads(index_bytes([(pack, members)]))
    victim = members[1][0].hex
    key, value = BAD_ENTRIES[bad]
    del doc["objects"][victim]
    doc["objects"][key or victim] = value
    data = json.dumps(doc).encode()
    entries = parse_entries(data, digests.of_bytes(data).hex)
    assert set(entries.slots) == {members[0][0].hex, members[2][0].hex}
    assert len(entries.refused) == 1


def test_a_bad_pack_of_the_list_refuses_only_its_objects() -> None:
    good = Digest(digests.of_bytes(b"ab").hex, 2)
    one, two = (Digest(digests.of_bytes(c).hex, 1) for c in (b"a", b"b"))
    doc = json.loads(index_bytes([(good, [(one, 0)]), (good, [(two, 1)])]))
    doc["packs"][1] = ["not hex", 2]
    data = json.dumps(doc).encode()
    entries = parse_entries(data, digests.of_bytes(data).hex)
    assert set(entries.slots) == {one.hex} and set(entries.refused) == {two.hex}


def test_a_remote_gc_refuses_an_index_with_a_refused_entry_and_nothing_goes(
    tmp_path: Path, store: Store
) -> None:
    """A pull uses the other entries; a gc must not: the refused entry may be all that keeps a
    referenced object's pack alive."""
    from fixture_store.errors import UsageError
    from fixture_store.remotes import gc as remote_gc
    from tests.remotes.test_gc import _pushed_folder

    _, keys, _, now = _pushed_folder(tmp_path, store)
    root = tmp_path / "remote"
    entries = _entries(root)
    victim = sorted(entries)[0]
    pack, _, length = entries[victim]
    _rewrite_index(root, {victim: [pack, 10**9, length]})
    before = sorted(p for p in root.rglob("*") if p.is_file())
    with pytest.raises(UsageError, match="cannot be read") as info:
        remote_gc.plan(keys, remote_gc.referenced([now]), min_age=0)
    assert "reach past the end" in info.value.message
    assert sorted(p for p in root.rglob("*") if p.is_file()) == before
