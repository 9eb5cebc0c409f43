from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fixture_store import ingest
from fixture_store import registry as registry_mod
from fixture_store.access import Fixtures
from fixture_store.errors import (
    DigestMismatchError,
    GapError,
    MissingObjectError,
    StoreError,
    UnknownArtifactError,
)
from fixture_store.objects import fsutil
from fixture_store.objects.digests import Algorithm, Digest
from fixture_store.objects.store import Store
from fixture_store.registry import Registry
from fixture_store.verify import Status, Verifier, verify_names
from tests.support import planted


def make_project(project: Path, store: Store) -> None:
    (project / "data" / "case" / "test_data_set_0").mkdir(parents=True)
    (project / "data" / "w.bin").write_bytes(os.urandom(3 << 20))
    (project / "data" / "case" / "model.onnx").write_bytes(b"model")
    (project / "data" / "case" / "test_data_set_0" / "input_0.pb").write_bytes(b"input")
    reg = registry_mod.load(project)
    ingest.add(store, reg, project / "data" / "w.bin", name="fam/w", kind="checkpoint")
    reg = registry_mod.load(project)
    ingest.add(store, reg, project / "data" / "case", name="fam/case", kind="onnx-case")


def project_with_weights(project: Path, store: Store) -> tuple[Registry, Digest]:
    """The test project, its registry, and the digest of its single-object record fam/w."""
    make_project(project, store)
    reg = registry_mod.load(project)
    digest = reg.get("fam/w").digest
    assert digest is not None
    return reg, digest


def tamper(path: Path, offset: int = 0) -> None:
    os.chmod(path, 0o644)
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 1]))


def test_everything_verifies_after_add(project: Path, store: Store) -> None:
    make_project(project, store)
    results = verify_names(store, registry_mod.load(project), ["fam/w", "fam/case"], full=True)
    assert [r.status for r in results] == [Status.VERIFIED, Status.VERIFIED]


def test_a_flipped_byte_fails_full_verify_naming_both_digests(project: Path, store: Store) -> None:
    reg, digest = project_with_weights(project, store)
    tamper(store.object_path(digest), 12345)
    [r] = verify_names(store, reg, ["fam/w"], full=True)
    assert r.status is Status.MISMATCH
    assert r.expected == digest and r.actual is not None and r.actual != digest
    assert digest.text in r.message and r.actual.text in r.message
    assert r.fix is not None and "fixture-store fetch fam/w" in r.fix
    with pytest.raises(DigestMismatchError, match="fam/w"):
        Fixtures(store, reg).path("fam/w")


def test_a_tampered_tree_member_is_named(project: Path, store: Store) -> None:
    make_project(project, store)
    reg = registry_mod.load(project)
    record = reg.get("fam/case")
    assert record.members is not None
    tamper(store.object_path(record.members.members["test_data_set_0/input_0.pb"]))
    [r] = verify_names(store, reg, ["fam/case"])
    assert r.status is Status.MISMATCH and r.member == "test_data_set_0/input_0.pb"
    with pytest.raises(DigestMismatchError):
        Fixtures(store, reg).tree("fam/case")


def _forget_proofs(store: Store) -> None:
    """Drop the verified-state cache, with the proofs the store made as it published what it
    had hashed on the way in: the next verify reads every object, as on another machine."""
    (store.state_dir / "verified.sqlite3").unlink()


def test_warm_verify_skips_hashing_and_full_rehashes(project: Path, store: Store) -> None:
    make_project(project, store)
    _forget_proofs(store)
    reg = registry_mod.load(project)
    [cold] = verify_names(store, reg, ["fam/w"])
    assert cold.hashed_bytes == 3 << 20 and not cold.cached
    [warm] = verify_names(store, reg, ["fam/w"])
    assert warm.ok and warm.cached and warm.hashed_bytes == 0
    [full] = verify_names(store, reg, ["fam/w"], full=True)
    assert full.ok and not full.cached and full.hashed_bytes == 3 << 20


def test_an_edit_that_restores_mtime_still_misses_the_cache(project: Path, store: Store) -> None:
    reg, digest = project_with_weights(project, store)
    path = store.object_path(digest)
    verify_names(store, reg, ["fam/w"])
    st = path.stat()
    tamper(path, 7)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size, same mtime: ctime moved
    [r] = verify_names(store, reg, ["fam/w"])
    assert r.status is Status.MISMATCH


def test_a_read_only_bit_is_not_proof(project: Path, store: Store) -> None:
    reg, digest = project_with_weights(project, store)
    path = store.object_path(digest)
    tamper(path, 1)
    os.chmod(path, 0o444)
    [r] = verify_names(store, reg, ["fam/w"])
    assert r.status is Status.MISMATCH


