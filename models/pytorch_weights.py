"""Write the PyTorch weights of PyTorch-exported ONNX cases as ``model.safetensors`` files.

The upstream is the ``pytorch-converted`` corpus of the pinned onnx release: real ``torch.nn``
modules exported with their weights. Each case's initializers become the module's state dict under
PyTorch's own names (``weight``, ``bias``, ``running_mean``, ``running_var``), written with the
pinned ``safetensors`` package as a Hub checkpoint is: ``<case>/model.safetensors``. The header's
``__metadata__`` (strings only, as the format allows) has one key, ``fixture_store``: the JSON of
``format: pt``, the module type and hyper-parameters read from the graph, and the parent case's
name and digest, so the converter needs nothing but this file.

The bytes are deterministic: the package writes the tensors in a fixed order (by alignment, then
name), and the metadata's one key cannot be reordered (see :func:`header_metadata`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import fixture_store_generator as kit

STAGE = "pytorch-weights"
WRITER_VERSION = "1"
UPSTREAM = ("onnx==1.22.0", "safetensors==0.8.0")
FILE = "model.safetensors"
METADATA_KEY = "fixture_store"
_BIAS = 2  # Gemm's and Conv's inputs: the data, the weight, then the optional bias


def module_of(model: Any) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(module type, config, state dict) of a single-module PyTorch export."""
    import onnx
    from onnx import numpy_helper

    graph = model.graph
    inits = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    ops = [n.op_type for n in graph.node]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for n in graph.node for a in n.attribute}
    node = graph.node[-1]
    if ops == ["Gemm"]:
        if attrs.get("transB") != 1 or attrs.get("alpha", 1.0) != 1.0:
            raise SystemExit("error: Gemm is not a Linear layer (transB=1, alpha=1)")
        state = {"weight": inits[node.input[1]]}
        if len(node.input) > _BIAS:
            state["bias"] = inits[node.input[_BIAS]]
    elif ops == ["Transpose", "MatMul"]:
        state = {"weight": inits[graph.node[0].input[0]]}
    elif ops == ["Conv"]:
        state = {"weight": inits[node.input[1]]}
        if len(node.input) > _BIAS:
            state["bias"] = inits[node.input[_BIAS]]
        config: dict[str, Any] = {k: list(attrs[k]) for k in ("strides", "pads", "dilations")}
        config["groups"] = int(attrs.get("group", 1))
        return "Conv2d", config, state
    elif ops == ["BatchNormalization"]:
        names = ("weight", "bias", "running_mean", "running_var")
        state = {n: inits[i] for n, i in zip(names, node.input[1:], strict=True)}
        return "BatchNorm2d", {"eps": float(attrs["epsilon"])}, state
    else:
        raise SystemExit(f"error: no converter for a graph of {ops}")
    out_f, in_f = state["weight"].shape
    return "Linear", {"in_features": int(in_f), "out_features": int(out_f)}, state


def header_metadata(
    module: dict[str, Any], parent: dict[str, Any], writer: dict[str, Any]
) -> dict[str, str]:
    """The ``__metadata__``: one key, holding sorted JSON. The package keeps the metadata in a
    hash map whose order changes from process to process, so two keys or more would give other
    bytes on every run; one key is deterministic."""
    doc = {"format": "pt", "module": module, "parent": parent, "writer": writer}
    return {METADATA_KEY: json.dumps(doc, sort_keys=True)}


def main() -> int:
    parser = kit.parser(__doc__, family="pytorch-weights", inputs_required=True)
    args = kit.checked(parser, upstream=UPSTREAM, stage=STAGE)
    import numpy as np
    import onnx
    from safetensors.numpy import save

    args.out.mkdir(parents=True, exist_ok=True)
    outputs = []
    for item in json.loads(args.inputs.read_text()):
        case = item["name"].rsplit("/", 1)[1]
        mtype, config, state = module_of(onnx.load(str(Path(item["path"]) / "model.onnx")))
        module = {"type": mtype, "config": config}
        parent = {"name": item["name"], "digest": item["digest"]}
        writer = {"name": "models/pytorch_weights.py", "version": WRITER_VERSION}
        tensors = {n: np.ascontiguousarray(state[n]) for n in sorted(state)}
        rel = f"{case}/{FILE}"
        (args.out / case).mkdir(exist_ok=True)
        data = save(tensors, metadata=header_metadata(module, parent, writer))
        (args.out / rel).write_bytes(data)
        outputs.append(
            {
                "name": f"{args.family}/{rel}",
                "kind": "checkpoint",
                "path": rel,
                "parents": [item["name"]],
                "media_type": "application/x-safetensors",
                "metadata": {"writer": writer, "parent": parent, "module": module},
            }
        )
    kit.write_outputs(args.out, outputs)
    kit.write_environment(args.out, {"stage": STAGE, "writer_version": WRITER_VERSION})
    sys.stderr.write(f"{len(outputs)} safetensors files\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
