"""gc of a folder or S3 remote: what no record references goes, packs included (a pack all
garbage removed with its index replaced, a pack partly garbage repacked or kept whole), every
referenced object still pulls and verifies, a gc cut at any step leaves the remote readable,
and what cannot be read is never taken for garbage."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from fixture_store import registry as registry_mod
from fixture_store.errors import FixtureStoreError, UsageError
from fixture_store.objects import digests
from fixture_store.objects.digests import Digest
from fixture_store.objects.store import Store
from fixture_store.registry import Registry
from fixture_store.remotes import gc as remote_gc
from fixture_store.remotes import open_remote
from fixture_store.remotes.base import RemoteError, Retry, object_key
from fixture_store.remotes.config import RemoteSpec
from fixture_store.remotes.folder import FolderRemote
from fixture_store.remotes.keys import Keys, keys_of
from fixture_store.remotes.packs import INDEXES, PACKS, Packing, index_bytes, pack_key
from fixture_store.remotes.s3 import S3Remote
from fixture_store.remotes.sync import Outcome, plan, pull, push
from fixture_store.verify import verify_names
from tests.remotes.conftest import s3_client
from tests.support.records import local_record
from tests.support.s3server import FaultProxy

FAST = Retry(attempts=3, backoff=0.01, total=10.0)
# Objects of 200-310 bytes in packs of at most 1,000, in name order: r00-r03, r04-r06, r07-r09,
# r10-r11. Kept: r00-r02 (630 of the pack's 860 bytes: kept whole), r06 (260 of 750: repacked),
# r07-r09 (a pack untouched), big/b0; r10, r11 fill a pack all garbage, and big/b1 is garbage
# under its own key.
PACKING = Packing(threshold=4096, pack_size=1000)
SMALL = 12
KEPT = ("fam/r00", "fam/r01", "fam/r02", "fam/r06", "fam/r07", "fam/r08", "fam/r09", "big/b0")


def _registries(tmp_path: Path, store: Store) -> tuple[Registry, Registry]:
    """Every record (what was pushed), and the project as it is now (``KEPT`` only)."""
    records = {}
    for i in range(SMALL):
        data = f"object {i:02d}\n".encode() * (20 + i)
        store.put_bytes(data)
        records[f"fam/r{i:02d}"] = local_record(f"fam/r{i:02d}", i, data=data)
    for i in range(2):
        data = bytes([65 + i]) * 5000
        store.put_bytes(data)
        records[f"big/b{i}"] = local_record(f"big/b{i}", 100 + i, data=data)
    out = []
    for name, chosen in (("all", records), ("now", {k: records[k] for k in KEPT})):
        root = tmp_path / name
        (root / "provenance").mkdir(parents=True)
        for family in ("fam", "big"):
            mine = [r for n, r in chosen.items() if n.startswith(family + "/")]
            registry_mod.write_family(registry_mod.load(root), family, mine)
        out.append(registry_mod.load(root))
    return out[0], out[1]


def _pushed(tmp_path: Path, store: Store, remote: Any) -> tuple[Registry, Registry]:
    everything, now = _registries(tmp_path, store)
    report = push(
        store, everything, remote, plan(everything, everything.names()), retry=FAST, packing=PACKING
    )
    assert {r.outcome for r in report.results} == {Outcome.PUSHED}
    return everything, now


def _pushed_folder(tmp_path: Path, store: Store) -> tuple[FolderRemote, Keys, Registry, Registry]:
    """A folder remote everything was pushed to, its keys, and the registries of ``_pushed``."""
    remote = FolderRemote("shared", tmp_path / "remote")
    everything, now = _pushed(tmp_path, store, remote)
    keys = keys_of(remote)
    assert keys is not None
    return remote, keys, everything, now


def _wants(registry: Registry, *names: str) -> set[str]:
    return {d.hex for n in names for d in plan(registry, [n]).wants[n]}


def _pulls(tmp_path: Path, registry: Registry, remote: Any, name: str) -> None:
    """Every referenced object pulls from the remote into an empty store and verifies."""
    fresh = Store.at(tmp_path / name).ensure()
    got = pull(fresh, registry, remote, plan(registry, registry.names()), retry=FAST)
    assert {r.outcome for r in got.results} == {Outcome.PULLED}, [r.message for r in got.results]
    assert all(r.ok for r in verify_names(fresh, registry, registry.names()))


def _slots(keys: Keys) -> dict[str, str]:
    """Object hex -> pack hex, as every index of the remote says."""
    found: dict[str, str] = {}
    listed = keys.stamped(INDEXES)
    for table in remote_gc.read_indexes(keys, listed, FAST, 4).values():
        found.update({h: s.pack.hex for h, s in table.items()})
    return found


def _collect(keys: Keys, now: Registry, **options: Any) -> remote_gc.Swept:
    the_plan = remote_gc.plan(keys, remote_gc.referenced([now]), min_age=0, retry=FAST, **options)
    return remote_gc.execute(keys, the_plan, retry=FAST)


# -- folder ----------------------------------------------------------------------------------
def test_gc_removes_garbage_keeps_what_is_referenced_and_pulls_still_verify(
    tmp_path: Path, store: Store
) -> None:
    remote, keys, everything, now = _pushed_folder(tmp_path, store)
    before = _slots(keys)
    kept = _wants(now, *(n for n in KEPT if n.startswith("fam/")))  # in packs
    packs_of = {h: {o for o, p in before.items() if p == h} for h in set(before.values())}
    whole = [p for p, objs in packs_of.items() if not objs & kept]
    partly = [p for p, objs in packs_of.items() if objs & kept and objs - kept]
    garbage_big = object_key(plan(everything, ["big/b1"]).wants["big/b1"][0])
    size = {d.hex: d.size for d in plan(everything, everything.names()).objects.values()}

    def fate(pack: str) -> remote_gc.Fate:
        live = sum(size[o] for o in packs_of[pack] & kept)
        total = sum(size[o] for o in packs_of[pack])
        if not live:
            return remote_gc.Fate.DELETE
        return remote_gc.Fate.REPACK if live < total / 2 else remote_gc.Fate.KEEP

    the_plan = remote_gc.plan(keys, remote_gc.referenced([now]), min_age=0, repack_below=0.5)
    expected = {p: fate(p) for p in [*whole, *partly]}
    assert sorted(expected.values()) == sorted(
        remote_gc.Fate(f) for f in ("delete", "repack", "keep")
    )
    assert {p.pack.hex: p.fate for p in the_plan.packs} == expected
    assert [key for key, _ in the_plan.objects] == [garbage_big]
    assert (tmp_path / "remote" / garbage_big).exists()  # a plan removes nothing

    swept = remote_gc.execute(keys, the_plan, retry=FAST)
    assert swept.ok
    assert not (tmp_path / "remote" / garbage_big).exists()
    assert not (tmp_path / "remote" / pack_key(whole[0])).exists()
    after = _slots(keys)
    assert kept <= set(after)  # every referenced object is still placed ...
    kept_whole = [p.pack.hex for p in the_plan.fated(remote_gc.Fate.KEEP)]
    assert set(after) - kept == packs_of[kept_whole[0]] - kept  # ... garbage only in kept packs
    assert the_plan.kept_bytes == sum(
        p.garbage_bytes for p in the_plan.packs if p.fate is remote_gc.Fate.KEEP
    )
    on_disk = {p.name.removesuffix(".pack") for p in (tmp_path / "remote" / PACKS).glob("*.pack")}
    assert on_disk == set(after.values())  # no pack left that no index names
    _pulls(tmp_path, now, remote, "fresh")
    assert not remote_gc.plan(keys, remote_gc.referenced([now]), min_age=0).objects


def test_repack_below_zero_keeps_every_partly_garbage_pack_whole(
    tmp_path: Path, store: Store
) -> None:
    remote, keys, _, now = _pushed_folder(tmp_path, store)
    the_plan = remote_gc.plan(keys, remote_gc.referenced([now]), min_age=0, repack_below=0)
    assert not the_plan.fated(remote_gc.Fate.REPACK)
    assert len(the_plan.fated(remote_gc.Fate.KEEP)) == 2
    swept = remote_gc.execute(keys, the_plan, retry=FAST)
    assert swept.ok and not swept.repacked
    _pulls(tmp_path, now, remote, "fresh")


def test_repack_everything_leaves_no_garbage_in_any_pack(tmp_path: Path, store: Store) -> None:
    remote, keys, _, now = _pushed_folder(tmp_path, store)
    swept = _collect(keys, now, repack_below=1.0)
    assert swept.ok and len(swept.repacked) == 2  # the pack kept whole at 0.5 too
    assert set(_slots(keys)) == _wants(now, *[n for n in KEPT if n.startswith("fam/")])
    for new in swept.repacked.values():  # written once, named by its bytes
        data = (tmp_path / "remote" / pack_key(new)).read_bytes()
        assert digests.of_bytes(data).hex == new
    _pulls(tmp_path, now, remote, "fresh")


def test_keep_registry_keeps_the_objects_of_another_project(tmp_path: Path, store: Store) -> None:
    remote, keys, everything, now = _pushed_folder(tmp_path, store)
    the_plan = remote_gc.plan(keys, remote_gc.referenced([now, everything]), min_age=0)
    assert not the_plan.objects and not the_plan.packs
    _pulls(tmp_path, everything, remote, "fresh")


class _Cut(Exception):
    """The process dies here."""


class _Dying:
    """A remote's keys that die at the ``at``-th change (a put, or the delete of one key)."""

    def __init__(self, keys: Keys, at: int) -> None:
        self.keys, self.at, self.changes = keys, at, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.keys, name)

    def _change(self) -> None:
        self.changes += 1
        if self.changes == self.at:
            raise _Cut

    def put(self, key: str, path: Path, digest: Digest) -> bool:
        self._change()
        return self.keys.put(key, path, digest)

    def delete(self, keys: Sequence[str]) -> dict[str, FixtureStoreError]:
        for key in keys:
            self._change()
            self.keys.delete([key])
        return {}


