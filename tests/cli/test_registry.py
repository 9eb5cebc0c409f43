"""``list``, ``show``, ``status`` through the CLI (``fixture_store.cli.registry``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import add_file_and_case, run


@pytest.mark.usefixtures("store")
def test_list_show_status_and_help(project: Path) -> None:
    add_file_and_case(project)
    code, out, _ = run("list", "--json")
    assert code == 0 and [r["name"] for r in json.loads(out)] == ["fam/a", "fam/case"]
    code, out, _ = run("show", "fam/case")
    assert code == 0 and "members: 1 files" in out and "verified" in out
    code, out, _ = run("status", "--json")
    assert json.loads(out)["families"]["fam"]["present"] == 2
    for cmd in ("init", "add", "verify", "list", "show", "gc", "status"):
        code, out, _ = run(cmd, "--help")
        assert code == 0 and "Usage:" in out


@pytest.mark.usefixtures("store")
def test_show_prints_license_metadata_and_upstream(project: Path) -> None:
    (project / "a.bin").write_bytes(b"a")
    rev = "f826b80d28226b62986cc218e5cec390b1096902"
    assert (
        run(
            "add",
            "a.bin",
            "--name",
            "fam/a",
            "--kind",
            "fixture",
            "--license",
            "MIT",
            "--metadata",
            "model=[dinov2]",
            "--upstream",
            f"hf://MIT/ast@{rev}/model.safetensors",
        )[0]
        == 0
    )
    code, out, _ = run("show", "fam/a")
    assert code == 0 and "license:" in out and "MIT" in out
    assert '{"model": "[dinov2]"}' in out  # user text printed as it is, not as markup
    assert f"hub MIT/ast@{rev[:12]}:model.safetensors" in out


def test_status_reports_files_no_record_names_in_folders_of_local_sources(project: Path) -> None:
    add_file_and_case(project)  # data/a.bin and data/case: data/ is a folder of local sources
    code, out, _ = run("status", "--json")
    assert code == 0 and json.loads(out)["orphans"] == []
    (project / "data" / "[red]stray[x].bin").write_bytes(b"nobody registered me")
    (project / "data" / "case" / "extra.pb").write_bytes(b"not in the manifest")
    code, out, _ = run("status", "--json")
    assert json.loads(out)["orphans"] == [
        {"path": "data/[red]stray[x].bin", "folder": "data"},
        {"path": "data/case/extra.pb", "folder": "data/case"},
    ]
    code, out, _ = run("status")
    assert code == 0
    assert "2 orphan(s): files in folders of local sources that no record names" in out
    assert "  data/[red]stray[x].bin\n" in out and "  data/case/extra.pb\n" in out
    assert "fix: register it (fixture-store add 'data/[red]stray[x].bin' --name" in out


@pytest.mark.usefixtures("store")
def test_a_name_typed_without_its_extension_suggests_the_registered_name(project: Path) -> None:
    """``reference/logits`` for the registered ``reference/logits.npz``: every command that
    takes a name says which one is meant, and never proposes registering a duplicate."""
    (project / "logits.npz").write_bytes(b"not really an npz but bytes")
    assert run("add", "logits.npz", "--name", "reference/logits.npz", "--kind", "fixture")[0] == 0
    for command in (
        ("path", "reference/logits"),
        ("fetch", "reference/logits"),
        ("show", "reference/logit.npz"),
    ):
        code, out, err = run(*command)
        assert code == 2, (command, out, err)
        text = out + err
        assert "did you mean reference/logits.npz?" in text, (command, text)
        assert "fixture-store add" not in text, (command, text)
    code, _, err = run("path", "other/thing")
    assert code == 2 and "fixture-store add PATH --name other/thing" in err
