"""Records the parsed-registry cache vouches for are built when first used
(``fixture_store.registry.lazy_records``): names, selections and lookups build nothing else, and
what is built equals what a parse gives, in a family of one file and in a sharded one whose
shards are partly parsed, partly from the cache."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fixture_store import registry as registry_mod
from fixture_store.errors import RegistryError
from fixture_store.registry import documents, lazy_records, parsed_cache, reading, shards
from fixture_store.registry.records import Record
from tests.registry.test_parsed_cache import _records, _same, _tree, _write_raw


def _count_builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the records built from the cache's JSON from now on."""
    built: list[str] = []
    rebuild = parsed_cache.rebuild

    def counted(name: str, raw: Any, file: str, parse: Any) -> Record:
        built.append(name)
        return rebuild(name, raw, file, parse)

    monkeypatch.setattr(lazy_records, "rebuild", counted)
    return built


def test_names_and_lookups_build_only_the_records_they_return(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write_raw(project, _records())
    parsed = registry_mod.load(project)  # parses, and the cache remembers
    built = _count_builds(monkeypatch)
    reg = registry_mod.load(project)
    fam = reg.families["fam"].records
    assert reg.names() == sorted(_records()) == list(fam)
    assert reg.select(families=["fam"]) == reg.select(["fam/*"]) == sorted(_records())
    assert "fam/local" in fam and "fam/nothing" not in fam and len(fam) == len(_records())
    assert built == []
    assert reg.get("fam/local") == reg.get("fam/local") == parsed.get("fam/local")
    assert fam.get("fam/nothing") is None
    assert built == ["fam/local"]
    assert list(fam.values()) == list(parsed.families["fam"].records.values())
    assert sorted(built) == sorted(_records())  # each built once
    _same(reg, parsed)


def test_a_sharded_family_partly_parsed_partly_cached_loads_as_a_parse(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shards, "SHARD_ABOVE", 4096)
    names = [f"fam/tree_{i}" for i in range(60)]
    records = [registry_mod.parse_record(n, _tree(i), file="<t>") for i, n in enumerate(names)]
    registry_mod.write_family(registry_mod.load(project, cached=False), "fam", records)
    registry_mod.load(project)  # every shard remembered
    changed = registry_mod.parse_record(names[7], {**_tree(7), "description": "x"}, file="<t>")
    registry_mod.write_family(
        registry_mod.load(project), "fam", [*records[:7], changed, *records[8:]]
    )
    head = project / "provenance" / "fam.json"
    parses: list[str] = []

    def counted(text: str, shown: str, **kw: Any) -> Any:
        parses.append(shown)
        return documents.parse_document(text, shown, **kw)

    monkeypatch.setattr(reading, "parse_document", counted)
    built = _count_builds(monkeypatch)
    reg = registry_mod.load(project)
    assert parses == [str(head), str(shards.shard_path(head, shards.shard_of(names[7])))]
    fam = reg.families["fam"]
    assert list(fam.records) == sorted(names) and built == []
    assert fam.records[names[7]].description == "x" and built == []  # parsed, not rebuilt
    assert fam.sharded and fam.file_of(names[3]) == shards.shard_path(
        head, shards.shard_of(names[3])
    )
    _same(reg, registry_mod.load(project, cached=False))
    assert sorted(built) == sorted(n for n in names if n != names[7])


def test_kinds_build_no_record_and_are_those_of_a_parse(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A family's names and kinds (what test collection keeps) come from the JSON a verdict
    vouches for, the same as a parse's records and invalid names give."""
    raw = _records()
    raw["fam/broken"] = {"kind": "no-such-kind", "source": {"type": "local", "path": "b"}}
    _write_raw(project, raw)
    parsed = registry_mod.load(project, cached=False).families["fam"]
    expected = {n: r.kind.value for n, r in parsed.records.items()} | {"fam/broken": None}
    assert parsed.kinds() == dict(sorted(expected.items()))
    del raw["fam/broken"]  # a file with an invalid record is never vouched for
    _write_raw(project, raw)
    registry_mod.load(project)  # the cache remembers
    built = _count_builds(monkeypatch)
    fam = registry_mod.load(project).families["fam"]
    assert isinstance(fam.records, lazy_records.LazyRecords)
    assert fam.kinds() == {n: k for n, k in parsed.kinds().items() if k is not None}
    assert built == []
    assert fam.records["fam/local"].kind == "fixture"  # one built: its kind is the record's
    assert fam.kinds()["fam/local"] == "fixture" and built == ["fam/local"]


def test_a_vouched_json_whose_kind_is_not_a_kind_is_built_and_refused() -> None:
    """A kind the verdict cannot have vouched for (the entry stale against a changed parser,
    say) is not taken from the JSON: the record is built, and its parse refuses it."""
    lazy = lazy_records.LazyRecords.of_json(
        {"fam/x": {"kind": "nonsense", "source": {"type": "local", "path": "x"}}}, "<t>"
    )
    with pytest.raises(RegistryError, match="unknown kind"):
        lazy.kinds()


def test_a_walk_by_name_builds_the_rest_in_one_pass(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = [f"fam/case_{i:03d}" for i in range(200)]
    raw = {n: _tree(i) for i, n in enumerate(names)}
    _write_raw(project, raw)
    parsed = registry_mod.load(project)
    built = _count_builds(monkeypatch)
    reg = registry_mod.load(project)
    few = lazy_records._FEW
    looked = [reg.get(n) for n in names[:few]]
    assert built == names[:few]  # one by one
    looked.append(reg.get(names[few]))
    assert len(built) == len(names)  # then every other one at once, each once
    looked += [reg.get(n) for n in names[few + 1 :]]
    assert looked == list(parsed.records()) and len(built) == len(names)
