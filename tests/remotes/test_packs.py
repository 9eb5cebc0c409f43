"""Packs: small objects pushed many to a file with an index, pulled as ranges, each object
checked on its own (DESIGN decision 9 per object, never per pack). Folder and S3 remotes."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from fixture_store import registry as registry_mod
from fixture_store.objects import digests
from fixture_store.objects.digests import Digest
from fixture_store.objects.store import Store
from fixture_store.registry import Registry
from fixture_store.remotes import packed
from fixture_store.remotes.base import Retry, object_key
from fixture_store.remotes.config import RemoteSpec
from fixture_store.remotes.folder import FolderRemote
from fixture_store.remotes.keys import keys_of
from fixture_store.remotes.mirrors import Mirrors
from fixture_store.remotes.packs import (
    INDEX_CAP,
    INDEXES,
    ONE_PER_KEY,
    PACKS,
    Packing,
    index_bytes,
    index_key,
    load_index,
    pack_key,
    parse_entries,
    parse_index,
)
from fixture_store.remotes.s3 import S3Remote
from fixture_store.remotes.sync import Outcome, SyncPlan, plan, pull, push
from fixture_store.verify import verify_names
from tests.remotes.conftest import s3_client
from tests.support.records import local_record
from tests.support.s3server import FaultProxy

FAST = Retry(attempts=3, backoff=0.01, total=10.0)
COUNT = 12


def _project(project: Path, store: Store, count: int = COUNT) -> tuple[Registry, SyncPlan]:
    """``fam/r00`` … : one small object each (a few hundred bytes), in the store."""
    records = []
    for i in range(count):
        data = f"object {i:02d}\n".encode() * (20 + i)
        store.put_bytes(data)
        records.append(local_record(f"fam/r{i:02d}", i, data=data))
    registry_mod.write_family(registry_mod.load(project), "fam", records)
    registry = registry_mod.load(project)
    return registry, plan(registry, registry.names())


def _fresh(tmp_path: Path, name: str = "fresh") -> Store:
    return Store.at(tmp_path / name).ensure()


def _s3(endpoint: str, bucket: str) -> S3Remote:
    spec = RemoteSpec("team", f"s3://{bucket}/fixtures", endpoint_url=endpoint)
    return S3Remote.connect(spec, retry=FAST)


def _folder_files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and "tmp" not in p.relative_to(root).parts
    }


def _slots(root: Path) -> dict[str, Any]:
    """The folder remote's index, read back: object hex → [pack, offset, length]."""
    (index,) = (root / INDEXES).iterdir()
    doc = json.loads(index.read_bytes())
    packs = [p[0] for p in doc["packs"]]
    return {h: (packs[n], off, length) for h, (n, off, length) in doc["objects"].items()}


# -- folder ----------------------------------------------------------------------------------
def test_push_packs_small_objects_and_a_second_push_writes_nothing(
    project: Path, store: Store, tmp_path: Path
) -> None:
    registry, the_plan = _project(project, store)
    remote = FolderRemote("shared", tmp_path / "remote")
    first = push(store, registry, remote, the_plan, retry=FAST)
    assert {r.outcome for r in first.results} == {Outcome.PUSHED}
    assert first.moved_objects == COUNT
    # one pack, one index, no object under its own key
    (pack,) = (tmp_path / "remote" / PACKS).glob("*.pack")
    assert pack.name == digests.of_bytes(pack.read_bytes()).hex + ".pack"
    assert not (tmp_path / "remote" / "objects" / "sha256").exists()
    before = _folder_files(tmp_path / "remote")
    again = push(store, registry, remote, the_plan, retry=FAST)
    assert {r.outcome for r in again.results} == {Outcome.PRESENT}
    assert again.moved_objects == 0
    assert _folder_files(tmp_path / "remote") == before  # written once: nothing new
    other = _fresh(tmp_path)
    pulled = pull(other, registry, remote, the_plan, retry=FAST)
    assert {r.outcome for r in pulled.results} == {Outcome.PULLED}
    assert all(r.ok for r in verify_names(other, registry, registry.names()))


