"""Record values: kinds, gaps, the objects a record needs, and a rewrite that changes no byte."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from fixture_store import registry as registry_mod
from fixture_store.errors import GapError, RegistryError
from fixture_store.objects import trees
from fixture_store.objects.digests import Awaited, Digest
from fixture_store.registry import (
    Annotations,
    Gap,
    Kind,
    LocalSource,
    Metric,
    ObjectRef,
    PackageSource,
    Record,
    Where,
    check_record,
    files,
    parse_record,
)

PROJECT = Path(__file__).resolve().parents[2]
HEX = "ab" * 32
B3 = "cd" * 32
LOCAL = {"type": "local", "path": "x"}


def test_rewriting_the_projects_registry_changes_no_byte(tmp_path: Path) -> None:
    shutil.copytree(PROJECT / "provenance", tmp_path / "provenance")
    registry = registry_mod.load(tmp_path)
    for family, fam in registry.families.items():
        registry_mod.write_family(registry, family, fam.records.values())
    for path in sorted((PROJECT / "provenance").glob("*.json")):
        assert (tmp_path / "provenance" / path.name).read_bytes() == path.read_bytes(), path.name


def test_every_committed_record_prints_back_its_json() -> None:
    for path in sorted((PROJECT / "provenance").glob("*.json")):
        for name, raw in json.loads(path.read_text())["records"].items():
            assert parse_record(name, raw, file=str(path)).to_json() == raw, name


def test_kind_is_a_str_enum_so_json_is_unchanged() -> None:
    record = parse_record(
        "fam/x",
        {"kind": "fixture", "source": LOCAL, "digest": f"sha256:{HEX}", "size": 3},
        file="t",
    )
    assert record.kind is Kind.FIXTURE and str(record.kind) == "fixture"
    assert json.dumps(record.to_json()["kind"]) == '"fixture"'
    assert tuple(k.value for k in Kind) == registry_mod.KINDS


def test_a_gap_keeps_its_issue_and_has_no_object() -> None:
    raw: dict[str, Any] = {
        "kind": "checkpoint",
        "source": LOCAL,
        "gap": {"reason": "upstream has not published it", "issue": "#12"},
    }
    record = parse_record("fam/x", raw, file="t")
    assert record.gap == Gap("upstream has not published it", "#12")
    assert str(record.gap) == "upstream has not published it"
    assert record.to_json() == raw
    assert record.objects() == [] and record.referenced() == frozenset()
    with pytest.raises(GapError, match="fam/x: declared gap: upstream has not published it"):
        _ = record.object


def test_objects_of_a_tree_are_its_members_then_its_manifest() -> None:
    tree = trees.Tree({"a.bin": Digest("11" * 32, 1), "b/c.bin": Digest("22" * 32, 2)})
    members = trees.to_json(tree)
    members["a.bin"]["blake3"] = B3
    record = parse_record(
        "fam/t",
        {
            "kind": "tree",
            "source": LOCAL,
            "digest": tree.digest.text,
            "size": tree.digest.size,
            "members": members,
        },
        file="t",
    )
    assert record.tree == tree and record.object == tree.digest
    assert record.objects() == [
        ObjectRef(Digest("11" * 32, 1), "a.bin", B3),
        ObjectRef(Digest("22" * 32, 2), "b/c.bin", None),
        ObjectRef(tree.digest),
    ]
    assert [ref.member for ref in record.objects()] == ["a.bin", "b/c.bin", None]


def test_an_archive_is_one_object_and_a_package_keeps_its_distribution() -> None:
    content = trees.Tree({"w.npy": Digest("33" * 32, 9)})
    archive = Digest(HEX, 100)
    source = PackageSource("onnx==1.22.0", "onnx.whl", f"sha256:{'ee' * 32}", "w.tar")
    record = Record("fam/a", Kind.ARCHIVE, source, archive, blake3=B3, members=content)
    assert record.tree is None and not record.is_tree
    assert record.objects() == [ObjectRef(archive, None, B3)]
    assert record.referenced() == frozenset({HEX, "ee" * 32})


def test_check_record_applies_the_rules_between_fields() -> None:
    tree = trees.Tree({"a.bin": Digest("11" * 32, 1)})
    good = Record("fam/t", Kind.TREE, LocalSource("t"), tree.digest, members=tree)
    assert check_record(good, file="f") is good
    with pytest.raises(RegistryError, match="does not match the member manifest"):
        check_record(
            Record("fam/t", Kind.TREE, LocalSource("t"), Digest(HEX, 1), members=tree), file="f"
        )
    with pytest.raises(RegistryError, match="needs its member manifest"):
        check_record(Record("fam/t", Kind.ONNX_CASE, LocalSource("t"), Digest(HEX, 1)), file="f")
    with pytest.raises(RegistryError, match="only a declared gap may omit it"):
        check_record(Record("fam/t", Kind.FIXTURE, LocalSource("t")), file="f")
    with pytest.raises(RegistryError, match=r"'\.\.' segment") as info:
        check_record(Record("fam/t", Kind.FIXTURE, LocalSource("../t"), Digest(HEX, 1)), file="f")
    assert (info.value.file, info.value.record, info.value.field) == ("f", "fam/t", "source.path")


def test_annotations_parse_given_fields_and_refuse_others() -> None:
    where = Where("outputs.json", "fam/x")
    given = Annotations.from_json(
        {
            "media_type": "application/x-npy",
            "tolerance": {"metric": "exact"},
            "metadata": {"k": [1]},
        },
        where,
    )
    record = given.apply(Record("fam/x", Kind.FIXTURE, LocalSource("x"), Digest(HEX, 1)))
    assert record.media_type == "application/x-npy"
    assert record.to_json()["tolerance"] == {"metric": "exact"}
    assert record.to_json()["metadata"] == {"k": [1]}
    with pytest.raises(RegistryError, match="not a descriptive field") as info:
        Annotations.from_json({"digest": f"sha256:{HEX}"}, where)
    assert info.value.field == "digest" and info.value.file == "outputs.json"
    with pytest.raises(RegistryError, match="unknown limits profile"):
        Annotations.from_json({"profile": "2GiB"}, where)


def _arrays_record(per_array: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "fixture",
        "digest": f"sha256:{HEX}",
        "size": 10,
        "media_type": "application/x-npz",
        "source": LOCAL,
        "arrays": {
            "cls_token": {"dtype": "float32", "shape": [1, 384]},
            "patch_tokens": {"dtype": "float32", "shape": [1, 256, 384]},
        },
        "tolerance": {"metric": "mean_abs", "max": 5e-4, "per_array": per_array},
    }


def test_per_array_overrides_are_keyed_by_the_arrays_manifest() -> None:
    raw = _arrays_record({"cls_token": {"max": 1e-4}})
    record = parse_record("fam/ref.npz", raw, file="f")
    assert record.tolerance is not None
    assert record.tolerance.for_array("cls_token").bound == 1e-4
    assert record.tolerance.for_array("patch_tokens").bound == 5e-4


@pytest.mark.parametrize("key", ["cls", "ref.npz:cls_token", "x"])
def test_a_per_array_key_the_manifest_does_not_list_is_refused(key: str) -> None:
    with pytest.raises(RegistryError) as info:
        parse_record("fam/ref.npz", _arrays_record({key: {"max": 1e-4}}), file="f")
    assert info.value.field == f"tolerance.per_array.{key}"
    assert "['cls_token', 'patch_tokens']" in str(info.value)
    # A record built in code (regenerate --accept, add) is held to the same rule.
    good = parse_record("fam/ref.npz", _arrays_record({}), file="f")
    bad = Annotations.from_json(
        {"tolerance": {"metric": "exact", "per_array": {key: {}}}}, Where("f", "fam/ref.npz")
    ).apply(good)
    with pytest.raises(RegistryError, match="names no array of the record's arrays manifest"):
        check_record(bad, file="f")


def test_a_pattern_rule_keys_many_arrays_in_one_entry_and_the_schema_takes_it() -> None:
    raw = _arrays_record({"patch_*": {"metric": "rms", "max": 1e-5, "why": "upstream's rms"}})
    raw["tolerance"]["per_dtype"] = {"float32": {"metric": "default"}}
    raw["tolerance"]["checks"] = [{"metric": "rms", "max": 1e-4}, {"metric": "cosine", "max": 0}]
    del raw["tolerance"]["metric"], raw["tolerance"]["max"]
    jsonschema.validate({"format_version": 1, "records": {"fam/ref.npz": raw}}, files.schema())
    record = parse_record("fam/ref.npz", raw, file="f")
    assert record.tolerance is not None
    assert record.tolerance.for_array("patch_tokens").metric is Metric.RMS
    assert record.tolerance.for_array("cls_token", dtype="float32").metric is Metric.DEFAULT
    assert record.to_json()["tolerance"] == raw["tolerance"]


@pytest.mark.parametrize("key", ["patch_*_x", "cls?", "[xy]*"])
def test_a_pattern_that_matches_no_array_of_the_manifest_is_refused(key: str) -> None:
    with pytest.raises(RegistryError) as info:
        parse_record("fam/ref.npz", _arrays_record({key: {"max": 1e-4}}), file="f")
    assert info.value.field == f"tolerance.per_array.{key}"
    assert "pattern matches no array" in str(info.value)
    assert "['cls_token', 'patch_tokens']" in str(info.value)


def test_two_patterns_tied_on_an_array_are_refused_naming_both() -> None:
    with pytest.raises(RegistryError) as info:
        parse_record("fam/ref.npz", _arrays_record({"*_token": {}, "cls_to*": {}}), file="f")
    assert "'*_token' and 'cls_to*' both match array 'cls_token'" in str(info.value)


def test_a_gap_needs_no_source_and_may_name_its_digest_without_a_size() -> None:
    bare = {"kind": "fixture", "gap": {"reason": "upstream not released"}}
    record = parse_record("f/x", bare, file="f.json")
    assert record.is_gap and record.digest is None and record.to_json() == bare
    named = {**bare, "digest": f"sha256:{HEX}"}
    record = parse_record("f/x", named, file="f.json")
    assert record.gap is not None and str(record.gap.expected) == f"sha256:{HEX}"
    assert record.digest is None and record.objects() == [] and record.to_json() == named
    with pytest.raises(RegistryError, match="lacks the 'sha256:' prefix"):
        parse_record("f/x", {**bare, "digest": HEX}, file="f.json")
    with pytest.raises(RegistryError, match="a size only with its digest"):
        parse_record("f/x", {**bare, "size": 3}, file="f.json")


@pytest.mark.parametrize("awaited", [f"md5:{'cd' * 16}", f"sha1:{'ef' * 20}"])
def test_a_gap_known_only_by_a_weak_digest_shows_it_as_its_digest(awaited: str) -> None:
    raw = {"kind": "fixture", "gap": {"reason": "absent; weak"}, "digest": awaited}
    jsonschema.validate({"format_version": 1, "records": {"f/x": raw}}, files.schema())
    record = parse_record("f/x", raw, file="f.json")
    assert record.gap is not None and record.gap.expected is not None
    assert record.gap.expected.weak and str(record.gap.expected) == awaited
    assert record.digest is None and record.objects() == [] and record.to_json() == raw
    # A weak digest never pins bytes: not beside a size, not in a record that is no gap.
    for shape in ({**raw, "size": 3}, {"kind": "fixture", "digest": awaited, "size": 3}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({"format_version": 1, "records": {"f/x": shape}}, files.schema())
    with pytest.raises(RegistryError) as caught:
        parse_record("f/x", {**raw, "size": 3}, file="f.json")
    assert caught.value.field == "digest" and "identity is sha256" in str(caught.value)
    with pytest.raises(RegistryError, match="md5 has 32"):
        parse_record("f/x", {**raw, "digest": "md5:" + "cd" * 15}, file="f.json")


def test_a_gap_is_filled_only_by_the_bytes_it_awaits() -> None:
    sha = Digest(HEX, 12)
    imported = {"imported_from": {"digests": [f"md5:{'cd' * 16}"], "format": "pooch"}}
    weak = parse_record(
        "f/x",
        {
            "kind": "fixture",
            "gap": {"reason": "r"},
            "digest": f"md5:{'cd' * 16}",
            "metadata": imported,
        },
        file="f",
    )
    assert weak.gap is not None and weak.gap.expected is not None
    assert weak.filled(sha) is None  # a SHA-256 cannot say it has that md5
    assert weak.filled(sha, proved=Awaited("md5", "ab" * 16)) is None  # another md5
    filled = weak.filled(sha, proved=weak.gap.expected)
    assert filled is not None and filled.gap is None and filled.digest == sha
    assert filled.metadata == weak.metadata  # the import's list keeps the weak digest already
    typed = replace(weak, metadata=None)  # a gap written by hand: the weak digest is kept too
    kept = typed.filled(sha, proved=weak.gap.expected)
    assert kept is not None and kept.metadata == {"checked_against": f"md5:{'cd' * 16}"}
    by_sha = parse_record(
        "f/x", {"kind": "fixture", "gap": {"reason": "r"}, "digest": f"sha256:{HEX}"}, file="f"
    )
    assert by_sha.filled(Digest("cd" * 32, 12)) is None
    lifted = by_sha.filled(sha)
    assert lifted is not None and lifted.gap is None and lifted.metadata is None
    sized = replace(by_sha, digest=sha, gap=Gap("r"))
    assert sized.filled(Digest(HEX, 13)) is None and sized.filled(sha) is not None
    assert replace(sized, gap=None).filled(sha) is None  # no gap, nothing to fill


def test_only_a_gap_may_go_without_a_source() -> None:
    with pytest.raises(RegistryError, match="only a declared gap may omit it") as e:
        parse_record("f/x", {"kind": "fixture", "digest": f"sha256:{HEX}", "size": 1}, file="f")
    assert e.value.field == "source"
    from fixture_store.registry import NoSource

    with pytest.raises(RegistryError) as e:
        check_record(Record("f/x", Kind.FIXTURE, NoSource(), Digest(HEX, 1)), file="f")
    assert e.value.field == "source"


def test_check_record_applies_the_upstream_and_command_rules_to_values_built_in_code() -> None:
    from fixture_store.registry import HubUpstream

    base = Record("f/x", Kind.FIXTURE, LocalSource("x"), Digest(HEX, 1))
    moving = HubUpstream("MIT/ast", "main", "model.safetensors")
    with pytest.raises(RegistryError, match="'main' is a branch") as e:
        check_record(replace(base, upstream=(moving,)), file="f")
    assert e.value.field == "upstream[0].revision"
    with pytest.raises(RegistryError) as e:
        check_record(replace(base, command=()), file="f")
    assert e.value.field == "command"
