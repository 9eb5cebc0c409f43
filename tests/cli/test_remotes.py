"""The push, pull and remote commands: exit codes, JSON, messages."""

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


@pytest.mark.usefixtures("store")
def test_push_and_pull_through_a_default_folder_remote(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_file_and_case(project)
    remote = tmp_path / "remote"
    assert run("remote", "add", "shared", str(remote), "--default")[0] == 0
    code, out, _ = run("push", "--all", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["counts"] == {"pushed": 2} and doc["moved_objects"] == 3
    monkeypatch.setenv("FIXTURE_STORE_DIR", str(tmp_path / "fresh"))
    code, out, _ = run("pull", "--family", "fam")
    assert code == 0 and "2 pulled" in out
    assert run("verify")[0] == 0


@pytest.mark.usefixtures("store")
def test_pull_of_what_the_remote_lacks_exits_1_naming_the_artifact_and_the_fix(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_file_and_case(project)
    monkeypatch.setenv("FIXTURE_STORE_DIR", str(tmp_path / "fresh"))
    (tmp_path / "empty").mkdir()
    code, _, err = run("pull", "fam/a", "--remote", str(tmp_path / "empty"))
    assert code == 1
    assert "missing: fam/a" in err and "fix: fixture-store push fam/a" in err


@pytest.mark.usefixtures("store")
def test_pull_from_a_folder_that_does_not_exist_says_so(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_file_and_case(project)
    monkeypatch.setenv("FIXTURE_STORE_DIR", str(tmp_path / "fresh"))
    code, _, err = run("pull", "fam/a", "--remote", str(tmp_path / "typo"))
    assert code == 1
    assert f"the folder {tmp_path / 'typo'} does not exist" in err
    assert "fix: check the remote's path" in err and "does not hold" not in err
    assert not (tmp_path / "typo").exists()


@pytest.mark.usefixtures("project")
def test_each_sync_command_help_names_the_urls_it_takes() -> None:
    push_help = run("push", "--help")[1]
    pull_help = run("pull", "--help")[1]
    assert "https://" not in push_help.split("--remote", 1)[1].split("--jobs", 1)[0]
    assert "https://" in pull_help.split("--remote", 1)[1].split("--jobs", 1)[0]


@pytest.mark.usefixtures("store")
def test_usage_errors_exit_2(project: Path) -> None:
    add_file_and_case(project)
    assert run("push")[0] == 2
    code, _, err = run("push", "--all")
    assert code == 2 and "no default remote" in err
    code, _, err = run("push", "--all", "--remote", "https://mirror.example/f")
    assert code == 2 and "read-only" in err
    assert run("pull", "fam/nope", "--remote", "/tmp/x")[0] == 2


@pytest.mark.usefixtures("project", "user_config")
def test_remote_list_shows_the_default_first_and_remove_drops_it() -> None:
    assert run("remote", "add", "b", "s3://bucket/b")[0] == 0
    assert run("remote", "add", "a", "/srv/a", "--default")[0] == 0
    code, out, _ = run("remote", "list", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["default"] == "a"
    assert [r["name"] for r in doc["remotes"]] == ["a", "b"]
    assert run("remote", "remove", "a")[0] == 0
    assert [r["name"] for r in json.loads(run("remote", "list", "--json")[1])["remotes"]] == ["b"]
    code, _, err = run("remote", "remove", "a")
    assert code == 2 and "declares no remote" in err


@pytest.mark.usefixtures("store")
def test_push_and_remote_list_print_a_url_with_brackets_as_it_is(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "1000")  # tables fold long cells; the URL must stay whole
    add_file_and_case(project)
    remote = str(tmp_path / "remote[bold]")  # what rich would read as markup
    assert run("remote", "add", "shared", remote, "--default")[0] == 0
    code, out, _ = run("remote", "list")
    assert code == 0 and remote in out and "\\[" not in out
    code, out, _ = run("push", "--all")
    assert code == 0 and f"push shared ({remote})" in out and "\\[" not in out


@pytest.mark.usefixtures("store")
def test_remote_add_sets_the_pack_threshold_that_list_shows_and_push_follows(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "1000")
    add_file_and_case(project)
    remote = tmp_path / "remote"
    assert run("remote", "add", "plain", str(remote), "--pack-threshold", "0")[0] == 0
    assert run("remote", "add", "packed", str(tmp_path / "packed"))[0] == 0
    doc = json.loads(run("remote", "list", "--json")[1])
    assert {r["name"]: r.get("pack_threshold") for r in doc["remotes"]} == {
        "plain": 0,
        "packed": None,
    }
    table = run("remote", "list")[1]
    assert "none" in table and "under 1,048,576 B" in table
    assert run("push", "--all", "--remote", "plain")[0] == 0
    # No packs: every object under its own key, none in a pack or an index.
    assert not any("pack" in p.name for p in remote.rglob("*"))
    assert len([p for p in remote.rglob("*") if p.is_file()]) == 3


@pytest.mark.usefixtures("project")
@pytest.mark.parametrize("url", ["hf://datasets/org/data", "https://mirror.example/f"])
def test_a_pack_threshold_on_a_remote_push_never_packs_is_refused(url: str) -> None:
    code, _, err = run("remote", "add", "r", url, "--pack-threshold", "0")
    assert code == 2 and "pack_threshold is for folder and S3 remotes" in err
    assert json.loads(run("remote", "list", "--json")[1])["remotes"] == []
