"""The parsed-registry cache (``fixture_store.registry.parsed_cache``): a load with it equals a
load without it, whatever the cache holds. An entry is a verdict about exact bytes in one place,
named by an HMAC under the user's secret: a stale, edited, forged or misplaced entry is a miss,
never a record that would not parse."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from pathlib import Path
from typing import Any

import pytest

from fixture_store import registry as registry_mod
from fixture_store.objects import digests, trees
from fixture_store.objects.store import Store
from fixture_store.registry import documents, parsed_cache, reading, shards
from tests.support.cli import run


def _tree(i: int) -> dict[str, Any]:
    parts = {f"part_{j}.bin": digests.of_bytes(f"{i}:{j}".encode()) for j in range(2)}
    manifest = trees.Tree(parts).digest
    return {
        "kind": "tree",
        "digest": manifest.text,
        "size": manifest.size,
        "media_type": "application/vnd.fixture-store.tree+json",
        "members": {
            p: {"digest": d.text, "size": d.size, "blake3": "ab" * 32} for p, d in parts.items()
        },
        "source": {"type": "local", "path": f"data/case_{i}"},
    }


def _records() -> dict[str, Any]:
    """Records of every shape the cache builds itself, and some it leaves to the parser."""
    one = digests.of_bytes(b"one")
    plain = {"digest": one.text, "size": one.size}
    package = {
        "type": "package",
        "requirement": "onnx==1.17.0",
        "file": "onnx-1.17.0.whl",
        "file_digest": one.text,
        "path": "onnx/x.pb",
    }
    out: dict[str, Any] = {f"fam/tree_{i}": _tree(i) for i in range(3)}
    out["fam/local"] = {"kind": "fixture", "source": {"type": "local", "path": "a.bin"}, **plain}
    out["fam/described"] = {
        **out["fam/local"],
        "description": "a fixture",
        "license": "MIT",
        "blake3": "cd" * 32,
        "lineage": [digests.of_bytes(b"parent").text],
    }
    out["fam/package"] = {"kind": "fixture", "source": package, **plain}
    out["fam/sized_package"] = {"kind": "fixture", "source": {**package, "file_size": 3}, **plain}
    out["fam/url"] = {
        "kind": "fixture",
        "source": {"type": "url", "url": "https://example.org/x.bin"},
        **plain,
    }
    out["fam/metadata"] = {**out["fam/local"], "metadata": {"shape": [2, 3]}}
    out["fam/gap"] = {"kind": "fixture", "gap": {"reason": "not fetched yet"}}
    return out


def _write_raw(project: Path, records: dict[str, Any], family: str = "fam") -> Path:
    path = project / "provenance" / f"{family}.json"
    path.write_text(json.dumps({"format_version": 1, "records": records}, indent=2) + "\n")
    return path


def _entries() -> list[Path]:
    folder = parsed_cache.folder()
    return sorted(p for p in folder.glob("*.json")) if folder.is_dir() else []


def _parse_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make a full parse fail the test: what loads now comes from the cache's path."""

    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("parsed in full")

    monkeypatch.setattr(reading, "parse_document", refuse)


