"""Fast re-verification: BLAKE3 recorded at ingest, used by verify, SHA-256 forced on demand;
and the warm path that hashes nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import blake3
import pytest
from click.testing import CliRunner

from fixture_store import registry as registry_mod
from fixture_store.cli import main
from fixture_store.ingest import add
from fixture_store.objects.digests import Algorithm
from fixture_store.objects.store import Store
from fixture_store.registry import Registry
from fixture_store.verify import Status, verify_names


@pytest.fixture
def project(tmp_path: Path) -> tuple[Store, Path]:
    (tmp_path / "proj" / "provenance").mkdir(parents=True)
    return Store.at(tmp_path / "store"), tmp_path / "proj"


def _load(root: Path) -> Registry:
    return registry_mod.load(root)


def _add_file(store: Store, root: Path, name: str, data: bytes) -> None:
    p = root / "data" / name.replace("/", "_")
    p.parent.mkdir(exist_ok=True)
    p.write_bytes(data)
    add(store, _load(root), p, name=name, kind="fixture")


def _add_tree(store: Store, root: Path, name: str, files: dict[str, bytes]) -> None:
    folder = root / "trees" / name.replace("/", "_")
    for rel, data in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
    add(store, _load(root), folder, name=name, kind="tree")


def _flip_byte(path: Path) -> None:
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def test_add_records_the_blake3_of_the_ingested_bytes(project: tuple[Store, Path]) -> None:
    store, root = project
    data = os.urandom(3 << 20)
    _add_file(store, root, "fx/big", data)
    _add_tree(store, root, "fx/tree", {"a.bin": b"alpha", "sub/b.bin": b"beta"})
    raw = json.loads((root / "provenance" / "fx.json").read_text())["records"]
    assert raw["fx/big"]["blake3"] == blake3.blake3(data).hexdigest()
    members = raw["fx/tree"]["members"]
    assert members["a.bin"]["blake3"] == blake3.blake3(b"alpha").hexdigest()
    assert members["sub/b.bin"]["blake3"] == blake3.blake3(b"beta").hexdigest()
    reg = _load(root)
    assert reg.get("fx/tree").member_blake3["a.bin"] == members["a.bin"]["blake3"]
    assert not dict(reg.invalid())


def test_member_blake3_must_be_hex(project: tuple[Store, Path]) -> None:
    store, root = project
    _add_tree(store, root, "fx/tree", {"a.bin": b"alpha"})
    path = root / "provenance" / "fx.json"
    doc = json.loads(path.read_text())
    doc["records"]["fx/tree"]["members"]["a.bin"]["blake3"] = "XYZ"
    path.write_text(json.dumps(doc))
    err = dict(_load(root).invalid())["fx/tree"]
    assert err.field == "members.a.bin.blake3"


def test_verify_uses_blake3_and_still_catches_a_flipped_byte(
    project: tuple[Store, Path],
) -> None:
    store, root = project
    data = os.urandom(1 << 20)
    _add_file(store, root, "fx/big", data)
    reg = _load(root)
    [ok] = verify_names(store, reg, ["fx/big"], full=True)
    assert ok.status is Status.VERIFIED and ok.hashed_bytes == len(data)
    record = reg.get("fx/big")
    assert record.digest is not None
    _flip_byte(store.object_path(record.digest))
    [bad] = verify_names(store, reg, ["fx/big"], full=True)
    assert bad.status is Status.MISMATCH
    # The failure names the identity: expected and actual SHA-256, not only BLAKE3.
    assert record.digest.text in bad.message and bad.actual is not None
    assert bad.actual.text in bad.message and bad.actual != record.digest


def _corrupt_recorded_blake3(root: Path, name: str) -> None:
    path = root / "provenance" / "fx.json"
    doc = json.loads(path.read_text())
    doc["records"][name]["blake3"] = "0" * 64
    path.write_text(registry_mod.dumps(doc))


def test_digest_sha256_forces_the_identity_hash(project: tuple[Store, Path]) -> None:
    store, root = project
    _add_file(store, root, "fx/big", os.urandom(4096))
    # A wrong BLAKE3 tells the two modes apart: auto reads BLAKE3, sha256 never does.
    _corrupt_recorded_blake3(root, "fx/big")
    reg = _load(root)
    [auto] = verify_names(store, reg, ["fx/big"], full=True)
    assert auto.status is Status.MISMATCH and "BLAKE3" in auto.message
    assert auto.fix is not None and "rehash" in auto.fix
    [sha] = verify_names(store, reg, ["fx/big"], full=True, algorithm=Algorithm.SHA256)
    assert sha.status is Status.VERIFIED and sha.hashed_bytes == 4096

    runner = CliRunner()
    base = ["--store", str(store.root), "--registry", str(root), "verify", "--full", "--json"]
    forced = runner.invoke(main, [*base, "--digest", "sha256"])
    assert forced.exit_code == 0, forced.output
    assert json.loads(forced.output)["digest"] == "sha256"
    assert runner.invoke(main, base).exit_code == 1


def test_warm_verify_hashes_nothing_and_full_rehashes(project: tuple[Store, Path]) -> None:
    store, root = project
    _add_tree(store, root, "fx/tree", {f"m{i}.bin": os.urandom(100 + i) for i in range(20)})
    _add_file(store, root, "fx/one", b"x" * 5000)
    reg = _load(root)
    names = reg.names()
    cold = verify_names(store, reg, names)
    assert all(r.ok for r in cold) and sum(r.hashed_bytes for r in cold) > 0
    warm = verify_names(store, reg, names)
    assert all(r.ok and r.cached for r in warm)
    assert sum(r.hashed_bytes for r in warm) == 0
    full = verify_names(store, reg, names, full=True)
    assert all(r.ok and not r.cached for r in full)
    assert sum(r.hashed_bytes for r in full) == sum(r.hashed_bytes for r in cold)

    runner = CliRunner()
    base = ["--store", str(store.root), "--registry", str(root), "verify", "--json"]
    assert json.loads(runner.invoke(main, base).output)["hashed_bytes"] == 0
    assert json.loads(runner.invoke(main, [*base, "--full"]).output)["hashed_bytes"] > 0


def test_a_changed_object_misses_the_warm_cache(project: tuple[Store, Path]) -> None:
    store, root = project
    _add_file(store, root, "fx/one", b"y" * 5000)
    reg = _load(root)
    assert verify_names(store, reg, ["fx/one"])[0].ok
    record = reg.get("fx/one")
    assert record.digest is not None
    _flip_byte(store.object_path(record.digest))
    [r] = verify_names(store, reg, ["fx/one"])
    assert r.status is Status.MISMATCH and not r.cached


@pytest.mark.parametrize("executor", ["thread", "process"])
def test_parallel_verify_checks_each_shared_object_once(
    project: tuple[Store, Path], executor: str
) -> None:
    store, root = project
    shared = {"same.bin": b"shared bytes"}
    _add_tree(store, root, "fx/t1", {**shared, "a.bin": b"a" * 9000})
    _add_tree(store, root, "fx/t2", {**shared, "b.bin": b"b" * 7000})
    reg = _load(root)
    results = verify_names(store, reg, ["fx/t2", "fx/t1"], full=True, workers=2, executor=executor)
    assert [r.name for r in results] == ["fx/t2", "fx/t1"]
    assert all(r.ok for r in results)
    record = reg.get("fx/t1")
    assert record.members is not None
    _flip_byte(store.object_path(record.members.members["a.bin"]))
    results = verify_names(store, reg, ["fx/t1", "fx/t2"], full=True, workers=2, executor=executor)
    assert results[0].status is Status.MISMATCH and results[0].member == "a.bin"
    assert results[1].ok


@pytest.mark.parametrize("size", [0, 1, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, (5 << 20) + 7])
def test_file_hashes_match_across_chunk_boundaries(tmp_path: Path, size: int) -> None:
    from fixture_store.objects import digests

    data = os.urandom(size)
    p = tmp_path / "f"
    p.write_bytes(data)
    assert digests.of_file(p) == digests.of_bytes(data)
    assert digests.blake3_of_file(p) == (blake3.blake3(data).hexdigest(), size)


def test_a_large_object_the_store_hashed_on_the_way_in_is_verified_without_a_read(
    project: tuple[Store, Path],
) -> None:
    """The store proves what it publishes (1 MiB or more): the first verify, in a fresh
    verifier as another process would have, reads no byte; ``--full`` still reads them all, and
    a byte changed since is caught."""
    store, root = project
    data = os.urandom(2 << 20)
    _add_file(store, root, "fx/big", data)
    reg = _load(root)
    [first] = verify_names(store, reg, ["fx/big"])
    assert first.ok and first.cached and first.hashed_bytes == 0
    [full] = verify_names(store, reg, ["fx/big"], full=True)
    assert full.ok and full.hashed_bytes == len(data)
    record = reg.get("fx/big")
    assert record.digest is not None
    _flip_byte(store.object_path(record.digest))
    [bad] = verify_names(store, reg, ["fx/big"])
    assert bad.status is Status.MISMATCH and not bad.cached


def test_a_proof_made_on_the_way_in_vouches_for_no_other_blake3(
    project: tuple[Store, Path],
) -> None:
    """A record whose BLAKE3 is not its bytes' is refused by the first verify too: the
    store's proofs are of the bytes' own BLAKE3 and SHA-256, and the check the record asks for
    (its BLAKE3) takes only a row of that BLAKE3."""
    store, root = project
    _add_file(store, root, "fx/big", os.urandom(2 << 20))
    _corrupt_recorded_blake3(root, "fx/big")
    [r] = verify_names(store, _load(root), ["fx/big"])
    assert r.status is Status.MISMATCH and "BLAKE3" in r.message


def test_a_small_object_is_hashed_by_its_first_verify(project: tuple[Store, Path]) -> None:
    """Under 1 MiB, hashing costs less than saving a proof: none is made on the way in."""
    store, root = project
    _add_file(store, root, "fx/small", os.urandom(4096))
    [r] = verify_names(store, _load(root), ["fx/small"])
    assert r.ok and not r.cached and r.hashed_bytes == 4096
