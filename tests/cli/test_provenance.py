"""The project's own converted-checkpoint chain, as the CLI shows it: upstream case ->
safetensors weights -> converted archive -> JAX parity fixture, each step naming the one before
by digest (``show --lineage``) and in its in-toto statement (``provenance --format in-toto``)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from fixture_store import registry as registry_mod
from tests.support.cli import run

ROOT = Path(__file__).resolve().parents[2]
CASE = "test_Conv2d"
CHAIN = (
    f"jax-parity/{CASE}/output_0.npy",
    f"checkpoints/{CASE}.tar.zst",
    f"pytorch-weights/{CASE}/model.safetensors",
    f"onnx-pytorch-converted/{CASE}",
)
STAGES = ("jax-parity", "checkpoints", "pytorch-weights")


def _cli(tmp_path: Path, *args: str) -> Any:
    code, out, err = run("--store", str(tmp_path / "store"), "--registry", str(ROOT), *args)
    assert code == 0, out + err
    return json.loads(out)


def test_show_lineage_reads_the_whole_chain_from_the_parity_fixture(tmp_path: Path) -> None:
    registry = registry_mod.load(ROOT)
    steps = _cli(tmp_path, "show", CHAIN[0], "--lineage", "--json")
    assert [(s["depth"], s["name"]) for s in steps] == list(enumerate(CHAIN))
    for step in steps:
        assert step["digest"] == registry.get(step["name"]).object.text
    assert [s["source"] for s in steps[:3]] == [f"generator stage {s}" for s in STAGES]
    assert steps[3]["source"].startswith("package onnx==1.22.0")
    weights = registry.get(CHAIN[2])
    assert weights.media_type == "application/x-safetensors"
    assert weights.arrays is not None and set(weights.arrays) == {"weight", "bias"}


def test_each_in_toto_statement_names_the_step_before_it(tmp_path: Path) -> None:
    registry = registry_mod.load(ROOT)
    for (name, parent), stage in zip(itertools.pairwise(CHAIN), STAGES, strict=True):
        st = _cli(tmp_path, "provenance", name, "--format", "in-toto")
        assert st["subject"][0] == {
            "name": name,
            "digest": {"sha256": registry.get(name).object.hex},
        }
        predicate = st["predicate"]
        assert (
            predicate["runDetails"]["builder"]["id"]
            == f"urn:fixture-store:builder:regenerate:{stage}"
        )
        deps = {d.get("name"): d for d in predicate["buildDefinition"]["resolvedDependencies"]}
        assert deps[parent]["digest"] == {"sha256": registry.get(parent).object.hex}, name
        assert deps[parent]["uri"] == f"fixture-store:{parent}"
    # The weights and the archive were made with the pinned safetensors package.
    for name in CHAIN[1:3]:
        st = _cli(tmp_path, "provenance", name, "--format", "in-toto")
        env = st["predicate"]["buildDefinition"]["internalParameters"]["environment"]
        assert env["packages"]["safetensors"] == "0.8.0", name
    # The upstream case's statement resolves to the pinned onnx distribution.
    st = _cli(tmp_path, "provenance", CHAIN[3], "--format", "in-toto", "--no-members")
    uris = [d["uri"] for d in st["predicate"]["buildDefinition"]["resolvedDependencies"]]
    assert any(u.startswith("pkg:pypi/onnx@1.22.0?file_name=onnx-1.22.0-") for u in uris)


def test_the_archive_and_the_weights_name_the_same_upstream_case() -> None:
    registry = registry_mod.load(ROOT)
    case = registry.get(CHAIN[3]).object.text
    weights, archive = registry.get(CHAIN[2]), registry.get(CHAIN[1])
    assert weights.lineage == (case,)
    assert archive.lineage == (weights.object.text,)
    for record in (weights, archive):
        assert record.metadata is not None
        assert dict(record.metadata["parent"]) == {"name": CHAIN[3], "digest": case}