def test_a_gc_cut_at_any_step_leaves_every_referenced_object_readable(
    tmp_path: Path, store: Store
) -> None:
    pristine = FolderRemote("shared", tmp_path / "pristine")
    _, now = _pushed(tmp_path, store, pristine)
    counting = _Dying(keys_of(pristine), 0)  # type: ignore[arg-type]
    shutil.copytree(pristine.root, tmp_path / "counted")
    counting.keys = keys_of(FolderRemote("shared", tmp_path / "counted"))  # type: ignore[assignment]
    _collect(counting, now, repack_below=0.5)
    steps = counting.changes
    assert steps > 5
    for at in range(1, steps + 1):
        copy = tmp_path / f"cut-{at}"
        shutil.copytree(pristine.root, copy)
        remote = FolderRemote("shared", copy)
        with pytest.raises(_Cut):
            _collect(_Dying(keys_of(remote), at), now, repack_below=0.5)  # type: ignore[arg-type]
        _pulls(tmp_path, now, remote, f"after-cut-{at}")
        again = _collect(keys_of(remote), now, repack_below=0.5)  # type: ignore[arg-type]
        assert again.ok
        _pulls(tmp_path, now, remote, f"after-rerun-{at}")


def test_a_pack_an_index_written_after_the_plan_names_is_spared(
    tmp_path: Path, store: Store
) -> None:
    _remote, keys, _, now = _pushed_folder(tmp_path, store)
    the_plan = remote_gc.plan(keys, remote_gc.referenced([now]), min_age=0)
    (doomed,) = the_plan.fated(remote_gc.Fate.DELETE)
    # a push of another registry, meanwhile, finds its objects in that pack and indexes them
    data = index_bytes([(doomed.pack, [(Digest(h, s), o) for h, s, o in _members(keys, doomed)])])
    (tmp_path / "remote" / INDEXES / f"{digests.of_bytes(data).hex}.json").write_bytes(data)
    swept = remote_gc.execute(keys, the_plan, retry=FAST)
    assert swept.spared == [doomed.pack.hex]
    assert (tmp_path / "remote" / doomed.key).exists()