def _count_parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files parsed in full from now on, in order."""
    calls: list[str] = []

    def counted(text: str, shown: str, **kw: Any) -> Any:
        calls.append(shown)
        return documents.parse_document(text, shown, **kw)

    monkeypatch.setattr(reading, "parse_document", counted)
    return calls


def _same(a: registry_mod.Registry, b: registry_mod.Registry) -> None:
    """Equal registries (errors are compared by what they say: two parses make two)."""
    assert a.root == b.root and list(a.families) == list(b.families)
    for family, fam in a.families.items():
        other = b.families[family]
        assert dict(fam.records) == dict(other.records)
        assert {n: r.to_json() for n, r in fam.records.items()} == {
            n: r.to_json() for n, r in other.records.items()
        }
        assert {n: str(e) for n, e in fam.invalid.items()} == {
            n: str(e) for n, e in other.invalid.items()
        }
        assert fam.text_digest == other.text_digest


def test_a_cached_load_equals_a_parse_for_every_record_shape(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write_raw(project, _records())
    parsed = registry_mod.load(project, cached=False)
    assert not _entries()  # a load without the cache leaves no entry
    assert registry_mod.load(project) == parsed  # the first cached load parses and remembers
    assert len(_entries()) == 1
    _parse_refused(monkeypatch)
    cached = registry_mod.load(project)
    _same(cached, parsed)
    assert sorted(cached.families["fam"].records) == sorted(_records())


def test_a_sharded_family_loads_from_the_cache_shard_by_shard(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shards, "SHARD_ABOVE", 4096)
    records = [
        registry_mod.parse_record(f"fam/tree_{i}", _tree(i), file="<test>") for i in range(60)
    ]
    registry_mod.write_family(registry_mod.load(project, cached=False), "fam", records)
    parsed = registry_mod.load(project, cached=False)
    assert parsed.families["fam"].sharded
    registry_mod.load(project)
    shard_count = len(shards.shard_files(project / "provenance" / "fam.json"))
    assert len(_entries()) == shard_count  # one per shard; the family's file holds no records
    calls = _count_parses(monkeypatch)
    _same(registry_mod.load(project), parsed)
    assert calls == [str(project / "provenance" / "fam.json")]  # only the head is parsed


def test_an_edited_file_is_parsed_again_never_served_from_a_stale_entry(project: Path) -> None:
    records = _records()
    path = _write_raw(project, records)
    registry_mod.load(project)
    registry_mod.load(project)
    records["fam/tree_0"]["members"]["../escape"] = records["fam/tree_0"]["members"].pop(
        "part_0.bin"
    )
    records["fam/local"]["digest"] = "sha256:not-hex"
    records["fam/described"]["description"] = "edited"
    _write_raw(project, records)
    loaded = registry_mod.load(project)
    _same(loaded, registry_mod.load(project, cached=False))
    assert set(loaded.families["fam"].invalid) == {"fam/tree_0", "fam/local"}
    assert loaded.families["fam"].records["fam/described"].description == "edited"
    assert path.exists()


def test_a_file_with_an_invalid_record_gets_no_entry(project: Path) -> None:
    records = _records()
    records["fam/local"]["size"] = -1
    _write_raw(project, records)
    for _ in range(2):
        assert set(registry_mod.load(project).families["fam"].invalid) == {"fam/local"}
    assert not _entries()


def _forge(role: str, text: str, secret: bytes) -> Path:
    """An entry saying ``text`` at ``role`` parsed valid, named with ``secret``."""
    digest = hashlib.sha256(text.encode()).hexdigest()
    key = f"{parsed_cache.FORMAT}\0{parsed_cache.code_state()}\0{role}\0{digest}".encode()
    entry = parsed_cache.folder() / (hmac.new(secret, key, hashlib.sha256).hexdigest() + ".json")
    entry.write_text(json.dumps({"format": 1, "sha256": digest, "valid": True}, sort_keys=True))
    entry.chmod(0o600)
    return entry


def test_a_forged_entry_cannot_make_an_invalid_record_load(project: Path) -> None:
    """Whoever writes an entry without the user's secret vouches for nothing: the record that
    does not parse is still reported, with the error a parse gives."""
    records = _records()
    _write_raw(project, records, family="other")  # makes the folder and the secret
    registry_mod.load(project)
    bad = {"fam/tree_0": _tree(0)}
    bad["fam/tree_0"]["members"] = {"../../etc/passwd": bad["fam/tree_0"]["members"]["part_0.bin"]}
    path = _write_raw(project, bad)
    text = path.read_text()
    _forge("fam", text, b"\0" * 32)  # a guessed secret
    _forge("fam", text, os.urandom(32))
    loaded = registry_mod.load(project)
    assert set(loaded.families["fam"].invalid) == {"fam/tree_0"}
    _same(loaded, registry_mod.load(project, cached=False))


def test_an_entry_vouches_only_for_its_place(project: Path) -> None:
    """The same bytes valid as family ``fam`` are not valid as family ``moved`` (its records
    belong to ``fam``): the entry of one place is not found for the other."""
    text = _write_raw(project, _records()).read_text()
    registry_mod.load(project)
    (project / "provenance" / "fam.json").unlink()
    (project / "provenance" / "moved.json").write_text(text)
    loaded = registry_mod.load(project)
    assert set(loaded.families["moved"].invalid) == set(_records())
    assert not loaded.families["moved"].records


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: p.write_text("{not json"),
        lambda p: p.write_text(p.read_text().replace('"valid": true', '"valid": false')),
        lambda p: p.write_text(p.read_text().replace('"format": 1', '"format": 99')),
        lambda p: p.write_text(json.dumps([1, 2, 3])),
        lambda p: p.chmod(0o666),
    ],
    ids=["garbage", "edited", "foreign-format", "other-json", "writable-by-others"],
)
def test_a_damaged_or_foreign_entry_is_a_miss(
    project: Path, monkeypatch: pytest.MonkeyPatch, damage: Any
) -> None:
    _write_raw(project, _records())
    parsed = registry_mod.load(project)
    (entry,) = _entries()
    damage(entry)
    calls = _count_parses(monkeypatch)
    _same(registry_mod.load(project), parsed)
    assert calls  # parsed in full


def test_a_secret_others_can_read_turns_the_cache_off(project: Path) -> None:
    _write_raw(project, _records())
    parsed = registry_mod.load(project)
    (parsed_cache.folder() / "secret").chmod(0o644)
    assert parsed_cache.Cache.open() is None
    _same(registry_mod.load(project), parsed)


def test_a_cache_folder_others_can_write_is_not_used(project: Path) -> None:
    _write_raw(project, _records())
    registry_mod.load(project)
    parsed_cache.folder().chmod(0o777)
    assert parsed_cache.Cache.open() is None


def test_a_cache_folder_owned_by_another_user_is_not_used(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another user could write entries there (or make it so): the folder must be ours."""
    _write_raw(project, _records())
    registry_mod.load(project)
    ours = parsed_cache.Cache.open()
    assert ours is not None
    ours.close()
    others = os.geteuid() + 1
    monkeypatch.setattr(os, "geteuid", lambda: others)  # the folder is now another user's
    assert parsed_cache.Cache.open() is None


def test_a_cache_folder_under_a_parent_others_can_write_is_not_used(project: Path) -> None:
    """Whoever can write the parent can put another folder in the cache folder's place."""
    _write_raw(project, _records())
    registry_mod.load(project)
    parsed_cache.folder().parent.chmod(0o777)
    assert parsed_cache.Cache.open() is None
    parsed_cache.folder().parent.chmod(0o700)
    ours = parsed_cache.Cache.open()
    assert ours is not None
    ours.close()


def test_verify_full_never_reads_the_cache(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    Store.at(project / "store").ensure()
    monkeypatch.setenv("FIXTURE_STORE_DIR", str(project / "store"))
    _write_raw(project, {"fam/gap": _records()["fam/gap"]})
    registry_mod.load(project)

    def refuse() -> None:
        raise AssertionError("verify --full opened the parsed-registry cache")

    monkeypatch.setattr(parsed_cache.Cache, "open", staticmethod(refuse))
    code, out, err = run("verify", "--full")
    assert code == 0, out + err