def test_missing_object_and_gap_statuses(project: Path, store: Store) -> None:
    reg, digest = project_with_weights(project, store)
    store.remove(digest)
    [r] = verify_names(store, reg, ["fam/w"])
    assert r.status is Status.MISSING and r.fix == "fixture-store fetch fam/w"
    with pytest.raises(MissingObjectError, match="fixture-store fetch fam/w"):
        Fixtures(store, reg).path("fam/w")

    fam = project / "provenance" / "fam.json"
    text = fam.read_text().replace(
        '"kind": "checkpoint"',
        '"gap": {"reason": "weights not public yet"},\n      "kind": "checkpoint"',
    )
    fam.write_text(text)
    reg = registry_mod.load(project)
    [r] = verify_names(store, reg, ["fam/w"])
    assert r.status is Status.GAP
    with pytest.raises(GapError, match="weights not public yet"):
        Fixtures(store, reg).path("fam/w")


def test_verified_tree_checkout_holds_exactly_the_members(project: Path, store: Store) -> None:
    make_project(project, store)
    reg = registry_mod.load(project)
    folder = Fixtures(store, reg).tree("fam/case")
    assert (folder / "model.onnx").read_bytes() == b"model"
    assert (folder / "test_data_set_0" / "input_0.pb").read_bytes() == b"input"
    # a stray file in the checkout makes it rebuilt, not trusted
    os.chmod(folder, 0o755)
    (folder / "extra.pb").write_bytes(b"extra")
    again = Fixtures(store, reg).tree("fam/case")
    assert not (again / "extra.pb").exists()


def _registry_files(project: Path) -> dict[str, bytes]:
    """The registry's files (its lock folder, made by the writes that set the project up, is
    not one)."""
    return {p.name: p.read_bytes() for p in (project / "provenance").iterdir() if p.is_file()}


def test_unregistered_bytes_in_the_store_are_never_trusted(project: Path, store: Store) -> None:
    make_project(project, store)
    stray = store.put_bytes(b"adopt me")
    registry_text = _registry_files(project)
    reg = registry_mod.load(project)
    # The bytes are in the store, yet nothing vouches for them: a name without a record is
    # refused, whatever the store holds, and verifying everything adopts nothing.
    assert store.has(stray)
    [unknown] = verify_names(store, reg, ["fam/adopt-me"])
    assert unknown.status is Status.UNKNOWN and not unknown.ok
    with pytest.raises(UnknownArtifactError, match="fam/adopt-me"):
        Fixtures(store, reg).path("fam/adopt-me")
    assert all(r.ok for r in verify_names(store, reg, reg.names(), full=True))
    assert _registry_files(project) == registry_text
    assert all(stray not in (r.digest, *(d for _, d in (r.members or ()))) for r in reg.records())


@pytest.mark.parametrize("enabled", [True, False])
def test_verify_leaves_the_cyclic_gc_as_it_found_it(
    project: Path, store: Store, enabled: bool
) -> None:
    import gc

    make_project(project, store)
    reg = registry_mod.load(project)
    seen = []
    (gc.enable if enabled else gc.disable)()
    try:
        results = verify_names(
            store, reg, reg.names(), on_result=lambda _r: seen.append(gc.isenabled())
        )
        assert all(r.ok for r in results)
        assert seen and not any(seen)  # paused while verifying
        assert gc.isenabled() is enabled
    finally:
        gc.enable()


