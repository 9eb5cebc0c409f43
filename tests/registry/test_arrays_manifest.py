"""The compact arrays manifest (issue 36): one string per plain entry, old families read and
written back as they are, ranges only where partial fetch can use them, and ``migrate``
rewriting a family in one transaction with what verification reads unchanged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest

from fixture_store import ingest
from fixture_store import registry as registry_mod
from fixture_store.errors import RegistryError
from fixture_store.migrate import migrate_family
from fixture_store.objects.store import Store
from fixture_store.readers.tensor_ranges import MIN_BYTES, MIN_MEAN_BYTES, wants_ranges
from fixture_store.registry import files, parse_record
from fixture_store.verify import verify_names
from tests.support.cli import run

HEX = "ab" * 32
RANGED = {"dtype": "float32", "shape": [512, 512], "offset": 128, "length": 1 << 20, "sha256": HEX}


def _record(arrays: dict[str, Any], size: int = 10) -> dict[str, Any]:
    return {
        "kind": "array",
        "digest": "sha256:" + HEX,
        "size": size,
        "media_type": "application/x-npz",
        "source": {"type": "local", "path": "ref.npz"},
        "arrays": arrays,
    }


def test_plain_entries_are_grouped_by_dtype_and_shape_and_read_as_their_objects() -> None:
    groups = {
        "float64[1,12]": ["a", "b"],
        "float32[]": ["s"],
        "datetime64[ns][3]": ["t"],
        "r": RANGED,
    }
    singles = {
        "a": "float64[1,12]",
        "b": "float64[1,12]",
        "s": "float32[]",
        "t": "datetime64[ns][3]",
        "r": RANGED,
    }
    objects = {
        "a": {"dtype": "float64", "shape": [1, 12]},
        "b": {"dtype": "float64", "shape": [1, 12]},
        "s": {"dtype": "float32", "shape": []},
        "t": {"dtype": "datetime64[ns]", "shape": [3]},
        "r": RANGED,
    }
    grouped = parse_record("fam/ref.npz", _record(groups), file="f")
    one_each = parse_record("fam/ref.npz", _record(singles), file="f")
    old = parse_record("fam/ref.npz", _record(objects), file="f")
    assert grouped == one_each == old and grouped.arrays == old.arrays
    assert grouped.to_json()["arrays"] == groups
    assert one_each.to_json()["arrays"] == groups
    assert old.to_json()["arrays"] == objects  # an old family is written back byte for byte
    for arrays in (groups, singles, objects):
        doc = {"format_version": 1, "records": {"fam/r": _record(arrays)}}
        jsonschema.validate(doc, files.schema())


def test_an_array_named_like_a_group_is_written_one_entry_each() -> None:
    arrays = {"float64[3]": "float32[2]", "b": "float64[3]"}
    record = parse_record("fam/ref.npz", _record(arrays), file="f")
    assert record.to_json()["arrays"] == arrays
    with pytest.raises(RegistryError, match="twice"):
        parse_record("fam/ref.npz", _record({"float64[3]": ["a", "float64[3]"]}), file="f")
    with pytest.raises(RegistryError, match="twice"):
        parse_record("fam/ref.npz", _record({"float64[3]": ["a"], "int8[]": ["a"]}), file="f")


@pytest.mark.parametrize(
    "bad", ["float64", "float64[1, 2]", "[3]", "float64[01]", "float64[-1]", "float64[1,]", "", 3]
)
def test_a_malformed_entry_string_is_refused_naming_the_array(bad: str) -> None:
    with pytest.raises(RegistryError, match=r"arrays\.a"):
        parse_record("fam/ref.npz", _record({"a": bad}), file="f")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            {"format_version": 1, "records": {"fam/r": _record({"a": bad})}}, files.schema()
        )


def test_ranges_are_kept_only_where_the_arrays_are_large_enough_to_fetch_alone() -> None:
    assert not wants_ranges(MIN_BYTES - 1, 1)
    assert wants_ranges(MIN_BYTES, 1)
    assert not wants_ranges(4 * MIN_BYTES, 4 * MIN_BYTES // MIN_MEAN_BYTES + 1)
    assert wants_ranges(4 * MIN_BYTES, 4 * MIN_BYTES // MIN_MEAN_BYTES)


def test_a_file_past_1_mib_of_many_small_arrays_records_no_ranges(
    project: Path, store: Store
) -> None:
    rng = np.random.default_rng(0)
    arrays = {f"c{i:03d}": rng.standard_normal(2048) for i in range(80)}  # 1.3 MB, 16 KiB each
    np.savez(project / "ref.npz", **arrays)  # type: ignore[arg-type]
    ingest.add(
        store, registry_mod.load(project), project / "ref.npz", name="fam/ref.npz", kind="array"
    )
    raw = json.loads((project / "provenance" / "fam.json").read_text())
    assert (project / "ref.npz").stat().st_size > MIN_BYTES
    assert raw["records"]["fam/ref.npz"]["arrays"] == {"float64[2048]": sorted(arrays)}


def test_migrate_rewrites_a_family_in_the_compact_form_and_reads_the_same(
    project: Path, store: Store
) -> None:
    arrays = {"a": np.ones((1, 5)), "b": np.arange(3.0)}
    np.savez(project / "ref.npz", **arrays)  # type: ignore[arg-type]
    ingest.add(
        store, registry_mod.load(project), project / "ref.npz", name="fam/ref.npz", kind="array"
    )
    path = project / "provenance" / "fam.json"
    doc = json.loads(path.read_text())
    new = doc["records"]["fam/ref.npz"]
    # As an older fixture-store wrote it: objects, and ranges on a file too small to use them.
    new["arrays"] = {
        "a": {"dtype": "float64", "shape": [1, 5]},
        "b": {**RANGED, "dtype": "float64", "shape": [3]},
    }
    big = {**_record({"w": RANGED}, size=2 << 20), "source": {"type": "local", "path": "w.npy"}}
    doc["records"]["fam/w.npz"] = big
    path.write_text(files.dumps(doc))
    before = registry_mod.load(project)

    migrated = migrate_family(before, "fam")

    assert migrated.unranged == ("fam/ref.npz",) and migrated.after < migrated.before
    written = json.loads(path.read_text())["records"]
    assert written["fam/ref.npz"]["arrays"] == {"float64[1,5]": ["a"], "float64[3]": ["b"]}
    assert written["fam/w.npz"]["arrays"] == {"w": RANGED}  # its file keeps its ranges
    after = registry_mod.load(project)
    assert after.get("fam/ref.npz").digest == before.get("fam/ref.npz").digest
    assert [r.ok for r in verify_names(store, after, ["fam/ref.npz"])] == [True]
    again = path.read_bytes()
    migrate_family(after, "fam")  # the current form is a fixed point
    assert path.read_bytes() == again


@pytest.mark.usefixtures("store")
def test_migrate_command_names_what_it_did_and_refuses_an_unknown_family(project: Path) -> None:
    np.savez(project / "ref.npz", a=np.ones((1, 5)))
    assert run("add", "ref.npz", "--name", "fam/ref.npz", "--kind", "array")[0] == 0
    code, out, _ = run("migrate", "fam", "--json")
    assert code == 0 and json.loads(out)[0]["arrays"] == 1
    code, _, err = run("migrate", "nope")
    assert code == 2 and "no family 'nope'" in err


def test_an_accepted_regeneration_keeps_the_registered_records_form() -> None:
    # A DVC stage that regenerates and accepts rewrites its family: an accept is no migration.
    from fixture_store.regenerate.accepting import _reviewed_from

    objects = {"a": {"dtype": "float64", "shape": [1, 12]}}
    old = parse_record("fam/ref.npz", _record(objects), file="f")
    new = parse_record("fam/ref.npz", _record({"float64[1,12]": ["a"]}, size=11), file="f")
    assert _reviewed_from(old, new).to_json()["arrays"] == objects


def test_migrate_rewrites_every_shard_of_a_sharded_family(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fixture_store.registry import shards

    monkeypatch.setattr(shards, "SHARD_ABOVE", 512)
    objects = {"a": {"dtype": "float64", "shape": [1, 12]}}
    doc = {"format_version": 1, "records": {f"fam/r{i}.npz": _record(objects) for i in range(4)}}
    (project / "provenance" / "fam.json").write_text(files.dumps(doc))
    registry = registry_mod.load(project)
    files.write_family(registry, "fam", registry.records())  # shards it, in the object form
    assert (project / "provenance" / "fam").is_dir()

    migrate_family(registry_mod.load(project), "fam")

    texts = [p.read_text() for p in sorted((project / "provenance" / "fam").glob("*.json"))]
    assert texts and all('"float64[1,12]": [' in t and '"dtype"' not in t for t in texts)
