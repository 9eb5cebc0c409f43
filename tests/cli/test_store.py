"""``init``, ``add``, ``gc`` through the CLI (``fixture_store.cli.store``)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
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
def test_init_ignores_the_pipeline_outputs_and_keeps_the_gitignore_it_finds(
    tmp_path: Path,
) -> None:
    project = tmp_path / "new"
    project.mkdir()
    (project / "dvc.yaml").write_text("stages: {}\n")
    (project / ".gitignore").write_text(".venv/\n/metrics/")
    code, out, _ = run("init", str(project))
    assert code == 0 and "/reports/ /plots/" in out
    lines = (project / ".gitignore").read_text().splitlines()
    assert lines[:2] == [".venv/", "/metrics/"] and {"/reports/", "/plots/"} <= set(lines)
    assert lines.count("/metrics/") == 1
    before = (project / ".gitignore").read_bytes()
    assert run("init", str(project))[0] == 0
    assert (project / ".gitignore").read_bytes() == before


@pytest.mark.usefixtures("store")
def test_init_adds_no_pipeline_lines_to_a_project_without_dvc(tmp_path: Path) -> None:
    project = tmp_path / "new"
    project.mkdir()
    (project / ".gitignore").write_text(".venv/\n")
    code, out, _ = run("init", str(project))
    assert code == 0 and ".gitignore" not in out
    assert (project / ".gitignore").read_text() == ".venv/\n"
    assert run("init", str(tmp_path / "bare"))[0] == 0
    assert not (tmp_path / "bare" / ".gitignore").exists()
    (project / ".dvc").mkdir()
    code, out, _ = run("init", str(project))
    assert code == 0 and "/reports/ /metrics/ /plots/" in out


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


REV = "f826b80d28226b62986cc218e5cec390b1096902"
HUB = f"hf://MIT/ast-finetuned-audioset-10-10-0.4593@{REV}/model.safetensors"


def _npz(path: Path, **arrays: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **arrays)
    return path


def _records(project: Path, family: str) -> dict[str, Any]:
    doc = json.loads((project / "provenance" / f"{family}.json").read_text())
    records: dict[str, Any] = doc["records"]
    return records


@pytest.mark.usefixtures("store")
def test_add_of_many_files_names_them_by_file_and_reads_their_arrays(project: Path) -> None:
    _npz(project / "tests/data/a_ref.npz", cls=np.zeros((1, 4), np.float32))
    _npz(project / "tests/data/b_ref.npz", x=np.arange(3, dtype=np.int32))
    code, out, err = run(
        "add",
        "tests/data/a_ref.npz",
        "tests/data/b_ref.npz",
        "--family",
        "equimo",
        "--kind",
        "fixture",
        "--tolerance",
        "allclose:atol=1e-6,rtol=1e-4",
        "--license",
        "MIT",
        "--description",
        "DINOv2 reference outputs",
        "--metadata",
        "model=dinov2",
        "--metadata",
        "layers:=12",
        "--upstream",
        HUB,
        "--upstream-license",
        "bsd-3-clause",
        "--seed",
        "0",
        "--input-shape",
        "1,3,224,224",
        "--command",
        "python gen.py --seed 0",
    )
    assert code == 0, err
    assert "added equimo/a_ref.npz" in out and "added equimo/b_ref.npz" in out
    records = _records(project, "equimo")
    a = records["equimo/a_ref.npz"]
    assert a["arrays"] == {"float32[1,4]": ["cls"]}
    assert records["equimo/b_ref.npz"]["arrays"] == {"int32[3]": ["x"]}
    assert a["tolerance"] == {"metric": "allclose", "atol": 1e-6, "rtol": 1e-4}
    assert a["license"] == "MIT" and a["description"] == "DINOv2 reference outputs"
    assert a["metadata"] == {"model": "dinov2", "layers": 12}
    assert a["upstream"] == [
        {
            "type": "hub",
            "repo_id": "MIT/ast-finetuned-audioset-10-10-0.4593",
            "revision": REV,
            "path": "model.safetensors",
            "license": "bsd-3-clause",
        }
    ]
    assert a["seed"] == 0 and a["input_shape"] == [1, 3, 224, 224]
    assert a["command"] == ["python", "gen.py", "--seed", "0"]
    assert run("verify", "--full")[0] == 0


@pytest.mark.usefixtures("store")
def test_a_batch_with_one_refused_file_registers_none_and_names_it(project: Path) -> None:
    _npz(project / "data/good.npz", x=np.arange(2))
    bad = project / "data/bad.npy"
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    bad.write_bytes(buf.getvalue())
    code, _, err = run("add", "data/good.npz", "data/bad.npy", "--family", "fam", "--kind", "array")
    assert code == 1 and "bad.npy" in err and "nothing was stored or recorded" in err
    assert not (project / "provenance" / "fam.json").exists()


@pytest.mark.usefixtures("store")
def test_a_moving_upstream_or_a_bad_tolerance_is_refused_before_anything_is_recorded(
    project: Path,
) -> None:
    _npz(project / "data/a.npz", x=np.arange(2))
    base = ("add", "data/a.npz", "--name", "fam/a", "--kind", "fixture")
    code, _, err = run(*base, "--upstream", "hf://MIT/ast@main/model.safetensors")
    assert code == 2 and "'main' is a branch" in err
    code, _, err = run(*base, "--tolerance", "allclose:atol=Infinity")
    assert code == 2 and "finite" in err
    code, _, err = run(*base, "--metadata", "novalue")
    assert code == 2 and "KEY=VALUE" in err
    assert not (project / "provenance" / "fam.json").exists()


@pytest.mark.usefixtures("store")
def test_a_value_typed_on_the_command_line_is_blamed_on_the_command_line(project: Path) -> None:
    """Checks of the whole record built from the options (a per-array tolerance naming no array
    of the bytes) blame the command line, not a registry file that was never written."""
    _npz(project / "data/a.npz", x=np.arange(2))
    per_array = '{"metric": "exact", "per_array": {"nope": {"metric": "exact"}}}'
    code, _, err = run(
        "add", "data/a.npz", "--name", "fam/a", "--kind", "fixture", "--tolerance", per_array
    )
    assert code == 2 and "field 'tolerance.per_array.nope'" in err
    assert err.startswith("error: --tolerance ") and "provenance/fam.json" not in err
    assert not (project / "provenance" / "fam.json").exists()


_HEX = "0123456789abcdef0123456789abcdef01234567"


@pytest.mark.usefixtures("store")
@pytest.mark.parametrize(
    ("option", "value", "extra"),
    [
        ("--tolerance", "mean_abs:x", ()),
        ("--tolerance", '{"metric": "bogus"}', ()),
        ("--tolerance", '{"metric": "exact", "per_array": {"nope": {"metric": "exact"}}}', ()),
        ("--upstream", "owner/name", ()),
        ("--upstream", "hf://o/n@abc/f", ()),
        ("--upstream", f"hf://o/n@{_HEX}/a\\b", ()),
        ("--upstream-license", "MIT", ()),
        ("--source", "ftp://x", ()),
        ("--source", "hf://o/n/f", ()),
        ("--source", "hf://o/n@main/f", ()),
        ("--metadata", "novalue", ()),
        ("--metadata", "k:={bad", ()),
        ("--metadata-file", "bad.json", ()),
        ("--input-shape", "1,x", ()),
        ("--command", "", ()),
        ("--metadata", "ok=1", ("--upstream", "owner/name")),
        ("--inputs", "x", ()),
        ("--tolerance", "exact", ("--inputs", "nope*")),
    ],
)
def test_every_parsed_option_of_add_is_blamed_for_its_bad_value(
    project: Path, option: str, value: str, extra: tuple[str, ...]
) -> None:
    """A bad value of any option ``add`` parses: the error starts with the option that carried
    it (the last option when another is the bad one), its fix names the option or the form,
    never a registry file, and nothing is written."""
    _npz(project / "data/a.npz", x=np.arange(2))
    (project / "bad.json").write_text("[1,")
    args = ("add", "data/a.npz", "--name", "fam/a", "--kind", "fixture", option, value, *extra)
    code, _, err = run(*args)
    blamed = extra[0] if extra else option
    assert code == 2 and err.startswith(f"error: {blamed} "), err
    assert "provenance/" not in err and "Traceback" not in err
    assert "edit the command line" not in err
    assert not (project / "provenance" / "fam.json").exists()


@pytest.mark.usefixtures("store")
def test_a_differing_add_is_refused_with_the_difference_and_replace_rewrites_it(
    project: Path,
) -> None:
    add_file_and_case(project)
    path = project / "provenance" / "fam.json"
    before = path.read_bytes()
    code, out, _ = run("add", "data/a.bin", "--name", "fam/a", "--kind", "fixture")
    assert code == 0 and "unchanged fam/a" in out and "nothing written" in out
    assert path.read_bytes() == before
    changed = ("add", "data/a.bin", "--name", "fam/a", "--kind", "checkpoint", "--license", "MIT")
    code, _, err = run(*changed)
    assert code == 2 and "--replace" in err
    assert 'kind: "fixture" -> "checkpoint"' in err and 'license: (none) -> "MIT"' in err
    assert path.read_bytes() == before
    code, out, _ = run(*changed, "--replace")
    assert code == 0 and "replaced fam/a" in out
    record = _records(project, "fam")["fam/a"]
    assert record["kind"] == "checkpoint" and record["license"] == "MIT"
    # Fields not stated again are kept; the same statement again changes nothing.
    code, out, _ = run(*changed, "--tolerance", "exact", "--replace")
    assert code == 0 and _records(project, "fam")["fam/a"]["license"] == "MIT"
    after = path.read_bytes()
    assert run(*changed)[0] == 0 and path.read_bytes() == after


@pytest.mark.usefixtures("store")
def test_replace_sets_a_metadata_key_keeps_the_others_and_unset_removes_one(
    project: Path,
) -> None:
    add_file_and_case(project)
    base = ("add", "data/a.bin", "--name", "fam/a", "--kind", "fixture")
    code, _, err = run(
        *base, "--metadata", "origin=upstream", "--metadata", "stage:=3", "--replace"
    )
    assert code == 0, err
    code, _, err = run(*base, "--metadata", "stage:=4")
    assert code == 2 and "metadata" in err and "--replace" in err
    code, out, err = run(*base, "--metadata", "stage:=4", "--replace")
    assert code == 0 and "replaced fam/a" in out, err
    assert _records(project, "fam")["fam/a"]["metadata"] == {"origin": "upstream", "stage": 4}
    code, out, err = run(*base, "--unset-metadata", "origin", "--replace")
    assert code == 0, err
    assert _records(project, "fam")["fam/a"]["metadata"] == {"stage": 4}
    path = project / "provenance" / "fam.json"
    before = path.read_bytes()
    code, _, err = run(*base, "--unset-metadata", "orign", "--replace")
    assert code == 2 and "'orign'" in err and "its keys: stage" in err
    assert path.read_bytes() == before
    code, _, err = run(*base, "--unset-metadata", "stage", "--replace")
    assert code == 0 and "metadata" not in _records(project, "fam")["fam/a"]


@pytest.mark.usefixtures("store")
def test_a_declared_gap_has_no_bytes_digest_size_or_source(project: Path) -> None:
    code, out, err = run(
        "add", "--name", "fam/later.npz", "--kind", "fixture", "--gap", "not released yet"
    )
    assert code == 0 and "gap: not released yet" in out, err
    assert _records(project, "fam")["fam/later.npz"] == {
        "kind": "fixture",
        "gap": {"reason": "not released yet"},
    }
    assert run("verify", "--full")[0] == 0
    (project / "x.bin").write_bytes(b"x")
    code, _, err = run("add", "x.bin", "--name", "fam/x", "--kind", "fixture", "--gap", "why")
    assert code == 2 and "a declared gap has no bytes" in err


@pytest.mark.usefixtures("store")
@pytest.mark.parametrize(
    "header",
    [
        b'{"w\\ud800":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}',
        b'{"__metadata__":{"format":"\\udfff"},"w":{"dtype":"U8","shape":[2],'
        b'"data_offsets":[0,2]}}',
    ],
    ids=["tensor-name", "metadata-value"],
)
def test_add_of_safetensors_holding_a_lone_surrogate_is_refused_naming_it(
    project: Path, header: bytes
) -> None:
    """A name or value UTF-8 cannot write is refused where the header is read: no traceback
    while the registry is written, nothing registered."""
    (project / "data").mkdir()
    path = project / "data" / "w.safetensors"
    path.write_bytes(len(header).to_bytes(8, "little") + header + b"\0\0")
    code, _, err = run("add", "data/w.safetensors", "--name", "fam/w", "--kind", "array")
    assert code == 1, err
    assert "Traceback" not in err and "fam/w" in err and "[metadata-value]" in err
    assert "\\ud800" in err or "\\udfff" in err
    assert not (project / "provenance" / "fam.json").exists()


@pytest.mark.usefixtures("store")
def test_add_takes_a_pypi_source_from_the_command_line(project: Path) -> None:
    from importlib import metadata

    import certifi

    version = metadata.version("certifi")
    pem = project / "cacert.pem"
    pem.write_bytes(Path(certifi.where()).read_bytes())
    source = f"pypi:certifi=={version}/certifi/cacert.pem"
    args = ["add", "cacert.pem", "--name", "c/cacert.pem", "--kind", "fixture", "--source", source]
    code, _, err = run(*args)  # no --dist-digest, no uv.lock: the pin is not known
    assert code == 2 and "--dist-digest" in err and "Traceback" not in err
    digest = "sha256:" + "cd" * 32
    code, _, err = run(*args, "--dist-digest", digest)
    assert code == 0, err
    doc = json.loads((project / "provenance" / "c.json").read_text())["records"]["c/cacert.pem"]
    assert doc["source"] == {
        "type": "package",
        "requirement": f"certifi=={version}",
        "file": f"certifi-{version}-py3-none-any.whl",
        "file_digest": digest,
        "path": "certifi/cacert.pem",
    }
    code, _, err = run("add", "cacert.pem", "--name", "c/x", "--kind", "fixture", "--dist", "x")
    assert code == 2 and "--dist and --dist-digest pin a --source pypi:" in err
    pem.write_bytes(b"not the distribution's file")
    code, _, err = run(*args, "--dist-digest", digest, "--replace")
    assert code == 2 and "is not certifi/cacert.pem of certifi==" in err and "RECORD says" in err


@pytest.mark.usefixtures("store")
def test_add_inputs_names_the_arrays_no_rule_judges(project: Path) -> None:
    _npz(project / "data/a.npz", x=np.arange(2), mask_a=np.arange(2), y=np.arange(2))
    args = ("add", "data/a.npz", "--name", "fam/a.npz", "--kind", "fixture")
    code, _, err = run(*args, "--tolerance", "max_abs:1e-4", "--inputs", "x", "--inputs", "mask_*")
    assert code == 0, err
    saved = json.loads((project / "provenance" / "fam.json").read_text())
    assert saved["records"]["fam/a.npz"]["tolerance"]["inputs"] == ["x", "mask_*"]