def test_a_view_that_batches_cache_writes_saves_them_on_close(
    project: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fixture_store.objects import statecache
    from fixture_store.objects.statecache import VerifiedCache

    monkeypatch.setattr(statecache, "FLUSH_SECONDS", 3600.0)  # only the close saves here
    reg, w = project_with_weights(project, store)
    _forget_proofs(store)
    fx = Fixtures(store, reg, batch_cache_writes=True)
    assert fx.check("fam/w").ok and fx.check("fam/case").ok
    saved = VerifiedCache.open(store.state_dir)
    st = os.stat(store.object_path(w))
    b3 = reg.get("fam/w").blake3  # the proof of a BLAKE3 re-verification
    assert b3 is not None
    assert not saved.vouches(w.hex, st, b3)  # not yet written: one transaction per batch
    fx.close()
    assert VerifiedCache.open(store.state_dir).vouches(w.hex, st, b3)


def test_presence_counts_objects_without_hashing_them(project: Path, store: Store) -> None:
    from fixture_store.verify import presence_by_family, present

    reg, w = project_with_weights(project, store)
    case = reg.get("fam/case")
    assert case.members is not None and present(store, case)
    assert dict(presence_by_family(store, reg)["fam"]) == {"present": 2, "invalid": 0}
    store.remove(next(d for _, d in case.members).hex)
    tamper(store.object_path(w.hex))
    assert not present(store, case)
    assert present(store, reg.get("fam/w"))  # present is not verified
    assert dict(presence_by_family(store, reg)["fam"]) == {"present": 1, "missing": 1, "invalid": 0}


def test_a_plan_shows_the_work_before_it_reads_the_store(project: Path, store: Store) -> None:
    from fixture_store.verify import Verifier, VerifyPlan

    reg, digest = project_with_weights(project, store)
    case = reg.get("fam/case")
    assert case.members is not None
    plan = VerifyPlan.of(store, reg, ["fam/w", "nope/x", "fam/case", "fam/w"])
    assert plan.settled[1].status is Status.UNKNOWN  # decided by the registry alone
    assert sorted(plan.records) == [0, 2, 3]
    # each object once, though fam/w is named twice: its one object, the tree's members and
    # its manifest
    assert len(plan.objects) == 1 + len(case.members.members) + 1
    store.remove(digest)
    results = plan.execute(Verifier(store))
    assert [r.status for r in results] == [
        Status.MISSING,
        Status.UNKNOWN,
        Status.VERIFIED,
        Status.MISSING,
    ]


def _edit_record(project: Path, name: str, **fields: object) -> Registry:
    fam = project / "provenance" / f"{name.partition('/')[0]}.json"
    doc = json.loads(fam.read_text())
    record = doc["records"][name]
    record.update(fields)
    for key in [k for k, v in fields.items() if v is None]:
        del record[key]
    fam.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return registry_mod.load(project)


def test_the_warm_path_refuses_a_record_whose_size_is_wrong(project: Path, store: Store) -> None:
    reg, digest = project_with_weights(project, store)
    [cold] = verify_names(store, reg, ["fam/w"])
    assert cold.ok
    wrong = _edit_record(project, "fam/w", size=digest.size + 1)  # the right sha256
    [warm] = verify_names(store, wrong, ["fam/w"])
    assert warm.status is Status.MISMATCH and not warm.cached
    with pytest.raises(DigestMismatchError, match="fam/w"):
        Fixtures(store, wrong).path("fam/w")


def test_a_cache_row_vouches_only_for_the_algorithm_that_made_it(
    project: Path, store: Store
) -> None:
    import blake3

    reg, digest = project_with_weights(project, store)
    path = store.object_path(digest)
    # Other bytes of the same size, and a record whose BLAKE3 is theirs: BLAKE3 re-verification
    # trusts the reviewed record's BLAKE3, but it never proved the SHA-256.
    other = os.urandom(digest.size)
    os.chmod(path, 0o644)
    path.write_bytes(other)
    forged = _edit_record(project, "fam/w", blake3=blake3.blake3(other).hexdigest())
    [auto] = verify_names(store, forged, ["fam/w"])
    assert auto.ok
    [sha] = verify_names(store, forged, ["fam/w"], algorithm=Algorithm.SHA256)
    assert sha.status is Status.MISMATCH and not sha.cached
    # and the other way: a row proved by SHA-256 does not vouch for a record's BLAKE3
    store.put_bytes((project / "data" / "w.bin").read_bytes(), digest, replace=True)
    reg = registry_mod.load(project)
    [sha] = verify_names(store, _edit_record(project, "fam/w", blake3=None), ["fam/w"])
    assert sha.ok
    [auto] = verify_names(store, reg, ["fam/w"])  # the BLAKE3 forged above: now wrong
    assert auto.status is Status.MISMATCH and "BLAKE3" in auto.message


def test_an_object_file_that_is_a_link_is_not_verified(
    project: Path, store: Store, tmp_path: Path
) -> None:
    reg, digest = project_with_weights(project, store)
    path = store.object_path(digest)
    outside = tmp_path / "outside.bin"
    outside.write_bytes(path.read_bytes())  # the right bytes, outside the store
    [first] = verify_names(store, reg, ["fam/w"])
    assert first.ok
    os.chmod(path, 0o644)
    path.unlink()
    path.symlink_to(outside)
    for full in (False, True):
        [r] = verify_names(store, reg, ["fam/w"], full=full)
        assert r.status is Status.MISMATCH and "symbolic link" in r.message, full
        assert r.fix is not None and str(path) in r.fix
    with pytest.raises(DigestMismatchError):
        Fixtures(store, reg).path("fam/w")


def test_verify_refuses_a_shard_or_state_folder_that_is_a_link(
    project: Path, store: Store, tmp_path: Path
) -> None:
    reg, digest = project_with_weights(project, store)
    shard = store.object_path(digest).parent
    moved = tmp_path / "moved-shard"
    shard.rename(moved)
    shard.symlink_to(moved, target_is_directory=True)
    with pytest.raises(StoreError, match="plain folders"):
        verify_names(store, reg, ["fam/w"])
    shard.unlink()
    moved.rename(shard)
    user = tmp_path / "user"
    user.mkdir()
    fsutil.remove_tree(store.state_dir)
    store.state_dir.symlink_to(user, target_is_directory=True)
    with pytest.raises(StoreError, match="plain folders"):
        verify_names(store, reg, ["fam/w"])
    assert list(user.iterdir()) == []


def test_a_checkout_with_a_planted_link_is_rebuilt(
    project: Path, store: Store, tmp_path: Path
) -> None:
    make_project(project, store)
    reg = registry_mod.load(project)
    folder = Fixtures(store, reg).tree("fam/case")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "input_0.pb").write_bytes(b"unverified")
    os.chmod(folder, 0o755)
    (folder / "test_data_set_1").symlink_to(elsewhere, target_is_directory=True)
    again = Fixtures(store, reg).tree("fam/case")
    assert not os.path.lexists(again / "test_data_set_1")
    assert (elsewhere / "input_0.pb").read_bytes() == b"unverified"