def test_objects_from_the_threshold_on_keep_their_own_key(
    project: Path, store: Store, tmp_path: Path
) -> None:
    registry, the_plan = _project(project, store)
    sizes = sorted(d.size for d in the_plan.objects.values())
    threshold = sizes[COUNT // 2]
    remote = FolderRemote("shared", tmp_path / "remote")
    push(store, registry, remote, the_plan, retry=FAST, packing=Packing(threshold=threshold))
    for d in the_plan.objects.values():
        own = (tmp_path / "remote" / object_key(d)).exists()
        assert own is (d.size >= threshold)
    assert set(_slots(tmp_path / "remote")) == {
        d.hex for d in the_plan.objects.values() if d.size < threshold
    }
    other = _fresh(tmp_path)
    assert all(r.ok for r in pull(other, registry, remote, the_plan, retry=FAST).results)


def test_a_damaged_pack_byte_refuses_exactly_the_object_it_belongs_to(
    project: Path, store: Store, tmp_path: Path
) -> None:
    registry, the_plan = _project(project, store)
    root = tmp_path / "remote"
    remote = FolderRemote("shared", root)
    push(store, registry, remote, the_plan, retry=FAST)
    victim = the_plan.wants["fam/r05"][0]
    pack_hex, offset, length = _slots(root)[victim.hex]
    pack = root / pack_key(pack_hex)
    os.chmod(pack, 0o644)
    data = bytearray(pack.read_bytes())
    data[offset + length - 1] ^= 0x01  # the last byte of fam/r05: its neighbour starts next
    pack.write_bytes(bytes(data))
    other = _fresh(tmp_path)
    report = pull(other, registry, remote, the_plan, retry=FAST)
    failed = {r.name: r for r in report.results if not r.ok}
    assert set(failed) == {"fam/r05"}
    assert failed["fam/r05"].outcome is Outcome.FAILED
    assert (
        "other bytes" in failed["fam/r05"].message
        and pack_key(pack_hex) in failed["fam/r05"].message
    )
    assert failed["fam/r05"].fix is not None and "push again" in failed["fam/r05"].fix
    assert not other.has(victim)
    good = [n for n in registry.names() if n != "fam/r05"]
    assert all(r.ok for r in verify_names(other, registry, good))


def test_an_object_that_changes_in_the_store_during_a_push_is_not_packed(
    project: Path, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Remote objects are write-once: bytes packed under a digest they no longer have would be
    served as that object for good. Each object is hashed as it is copied into its pack; one
    that changed after the push verified it is left out, named, and its neighbours still go."""
    registry, the_plan = _project(project, store)
    victim = the_plan.wants["fam/r05"][0]
    checked = packed.statuses

    def then_changed(s: Store, objects: Any, jobs: int) -> Any:
        found = checked(s, objects, jobs)
        if s is not store:
            return found
        path = s.object_path(victim)  # edited in place after it verified, same size
        os.chmod(path, 0o644)
        path.write_bytes(path.read_bytes().upper())
        return found

    monkeypatch.setattr(packed, "statuses", then_changed)
    root = tmp_path / "remote"
    report = push(store, registry, FolderRemote("shared", root), the_plan, retry=FAST)
    failed = {r.name: r for r in report.results if not r.ok}
    assert set(failed) == {"fam/r05"}
    assert "mismatch in the store" in failed["fam/r05"].message
    assert set(_slots(root)) == {d.hex for d in the_plan.objects.values()} - {victim.hex}
    (pack,) = (root / PACKS).glob("*.pack")
    assert store.object_path(victim).read_bytes() not in pack.read_bytes()
    other = _fresh(tmp_path)
    pulled = pull(other, registry, FolderRemote("shared", root), the_plan, retry=FAST)
    assert {r.name for r in pulled.results if not r.ok} == {"fam/r05"}
    assert not other.has(victim)


def test_an_old_style_remote_and_a_mixed_one_still_read(
    project: Path, store: Store, tmp_path: Path
) -> None:
    registry, the_plan = _project(project, store)
    remote = FolderRemote("shared", tmp_path / "remote")
    half = plan(registry, registry.names()[: COUNT // 2])
    push(store, registry, remote, half, retry=FAST, packing=ONE_PER_KEY)  # as before packs
    pushed = push(store, registry, remote, the_plan, retry=FAST)  # the rest in a pack
    assert pushed.moved_objects == COUNT - COUNT // 2  # the one-per-key objects are not resent
    assert len(_slots(tmp_path / "remote")) == COUNT - COUNT // 2
    other = _fresh(tmp_path)
    report = pull(other, registry, remote, the_plan, retry=FAST)
    assert {r.outcome for r in report.results} == {Outcome.PULLED}
    assert all(r.ok for r in verify_names(other, registry, registry.names()))


def test_fetch_takes_packed_objects_from_a_mirror(
    project: Path, store: Store, tmp_path: Path
) -> None:
    registry, the_plan = _project(project, store)
    remote = FolderRemote("shared", tmp_path / "remote")
    push(store, registry, remote, the_plan, retry=FAST)
    other = _fresh(tmp_path)
    mirrors = Mirrors(other, [remote], retry=FAST)
    record = registry.get("fam/r03")
    got, tried, failed = mirrors.pull(record, lambda d: not other.has(d), lambda _: None)
    assert got is remote and tried == failed == []
    assert other.has(the_plan.wants["fam/r03"][0])


def test_a_damaged_index_is_not_used_and_the_pull_says_so(
    project: Path, store: Store, tmp_path: Path
) -> None:
    registry, the_plan = _project(project, store)
    root = tmp_path / "remote"
    push(store, registry, FolderRemote("shared", root), the_plan, retry=FAST)
    (index,) = (root / INDEXES).iterdir()
    os.chmod(index, 0o644)
    index.write_bytes(index.read_bytes().replace(b'"objects"', b'"objectz"'))
    report = pull(_fresh(tmp_path), registry, FolderRemote("shared", root), the_plan, retry=FAST)
    assert {r.outcome for r in report.results} == {Outcome.MISSING}
    assert "pack indexes could not be used" in report.results[0].message
    assert "damaged" in report.results[0].message


class _ListsAHugeIndex:
    """A folder remote's keys whose listing also names an index of ``INDEX_CAP + 1`` bytes;
    every ranged read is recorded."""

    def __init__(self, keys: Any, huge: str) -> None:
        self.keys, self.huge = keys, huge
        self.opened: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.keys, name)

    def listing(self, folder: str) -> dict[str, int]:
        found: dict[str, int] = self.keys.listing(folder)
        return found | ({f"{self.huge}.json": INDEX_CAP + 1} if folder == INDEXES else {})

    def open_range(self, key: str, digest: Digest, start: int, length: int) -> Any:
        self.opened.append(key)
        return self.keys.open_range(key, digest, start, length)


def test_an_index_over_the_cap_is_never_read_and_the_others_are_used(
    project: Path, store: Store, tmp_path: Path
) -> None:
    """One index on a shared remote larger than the cap is named and not read (a pull would
    otherwise hold it all in memory); the remote's other indexes still place their objects."""
    registry, the_plan = _project(project, store)
    remote = FolderRemote("shared", tmp_path / "remote")
    push(store, registry, remote, the_plan, retry=FAST)
    huge = "f" * 64
    keys = _ListsAHugeIndex(keys_of(remote), huge)
    index = load_index(keys, FAST, jobs=1)
    assert index_key(huge) not in keys.opened and len(keys.opened) == 1
    assert index.problems == [
        f"{index_key(huge)}: {INDEX_CAP + 1:,} bytes, more than the {INDEX_CAP:,} read"
    ]
    assert all(index.slot(d) is not None for d in the_plan.objects.values())


def test_an_index_is_used_only_if_its_bytes_are_its_name_and_well_formed() -> None:
    pack = Digest(digests.of_bytes(b"ab").hex, 2)
    one = Digest(digests.of_bytes(b"a").hex, 1)
    good = index_bytes([(pack, [(one, 0)])])
    assert parse_index(good, digests.of_bytes(good).hex)[one.hex].offset == 0
    with pytest.raises(ValueError, match="damaged"):
        parse_index(good, "0" * 64)
    # a bad entry is refused by itself (DESIGN decision 20): the index stays usable
    past = good.replace(b"[0,0,1]", b"[0,2,1]")
    assert "past the end" in parse_entries(past, digests.of_bytes(past).hex).refused[one.hex]
    with pytest.raises(ValueError, match="past the end"):  # whole, as a remote's gc needs it
        parse_index(past, digests.of_bytes(past).hex)
    negative = good.replace(b"[0,0,1]", b"[0,-1,1]")
    assert "not a count" in parse_entries(negative, digests.of_bytes(negative).hex).refused[one.hex]
    other = good.replace(b"pack-index/1", b"pack-index/9")
    with pytest.raises(ValueError, match="not a pack index"):
        parse_index(other, digests.of_bytes(other).hex)


# -- S3 --------------------------------------------------------------------------------------
def _keys(endpoint: str, bucket: str) -> dict[str, int]:
    page = s3_client(endpoint).list_objects_v2(Bucket=bucket)
    return {o["Key"]: o["Size"] for o in page.get("Contents", ())}


def test_s3_push_and_pull_take_a_handful_of_requests_and_a_second_push_writes_nothing(
    project: Path, store: Store, tmp_path: Path, proxy: FaultProxy, bucket: str
) -> None:
    registry, the_plan = _project(project, store)
    remote = _s3(proxy.url, bucket)
    push(store, registry, remote, the_plan, retry=FAST)
    # list the indexes, list the objects, the pack, the index, then the list of indexes a
    # mirror reads (list the indexes, write it, list them again): not one request an object
    assert proxy.faults.requests == 7
    keys = _keys(proxy.url, bucket)
    assert sum(k.endswith(".pack") for k in keys) == 1
    assert sum(k.endswith(".json") for k in keys) == 2  # the index, the list of indexes
    proxy.faults.requests, before = 0, len(proxy.faults.seen)
    again = push(store, registry, remote, the_plan, retry=FAST)
    assert {r.outcome for r in again.results} == {Outcome.PRESENT}
    assert "PUT" not in [m for m, _, _ in proxy.faults.seen[before:]]  # nothing written
    assert proxy.faults.requests == 3  # list the indexes, read the one, see the list is there
    assert _keys(proxy.url, bucket) == keys
    proxy.faults.requests = 0
    other = _fresh(tmp_path)
    pulled = pull(other, registry, remote, the_plan, retry=FAST)
    assert {r.outcome for r in pulled.results} == {Outcome.PULLED}
    assert proxy.faults.requests == 3  # list the indexes, read the one, one range of the pack


def test_s3_a_flipped_pack_byte_refuses_only_its_object(
    project: Path, store: Store, tmp_path: Path, proxy: FaultProxy, bucket: str, s3_endpoint: str
) -> None:
    registry, the_plan = _project(project, store)
    push(store, registry, _s3(s3_endpoint, bucket), the_plan, retry=FAST)
    proxy.faults.only = ".pack"
    proxy.faults.flip = True  # the first byte of every pack range: the first object's
    other = _fresh(tmp_path)
    report = pull(other, registry, _s3(proxy.url, bucket), the_plan, retry=FAST)
    failed = [r.name for r in report.results if not r.ok]
    assert failed == ["fam/r00"]
    assert [m for m, _, _ in proxy.faults.seen] == ["GET"]  # a mismatch is not retried


def test_s3_a_server_that_ignores_the_range_is_refused_before_its_body(
    project: Path, store: Store, tmp_path: Path, proxy: FaultProxy, bucket: str, s3_endpoint: str
) -> None:
    registry, _ = _project(project, store)
    push(store, registry, _s3(s3_endpoint, bucket), plan(registry, registry.names()), retry=FAST)
    proxy.faults.only = ".pack"
    proxy.faults.whole = True  # answers a range with the whole pack: a 200 from its start
    one = plan(registry, ["fam/r07"])
    other = _fresh(tmp_path)
    (result,) = pull(other, registry, _s3(proxy.url, bucket), one, retry=FAST).results
    assert result.outcome is Outcome.FAILED and "not 206 Partial Content" in result.message
    assert [m for m, _, _ in proxy.faults.seen] == ["GET"]  # refused at once, not retried
    assert not other.has(one.wants["fam/r07"][0])


def test_s3_a_push_cut_before_its_index_leaves_no_index_and_the_next_push_completes(
    project: Path, store: Store, tmp_path: Path, proxy: FaultProxy, bucket: str
) -> None:
    registry, the_plan = _project(project, store)
    remote = _s3(proxy.url, bucket)
    proxy.faults.only = ".json"
    proxy.faults.cut = 100  # every index upload: the connection closes without an answer
    cut = push(store, registry, remote, the_plan, retry=FAST)
    assert {r.outcome for r in cut.results} == {Outcome.FAILED}
    assert "their index was not" in cut.results[0].message
    keys = _keys(proxy.url, bucket)
    assert sum(k.endswith(".pack") for k in keys) == 1
    assert not any(k.endswith(".json") for k in keys)  # no index: nothing refers to a pack
    proxy.faults.cut = 0
    done = push(store, registry, remote, the_plan, retry=FAST)
    assert {r.outcome for r in done.results} == {Outcome.PUSHED}
    assert sum(k.endswith(".pack") for k in _keys(proxy.url, bucket)) == 1  # the same pack
    other = _fresh(tmp_path)
    assert all(r.ok for r in pull(other, registry, remote, the_plan, retry=FAST).results)


def test_s3_a_push_cut_while_sending_its_pack_writes_no_index(
    project: Path, store: Store, tmp_path: Path, proxy: FaultProxy, bucket: str
) -> None:
    registry, the_plan = _project(project, store)
    remote = _s3(proxy.url, bucket)
    proxy.faults.only = ".pack"
    proxy.faults.cut = 100
    cut = push(store, registry, remote, the_plan, retry=FAST)
    assert {r.outcome for r in cut.results} == {Outcome.FAILED}
    assert _keys(proxy.url, bucket) == {}
    proxy.faults.cut = 0
    assert {r.outcome for r in push(store, registry, remote, the_plan, retry=FAST).results} == {
        Outcome.PUSHED
    }
    other = _fresh(tmp_path)
    assert all(r.ok for r in pull(other, registry, remote, the_plan, retry=FAST).results)


def test_the_cli_pushes_in_packs_unless_the_remote_sets_no_packs(
    project: Path, store: Store
) -> None:
    from tests.support.cli import run

    _project(project, store)
    (project / "pyproject.toml").write_text(
        "[tool.fixture-store.remotes.packed]\nurl = 'packed'\n\n"
        "[tool.fixture-store.remotes.plain]\nurl = 'plain'\npack_threshold = 0\n"
    )
    assert run("push", "--all", "--remote", "packed")[0] == 0
    assert run("push", "--all", "--remote", "plain")[0] == 0
    assert len(list((project / "packed" / PACKS).glob("*.pack"))) == 1
    assert not (project / "plain" / PACKS).exists()
    assert len(list((project / "plain" / "objects" / "sha256").rglob("*"))) > COUNT


def test_s3_an_index_that_arrives_in_pieces_is_read_whole(
    project: Path, store: Store, tmp_path: Path, proxy: FaultProxy, bucket: str, s3_endpoint: str
) -> None:
    registry, the_plan = _project(project, store)
    push(store, registry, _s3(s3_endpoint, bucket), the_plan, retry=FAST)
    proxy.faults.only = ".json"
    proxy.faults.drip = 0.0005  # the index a byte at a time: many reads of the connection
    other = _fresh(tmp_path)
    report = pull(other, registry, _s3(proxy.url, bucket), the_plan, retry=FAST)
    assert {r.outcome for r in report.results} == {Outcome.PULLED}


def test_many_small_objects_of_one_pack_are_read_as_several_runs() -> None:
    from fixture_store.remotes.packs import RUN_OBJECTS, Slot, runs

    pack = Digest("a" * 64, 10 * RUN_OBJECTS * 3)
    objects = [Digest(f"{i:064x}", 10) for i in range(RUN_OBJECTS * 3 - 1)]
    found = runs((Slot(pack, i * 10, 10), d) for i, d in enumerate(objects))
    assert [len(r.items) for r in found] == [RUN_OBJECTS, RUN_OBJECTS, RUN_OBJECTS - 1]
    assert [d for r in found for _, d in r.items] == objects  # each once, in pack order
