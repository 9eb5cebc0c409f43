"""ONNX backend test cases read from a verified tree: the model and its data sets.

A case folder holds ``model.onnx`` and ``test_data_set_N/{input,output}_K.pb``. Each ``.pb`` is
parsed as the protobuf the model's graph declares for that position (tensor, sequence, optional,
map), as the onnx backend runner does, and turned into numpy values with onnx.numpy_helper:
bfloat16, float8, float4 and int4 arrive as ml_dtypes arrays. The model is loaded without its
external data; every external data location must name a member of the verified tree.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fixture_store._extras import require
from fixture_store.errors import UnsafeContentError, UsageError
from fixture_store.objects.trees import TreePathError, check_member_path
from fixture_store.registry import Kind, Tolerance

if TYPE_CHECKING:
    import onnx

    from fixture_store.access import Fixtures

MODEL = "model.onnx"
_DATASET = re.compile(r"test_data_set_(\d+)")
_PB = re.compile(r"(input|output)_(\d+)\.pb")
_READING = "reading an ONNX test case"


@dataclass(frozen=True)
class DataSet:
    """One ``test_data_set_N``: named inputs and expected outputs, in graph order."""

    index: int
    inputs: tuple[tuple[str, Any], ...]
    outputs: tuple[tuple[str, Any], ...]

    @property
    def feeds(self) -> dict[str, Any]:
        return dict(self.inputs)


@dataclass(frozen=True, eq=False)
class OnnxCase:
    """A loaded ONNX test case whose files all came out of a verified tree."""

    name: str
    folder: Path
    model: onnx.ModelProto = field(repr=False)
    datasets: tuple[DataSet, ...]
    tolerance: Tolerance | None = None

    @property
    def model_path(self) -> Path:
        return self.folder / MODEL

    @property
    def operators(self) -> tuple[str, ...]:
        """Operator types of the main graph's nodes, in order (domain-qualified if not ai.onnx)."""
        return tuple(
            f"{n.domain}.{n.op_type}" if n.domain not in ("", "ai.onnx") else n.op_type
            for n in self.model.graph.node
        )


def load_verified(fixtures: Fixtures, name: str) -> OnnxCase:
    """Verify ``name`` (an onnx-case tree) and load it; typed refusal errors otherwise."""
    record = fixtures.verified(name)
    if record.kind is not Kind.ONNX_CASE:
        raise UsageError(f"{name} is a {record.kind!r} artifact, not an onnx-case")
    return load_case(fixtures.tree(name), name=name, tolerance=record.tolerance)


def load_case(
    folder: str | os.PathLike[str], *, name: str, tolerance: Tolerance | None = None
) -> OnnxCase:
    """Load a case folder (already verified by the caller)."""
    require("onnx", for_what=_READING, modules=("onnx",))
    import onnx

    root = Path(folder)
    model_path = root / MODEL
    if not model_path.is_file():
        raise UnsafeContentError(name, f"the tree has no {MODEL}; it is not an ONNX test case")
    try:
        model = onnx.load(os.fspath(model_path), load_external_data=False)
    except Exception as e:
        raise UnsafeContentError(name, f"{MODEL} does not parse as an ONNX model: {e}") from e
    check_external_data(model, root, name)
    datasets = []
    for sub in sorted(root.iterdir(), key=_dataset_key):
        match = _DATASET.fullmatch(sub.name)
        if match is None or not sub.is_dir():
            continue
        datasets.append(_load_dataset(model, sub, int(match.group(1)), name))
    return OnnxCase(name, root, model, tuple(datasets), tolerance)


def _dataset_key(path: Path) -> tuple[int, str]:
    match = _DATASET.fullmatch(path.name)
    return (int(match.group(1)) if match else -1, path.name)


def _load_dataset(model: onnx.ModelProto, folder: Path, index: int, name: str) -> DataSet:
    found: dict[str, dict[int, Path]] = {"input": {}, "output": {}}
    for f in folder.iterdir():
        match = _PB.fullmatch(f.name)
        if match is not None:
            found[match.group(1)][int(match.group(2))] = f
    graph_io = {"input": model.graph.input, "output": model.graph.output}
    loaded: dict[str, list[tuple[str, Any]]] = {"input": [], "output": []}
    for role in ("input", "output"):
        positions = sorted(found[role])
        if positions != list(range(len(positions))):
            raise UnsafeContentError(
                name, f"{folder.name}: {role} files are not numbered 0..{len(positions) - 1}"
            )
        if len(positions) > len(graph_io[role]):
            raise UnsafeContentError(
                name,
                f"{folder.name}: {len(positions)} {role} files but the graph declares "
                f"{len(graph_io[role])} {role}s",
            )
        for i in positions:
            value_info = graph_io[role][i]
            loaded[role].append(
                (value_info.name, read_value(found[role][i], value_info.type, name))
            )
    return DataSet(index, tuple(loaded["input"]), tuple(loaded["output"]))


def read_value(path: Path, type_proto: onnx.TypeProto, name: str = "") -> Any:
    """Parse one ``.pb`` as the protobuf ``type_proto`` calls for and convert it to numpy."""
    require("onnx", for_what=_READING, modules=("onnx",))
    import onnx
    from onnx import numpy_helper

    data = path.read_bytes()
    which = type_proto.WhichOneof("value")
    try:
        if which == "sequence_type":
            seq = onnx.SequenceProto()
            seq.ParseFromString(data)
            return numpy_helper.to_list(seq)
        if which == "optional_type":
            opt = onnx.OptionalProto()
            opt.ParseFromString(data)
            return numpy_helper.to_optional(opt)
        if which == "map_type":
            mp = onnx.MapProto()
            mp.ParseFromString(data)
            return numpy_helper.to_dict(mp)
        tensor = onnx.TensorProto()
        tensor.ParseFromString(data)
        return numpy_helper.to_array(tensor)
    except Exception as e:
        raise UnsafeContentError(
            name, f"{path.parent.name}/{path.name} does not parse as {which or 'a tensor'}: {e}"
        ) from e


def _tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    yield from graph.initializer
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors
            if attr.HasField("g"):
                yield from _tensors(attr.g)
            for g in attr.graphs:
                yield from _tensors(g)


def check_external_data(model: onnx.ModelProto, root: Path, name: str) -> None:
    """Every external data location must be a file inside the verified tree, never elsewhere."""
    require("onnx", for_what=_READING, modules=("onnx",))
    import onnx

    for tensor in _tensors(model.graph):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        location = next((e.value for e in tensor.external_data if e.key == "location"), None)
        if location is None:
            raise UnsafeContentError(
                name, f"tensor {tensor.name!r} has external data without a location"
            )
        try:
            check_member_path(location)
        except TreePathError as e:
            raise UnsafeContentError(
                name,
                f"tensor {tensor.name!r}: external data location {location!r} is not "
                f"inside the verified tree ({e.message})",
            ) from e
        target = root / location
        if target.is_symlink() or not target.is_file():
            raise UnsafeContentError(
                name,
                f"tensor {tensor.name!r}: external data {location!r} is not a member of "
                "the verified tree",
            )
