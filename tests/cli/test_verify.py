"""``verify`` and ``path`` through the CLI (``fixture_store.cli.verify``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixture_store.objects.store import Store
from tests.support.cli import add_file_and_case, run


@pytest.mark.usefixtures("store")
def test_verify_prints_a_line_per_family_and_exits_0(project: Path) -> None:
    add_file_and_case(project)
    code, out, err = run("verify")
    assert code == 0, err
    assert out.splitlines() == ["  fam: 2 verified", "2 artifacts: 2 verified"]
    code, out, err = run("verify", "--verbose")
    assert code == 0, err
    assert "fam/a" in out and "fam/case" in out and "2 verified" in out


def test_verify_shows_a_row_only_for_what_is_not_fine(project: Path, store: Store) -> None:
    add_file_and_case(project)
    expected = json.loads(run("show", "fam/a", "--json")[1])["digest"]
    store.remove(expected[len("sha256:") :])
    code, out, _ = run("verify")
    assert code == 1
    assert "fam/a" in out and "fam/case" not in out and "  fam: 1 verified, 1 missing" in out


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


# A run of the CLI in a fresh interpreter that writes its exit code and every module it loaded
# to the file named first: start-up cost is what a new process pays, so only a new one tells.
LOADED = """
import json, sys
from fixture_store.cli import main
code = None
try:
    main(sys.argv[2:], prog_name="fixture-store")
except SystemExit as e:
    code = e.code
with open(sys.argv[1], "w", encoding="utf-8") as f:
    json.dump({"code": code, "modules": sorted(sys.modules)}, f)
"""
# What a warm verify never runs, so never imports: the access layer and its readers, the pools
# that hash and the verifier (a warm verify hashes nothing), and the registry's parsers (its
# snapshot vouches for the registry files by their bytes: it parses none of them).
NOT_ON_THE_WARM_PATH = (
    "fixture_store.access",
    "multiprocessing",
    "concurrent.futures",
    "logging",
    "fixture_store.verify",
    "fixture_store.verifying.verifier",
    "fixture_store.registry.records",
    "fixture_store.registry.documents",
    "fixture_store.registry.tolerance",
)


def loaded_by(tmp_path: Path, *args: str) -> tuple[int, set[str]]:
    report = tmp_path / "loaded.json"
    subprocess.run([sys.executable, "-c", LOADED, str(report), *args], check=True)
    doc = json.loads(report.read_text(encoding="utf-8"))
    return doc["code"], set(doc["modules"])


@pytest.mark.usefixtures("store")
@pytest.mark.parametrize("as_json", [False, True])
def test_a_warm_verify_imports_nothing_it_does_not_run(
    project: Path, tmp_path: Path, as_json: bool
) -> None:
    add_file_and_case(project)
    assert run("verify")[0] == 0  # the snapshot the warm runs are served from
    code, modules = loaded_by(tmp_path, "verify", *(["--json"] if as_json else []))
    assert code == 0
    assert not modules & set(NOT_ON_THE_WARM_PATH)
    # A verify that went well prints its JSON, or its lines per family, without rich: only an
    # artifact that is not fine gets a table row, and a bar needs a terminal.
    assert "rich.console" not in modules
    assert "rich.progress" not in modules
    assert "rich.table" not in modules