def _members(keys: Keys, pack: remote_gc.PackPlan) -> list[tuple[str, int, int]]:
    listed = keys.stamped(INDEXES)
    return [
        (h, s.length, s.offset)
        for table in remote_gc.read_indexes(keys, listed, FAST, 4).values()
        for h, s in table.items()
        if s.pack == pack.pack
    ]


def test_what_is_younger_than_min_age_is_left_and_an_old_orphan_pack_goes(
    tmp_path: Path, store: Store
) -> None:
    _remote, keys, _, now = _pushed_folder(tmp_path, store)
    orphan = b"the pack of a push cut before its index"
    hexpart = digests.of_bytes(orphan).hex
    (tmp_path / "remote" / pack_key(hexpart)).write_bytes(orphan)
    young = remote_gc.plan(keys, remote_gc.referenced([now]))  # the default: an hour
    assert not young.objects and young.young_objects == 1
    assert {p.fate for p in young.packs} == {remote_gc.Fate.YOUNG}
    assert remote_gc.execute(keys, young, retry=FAST).removed == []
    swept = _collect(keys, now)
    assert pack_key(hexpart) in swept.removed
    assert not (tmp_path / "remote" / pack_key(hexpart)).exists()


# -- refusals --------------------------------------------------------------------------------
def test_a_registry_with_an_invalid_record_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "broken"
    (root / "provenance").mkdir(parents=True)
    (root / "provenance" / "fam.json").write_text(
        '{"format_version": 1, "records": {"fam/x": {"kind": "fixture"}}}'
    )
    with pytest.raises(UsageError, match="refusing to collect") as info:
        remote_gc.referenced([registry_mod.load(root)])
    assert "fam/x" in info.value.message
    assert info.value.fix


