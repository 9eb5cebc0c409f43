"""A field the importer does not know never refuses an import: random unknown fields, at random
depths of a valid manifest, are kept verbatim and reported, and ``--dry-run`` and the real
import agree on every record and every line of the report."""

from __future__ import annotations

import copy
import hashlib
import io
import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixture_store.importers import fields
from tests.support.cli import run
from tests.support.importing import family_doc, write

REV = "9c1d7f0e2b3a4c5d6e7f8091a2b3c4d5e6f70812"


def _npz(value: float) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, x=np.full((1, 2), value, np.float32))
    return buf.getvalue()


FILES = {"a.npz": _npz(0.0), "deep/b.npz": _npz(1.0)}


def _valid() -> dict[str, Any]:
    return {
        "format_version": 1,
        "locked_environment": {"numpy": "2.1.0"},
        "fixtures": {
            name: {
                "sha256": hashlib.sha256(data).hexdigest(),
                "arrays": {"x": {"dtype": "float32", "shape": [1, 2]}},
                "tolerance": 1e-6,
                "upstream": {
                    "repository": "https://github.com/org/model",
                    "revision": REV,
                    "checkpoint": "weights.bin",
                    "checkpoint_sha256": "cd" * 32,
                },
                "seed": 3,
            }
            for name, data in FILES.items()
        },
    }


KNOWN = frozenset(
    name
    for table in (fields.DOCUMENT, fields.ENTRY, fields.UPSTREAM, fields.ARRAY)
    for row in table
    for name in row.names
)
keys = st.text(min_size=1, max_size=10).filter(lambda k: k not in KNOWN)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**18), 10**18)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
    max_leaves=8,
)
# Where a field is added: the document, an entry, its upstream, one of its arrays.
DEPTHS = ("document", "entry", "upstream", "array")
additions = st.lists(
    st.tuples(st.sampled_from(DEPTHS), st.sampled_from(sorted(FILES)), keys, values),
    min_size=1,
    max_size=5,
)


def _add(doc: dict[str, Any], added: list[tuple[str, str, str, Any]]) -> dict[str, Any]:
    """``doc`` with each field added where its depth says; the pointer of each, by value."""
    kept: dict[str, Any] = {}
    for depth, name, key, value in added:
        entry_at = fields.pointer("/fixtures", name)
        target, at = {
            "document": (doc, ""),
            "entry": (doc["fixtures"][name], entry_at),
            "upstream": (doc["fixtures"][name]["upstream"], f"{entry_at}/upstream"),
            "array": (doc["fixtures"][name]["arrays"]["x"], f"{entry_at}/arrays/x"),
        }[depth]
        if depth == "document" and key == "fixtures":
            continue
        target[key] = value
        kept[fields.pointer(at, key)] = value
    return kept


COUNTER = itertools.count()


@pytest.mark.usefixtures("store")
@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(added=additions)
def test_unknown_fields_are_kept_verbatim_reported_and_the_dry_run_agrees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, added: list[tuple[str, str, str, Any]]
) -> None:
    project = tmp_path / f"p{next(COUNTER)}"
    (project / "provenance").mkdir(parents=True)
    monkeypatch.chdir(project)
    doc = copy.deepcopy(_valid())
    kept = _add(doc, added)
    write(project / "refs", FILES)
    (project / "refs" / "manifest.json").write_text(json.dumps(doc))

    reports = []
    for extra in (("--dry-run",), ()):
        code, out, err = run("import", "refs/manifest.json", "--family", "f", "--json", *extra)
        assert code == 0, err
        report = json.loads(out)
        reports.append({k: v for k, v in report.items() if k != "imported"})
    human = run("import", "refs/manifest.json", "--family", "g", "--dry-run")[1]
    dry, real = reports
    assert dry == real  # the same records, the same report
    assert sorted(dry["unknown_fields"]) == sorted(kept)
    mapped = {m["field"] for m in dry["mapped_fields"]}
    for name in FILES:
        assert f"{fields.pointer('/fixtures', name)}/upstream/checkpoint_sha256" in mapped
    assert "fields the importer does not know" in human

    records = family_doc(project, "f")["records"]
    for name in FILES:
        record = records[f"f/{name}"]
        entry_at = fields.pointer("/fixtures", name) + "/"
        own = {p: v for p, v in kept.items() if p.startswith(entry_at) or p.count("/") == 1}
        assert record["metadata"].get("unknown_fields", {}) == json.loads(json.dumps(own))
        assert record["upstream"][0]["digest"] == "sha256:" + "cd" * 32
        assert record["metadata"] == dry["records"][f"f/{name}"]["metadata"]
        assert record["upstream"] == dry["records"][f"f/{name}"]["upstream"]


@pytest.mark.usefixtures("store")
@pytest.mark.smoke
def test_a_field_given_twice_with_other_values_is_kept_not_guessed(project: Path) -> None:
    doc = _valid()
    entry = doc["fixtures"]["a.npz"]
    entry["checksum"] = "00" * 32  # a second digest, not the one read
    entry["upstream"]["commit"] = REV  # the same revision under another name: mapped too
    write(project / "refs", FILES)
    (project / "refs" / "manifest.json").write_text(json.dumps(doc))
    code, out, err = run("import", "refs/manifest.json", "--family", "f", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert "/fixtures/a.npz/checksum" in report["unknown_fields"]
    assert {"field": "/fixtures/a.npz/upstream/commit", "as": "upstream revision"} in report[
        "mapped_fields"
    ]
    assert family_doc(project, "f")["records"]["f/a.npz"]["metadata"]["unknown_fields"] == {
        "/fixtures/a.npz/checksum": "00" * 32
    }
