"""The embedded corpus: the onnx 1.22.0 test data, fetched for real from the package index."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fixture_store import registry as registry_mod
from fixture_store.fetch import Outcome, fetch_names
from fixture_store.objects.store import Store
from fixture_store.verify import verify_names
from tests.support.fetchutil import online_env  # noqa: F401 - autouse

PROJECT = Path(__file__).resolve().parents[2]
FAMILIES = (
    "onnx-light",
    "onnx-node",
    "onnx-pytorch-converted",
    "onnx-pytorch-operator",
    "onnx-simple",
)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    return Store.at(tmp_path_factory.mktemp("onnx-store"))


def test_committed_corpus_registry_is_complete_and_valid() -> None:
    registry = registry_mod.load(PROJECT)
    assert set(FAMILIES) <= set(registry.families)
    assert not [n for n, _ in registry.invalid() if n.split("/")[0] in FAMILIES]
    node = registry.families["onnx-node"].records
    assert len(node) == 1765
    assert sum(len(r.members or ()) for r in node.values()) == 7794
    abs_case = node["onnx-node/test_abs"]
    assert abs_case.kind == "onnx-case" and abs_case.license == "Apache-2.0"
    assert abs_case.source.requirement == "onnx==1.22.0"  # type: ignore[union-attr]
    assert set(dict(abs_case.members.members)) == {  # type: ignore[union-attr]
        "model.onnx",
        "test_data_set_0/input_0.pb",
        "test_data_set_0/output_0.pb",
    }
    for family in FAMILIES:
        assert (PROJECT / "provenance" / f"{family}.json").stat().st_size < 5 * 2**20


@pytest.mark.network
def test_node_family_fetches_verifies_and_refetches_nothing(store: Store) -> None:
    registry = registry_mod.load(PROJECT)
    names = registry.select(families=["onnx-node"])
    report = fetch_names(store, registry, names)
    failed = [r for r in report.results if r.outcome is not Outcome.FETCHED]
    assert failed == [] and report.downloads == 1
    assert all(r.ok for r in verify_names(store, registry, names, full=True))
    again = fetch_names(store, registry, names)
    assert {r.outcome for r in again.results} == {Outcome.PRESENT}
    assert again.downloads == 0 and again.downloaded_bytes == 0


@pytest.mark.network
def test_generator_reproduces_the_committed_registry(store: Store, tmp_path: Path) -> None:
    (tmp_path / "provenance").mkdir()
    subprocess.run(
        [
            sys.executable,
            str(PROJECT / "scripts" / "onnx_corpus.py"),
            "--project",
            str(tmp_path),
            "--store",
            str(store.root),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    for family in FAMILIES:
        generated = (tmp_path / "provenance" / f"{family}.json").read_bytes()
        assert generated == (PROJECT / "provenance" / f"{family}.json").read_bytes(), family