def test_a_checkout_member_that_is_a_link_to_its_object_is_rebuilt(
    project: Path, store: Store
) -> None:
    make_project(project, store)
    reg = registry_mod.load(project)
    record = reg.get("fam/case")
    assert record.members is not None
    folder = Fixtures(store, reg).tree("fam/case")
    member = folder / "model.onnx"
    os.chmod(folder, 0o755)
    member.unlink()
    member.symlink_to(store.object_path(record.members.members["model.onnx"]))
    again = Fixtures(store, reg).tree("fam/case")
    assert not (again / "model.onnx").is_symlink()
    assert (again / "model.onnx").read_bytes() == b"model"


def test_a_tree_folder_that_is_a_link_is_refused(
    project: Path, store: Store, tmp_path: Path
) -> None:
    make_project(project, store)
    reg = registry_mod.load(project)
    user = tmp_path / "user"
    user.mkdir()
    (store.root / "trees").symlink_to(user, target_is_directory=True)
    with pytest.raises(StoreError, match="plain folders"):
        Fixtures(store, reg).tree("fam/case")
    assert list(user.iterdir()) == []


def test_tree_files_come_from_the_manifest(project: Path, store: Store) -> None:
    make_project(project, store)
    reg = registry_mod.load(project)
    files = Fixtures(store, reg).tree_files("fam/case")
    assert sorted(files) == ["model.onnx", "test_data_set_0/input_0.pb"]
    assert files["test_data_set_0/input_0.pb"].read_bytes() == b"input"


# -- SHA-256 only: the records the project commits carry no BLAKE3 ---------------------------
def _without_blake3(project: Path) -> Registry:
    """Rewrite the family file without any recorded BLAKE3, so verify must hash SHA-256."""
    import json

    path = project / "provenance" / "fam.json"
    doc = json.loads(path.read_text())
    for raw in doc["records"].values():
        raw.pop("blake3", None)
        for member in (raw.get("members") or {}).values():
            member.pop("blake3", None)
    path.write_text(registry_mod.dumps(doc))
    reg = registry_mod.load(project)
    assert all(r.blake3 is None and not r.member_blake3 for r in reg.records())
    return reg


def _same_size_other_bytes(path: Path) -> None:
    """Replace the bytes with others of the same size (a different SHA-256, the right size)."""
    size = path.stat().st_size
    os.chmod(path, 0o644)
    path.write_bytes(bytes(b ^ 0x5A for b in path.read_bytes()))
    assert path.stat().st_size == size


@pytest.mark.parametrize("full", [False, True])
def test_sha256_only_records_a_wrong_sha256_of_the_right_size_is_a_mismatch(
    project: Path, store: Store, full: bool
) -> None:
    make_project(project, store)
    reg = _without_blake3(project)
    w = reg.get("fam/w").digest
    case = reg.get("fam/case")
    assert w is not None and case.members is not None
    member = case.members.members["model.onnx"]
    _same_size_other_bytes(store.object_path(w))
    _same_size_other_bytes(store.object_path(member))
    # Cold: nothing in the verified-state cache for the damaged objects.
    results = verify_names(store, reg, ["fam/w", "fam/case"], full=full)
    assert [r.status for r in results] == [Status.MISMATCH, Status.MISMATCH]
    assert results[0].expected == w and results[0].actual is not None
    assert results[0].actual.size == w.size and results[0].actual.hex != w.hex
    assert results[1].member == "model.onnx"
    assert Verifier(store, full=full).check_object(w).status is Status.MISMATCH


