"""ONNX backend test cases read from a verified tree: the model and its data sets.

A case folder holds ``model.onnx`` and ``test_data_set_N/{input,output}_K.pb``. Each ``.pb`` is
parsed as the protobuf the model's graph declares for that position (tensor, sequence, optional,
map), as the onnx backend runner does, and turned into numpy values with onnx.numpy_helper:
bfloat16, float8, float4 and int4 arrive as ml_dtypes arrays. The model is loaded without its
external data; every external data location must name a member of the verified tree.

A case is read from its manifest, never from a listing of its folder (DESIGN 11): whatever else
is in the folder (a planted link, a stray file) is never opened.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fixture_store._extras import require
from fixture_store.errors import UnsafeContentError
from fixture_store.objects.trees import TreePathError, check_member_path, scan_folder
from fixture_store.registry import Tolerance

if TYPE_CHECKING:
    import onnx

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


def load_case(
    folder: str | os.PathLike[str],
    *,
    name: str,
    tolerance: Tolerance | None = None,
    members: Iterable[str] | None = None,
) -> OnnxCase:
    """Load a case folder (already verified by the caller) from its ``members``: the verified
    tree's manifest, the only files read. Without ``members`` the folder's own listing is the
    manifest, and a link or special file in it is refused."""
    require("onnx", for_what=_READING, modules=("onnx",))
    import onnx

    root = Path(folder)
    files = _case_files(root, members, name)
    if MODEL not in files:
        raise UnsafeContentError(name, f"the tree has no {MODEL}; it is not an ONNX test case")
    try:
        model = onnx.load(os.fspath(files[MODEL]), load_external_data=False)
    except Exception as e:
        raise UnsafeContentError(name, f"{MODEL} does not parse as an ONNX model: {e}") from e
    check_external_data(model, root, name, files)
    grouped: dict[str, dict[str, dict[int, Path]]] = {}  # data set folder -> role -> files
    for member, path in files.items():
        folder_name, _, file_name = member.partition("/")
        if not file_name or "/" in file_name or _DATASET.fullmatch(folder_name) is None:
            continue
        found = grouped.setdefault(folder_name, {"input": {}, "output": {}})
        pb = _PB.fullmatch(file_name)
        if pb is not None:
            found[pb.group(1)][int(pb.group(2))] = path
    datasets = [
        _load_dataset(model, folder_name, grouped[folder_name], _dataset_index(folder_name), name)
        for folder_name in sorted(grouped, key=lambda f: (_dataset_index(f), f))
    ]
    return OnnxCase(name, root, model, tuple(datasets), tolerance)


def _dataset_index(folder: str) -> int:
    match = _DATASET.fullmatch(folder)
    assert match is not None
    return int(match.group(1))


def _case_files(root: Path, members: Iterable[str] | None, name: str) -> dict[str, Path]:
    """Member path -> file: the manifest's members under ``root``, or the folder's listing."""
    try:
        if members is None:
            return scan_folder(root)
        return {check_member_path(m): root.joinpath(*m.split("/")) for m in members}
    except TreePathError as e:
        raise UnsafeContentError(name, e.message) from e


def _load_dataset(
    model: onnx.ModelProto,
    folder: str,
    found: dict[str, dict[int, Path]],
    index: int,
    name: str,
) -> DataSet:
    graph_io = {"input": model.graph.input, "output": model.graph.output}
    loaded: dict[str, list[tuple[str, Any]]] = {"input": [], "output": []}
    for role in ("input", "output"):
        positions = sorted(found[role])
        if positions != list(range(len(positions))):
            raise UnsafeContentError(
                name, f"{folder}: {role} files are not numbered 0..{len(positions) - 1}"
            )
        if len(positions) > len(graph_io[role]):
            raise UnsafeContentError(
                name,
                f"{folder}: {len(positions)} {role} files but the graph declares "
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


def check_external_data(
    model: onnx.ModelProto, root: Path, name: str, files: dict[str, Path] | None = None
) -> None:
    """Every external data location must be a member of the verified tree (``files``, by
    default the folder's listing), never anything else."""
    require("onnx", for_what=_READING, modules=("onnx",))
    import onnx

    if files is None:
        files = _case_files(root, None, name)
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
        if location not in files:
            raise UnsafeContentError(
                name,
                f"tensor {tensor.name!r}: external data {location!r} is not a member of "
                "the verified tree",
            )
