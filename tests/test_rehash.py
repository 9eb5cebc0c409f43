"""``fixture-store rehash``: BLAKE3 is written into records only after their SHA-256 matched."""

from __future__ import annotations

import json
import os
from pathlib import Path

import blake3
from click.testing import CliRunner

from fixture_store import registry as registry_mod
from fixture_store.cli import main
from fixture_store.ingest import add
from fixture_store.objects.store import Store
from fixture_store.rehash import record_blake3


def _strip_blake3(path: Path) -> None:
    doc = json.loads(path.read_text())
    for rec in doc["records"].values():
        rec.pop("blake3", None)
        for member in rec.get("members", {}).values():
            member.pop("blake3", None)
    path.write_text(registry_mod.dumps(doc))


def _setup(tmp_path: Path) -> tuple[Store, Path, bytes]:
    root = tmp_path / "proj"
    (root / "provenance").mkdir(parents=True)
    (root / "f.bin").write_bytes(data := os.urandom(70000))
    (root / "t").mkdir()
    (root / "t" / "m.bin").write_bytes(b"member")
    store = Store.at(tmp_path / "store")
    add(store, registry_mod.load(root), root / "f.bin", name="fx/f", kind="fixture")
    add(store, registry_mod.load(root), root / "t", name="fx/t", kind="tree")
    _strip_blake3(root / "provenance" / "fx.json")
    return store, root, data


def test_rehash_fills_in_blake3_after_sha256_matched(tmp_path: Path) -> None:
    store, root, data = _setup(tmp_path)
    reg = registry_mod.load(root)
    assert reg.get("fx/f").blake3 is None
    report = record_blake3(store, reg, reg.names())
    assert sorted(report.updated) == ["fx/f", "fx/t"] and not report.failed
    reg = registry_mod.load(root)
    assert reg.get("fx/f").blake3 == blake3.blake3(data).hexdigest()
    assert reg.get("fx/t").member_blake3 == {"m.bin": blake3.blake3(b"member").hexdigest()}
    again = record_blake3(store, reg, reg.names())
    assert not again.updated and sorted(again.unchanged) == ["fx/f", "fx/t"]


def test_rehash_leaves_a_record_whose_bytes_fail_sha256(tmp_path: Path) -> None:
    store, root, _ = _setup(tmp_path)
    reg = registry_mod.load(root)
    digest = reg.get("fx/f").digest
    assert digest is not None
    obj = store.object_path(digest)
    os.chmod(obj, 0o644)
    obj.write_bytes(b"tampered")
    before = (root / "provenance" / "fx.json").read_text()
    result = CliRunner().invoke(
        main, ["--store", str(store.root), "--registry", str(root), "rehash", "fx/f", "--json"]
    )
    assert result.exit_code == 1
    assert json.loads(result.stdout)["failed"][0]["name"] == "fx/f"
    assert (root / "provenance" / "fx.json").read_text() == before
