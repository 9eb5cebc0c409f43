from __future__ import annotations

import os
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from fixture_store.errors import DigestMismatchError, UnsafeContentError, UsageError
from fixture_store.objects.store import Store
from fixture_store.readers.onnxcase import load_case
from tests.support.onnx_helpers import NODE_DATA, make_project, register_case, tamper


def test_loads_tensors_sequences_optionals_and_strings_from_a_verified_tree(
    project: Path, store: Store
) -> None:
    fixtures = make_project(project, store)
    abs_case = fixtures.onnx_case("onnx-node/test_abs")
    assert abs_case.operators == ("Abs",)
    ((name, x),) = abs_case.datasets[0].inputs
    assert name == "x" and x.dtype == np.float32 and x.shape == (3, 4, 5)
    assert abs_case.model_path.parent == fixtures.tree("onnx-node/test_abs")

    bf16 = fixtures.onnx_case("onnx-node/test_cast_FLOAT_to_BFLOAT16")
    assert bf16.datasets[0].outputs[0][1].dtype == ml_dtypes.bfloat16

    seq = fixtures.onnx_case("onnx-node/test_sequence_insert_at_back")
    assert isinstance(seq.datasets[0].inputs[0][1], list)

    strings = fixtures.onnx_case("onnx-node/test_equal_string")
    assert strings.datasets[0].inputs[0][1].dtype == object


def test_a_tampered_member_is_refused_before_any_parsing(project: Path, store: Store) -> None:
    fixtures = make_project(project, store, ("test_abs",))
    tamper(store, fixtures, "onnx-node/test_abs", "test_data_set_0/output_0.pb")
    with pytest.raises(DigestMismatchError, match=r"output_0\.pb"):
        fixtures.onnx_case("onnx-node/test_abs")


def test_a_non_case_artifact_is_a_usage_error(project: Path, store: Store) -> None:
    fixtures = make_project(project, store, ("test_abs",))
    from fixture_store import ingest
    from fixture_store import registry as registry_mod

    (project / "blob.bin").write_bytes(b"x")
    ingest.add(store, fixtures.registry, project / "blob.bin", name="misc/blob", kind="fixture")
    fixtures = type(fixtures)(store, registry_mod.load(project))
    with pytest.raises(UsageError, match="not an onnx-case"):
        fixtures.onnx_case("misc/blob")


def _model_with_external_data(folder: Path, location: str) -> None:
    folder.mkdir(parents=True)
    weight = numpy_helper.from_array(np.ones((4,), np.float32), "w")
    weight.ClearField("raw_data")
    weight.data_location = TensorProto.EXTERNAL
    weight.external_data.add(key="location", value=location)
    weight.external_data.add(key="offset", value="0")
    weight.external_data.add(key="length", value="16")
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        [weight],
    )
    onnx.save(helper.make_model(graph), str(folder / "model.onnx"))


@pytest.mark.parametrize("location", ["../outside.bin", "/etc/passwd", "absent.bin"])
def test_external_data_must_resolve_inside_the_verified_tree(tmp_path: Path, location: str) -> None:
    case = tmp_path / "case"
    _model_with_external_data(case, location)
    (tmp_path / "outside.bin").write_bytes(np.ones(4, np.float32).tobytes())
    with pytest.raises(UnsafeContentError, match="external data"):
        load_case(case, name="onnx-x/case")


def test_external_data_inside_the_tree_loads(project: Path, store: Store) -> None:
    source = project / "src" / "ext"
    _model_with_external_data(source, "weights.bin")
    (source / "weights.bin").write_bytes(np.ones(4, np.float32).tobytes())
    fixtures = make_project(project, store, ())
    register_case(project, store, "ext", name="onnx-x/ext", source_dir=source)
    from fixture_store import registry as registry_mod

    fixtures = type(fixtures)(store, registry_mod.load(project))
    case = fixtures.onnx_case("onnx-x/ext")
    assert case.datasets == ()
    assert (case.folder / "weights.bin").is_file()


def test_input_files_must_be_numbered_without_holes(tmp_path: Path) -> None:
    import shutil

    case = tmp_path / "abs"
    shutil.copytree(NODE_DATA / "test_add", case)
    (case / "test_data_set_0" / "input_0.pb").unlink()
    with pytest.raises(UnsafeContentError, match="not numbered"):
        load_case(case, name="onnx-node/test_add")


def _plant_dataset_link(folder: Path, elsewhere: Path) -> None:
    """``test_data_set_1 -> elsewhere``, holding a copy of data set 0 with other expected bytes."""
    import shutil

    shutil.copytree(folder / "test_data_set_0", elsewhere)
    os.chmod(elsewhere, 0o755)
    out = elsewhere / "output_0.pb"
    os.chmod(out, 0o644)
    tensor = onnx.TensorProto()
    tensor.ParseFromString(out.read_bytes())
    forged = numpy_helper.to_array(tensor) + 1
    out.write_bytes(numpy_helper.from_array(forged, tensor.name).SerializeToString())
    os.chmod(folder, 0o755)
    (folder / "test_data_set_1").symlink_to(elsewhere, target_is_directory=True)


def test_a_directory_link_planted_in_a_checkout_never_reaches_a_case(
    project: Path, store: Store, tmp_path: Path
) -> None:
    fixtures = make_project(project, store, ("test_abs",))
    folder = fixtures.tree("onnx-node/test_abs")
    _plant_dataset_link(folder, tmp_path / "elsewhere")
    case = fixtures.onnx_case("onnx-node/test_abs")
    assert [d.index for d in case.datasets] == [0]
    assert not os.path.lexists(case.folder / "test_data_set_1")


def test_a_case_is_read_from_its_manifest_not_its_folder(
    project: Path, store: Store, tmp_path: Path
) -> None:
    fixtures = make_project(project, store, ("test_abs",))
    record = fixtures.verified("onnx-node/test_abs")
    assert record.members is not None
    folder = fixtures.tree("onnx-node/test_abs")
    _plant_dataset_link(folder, tmp_path / "elsewhere")
    case = load_case(folder, name="onnx-node/test_abs", members=record.members.members)
    assert [d.index for d in case.datasets] == [0]
    # without a manifest, the folder's own listing is one, and a link in it is refused
    with pytest.raises(UnsafeContentError, match="symbolic link"):
        load_case(folder, name="onnx-node/test_abs")
