"""The hand-rolled JSON manifest: every field it carries lands on the record."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fixture_store import registry as registry_mod
from fixture_store.errors import UsageError
from fixture_store.importers import entry as entry_mod
from fixture_store.importers import jsonmanifest
from fixture_store.importers.entry import ManifestError
from fixture_store.importers.fields import MEAN_ABS
from fixture_store.importers.register import tolerance_json
from fixture_store.objects import digests
from fixture_store.objects.store import Store
from tests.support.importing import family_doc, refusal, run_import, write


def _npz(**arrays: Any) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


BLOCK = _npz(x=np.zeros((1, 3), np.float32), y=np.ones((2,), np.int64))
SHA = hashlib.sha256(BLOCK).hexdigest()
UPSTREAM = {"repository": "https://github.com/org/model", "revision": "a" * 40, "checkpoint": "v1"}


def _manifest(**over: Any) -> dict[str, Any]:
    entry = {
        "sha256": SHA,
        "arrays": {
            "x": {"dtype": "float32", "shape": [1, 3]},
            "y": {"dtype": "int64", "shape": [2]},
        },
        "tolerance": 1e-5,
        "upstream": UPSTREAM,
        "seed": 0,
        "input_shape": [1, 3],
        "generator": "scripts/make_block.py",
        "note": "kept as metadata",
    }
    entry.update(over)
    return {
        "format_version": 1,
        "locked_environment": {"torch": "2.4.1"},
        "fixtures": {"block0.npz": entry},
    }


def _write(project: Path, doc: dict[str, Any]) -> Path:
    write(project / "fixtures", {"block0.npz": BLOCK})
    path = project / "fixtures" / "manifest.json"
    path.write_text(json.dumps(doc))
    return path


def test_every_field_lands_on_the_record(store: Store, project: Path) -> None:
    planned, done = run_import(store, project, _write(project, _manifest()))
    assert planned.format == "json"
    (record,) = done.written
    assert record.name == "imp/block0.npz"
    assert record.object.hex == SHA
    assert record.arrays is not None and set(record.arrays) == {"x", "y"}
    doc = family_doc(project)["records"]["imp/block0.npz"]
    # the pinned upstream, seed, input shape and generator are the record's own fields
    assert doc["upstream"] == [
        {"type": "git", "url": UPSTREAM["repository"], "commit": "a" * 40, "path": "v1"}
    ]
    assert record.seed == 0 and doc["input_shape"] == [1, 3]
    assert record.command == ("scripts/make_block.py",)
    raw = doc["metadata"]
    assert not {"upstream", "seed", "input_shape", "generator"} & set(raw)
    assert raw["unknown_fields"] == {"/fixtures/block0.npz/note": "kept as metadata"}
    assert raw["locked_environment"] == {"torch": "2.4.1"}
    assert "tolerance" not in raw
    assert record.tolerance is not None
    assert record.tolerance.to_json() == {"metric": MEAN_ABS, "max": 1e-5}
    assert planned.orphans == ()  # the manifest itself is no orphan


def test_an_upstream_at_a_branch_is_refused_by_the_pin_rule(store: Store, project: Path) -> None:
    manifest = _manifest()
    manifest["fixtures"]["block0.npz"]["upstream"] = {**UPSTREAM, "revision": "main"}
    with pytest.raises(ManifestError, match="branch") as caught:
        run_import(store, project, _write(project, manifest))
    assert "manifest.json: 'block0.npz'" in caught.value.where
    assert caught.value.fix is not None and "provenance/" not in caught.value.fix
    assert not (project / "provenance" / "imp.json").exists()


def test_a_number_tolerance_means_mean_absolute_error() -> None:
    assert tolerance_json(2e-6) == {"metric": "mean_abs", "max": 2e-6}
    assert tolerance_json({"metric": "exact"}) == {"metric": "exact"}


def test_a_metric_object_the_registry_knows_becomes_the_record_tolerance(
    store: Store, project: Path
) -> None:
    doc = _manifest(tolerance={"metric": "allclose", "atol": 1e-6, "rtol": 1e-4})
    _, done = run_import(store, project, _write(project, doc))
    tolerance = done.written[0].tolerance
    assert tolerance is not None and tolerance.to_json() == {
        "metric": "allclose",
        "atol": 1e-6,
        "rtol": 1e-4,
    }


def test_a_malformed_known_metric_is_refused(store: Store, project: Path) -> None:
    doc = _manifest(tolerance={"metric": "allclose", "atol": -1})
    with pytest.raises(ManifestError, match="atol"):
        run_import(store, project, _write(project, doc))
    assert family_doc(project) == {}


def test_arrays_that_differ_from_the_bytes_are_refused(store: Store, project: Path) -> None:
    doc = _manifest(arrays={"x": {"dtype": "float64", "shape": [1, 3]}})
    with pytest.raises(UsageError, match=r"block0\.npz: the arrays manifest given for "):
        run_import(store, project, _write(project, doc))
    assert family_doc(project) == {}


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"sha256": SHA[:-1] + "x"}, "non-hex"),
        ({"sha256": SHA[:32]}, "has 32 hex characters"),
        ({"sha256": None}, "missing 'sha256'"),
        ({"tolerance": -1}, "finite non-negative"),
        ({"tolerance": True}, "finite non-negative"),
        ({"seed": "0"}, "'seed' must be an integer"),
        ({"input_shape": [1, -3]}, "non-negative integers"),
        ({"arrays": {"x": {"dtype": "f4"}}}, "a dtype and a shape"),
        ({"upstream": {"revision": "main"}}, "'repository'"),
    ],
)
def test_malformed_entries_are_refused_naming_the_file(over: dict[str, Any], message: str) -> None:
    with pytest.raises(ManifestError, match=message) as caught:
        jsonmanifest.parse(json.dumps(_manifest(**over)), "manifest.json")
    assert caught.value.where.startswith("manifest.json: 'block0.npz'")


@pytest.mark.parametrize(
    ("name", "message"),
    [("../block0.npz", "'..' segment"), ("/abs/block0.npz", "is absolute")],
)
def test_hostile_names_are_refused(name: str, message: str) -> None:
    doc = _manifest()
    doc["fixtures"] = {name: doc["fixtures"]["block0.npz"]}
    _, said = refusal(lambda: jsonmanifest.parse(json.dumps(doc), "manifest.json"))
    assert message in said


def test_a_field_named_like_the_import_record_is_kept_not_refused(
    store: Store, project: Path
) -> None:
    doc = _manifest(imported_from="elsewhere")
    run_import(store, project, _write(project, doc))
    raw = family_doc(project)["records"]["imp/block0.npz"]["metadata"]
    assert raw["unknown_fields"]["/fixtures/block0.npz/imported_from"] == "elsewhere"
    assert raw["imported_from"]["format"] == "json"


def test_duplicate_keys_are_refused() -> None:
    text = f'{{"format_version": 1, "files": {{"a.bin": {{"sha256": "{SHA}"}}, "a.bin": {{}}}}}}'
    with pytest.raises(ManifestError, match=r"duplicate key 'a\.bin'"):
        jsonmanifest.parse(text, "manifest.json")


def test_the_file_map_must_be_one() -> None:
    with pytest.raises(ManifestError, match="exactly one map"):
        jsonmanifest.parse('{"format_version": 1, "a": {}, "b": {}}', "manifest.json")
    with pytest.raises(ManifestError, match="line 1"):
        jsonmanifest.parse('{"format_version": 1,', "manifest.json")


def test_registry_reads_back_what_was_written(store: Store, project: Path) -> None:
    run_import(store, project, _write(project, _manifest()))
    record = registry_mod.load(project).get("imp/block0.npz")
    assert record.seed == 0 and record.upstream is not None


# A manifest is read under the registry's bounds, refused naming the manifest and the entry
# before anything is stored (issue 22, section 6).
@pytest.mark.parametrize(
    ("literal", "said"),
    [
        ("[" * 5000 + "]" * 5000, "nested more than 64 levels deep"),
        ("[" * 70 + "]" * 70, "nested more than 64 levels deep"),
        ("9" * 5000, "more than 20 digits"),
        ("9" * 30, "more than 20 digits"),
        ("Infinity", "not finite"),
        ("NaN", "not finite"),
        ("1e400", "not finite"),
        ('"\\ud800"', "lone surrogate"),
    ],
    ids=[
        "deep-5000",
        "deep-70",
        "digits-5000",
        "digits-30",
        "infinity",
        "nan",
        "1e400",
        "surrogate",
    ],
)
@pytest.mark.parametrize("field", ["seed", "note", "locked_environment", "format_version"])
def test_a_value_past_the_registry_bounds_is_refused_naming_the_entry(
    store: Store, project: Path, field: str, literal: str, said: str
) -> None:
    text = json.dumps(_manifest(seed=0, note=0))
    if field == "locked_environment":
        text = text.replace('"2.4.1"', literal)
    elif field == "format_version":
        text = text.replace('"format_version": 1', f'"format_version": {literal}')
    else:
        text = text.replace(f'"{field}": 0', f'"{field}": {literal}')
    path = _write(project, _manifest())
    path.write_text(text)
    with pytest.raises(ManifestError) as caught:
        run_import(store, project, path)
    assert said in caught.value.message and caught.value.fix
    assert str(path) in caught.value.where
    where = field if field in ("locked_environment", "format_version") else "block0.npz"
    assert where in caught.value.where
    assert not (project / "provenance" / "imp.json").exists()
    assert not store.has(digests.of_bytes(BLOCK))


def test_a_record_that_would_not_read_back_is_refused_before_anything_is_stored(
    store: Store, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The import reads every record back through the registry's reader before it stores a
    byte: a format whose own checks missed a value still cannot register it."""
    monkeypatch.setattr(entry_mod, "check_values", lambda _values, _where: None)
    monkeypatch.setattr(jsonmanifest, "load_json", lambda text, _shown, **_hook: json.loads(text))
    path = _write(project, _manifest(note=float("inf")))
    with pytest.raises(ManifestError) as caught:
        run_import(store, project, path)
    assert "block0.npz" in caught.value.where and "not finite" in caught.value.message
    assert "metadata.unknown_fields" in caught.value.message
    assert not (project / "provenance" / "imp.json").exists()
    assert not store.has(digests.of_bytes(BLOCK))


def test_a_tolerance_object_holding_lists_becomes_the_record_tolerance(
    store: Store, project: Path
) -> None:
    checks = [{"metric": "rms", "max": 1e-5}, {"metric": "max_abs", "max": 1e-3}]
    _, done = run_import(store, project, _write(project, _manifest(tolerance={"checks": checks})))
    tolerance = done.written[0].tolerance
    assert tolerance is not None and tolerance.to_json()["checks"] == checks


def test_a_generator_that_is_no_command_line_is_refused_naming_the_entry(
    store: Store, project: Path
) -> None:
    with pytest.raises(ManifestError, match="No closing quotation") as caught:
        run_import(store, project, _write(project, _manifest(generator='python "make.py')))
    assert "block0.npz" in caught.value.where
    assert not (project / "provenance" / "imp.json").exists()
