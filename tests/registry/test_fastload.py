"""Registry loading stays as strict when it is made fast: members checked in code, the compiled
record validator, and the marker that skips the schema backstop only for bytes that passed it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fixture_store import registry as registry_mod

SHA = "sha256:" + "ab" * 32


def _write(root: Path, records: dict[str, object]) -> Path:
    path = root / "provenance" / "fx.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(registry_mod.dumps({"format_version": 1, "records": records}))
    return path


def _fixture(**extra: object) -> dict[str, object]:
    return {
        "kind": "fixture",
        "source": {"type": "local", "path": "x.bin"},
        "digest": SHA,
        "size": 3,
        **extra,
    }


@pytest.fixture(autouse=True)
def _own_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIXTURE_STORE_DIR", str(tmp_path / "store"))


def test_unknown_member_field_is_refused(tmp_path: Path) -> None:
    from fixture_store.objects import trees
    from fixture_store.objects.digests import Digest

    tree = trees.Tree({"a.bin": Digest("ab" * 32, 3)})
    members = trees.to_json(tree)
    members["a.bin"]["colour"] = "red"
    _write(
        tmp_path,
        {
            "fx/t": {
                "kind": "tree",
                "source": {"type": "local", "path": "t"},
                "digest": tree.digest.text,
                "size": tree.digest.size,
                "members": members,
            }
        },
    )
    err = dict(registry_mod.load(tmp_path).invalid())["fx/t"]
    assert err.field == "members.a.bin" and "colour" in err.message


def test_schema_backstop_still_catches_unknown_fields_and_bad_sources(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "fx/extra": _fixture(colour="red"),
            "fx/url": _fixture(source={"type": "url", "url": "https://example.org/x", "x": 1}),
            "fx/ok": _fixture(),
        },
    )
    invalid = dict(registry_mod.load(tmp_path).invalid())
    assert set(invalid) == {"fx/extra", "fx/url"}
    assert "colour" in invalid["fx/extra"].message


def test_loading_a_registry_never_creates_a_store(tmp_path: Path) -> None:
    _write(tmp_path, {"fx/ok": _fixture()})
    assert not dict(registry_mod.load(tmp_path).invalid())
    assert not (tmp_path / "store").exists()


def test_the_pass_marker_covers_only_the_exact_bytes_that_passed(tmp_path: Path) -> None:
    (tmp_path / "store").mkdir()
    path = _write(tmp_path, {"fx/ok": _fixture()})
    assert not dict(registry_mod.load(tmp_path).invalid())
    markers = list((tmp_path / "store" / "state" / "schema-passed").iterdir())
    assert len(markers) == 1
    # Changed bytes get a new key: the backstop runs again and refuses the new field.
    doc = json.loads(path.read_text())
    doc["records"]["fx/ok"]["colour"] = "red"
    path.write_text(registry_mod.dumps(doc))
    assert set(dict(registry_mod.load(tmp_path).invalid())) == {"fx/ok"}
    # A file with an invalid record is never remembered as passed.
    assert len(list(markers[0].parent.iterdir())) == 1
