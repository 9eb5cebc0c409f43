from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from fixture_store import registry as registry_mod
from fixture_store.errors import InvalidRecordError, RegistryError, UnknownArtifactError
from fixture_store.registry import files

HEX = "ab" * 32
REV = "0123456789abcdef0123456789abcdef01234567"


def record(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "kind": "fixture",
        "digest": "sha256:" + HEX,
        "size": 10,
        "media_type": "application/x-npy",
        "source": {
            "type": "hub",
            "repo_id": "org/model",
            "repo_type": "model",
            "revision": REV,
            "path": "weights/x.npy",
        },
        "license": "Apache-2.0",
        "lineage": ["sha256:" + "cd" * 32],
        "arrays": {"x": {"dtype": "float32", "shape": [2, 3]}},
        "tolerance": {
            "metric": "allclose",
            "atol": 1e-6,
            "rtol": 1e-4,
            "per_array": {"x": {"atol": 1e-5}},
        },
    }
    base.update(overrides)
    return base


def write(project: Path, records: dict[str, Any], family: str = "fam", **top: Any) -> Path:
    doc = {"format_version": 1, "records": records, **top}
    path = project / "provenance" / f"{family}.json"
    path.write_text(json.dumps(doc))
    return path


def only_error(project: Path, name: str = "fam/x") -> RegistryError:
    reg = registry_mod.load(project)
    invalid = dict(reg.invalid())
    assert name in invalid, f"expected {name} to be invalid; valid: {reg.names()}"
    return invalid[name]


def test_a_valid_record_loads_with_its_fields(project: Path) -> None:
    write(project, {"fam/x": record()})
    reg = registry_mod.load(project)
    r = reg.get("fam/x")
    assert r.digest is not None and r.digest.hex == HEX and r.digest.size == 10
    assert r.source.revision == REV  # type: ignore[union-attr]
    assert r.arrays is not None and r.arrays["x"]["shape"] == (2, 3)
    assert r.lineage == ("sha256:" + "cd" * 32,)


def test_rewriting_an_unchanged_registry_is_byte_identical(project: Path) -> None:
    write(project, {"fam/x": record(), "fam/y": record(kind="checkpoint")})
    reg = registry_mod.load(project)
    path = files.write_family(reg, "fam", reg.records())
    first = path.read_bytes()
    reg2 = registry_mod.load(project)
    files.write_family(reg2, "fam", reg2.records())
    assert path.read_bytes() == first
    assert first.endswith(b"}\n")
    assert json.loads(first)["records"]["fam/x"] == json.loads(json.dumps(record()))


@pytest.mark.parametrize(
    ("mutate", "field", "needle"),
    [
        (
            lambda r: r["source"].update(revision="main"),
            "source.revision",
            "branch, tag or other moving reference",
        ),
        (lambda r: r["source"].update(revision="v1.0"), "source.revision", "moving reference"),
        (lambda r: r["source"].update(revision=REV[:7]), "source.revision", "short commit sha"),
        (lambda r: r["source"].update(revision=REV.upper()), "source.revision", "upper case"),
        (
            lambda r: r.update(
                source={
                    "type": "package",
                    "requirement": "onnx>=1.22",
                    "file": "f.whl",
                    "file_digest": "sha256:" + HEX,
                    "path": "a",
                }
            ),
            "source.requirement",
            "not an exact pin",
        ),
        (
            lambda r: r.update(
                source={
                    "type": "package",
                    "requirement": "onnx~=1.22.0",
                    "file": "f.whl",
                    "file_digest": "sha256:" + HEX,
                    "path": "a",
                }
            ),
            "source.requirement",
            "not an exact pin",
        ),
        (
            lambda r: r.update(source={"type": "url", "url": "http://example.org/x"}),
            "source.url",
            "not https",
        ),
        (
            lambda r: r.update(source={"type": "local", "path": "../outside"}),
            "source.path",
            "'..' segment",
        ),
        (
            lambda r: r.update(source={"type": "carrier-pigeon"}),
            "source.type",
            "unknown source type",
        ),
        (lambda r: r.pop("digest"), "digest", "missing required field"),
        (lambda r: r.pop("size"), "size", "missing required field"),
        (lambda r: r.pop("kind"), "kind", "missing required field"),
        (lambda r: r.pop("source"), "source", "missing required field"),
        (lambda r: r.update(kind="weights"), "kind", "unknown kind"),
        (lambda r: r.update(digest="sha256:" + HEX.upper()), "digest", "upper case"),
        (lambda r: r.update(digest=HEX), "digest", "prefix"),
        (lambda r: r.update(size=-1), "size", "non-negative"),
        (lambda r: r.update(size="10"), "size", "non-negative"),
        (lambda r: r.update(gap={"reason": ""}), "gap.reason", "needs a non-empty reason"),
        (lambda r: r.update(gap={}), "gap.reason", "needs a non-empty reason"),
        (lambda r: r.update(lineage=["sha256:" + "cd" * 31]), "lineage[0]", "62 hex"),
        (
            lambda r: r.update(arrays={"x": {"dtype": "float32", "shape": [-1]}}),
            "arrays.x.shape",
            "non-negative",
        ),
        (lambda r: r.update(tolerance={"atol": 1}), "tolerance.metric", "missing"),
        (
            lambda r: r.update(tolerance={"metric": "allclose", "rtol": -1}),
            "tolerance.rtol",
            "non-negative",
        ),
        (lambda r: r.update(colour="blue"), "record", "Additional properties"),
    ],
)
def test_each_validation_rule_names_file_record_and_field(
    project: Path, mutate: Any, field: str, needle: str
) -> None:
    r = copy.deepcopy(record())
    mutate(r)
    path = write(project, {"fam/x": r})
    e = only_error(project)
    assert e.file == str(path)
    assert e.record == "fam/x"
    assert e.field == field
    assert needle in str(e)


