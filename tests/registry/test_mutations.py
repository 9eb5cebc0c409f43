"""Bad registry input: any mutation of a valid record is rejected naming file, record, field."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixture_store.errors import RegistryError
from fixture_store.registry import dumps, load_file

_SETTINGS: dict[str, Any] = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.function_scoped_fixture],
}
FAMILY = "fam"
NAME = "fam/case-1"
REV = "0123456789abcdef0123456789abcdef01234567"
HEX = "ab" * 32

BASES: dict[str, dict[str, Any]] = {
    "hub": {
        "kind": "checkpoint",
        "digest": f"sha256:{HEX}",
        "size": 10,
        "source": {"type": "hub", "repo_id": "org/model", "revision": REV, "path": "w.bin"},
        "license": "apache-2.0",
        "description": "weights",
        "media_type": "application/x-npy",
        "lineage": [f"sha256:{'cd' * 32}"],
        "tolerance": {"metric": "allclose", "atol": 0.1},
        "arrays": {"x": {"dtype": "float32", "shape": [2, 3]}},
        "metadata": {"k": "v"},
        "profile": "1GiB",
    },
    "package": {
        "kind": "fixture",
        "digest": f"sha256:{HEX}",
        "size": 10,
        "source": {
            "type": "package",
            "requirement": "onnx==1.22.0",
            "file": "onnx-1.22.0.whl",
            "file_digest": f"sha256:{'ef' * 32}",
            "path": "onnx/backend/test/data/x.pb",
        },
    },
    "url": {
        "kind": "video",
        "digest": f"sha256:{HEX}",
        "size": 10,
        "source": {"type": "url", "url": "https://example.invalid/clip.mp4"},
    },
}


def _paths(doc: Any, prefix: str = "") -> list[str]:
    """Every field path of a record (dotted), including nested ones."""
    out = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            path = f"{prefix}.{k}" if prefix else k
            out.append(path)
            out.extend(_paths(v, path))
    return out


def _get_parent(doc: dict[str, Any], path: str) -> tuple[dict[str, Any], str]:
    *parents, last = path.split(".")
    node = doc
    for p in parents:
        node = node[p]
    return node, last


def _write(tmp: Path, records: dict[str, Any], text: str | None = None) -> Path:
    path = tmp / f"{FAMILY}.json"
    path.write_text(text if text is not None else dumps({"format_version": 1, "records": records}))
    return path


def _rejection(path: Path, name: str) -> str:
    """The message rejecting record ``name`` of ``path`` (file-level or per-record)."""
    try:
        fam = load_file(path)
    except RegistryError as e:
        return str(e)
    assert name not in fam.records, f"mutated record was accepted: {name}"
    assert name in fam.invalid
    return str(fam.invalid[name])


def _top(path: str) -> str:
    return path.split(".", maxsplit=1)[0]


@pytest.mark.parametrize("base", sorted(BASES))
def test_the_unmutated_records_are_valid(tmp_path: Path, base: str) -> None:
    fam = load_file(_write(tmp_path, {NAME: BASES[base]}))
    assert list(fam.records) == [NAME] and not fam.invalid


_REMOVABLE = {
    base: [
        p
        for p in _paths(doc)
        if p in {"kind", "digest", "size", "source"}
        or (p.startswith("source.") and p.count(".") == 1 and p != "source.repo_type")
        or p in {"arrays.x.dtype", "arrays.x.shape", "tolerance.metric"}
    ]
    for base, doc in BASES.items()
}


@settings(max_examples=80, **_SETTINGS)
@given(data=st.data())
def test_removing_a_required_field_is_rejected(tmp_path: Path, data: st.DataObject) -> None:
    base = data.draw(st.sampled_from(sorted(BASES)))
    field = data.draw(st.sampled_from(_REMOVABLE[base]))
    doc = copy.deepcopy(BASES[base])
    parent, last = _get_parent(doc, field)
    del parent[last]
    msg = _rejection(_write(tmp_path, {NAME: doc}), NAME)
    assert str(tmp_path / "fam.json") in msg
    assert repr(NAME) in msg
    assert f"field '{_top(field)}" in msg, msg


_VALUES = st.sampled_from([None, True, 0, -1, 2.5, "", "text", [], [1], {}, {"a": 1}])


def _json_type(v: Any) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int | float):
        return "number"
    return type(v).__name__


@settings(max_examples=150, **_SETTINGS)
@given(data=st.data())
def test_changing_a_field_type_is_rejected(tmp_path: Path, data: st.DataObject) -> None:
    base = data.draw(st.sampled_from(sorted(BASES)))
    # metadata is free-form by design: only its own type is checked.
    field = data.draw(
        st.sampled_from([p for p in _paths(BASES[base]) if not p.startswith("metadata.")])
    )
    doc = copy.deepcopy(BASES[base])
    parent, last = _get_parent(doc, field)
    value = data.draw(_VALUES.filter(lambda v: _json_type(v) != _json_type(parent[last])))
    parent[last] = value
    msg = _rejection(_write(tmp_path, {NAME: doc}), NAME)
    assert str(tmp_path / "fam.json") in msg
    assert repr(NAME) in msg
    assert f"field '{_top(field)}" in msg, msg


@settings(max_examples=40, **_SETTINGS)
@given(length=st.integers(0, 39))
def test_a_shortened_revision_is_rejected(tmp_path: Path, length: int) -> None:
    doc = copy.deepcopy(BASES["hub"])
    doc["source"]["revision"] = REV[:length]
    msg = _rejection(_write(tmp_path, {NAME: doc}), NAME)
    assert str(tmp_path / "fam.json") in msg and repr(NAME) in msg
    assert "field 'source.revision'" in msg


@settings(max_examples=60, **_SETTINGS)
@given(data=st.data())
def test_a_duplicate_key_is_rejected(tmp_path: Path, data: st.DataObject) -> None:
    base = data.draw(st.sampled_from(sorted(BASES)))
    field = data.draw(st.sampled_from(_paths(BASES[base])))
    text = dumps({"format_version": 1, "records": {NAME: BASES[base]}})
    # Repeat the field's line right after itself (same key, same value, same object).
    key = field.split(".")[-1]
    depth = field.count(".") + 3
    lines = text.splitlines()
    prefix = " " * (2 * depth) + json.dumps(key) + ": "
    at = next(i for i, line in enumerate(lines) if line.startswith(prefix))
    line = lines[at]
    if not line.rstrip().endswith((",", "{", "[")):
        line = line + ","
    if line.rstrip().endswith(("{", "[")):
        # A nested object or list: duplicate it as a scalar key, still a duplicate key.
        line = prefix + "1,"
    lines.insert(at, line)
    path = _write(tmp_path, {}, "\n".join(lines) + "\n")
    with pytest.raises(RegistryError) as info:
        load_file(path)
    msg = str(info.value)
    assert str(path) in msg and repr(NAME) in msg and "duplicate key" in msg
    assert f"field '{field}'" in msg, msg


@pytest.mark.parametrize(
    "name",
    [
        "fam/../x",
        "fam/a/../../etc",
        "../fam/x",
        "fam/./x",
        "fam/x\n",
        "fam/x/",
        "fam//x",
        "fam/x\x00y",
        "/fam/x",
        "fam\\x",
        "fam/..",
        "fam/x\u202e",
        "Fam/x",
    ],
)
def test_a_name_with_traversal_is_rejected(tmp_path: Path, name: str) -> None:
    msg = _rejection(_write(tmp_path, {name: BASES["url"]}), name)
    assert str(tmp_path / "fam.json") in msg
    assert repr(name) in msg
    assert "field 'name'" in msg


@pytest.mark.parametrize("profile", ["2GiB", "default ", "unlimited"])
def test_an_unknown_limits_profile_is_rejected(tmp_path: Path, profile: str) -> None:
    doc = {**BASES["url"], "profile": profile}
    msg = _rejection(_write(tmp_path, {NAME: doc}), NAME)
    assert repr(NAME) in msg and "field 'profile'" in msg and "unknown limits profile" in msg
