from __future__ import annotations

import json
import os
from pathlib import Path

from click.testing import CliRunner

from fixture_store.cli import main
from fixture_store.objects.store import Store


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def setup(project: Path) -> None:
    (project / "data").mkdir()
    (project / "data" / "a.bin").write_bytes(b"alpha" * 100)
    (project / "data" / "case").mkdir()
    (project / "data" / "case" / "model.onnx").write_bytes(b"m")
    assert run("add", "data/a.bin", "--name", "fam/a", "--kind", "fixture")[0] == 0
    assert run("add", "data/case", "--name", "fam/case", "--kind", "onnx-case")[0] == 0


def test_verify_prints_a_table_and_exits_0(project: Path, store: Store) -> None:
    setup(project)
    code, out, err = run("verify")
    assert code == 0, err
    assert "fam/a" in out and "fam/case" in out and "2 verified" in out


def test_verify_json_is_machine_readable(project: Path, store: Store) -> None:
    setup(project)
    code, out, _ = run("verify", "--json", "--full")
    doc = json.loads(out)
    assert code == 0 and doc["counts"] == {"verified": 2} and doc["full"] is True
    assert {r["name"] for r in doc["results"]} == {"fam/a", "fam/case"}


def test_a_tampered_object_exits_1_naming_artifact_and_digests(project: Path, store: Store) -> None:
    setup(project)
    expected = json.loads(run("show", "fam/a", "--json")[1])["digest"]
    path = store.object_path(expected[len("sha256:") :])
    os.chmod(path, 0o644)
    path.write_bytes(b"alphA" + b"alpha" * 99)
    code, out, err = run("verify", "--full")
    assert code == 1
    assert "mismatch: fam/a" in err and expected in err
    assert "1 mismatch" in out


def test_missing_object_exits_1_with_the_fetch_command(project: Path, store: Store) -> None:
    setup(project)
    expected = json.loads(run("show", "fam/a", "--json")[1])["digest"]
    store.remove(expected[len("sha256:") :])
    code, _, err = run("verify", "fam/a")
    assert code == 1 and "missing: fam/a" in err


def test_registry_errors_exit_2_on_stderr_without_traceback(project: Path, store: Store) -> None:
    (project / "provenance" / "fam.json").write_text('{"format_version": 9, "records": {}}')
    code, out, err = run("verify")
    assert code == 2 and out == ""
    assert "unknown format_version 9" in err and "Traceback" not in err


def test_unknown_name_exits_2(project: Path, store: Store) -> None:
    setup(project)
    code, _, err = run("verify", "fam/nope")
    assert code == 2 and "no record" in err and "fixture-store add" in err


def test_add_refuses_to_overwrite_a_record_silently(project: Path, store: Store) -> None:
    setup(project)
    before = (project / "provenance" / "fam.json").read_bytes()
    (project / "data" / "a.bin").write_bytes(b"changed")
    code, _, err = run("add", "data/a.bin", "--name", "fam/a", "--kind", "fixture")
    assert code == 2 and "already registered" in err and "--replace" in err
    assert (project / "provenance" / "fam.json").read_bytes() == before
    assert run("add", "data/a.bin", "--name", "fam/a", "--kind", "fixture", "--replace")[0] == 0
    assert (project / "provenance" / "fam.json").read_bytes() != before


def test_add_with_a_branch_revision_is_refused(project: Path, store: Store) -> None:
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
    setup(project)
    orphan = store.put_bytes(b"orphan")
    code, out, _ = run("gc")
    assert code == 0 and "would remove 1" in out and store.has(orphan)
    code, out, _ = run("gc", "--yes", "--json")
    assert code == 0 and json.loads(out)["removed"] == 1 and not store.has(orphan)
    assert run("verify", "--full")[0] == 0


def test_list_show_status_and_help(project: Path, store: Store) -> None:
    setup(project)
    code, out, _ = run("list", "--json")
    assert code == 0 and [r["name"] for r in json.loads(out)] == ["fam/a", "fam/case"]
    code, out, _ = run("show", "fam/case")
    assert code == 0 and "members: 1 files" in out and "verified" in out
    code, out, _ = run("status", "--json")
    assert json.loads(out)["families"]["fam"]["present"] == 2
    for cmd in ("init", "add", "verify", "list", "show", "gc", "status"):
        code, out, _ = run(cmd, "--help")
        assert code == 0 and "Usage:" in out


def test_init_creates_the_registry_folder(tmp_path: Path, store: Store) -> None:
    code, _out, _ = run("init", str(tmp_path / "new"))
    assert code == 0 and (tmp_path / "new" / "provenance").is_dir()


def test_path_prints_verified_locations_only(project: Path, store: Store) -> None:
    setup(project)
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


def test_a_generator_artifact_points_at_its_stage_not_at_fetch(project: Path, store: Store) -> None:
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