def test_an_invalid_record_is_refused_by_get_with_a_typed_error(project: Path) -> None:
    write(project, {"fam/x": record(kind="weights"), "fam/ok": record()})
    reg = registry_mod.load(project)
    assert reg.get("fam/ok").kind == "fixture"
    with pytest.raises(InvalidRecordError, match=r"fam/x: .*unknown kind"):
        reg.get("fam/x")


def test_a_gap_may_omit_its_digest(project: Path) -> None:
    r = record(gap={"reason": "upstream has not published the weights yet"})
    del r["digest"], r["size"]
    write(project, {"fam/x": r})
    got = registry_mod.load(project).get("fam/x")
    assert got.is_gap and got.digest is None


@pytest.mark.parametrize(
    "name",
    [
        "../x",
        "fam/../x",
        "fam/a/./b",
        "",
        "fam/x\n",
        "fam/x\x00",
        "fam",
        "fam/",
        "/fam/x",
        "fam//x",
        "Fam/x",
        "fam/x\\y",
        "fam/x\u202e",
        "fam/e\u0301",  # not NFC: the registry holds a name as it prints
    ],
)
def test_names_must_fully_match_the_pattern(project: Path, name: str) -> None:
    write(project, {name: record()})
    reg = registry_mod.load(project)
    invalid = dict(reg.invalid())
    assert name in invalid
    assert invalid[name].field in ("name",)


def test_records_that_collide_under_case_or_normalisation_are_refused(project: Path) -> None:
    write(project, {"fam/Model.onnx": record(), "fam/model.onnx": record()})
    invalid = dict(registry_mod.load(project).invalid())
    assert list(invalid) == ["fam/model.onnx"]  # the first in sorted order stands
    assert "collides with 'fam/Model.onnx'" in invalid["fam/model.onnx"].message


def test_a_name_typed_in_another_normalisation_finds_its_record(project: Path) -> None:
    write(project, {"fam/caf\u00e9.npy": record()})
    assert registry_mod.load(project).get("fam/cafe\u0301.npy").name == "fam/caf\u00e9.npy"


def test_unknown_format_version_fails_the_file(project: Path) -> None:
    path = project / "provenance" / "fam.json"
    path.write_text(json.dumps({"format_version": 2, "records": {}}))
    with pytest.raises(RegistryError, match="unknown format_version 2") as info:
        registry_mod.load(project)
    assert info.value.file == str(path) and info.value.field == "format_version"


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('{"format_version": 1, "records": {}, "records": {}}', "records"),
        ('{"format_version": 1, "records": {"fam/x": {"kind": "a", "kind": "b"}}}', "kind"),
        ('{"format_version": 1, "records": {"fam/x": {}, "fam/x": {}}}', "fam/x"),
    ],
)
def test_duplicate_keys_anywhere_are_an_error(project: Path, text: str, key: str) -> None:
    (project / "provenance" / "fam.json").write_text(text)
    with pytest.raises(RegistryError, match=f"duplicate key '{key}'"):
        registry_mod.load(project)