def test_a_pack_index_that_cannot_be_read_refuses_the_gc_and_nothing_goes(
    tmp_path: Path, store: Store
) -> None:
    _remote, keys, _, now = _pushed_folder(tmp_path, store)
    (index,) = (tmp_path / "remote" / INDEXES).iterdir()
    damaged = bytearray(index.read_bytes())
    damaged[10] ^= 1
    index.chmod(0o644)
    index.write_bytes(bytes(damaged))
    before = sorted(p for p in (tmp_path / "remote").rglob("*") if p.is_file())
    with pytest.raises(UsageError, match="cannot be read") as info:
        remote_gc.plan(keys, remote_gc.referenced([now]), min_age=0)
    assert index.name in info.value.message
    assert sorted(p for p in (tmp_path / "remote").rglob("*") if p.is_file()) == before


@pytest.mark.parametrize(
    ("url", "says"),
    [("hf://datasets/org/x", "history keeps every file"), ("https://h.example/f", "only serves")],
)
def test_a_hub_or_https_remote_is_refused(url: str, says: str) -> None:
    remote = open_remote(RemoteSpec.from_json("r", {"url": url}, "<test>"))
    refused = remote_gc.refusal(remote)
    assert refused is not None and says in refused.message and refused.fix
    assert remote_gc.refusal(FolderRemote("f", Path("/nowhere"))) is None