def test_sha256_only_full_verify_ignores_a_cache_that_vouches_for_damaged_bytes(
    project: Path, store: Store
) -> None:
    make_project(project, store)
    reg = _without_blake3(project)
    w = reg.get("fam/w").digest
    assert w is not None
    [warm] = verify_names(store, reg, ["fam/w"])
    assert warm.ok
    path = store.object_path(w)
    _same_size_other_bytes(path)
    # A cache entry for the damaged file's stat, as a stale or forged cache would hold.
    verifier = Verifier(store)
    verifier.cache.remember(w.hex, os.stat(path))
    verifier.cache.flush()
    [cached] = verify_names(store, reg, ["fam/w"])
    assert cached.ok and cached.cached  # the warm path trusts its cache: a stat, no hashing
    [full] = verify_names(store, reg, ["fam/w"], full=True)
    assert full.status is Status.MISMATCH and not full.cached
    assert full.actual is not None and full.actual.size == w.size


def _tree_record(store: Store, members: dict[str, bytes]) -> dict[str, object]:
    """The record form of a tree, built without Tree's checks (as a hand edit could write it)."""
    import json

    entries = {}
    for rel, data in members.items():
        d = store.put_bytes(data)
        entries[rel] = {"digest": d.text, "size": d.size}
    manifest = json.dumps(
        {"format": "fixture-store.tree/1", "members": entries},
        sort_keys=True,
        separators=(",", ":"),
    )
    digest = store.put_bytes(manifest.encode() + b"\n")
    return {
        "kind": "tree",
        "digest": digest.text,
        "size": digest.size,
        "members": entries,
        "source": {"type": "local", "path": "t"},
    }


@pytest.mark.parametrize(
    ("members", "why"),
    [
        ({"a": b"1", "a/b/c": b"2"}, "both a file and a folder"),
        ({"x/" + "n" * 256: b"1"}, "a filesystem allows 255"),
        ({"/".join(["s" * 250] * 17): b"1"}, "a filesystem allows 4096"),
    ],
)
def test_a_tree_no_checkout_can_hold_is_an_invalid_record_not_a_crash(
    project: Path, store: Store, members: dict[str, bytes], why: str
) -> None:
    from click.testing import CliRunner

    from fixture_store.cli import main

    (project / "provenance" / "fam.json").write_text(
        registry_mod.dumps(
            {"format_version": 1, "records": {"fam/t": _tree_record(store, members)}}
        )
    )
    reg = registry_mod.load(project)
    [(name, err)] = reg.invalid()
    assert name == "fam/t" and why in err.message
    [r] = verify_names(store, reg, ["fam/t"], full=True)
    assert r.status is Status.INVALID_RECORD and why in r.message
    result = CliRunner().invoke(
        main, ["--store", str(store.root), "--registry", str(project), "path", "fam/t"]
    )
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert why in result.output and "Traceback" not in result.output


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("at", "kind"), planted.cases())
@pytest.mark.parametrize("size", [100, 3 << 20])
def test_hashing_refuses_an_entry_planted_after_the_sweep(
    tmp_path: Path, store: Store, at: str, kind: str, size: int
) -> None:
    """Hashing opens each object through the path primitive: a link, FIFO or folder planted at
    an object's name or at its shard's between the sweep's stat and the read is refused with
    the store's error, never followed (the link points at the right bytes), never waited on."""
    from fixture_store.verify import ObjectKey, _hashing

    digest = store.put_bytes(os.urandom(size))
    verifier = Verifier(store, full=True)
    expected: dict[ObjectKey, tuple[Digest, str | None]] = {
        (digest.hex, digest.size, None): (digest, None)
    }
    to_hash = verifier.sweep(expected, {})
    assert len(to_hash) == 1
    path = planted.plant(store, digest, kind, at, tmp_path / "outside")
    jobs = [verifier.job(digest, None, st.st_size) for _, st in to_hash]
    with pytest.raises(StoreError) as info, _hashing(jobs, 1, "thread") as hashed:
        list(hashed)
    assert str(path) in info.value.message
    assert planted.WHAT[kind] in info.value.message
    assert "fixture-store verify" in str(info.value.fix)
