"""Small real inputs for the HTML reports: a compare run over a handful of real ONNX cases, and
a registry whose lineage runs upstream -> converter -> archive -> parity fixture.

The run has one of each thing a report must show: cases that pass on both runtimes, a case
whose expected output was edited (a mismatch, excused as a known failure on one runtime), a
known failure that now passes, a tampered case (refused, with both digests in its detail) and a
mismatching case with a long name (long unbreakable text in the results).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from fixture_store import registry as registry_mod
from fixture_store.access import Fixtures
from fixture_store.objects import digests
from fixture_store.objects.store import Store
from fixture_store.parity.cases import Report, compare
from fixture_store.registry import Record
from fixture_store.registry.files import write_family
from fixture_store.registry.known_failures import KnownFailure
from tests.support.onnx_helpers import NODE_DATA, make_project, register_case, tamper

PASSING = ("test_abs", "test_add", "test_relu")
LONG = "onnx-node/test_relu_" + "a_very_long_case_name_without_any_space_" * 4 + "end"
EDITED = "onnx-node/test_abs_edited"
TAMPERED = "onnx-node/test_add_tampered"


def _edited_copy(project: Path, case: str, folder: str) -> Path:
    source = project / "variants" / folder
    shutil.copytree(NODE_DATA / case, source)
    pb = source / "test_data_set_0" / "output_0.pb"
    tensor = onnx.TensorProto()
    tensor.ParseFromString(pb.read_bytes())
    array = numpy_helper.to_array(tensor) + np.float32(0.5)
    pb.write_bytes(numpy_helper.from_array(array, tensor.name).SerializeToString())
    return source


def compare_project(project: Path, store: Store) -> Fixtures:
    """The registered cases (see the module's docstring), known failures included."""
    make_project(project, store, PASSING)
    register_case(
        project, store, "test_abs", name=EDITED, source_dir=_edited_copy(project, "test_abs", "e")
    )
    register_case(
        project, store, "test_relu", name=LONG, source_dir=_edited_copy(project, "test_relu", "l")
    )
    edited_add = _edited_copy(project, "test_add", "t")  # objects of its own to damage
    register_case(project, store, "test_add", name=TAMPERED, source_dir=edited_add)
    registry = registry_mod.load(project)
    write_family(
        registry,
        "onnx-node",
        registry.families["onnx-node"].records.values(),
        known_failures=[
            KnownFailure("ort", EDITED, "expected output edited", "mismatch", max_abs=1),
            KnownFailure("reference", "onnx-node/test_relu", "stale: the case passes"),
        ],
    )
    fixtures = Fixtures(store, registry_mod.load(project))
    tamper(store, fixtures, TAMPERED, "test_data_set_0/output_0.pb")
    return fixtures


def compare_report(project: Path, store: Store) -> Report:
    """The compare run of :func:`compare_project` on both runtimes (its run page shows all of
    it; the tracked page, ``render(report, Part.TRACKED)``, what is the same on every machine)."""
    fixtures = compare_project(project, store)
    names = fixtures.registry.names()
    return compare(fixtures, names, ["ort", "reference"], jobs=0)


# -- the provenance report's registry ----------------------------------------------------------
REV = "0123456789abcdef0123456789abcdef01234567"


def _record(name: str, data: bytes, **fields: object) -> Record:
    raw = {
        "kind": "fixture",
        "source": {"type": "local", "path": f"data/{name.rsplit('/', 1)[-1]}"},
        "digest": digests.of_bytes(data).text,
        "size": len(data),
        **fields,
    }
    return registry_mod.parse_record(name, raw, file="<test>")


def _generated(name: str, data: bytes, stage: str, *parents: bytes, **fields: object) -> Record:
    return _record(
        name,
        data,
        source={"type": "generator", "stage": stage},
        lineage=[digests.of_bytes(p).text for p in parents],
        **fields,
    )


def chain_project(project: Path, store: Store) -> None:
    """upstream weights -> converter stage -> archive -> parity fixture, with a gap, a missing
    object, a record that does not validate and a known failure."""
    weights, archive, fixture = b"weights", b"archive of weights", b"parity output"
    registry = registry_mod.load(project)
    write_family(
        registry,
        "upstream",
        [
            _record(
                "upstream/weights.bin",
                weights,
                upstream=[
                    {
                        "type": "hub",
                        "repo_id": "org/model",
                        "revision": REV,
                        "path": "model.safetensors",
                    }
                ],
            ),
            _record("upstream/unfetched.bin", b"never stored"),
        ],
    )
    write_family(registry, "archives", [_generated("archives/w.tar", archive, "convert", weights)])
    write_family(
        registry,
        "parity",
        [
            _generated(
                "parity/out.npy",
                fixture,
                "jax-parity",
                archive,
                weights,
                tolerance={"metric": "allclose", "atol": 1e-5, "rtol": 1e-5},
            ),
            registry_mod.parse_record(
                "parity/large.npy",
                {"kind": "fixture", "gap": {"reason": "needs a GPU run"}},
                file="<test>",
            ),
        ],
        known_failures=[KnownFailure("ort", "parity/out.npy", "ort rounds differently")],
    )
    for data in (weights, archive, fixture):
        store.put_bytes(data)
    path = project / "provenance" / "parity.json"
    doc = json.loads(path.read_text())
    doc["records"]["parity/broken.npy"] = {"kind": "fixture", "digest": "sha256:nothex"}
    path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