# -- S3 ----------------------------------------------------------------------------------------
def test_s3_gc_removes_garbage_and_repacks_and_every_referenced_object_pulls(
    tmp_path: Path, store: Store, s3_endpoint: str, bucket: str
) -> None:
    spec = RemoteSpec("team", f"s3://{bucket}/fixtures", endpoint_url=s3_endpoint)
    remote = S3Remote.connect(spec, retry=FAST)
    everything, now = _pushed(tmp_path, store, remote)
    keys = keys_of(remote)
    assert keys is not None
    listed = {
        o["Key"] for o in s3_client(s3_endpoint).list_objects_v2(Bucket=bucket).get("Contents", [])
    }
    swept = _collect(keys, now, repack_below=0.5)
    assert swept.ok and swept.repacked and swept.removed
    after = {
        o["Key"] for o in s3_client(s3_endpoint).list_objects_v2(Bucket=bucket).get("Contents", [])
    }
    assert {f"fixtures/{k}" for k in swept.removed} == listed - after
    big = object_key(plan(everything, ["big/b1"]).wants["big/b1"][0])
    assert f"fixtures/{big}" not in after
    assert f"fixtures/{object_key(plan(now, ['big/b0']).wants['big/b0'][0])}" in after
    _pulls(tmp_path, now, remote, "fresh")
    assert not _collect(keys, now, repack_below=0.5).removed  # nothing more to do


class _KeepsIndexes(_Dying):
    """A remote's keys that refuse to delete an index (a permission, a lock of the bucket)."""

    def __init__(self, keys: Keys) -> None:
        super().__init__(keys, 0)

    def delete(self, keys: Sequence[str]) -> dict[str, FixtureStoreError]:
        refused = [k for k in keys if k.startswith(INDEXES + "/")]
        failed = self.keys.delete([k for k in keys if k not in refused])
        return failed | {k: RemoteError(f"cannot remove {k}") for k in refused}


def test_no_pack_goes_while_an_index_naming_it_could_not_be_removed(
    tmp_path: Path, store: Store
) -> None:
    remote = FolderRemote("shared", tmp_path / "remote")
    _, now = _pushed(tmp_path, store, remote)
    packs_before = sorted((tmp_path / "remote" / PACKS).glob("*.pack"))
    swept = _collect(_KeepsIndexes(keys_of(remote)), now, repack_below=1.0)  # type: ignore[arg-type]
    assert not swept.ok and all(k.startswith(INDEXES) for k in swept.failed)
    assert set(packs_before) <= set((tmp_path / "remote" / PACKS).glob("*.pack"))
    _pulls(tmp_path, now, remote, "fresh")


def test_a_damaged_object_is_never_repacked_and_its_pack_is_kept_whole(
    tmp_path: Path, store: Store
) -> None:
    _remote, keys, _, now = _pushed_folder(tmp_path, store)
    the_plan = remote_gc.plan(keys, remote_gc.referenced([now]), min_age=0, repack_below=0.5)
    (repack,) = the_plan.fated(remote_gc.Fate.REPACK)
    (victim, offset), *_ = repack.live
    path = tmp_path / "remote" / repack.key
    data = bytearray(path.read_bytes())
    data[offset] ^= 1
    path.chmod(0o644)
    path.write_bytes(bytes(data))
    swept = remote_gc.execute(keys, the_plan, retry=FAST)
    assert list(swept.failed) == [repack.key]
    assert victim.text in swept.failed[repack.key].message
    assert not swept.repacked and path.exists()
    assert victim.hex in _slots(keys)  # still named where it is: nothing was lost


def test_the_temp_file_of_a_cut_push_goes_once_it_is_older_than_min_age(
    tmp_path: Path, store: Store
) -> None:
    _remote, keys, _, now = _pushed_folder(tmp_path, store)
    temps = tmp_path / "remote" / "tmp"
    for name in ("push-old", "push-young", "notes.txt"):
        (temps / name).write_bytes(b"half an object")
    old = time.time() - 7200
    os.utime(temps / "push-old", (old, old))
    os.utime(temps / "notes.txt", (old, old))
    the_plan = remote_gc.plan(keys, remote_gc.referenced([now]), min_age=3600)
    assert the_plan.temps == (("tmp/push-old", 14),)
    remote_gc.execute(keys, the_plan, retry=FAST)
    assert sorted(p.name for p in temps.iterdir()) == ["notes.txt", "push-young"]


