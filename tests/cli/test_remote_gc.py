"""``fixture-store remote gc``: a dry run by default, --yes deletes, refusals exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import add_file_and_case, run


@pytest.fixture(autouse=True)
def user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "user.toml"
    monkeypatch.setenv("FIXTURE_STORE_CONFIG", str(path))
    return path


def _drop(project: Path, name: str) -> None:
    """The record ``name`` leaves the registry (its objects stay on the remote)."""
    path = project / "provenance" / "fam.json"
    doc = json.loads(path.read_text())
    del doc["records"][name]
    path.write_text(json.dumps(doc, indent=2) + "\n")


@pytest.mark.usefixtures("store")
def test_remote_gc_is_a_dry_run_until_yes_and_what_is_referenced_still_pulls(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_file_and_case(project)
    remote = tmp_path / "remote"
    assert run("remote", "add", "shared", str(remote), "--default")[0] == 0
    assert run("push", "--all")[0] == 0
    _drop(project, "fam/case")
    before = sorted(p for p in remote.rglob("*") if p.is_file())
    code, out, _ = run("remote", "gc", "shared", "--min-age", "0", "--repack-below", "1", "--json")
    assert code == 0, out
    doc = json.loads(out)
    assert doc["dry_run"] is True and doc["bytes_freed"] > 0
    assert sorted(p for p in remote.rglob("*") if p.is_file()) == before
    code, out, err = run("remote", "gc", "shared", "--min-age", "0", "--repack-below", "1", "--yes")
    assert code == 0, err
    assert "removed" in out
    assert sorted(p for p in remote.rglob("*") if p.is_file()) != before
    code, out, _ = run("remote", "gc", "shared", "--min-age", "0", "--repack-below", "1", "--json")
    assert json.loads(out)["bytes_freed"] == 0  # nothing more
    monkeypatch.setenv("FIXTURE_STORE_DIR", str(tmp_path / "fresh"))
    assert run("pull", "fam/a")[0] == 0
    assert run("verify", "fam/a")[0] == 0


@pytest.mark.usefixtures("store")
def test_remote_gc_refuses_a_keep_registry_that_does_not_parse(
    project: Path, tmp_path: Path
) -> None:
    add_file_and_case(project)
    remote = tmp_path / "remote"
    assert run("push", "--all", "--remote", str(remote))[0] == 0
    _drop(project, "fam/case")
    other = tmp_path / "other"
    (other / "provenance").mkdir(parents=True)
    (other / "provenance" / "fam.json").write_text("{ not json")
    before = sorted(p for p in remote.rglob("*") if p.is_file())
    code, _, err = run(
        "remote", "gc", str(remote), "--min-age", "0", "--yes", "--keep-registry", str(other)
    )
    assert code == 2, err
    assert "fam.json" in err and "Traceback" not in err
    assert sorted(p for p in remote.rglob("*") if p.is_file()) == before


@pytest.mark.usefixtures("store")
def test_remote_gc_refuses_a_hub_remote(project: Path) -> None:
    add_file_and_case(project)
    code, _, err = run("remote", "gc", "hf://datasets/org/x", "--yes")
    assert code == 2
    assert "history keeps every file" in err and "fix:" in err


@pytest.mark.usefixtures("store")
def test_the_table_counts_a_pack_too_young_to_touch_apart_from_one_kept_whole(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    add_file_and_case(project)
    remote = tmp_path / "remote"
    assert run("push", "--all", "--remote", str(remote))[0] == 0
    _drop(project, "fam/case")
    code, out, err = run("remote", "gc", str(remote))  # the pack was written a moment ago
    assert code == 0, err
    young = next(line for line in out.splitlines() if "packs too young" in line)
    kept = next(line for line in out.splitlines() if "packs kept whole" in line)
    assert "│ 1 " in young and "│ 0 " in kept
    assert "stay in packs kept whole or too young" in out
    assert "written too recently (--min-age)" in err
