"""``verify`` and ``path`` through the CLI (``fixture_store.cli.verify``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fixture_store.objects.store import Store
from tests.support.cli import add_file_and_case, run


@pytest.mark.usefixtures("store")
def test_verify_prints_a_table_and_exits_0(project: Path) -> None:
    add_file_and_case(project)
    code, out, err = run("verify")
    assert code == 0, err
    assert "fam/a" in out and "fam/case" in out and "2 verified" in out


@pytest.mark.usefixtures("store")
def test_verify_json_is_machine_readable(project: Path) -> None:
    add_file_and_case(project)
    code, out, _ = run("verify", "--json", "--full")
    doc = json.loads(out)
    assert code == 0 and doc["counts"] == {"verified": 2} and doc["full"] is True
    assert {r["name"] for r in doc["results"]} == {"fam/a", "fam/case"}


def test_a_tampered_object_exits_1_naming_artifact_and_digests(project: Path, store: Store) -> None:
    add_file_and_case(project)
    expected = json.loads(run("show", "fam/a", "--json")[1])["digest"]
    path = store.object_path(expected[len("sha256:") :])
    os.chmod(path, 0o644)
    path.write_bytes(b"alphA" + b"alpha" * 99)
    code, out, err = run("verify", "--full")
    assert code == 1
    assert "mismatch: fam/a" in err and expected in err
    assert "1 mismatch" in out


def test_missing_object_exits_1_with_the_fetch_command(project: Path, store: Store) -> None:
    add_file_and_case(project)
    expected = json.loads(run("show", "fam/a", "--json")[1])["digest"]
    store.remove(expected[len("sha256:") :])
    code, _, err = run("verify", "fam/a")
    assert code == 1 and "missing: fam/a" in err


@pytest.mark.usefixtures("store")
def test_registry_errors_exit_2_on_stderr_without_traceback(project: Path) -> None:
    (project / "provenance" / "fam.json").write_text('{"format_version": 9, "records": {}}')
    code, out, err = run("verify")
    assert code == 2 and out == ""
    assert "unknown format_version 9" in err and "Traceback" not in err


@pytest.mark.usefixtures("store")
def test_unknown_name_exits_2(project: Path) -> None:
    add_file_and_case(project)
    code, _, err = run("verify", "fam/nope")
    assert code == 2 and "no record" in err and "fixture-store add" in err


@pytest.mark.usefixtures("store")
def test_path_prints_verified_locations_only(project: Path) -> None:
    add_file_and_case(project)
    code, out, _ = run("path", "fam/a")
    assert code == 0 and Path(out.strip()).read_bytes() == b"alpha" * 100
    code, out, _ = run("path", "fam/case")
    assert code == 0 and (Path(out.strip()) / "model.onnx").read_bytes() == b"m"
    target = Path(run("path", "fam/a")[1].strip())
    os.chmod(target, 0o644)
    target.write_bytes(b"x" * 500)
    code, out, err = run("path", "fam/a")
    assert code == 1 and out == "" and "does not match its record" in err


def test_many_failures_are_summarised_not_flooded(project: Path, store: Store) -> None:
    (project / "many").mkdir()
    for i in range(25):
        (project / "many" / f"f{i}.bin").write_bytes(b"%d" % i)
        assert run("add", f"many/f{i}.bin", "--name", f"fam/f{i}", "--kind", "fixture")[0] == 0
    for hexpart, _ in list(store.iter_objects()):
        store.remove(hexpart)
    code, out, err = run("verify")
    assert code == 1
    assert "25 artifacts: 25 missing" in out
    assert len([line for line in err.splitlines() if line.startswith("missing: ")]) == 20
    assert "… and 5 more failures (use --json for all)" in err
    assert len(json.loads(run("verify", "--json")[1])["results"]) == 25