# -- S3: multipart uploads cut pushes left open -------------------------------------------------
class _Died(BaseException):
    """The pushing process dies here: it never completes nor aborts its upload."""


def _die(**_: Any) -> None:
    raise _Died


def _cut_multipart_push(
    tmp_path: Path, spec: RemoteSpec, monkeypatch: pytest.MonkeyPatch
) -> tuple[Digest, str]:
    """A push of a 5,000-byte object in 1 KiB parts that dies after its parts are up: the
    object, and the key its upload is open at."""
    pusher = S3Remote.connect(spec, retry=FAST, multipart_threshold=1024, part_size=1024)
    data = b"a large object, cut mid-push\n" * 172 + b"...."
    path = tmp_path / "large.bin"
    path.write_bytes(data)
    digest = digests.of_bytes(data)
    monkeypatch.setattr(pusher.client, "complete_multipart_upload", _die)
    monkeypatch.setattr(pusher.client, "abort_multipart_upload", _die)
    with pytest.raises(_Died):
        pusher.upload(path, digest)
    return digest, pusher.key(digest)


def _open_uploads(endpoint: str, bucket: str) -> list[str]:
    listed = s3_client(endpoint).list_multipart_uploads(Bucket=bucket)
    return sorted(u["Key"] for u in listed.get("Uploads", []))


def _others(endpoint: str, bucket: str) -> list[str]:
    """Uploads in progress that are not the remote's: another prefix (one sharing its first
    letters too), and a key of its prefix fixture-store never writes."""
    keys = ["other/objects/sha256/ab/cd", "fixtures-old/objects/packs/x.pack", "fixtures/notes"]
    for key in keys:
        s3_client(endpoint).create_multipart_upload(Bucket=bucket, Key=key)
    return sorted(keys)