def test_malformed_json_names_line_and_column(project: Path) -> None:
    (project / "provenance" / "fam.json").write_text('{"format_version": 1,\n "records": }')
    with pytest.raises(RegistryError, match=r"fam\.json: not valid JSON: .* line 2 column"):
        registry_mod.load(project)


def test_a_record_in_the_wrong_family_file_is_invalid(project: Path) -> None:
    write(project, {"other/x": record()})
    e = dict(registry_mod.load(project).invalid())["other/x"]
    assert "belongs to family 'other'" in str(e) and e.fix and "other.json" in e.fix


def test_tree_members_are_validated_and_bound_to_the_digest(project: Path) -> None:
    members = {"model.onnx": {"digest": "sha256:" + HEX, "size": 3}}
    write(project, {"fam/x": record(kind="onnx-case", members=members)})
    e = only_error(project)
    assert e.field == "digest" and "does not match the member manifest" in str(e)
    write(
        project,
        {
            "fam/x": record(
                kind="onnx-case", members={"../evil": {"digest": "sha256:" + HEX, "size": 3}}
            )
        },
    )
    e = only_error(project)
    assert e.field == "members" and "'..'" in str(e)
    write(project, {"fam/x": record(kind="onnx-case")})
    e = only_error(project)
    assert e.field == "members" and "needs its member manifest" in str(e)


def test_unknown_names_are_refused(project: Path) -> None:
    write(project, {"fam/x": record()})
    reg = registry_mod.load(project)
    with pytest.raises(UnknownArtifactError, match="fam/nope: no record"):
        reg.get("fam/nope")
    with pytest.raises(UnknownArtifactError):
        reg.select(["fam/nope"])
    assert reg.select(["fam/*"]) == ["fam/x"]


def test_the_shipped_schema_accepts_a_valid_file(project: Path) -> None:
    import jsonschema

    path = write(project, {"fam/x": record()})
    jsonschema.validate(json.loads(path.read_text()), files.schema())


def test_the_projects_own_registry_is_valid() -> None:
    root = Path(__file__).resolve().parents[2]
    reg = registry_mod.load(root)
    assert dict(reg.invalid()) == {}


def test_every_archive_or_array_the_project_ships_carries_its_content_manifest() -> None:
    archive_types = {
        "application/zstd",
        "application/x-lz4",
        "application/x-tar",
        "application/zip",
    }
    reg = registry_mod.load(Path(__file__).resolve().parents[2])
    archives = [reg.get(n) for n in reg.names() if reg.get(n).media_type in archive_types]
    arrays = [reg.get(n) for n in reg.names() if reg.get(n).media_type == "application/x-npy"]
    assert {r.family for r in archives} == {"checkpoints"} and len(archives) == 20
    assert {r.family for r in arrays} == {"jax-parity"}
    for record in archives:
        assert record.members is not None and not record.is_tree, record.name
        assert "metadata.json" in record.members.members, record.name
    for record in arrays:
        assert record.arrays is not None and len(record.arrays) == 1, record.name


def test_a_known_failure_condition_round_trips_and_a_bad_one_fails_the_file(project: Path) -> None:
    entry = {
        "runtime": "ort",
        "pattern": "fam/*",
        "expect": 1,
        "reason": "needs a locale",
        "outcome": "error",
        "condition": "locale-missing:en_US.UTF-8",
    }
    path = write(project, {}, known_failures=[entry])
    import jsonschema

    jsonschema.validate(json.loads(path.read_text()), files.schema())
    reg = registry_mod.load(project)
    (kf,) = reg.known_failures()
    assert kf.condition == "locale-missing:en_US.UTF-8"
    files.write_family(reg, "fam", [])
    assert json.loads(path.read_text())["known_failures"] == [entry]

    write(project, {}, known_failures=[{**entry, "condition": "moon-phase:full"}])
    with pytest.raises(RegistryError, match=r"known_failures\[0\].condition.*unknown condition"):
        registry_mod.load(project)


def test_the_projects_known_failures_follow_the_schema() -> None:
    import jsonschema

    root = Path(__file__).resolve().parents[2]
    for path in sorted((root / "provenance").glob("*.json")):
        jsonschema.validate(json.loads(path.read_text()), files.schema())


def test_create_directory_says_whether_it_is_new(tmp_path: Path) -> None:
    assert files.create_directory(tmp_path / "p") == (tmp_path / "p" / "provenance", True)
    assert files.create_directory(tmp_path / "p") == (tmp_path / "p" / "provenance", False)
