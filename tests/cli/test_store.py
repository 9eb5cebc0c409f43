"""``init``, ``add``, ``gc`` through the CLI (``fixture_store.cli.store``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fixture_store.objects.store import Store
from tests.support.cli import add_file_and_case, run


@pytest.mark.usefixtures("store")
def test_add_refuses_to_overwrite_a_record_silently(project: Path) -> None:
    add_file_and_case(project)
    before = (project / "provenance" / "fam.json").read_bytes()
    (project / "data" / "a.bin").write_bytes(b"changed")
    code, _, err = run("add", "data/a.bin", "--name", "fam/a", "--kind", "fixture")
    assert code == 2 and "already registered" in err and "--replace" in err
    assert (project / "provenance" / "fam.json").read_bytes() == before
    assert run("add", "data/a.bin", "--name", "fam/a", "--kind", "fixture", "--replace")[0] == 0
    assert (project / "provenance" / "fam.json").read_bytes() != before


@pytest.mark.usefixtures("store")
def test_add_with_a_branch_revision_is_refused(project: Path) -> None:
    (project / "w.bin").write_bytes(b"w")
    code, _, err = run(
        "add",
        "w.bin",
        "--name",
        "fam/w",
        "--kind",
        "checkpoint",
        "--source",
        "hf://org/model@main/w.bin",
    )
    assert code == 2 and "'main' is a branch" in err
    assert not (project / "provenance" / "fam.json").exists()


def test_gc_is_a_dry_run_unless_yes(project: Path, store: Store) -> None:
    add_file_and_case(project)
    orphan = store.put_bytes(b"orphan")
    code, out, _ = run("gc")
    assert code == 0 and "would remove 1" in out and store.has(orphan)
    code, out, _ = run("gc", "--yes", "--json")
    assert code == 0 and json.loads(out)["removed"] == 1 and not store.has(orphan)
    assert run("verify", "--full")[0] == 0


@pytest.mark.usefixtures("store")
def test_init_creates_the_registry_folder(tmp_path: Path) -> None:
    code, _out, _ = run("init", str(tmp_path / "new"))
    assert code == 0 and (tmp_path / "new" / "provenance").is_dir()


@pytest.mark.usefixtures("store")
def test_a_generator_artifact_points_at_its_stage_not_at_fetch(project: Path) -> None:
    from fixture_store import registry as registry_mod
    from fixture_store.verify import repair_command

    (project / "v.npy").write_bytes(b"v")
    assert run("add", "v.npy", "--name", "video/clip", "--kind", "video")[0] == 0
    fam = project / "provenance" / "video.json"
    fam.write_text(
        fam.read_text().replace(
            '"path": "v.npy",\n        "type": "local"',
            '"stage": "video",\n        "type": "generator"',
        )
    )
    record = registry_mod.load(project).get("video/clip")
    assert record.source.type == "generator"
    assert repair_command(record) == "fixture-store regenerate video --fetch"