def test_s3_gc_aborts_the_upload_a_cut_multipart_push_left_once_it_is_older_than_min_age(
    tmp_path: Path, store: Store, s3_endpoint: str, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = RemoteSpec("team", f"s3://{bucket}/fixtures", endpoint_url=s3_endpoint)
    remote = S3Remote.connect(spec, retry=FAST)
    _, now = _pushed(tmp_path, store, remote)
    others = _others(s3_endpoint, bucket)
    digest, key = _cut_multipart_push(tmp_path, spec, monkeypatch)
    assert _open_uploads(s3_endpoint, bucket) == sorted([*others, key])
    assert not remote.stat(digest)  # a listing of keys does not show it
    keys = keys_of(remote)
    assert keys is not None
    keep = remote_gc.referenced([now])
    # moto says every upload was initiated on 2010-11-10: "young" is a min-age beyond that
    young = remote_gc.plan(keys, keep, min_age=1e12, retry=FAST)
    assert young.uploads == () and young.young_uploads == 1
    assert not remote_gc.execute(keys, young, retry=FAST).aborted
    assert _open_uploads(s3_endpoint, bucket) == sorted([*others, key])
    the_plan = remote_gc.plan(keys, keep, min_age=0, retry=FAST)
    (upload,) = the_plan.uploads
    assert (f"fixtures/{upload.key}", upload.size) == (key, digest.size)  # five parts: ListParts
    assert the_plan.young_uploads == 0
    assert the_plan.to_json()["uploads"] == [
        {"key": upload.key, "upload_id": upload.upload_id, "initiated": upload.written,
         "bytes": digest.size}
    ]  # fmt: skip
    assert _open_uploads(s3_endpoint, bucket) == sorted([*others, key])  # a plan aborts nothing
    swept = remote_gc.execute(keys, the_plan, retry=FAST)
    assert swept.ok and swept.aborted == [f"{upload.key} (upload {upload.upload_id})"]
    assert _open_uploads(s3_endpoint, bucket) == others  # the others' are untouched
    _pulls(tmp_path, now, remote, "fresh")
    assert not remote_gc.plan(keys, keep, min_age=0, retry=FAST).uploads


def test_s3_gc_never_takes_an_upload_outside_its_prefix_from_a_server_ignoring_prefix(
    tmp_path: Path, store: Store, proxy: FaultProxy, bucket: str, s3_endpoint: str
) -> None:
    spec = RemoteSpec("team", f"s3://{bucket}/fixtures", endpoint_url=proxy.url)
    remote = S3Remote.connect(spec, retry=FAST)
    _, now = _pushed(tmp_path, store, remote)
    others = _others(s3_endpoint, bucket)
    proxy.faults.ignore_prefix = True
    keys = keys_of(remote)
    assert keys is not None
    assert (
        len(s3_client(proxy.url).list_multipart_uploads(Bucket=bucket, Prefix="x")["Uploads"]) == 3
    )
    the_plan = remote_gc.plan(keys, remote_gc.referenced([now]), min_age=0, retry=FAST)
    assert the_plan.uploads == ()
    remote_gc.execute(keys, the_plan, retry=FAST)
    assert _open_uploads(s3_endpoint, bucket) == others


def test_s3_gc_reports_an_upload_it_may_not_abort_and_the_remote_stays_readable(
    tmp_path: Path,
    store: Store,
    proxy: FaultProxy,
    bucket: str,
    s3_endpoint: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = RemoteSpec("team", f"s3://{bucket}/fixtures", endpoint_url=proxy.url)
    remote = S3Remote.connect(spec, retry=FAST)
    everything, _ = _pushed(tmp_path, store, remote)
    _, key = _cut_multipart_push(tmp_path, spec, monkeypatch)
    keys = keys_of(remote)
    assert keys is not None
    the_plan = remote_gc.plan(keys, remote_gc.referenced([everything]), min_age=0, retry=FAST)
    (upload,) = the_plan.uploads  # and nothing else to do
    proxy.faults.forbid = True  # the credentials may list, not abort
    swept = remote_gc.execute(keys, the_plan, retry=FAST)
    proxy.faults.forbid = False
    assert not swept.ok and not swept.aborted
    error = swept.failed[f"{upload.key} (upload {upload.upload_id})"]
    assert "access denied" in error.message and key in error.message and error.fix
    assert _open_uploads(s3_endpoint, bucket) == [key]
    _pulls(tmp_path, everything, remote, "fresh")


def test_s3_gc_reads_every_page_of_the_uploads_listing(
    tmp_path: Path, store: Store, proxy: FaultProxy, bucket: str, s3_endpoint: str
) -> None:
    spec = RemoteSpec("team", f"s3://{bucket}/fixtures", endpoint_url=proxy.url)
    remote = S3Remote.connect(spec, retry=FAST)
    everything, _ = _pushed(tmp_path, store, remote)
    client = s3_client(s3_endpoint)
    for i in range(5):  # two on one key: the next page starts inside a key's uploads
        key = f"fixtures/objects/sha256/{i // 2:02x}/" + "e" * 62
        client.create_multipart_upload(Bucket=bucket, Key=key)
    proxy.faults.upload_pages = 2
    keys = keys_of(remote)
    assert keys is not None
    the_plan = remote_gc.plan(keys, remote_gc.referenced([everything]), min_age=0, retry=FAST)
    assert len(the_plan.uploads) == 5
    assert len(remote_gc.execute(keys, the_plan, retry=FAST).aborted) == 5
    assert _open_uploads(s3_endpoint, bucket) == []
