"""The pipeline's last step: summarise the stage reports and verify the registry for real."""

from __future__ import annotations

import json
import os
from pathlib import Path

from click.testing import CliRunner

from fixture_store import ingest
from fixture_store import registry as registry_mod
from fixture_store.cli import main
from fixture_store.objects.store import Store
from fixture_store.regenerate import regenerate
from tests.support.regen_project import PYTHON, make_project


def cli(project: Path, store: Store, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        main, ["--store", str(store.root), "--registry", str(project), *args]
    )
    return result.exit_code, result.output


def toy_project(tmp_path: Path) -> tuple[Path, Store]:
    return make_project(tmp_path / "proj"), Store.at(tmp_path / "store").ensure()


def regenerate_toy(project: Path, store: Store, report: Path, *flags: str) -> None:
    """``fixture-store regenerate toy``, its report written to ``report``; it must pass."""
    code, output = cli(
        project, store, "regenerate", "toy", "--python", PYTHON, *flags, "--report", str(report)
    )
    assert code == 0, output


def summarise(
    project: Path, store: Store, report: Path, metrics: Path, *flags: str
) -> tuple[int, str, dict[str, object]]:
    """``fixture-store regenerate-summary`` of ``report``: exit code, output, the metrics."""
    code, output = cli(
        project, store, "regenerate-summary", str(report), "--metrics", str(metrics), *flags
    )
    doc: dict[str, object] = json.loads(metrics.read_text())
    return code, output, doc


def test_all_full_verifies_families_outside_the_reports_by_rehashing(tmp_path: Path) -> None:
    project, store = toy_project(tmp_path)
    regenerate(project, store, "toy", scratch=tmp_path / "s0", accept=True, python=PYTHON)
    blob = project / "blob.bin"
    blob.write_bytes(b"x" * 64)
    ingest.add(store, registry_mod.load(project), blob, name="other/blob.bin", kind="fixture")
    regenerate_toy(project, store, tmp_path / "toy.json")

    def summary(*flags: str) -> tuple[int, dict[str, object]]:
        code, output, doc = summarise(
            project, store, tmp_path / "toy.json", tmp_path / "metrics.json", *flags
        )
        assert "files: 3 identical, 0 within tolerance, 0 drift" in output
        # A stage whose every file is bit-identical shares one line with the others like it.
        assert "  every file bit-identical: toy (2 artifacts)\n" in output
        return code, doc

    assert summary() == (0, {"pass": 3, "drift": 0, "verified": 2})
    # This machine's split of the passing files, beside the tracked headline.
    split = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert split == {"identical": 3, "within": 0, "pass": 0}
    code, doc = summary("--all", "--full")
    assert code == 0 and doc["verified"] == 3

    # Same size, same mtime, other bytes: only re-hashing can tell.
    obj = store.object_path(registry_mod.load(project).get("other/blob.bin").digest)  # type: ignore[arg-type]
    st = obj.stat()
    obj.chmod(0o644)
    obj.write_bytes(b"y" * 64)
    os.utime(obj, ns=(st.st_atime_ns, st.st_mtime_ns))
    code, doc = summary("--all", "--full")
    assert code == 1
    assert doc == {"pass": 3, "drift": 0, "verified": 2, "not_verified": 1}


def test_the_json_summary_has_every_stage_and_the_verification(tmp_path: Path) -> None:
    project, store = toy_project(tmp_path)
    regenerate_toy(project, store, tmp_path / "toy.json", "--accept")
    regenerate_toy(project, store, tmp_path / "toy.json")
    report, metrics = str(tmp_path / "toy.json"), str(tmp_path / "m.json")
    code, output = cli(project, store, "regenerate-summary", report, "--metrics", metrics, "--json")
    assert code == 0, output
    doc = json.loads(output)
    assert doc["ok"] is True and doc["verify"] == {"verified": 2}
    assert doc["stages"]["toy"]["files"]["bit_identical"] == 3
    assert doc["total_files"]["drift"] == 0


def test_the_within_tolerance_plot_carries_each_arrays_ulps(project: Path, store: Store) -> None:
    import csv

    from fixture_store.regenerate import summary

    array = {"max_abs": 1.2e-4, "mean_abs": 3e-6, "max_rel": 1.1e-7, "mean_rel": 1e-8}
    report = {
        "stage": "onnx-node",
        "ok": True,
        "file_counts": {"bit-identical": 0, "within-tolerance": 2, "drift": 0},
        "counts": {"within-tolerance": 1},
        "families": [],
        "artifacts": [
            {
                "name": "onnx-node/test_pow",
                "members": [
                    {
                        "path": "test_data_set_0/output_0.pb",
                        "verdict": "within-tolerance",
                        "arrays": [{**array, "name": "y", "max_ulp": 1.0}],
                    },
                    # A report written before ULPs were counted still summarises.
                    {"path": "old.pb", "verdict": "within-tolerance", "arrays": [array]},
                ],
            }
        ],
    }
    # The stage's tracked report names the within-tolerance files; their errors are in the
    # run report beside it.
    path = project / "onnx-node.json"
    (project / "run").mkdir()
    (project / "run" / "onnx-node.json").write_text(json.dumps(report))
    for m in report["artifacts"][0]["members"]:  # type: ignore[index]
        del m["arrays"]
    path.write_text(json.dumps(report))
    result = summary.summarise([path], registry_mod.load(project), store)
    summary.write(result, project / "metrics.json", project / "plots")
    assert not (project / "plots" / "within-tolerance.csv").exists()
    with open(project / "plots" / "run" / "within-tolerance.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(r["file"], r["max_ulp"]) for r in rows] == [
        ("onnx-node/test_pow/old.pb", ""),
        ("onnx-node/test_pow/test_data_set_0/output_0.pb", "1.0"),
    ]


def test_a_declared_gap_does_not_fail_the_summary_of_the_whole_registry(tmp_path: Path) -> None:
    project, store = toy_project(tmp_path)
    regenerate_toy(project, store, tmp_path / "toy.json", "--accept")
    code, output = cli(
        project,
        store,
        "add",
        "--name",
        "later/x",
        "--kind",
        "fixture",
        "--gap",
        "upstream not released",
    )
    assert code == 0, output
    assert cli(project, store, "verify", "--full")[0] == 0
    code, output, doc = summarise(
        project, store, tmp_path / "toy.json", tmp_path / "metrics.json", "--all", "--full"
    )
    assert code == 0, output
    assert doc["verified"] == 2 and "not_verified" not in doc and "gap: later/x" not in output
