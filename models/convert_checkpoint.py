"""Convert PyTorch-exported ONNX cases into checkpoint archives (.tar.zst and .tar.lz4).

The upstream is the ``pytorch-converted`` corpus of the pinned onnx release: real ``torch.nn``
modules exported with their weights. Each case's initializers become the module's state dict under
PyTorch's own names (``weight``, ``bias``, ``running_mean``, ``running_var``), with the module type
and its hyper-parameters in the archive's metadata, next to the parent case's digest.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import _checkpoint_format as ckpt
import fixture_store_generator as kit

STAGE = "checkpoints"
CONVERTER_VERSION = "1"
UPSTREAM = ("onnx==1.22.0",)
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


def main() -> int:
    parser = kit.parser(__doc__, family="checkpoints", inputs_required=True)
    args = kit.checked(parser, upstream=UPSTREAM, stage=STAGE)
    import onnx

    args.out.mkdir(parents=True, exist_ok=True)
    outputs = []
    for item in json.loads(args.inputs.read_text()):
        case = item["name"].rsplit("/", 1)[1]
        model = onnx.load(str(Path(item["path"]) / "model.onnx"))
        mtype, config, state = module_of(model)
        metadata = {
            "converter": {"name": "models/convert_checkpoint.py", "version": CONVERTER_VERSION},
            "parent": {"name": item["name"], "digest": item["digest"]},
            "module": {"type": mtype, "config": config},
        }
        raw = ckpt.tar_bytes(state, metadata)
        for codec in ("zst", "lz4"):
            rel = f"{case}.tar.{codec}"
            (args.out / rel).write_bytes(ckpt.compress(raw, codec))
            outputs.append(
                {
                    "name": f"{args.family}/{rel}",
                    "kind": "checkpoint",
                    "path": rel,
                    "parents": [item["name"]],
                    "media_type": "application/zstd" if codec == "zst" else "application/x-lz4",
                    "metadata": {
                        **metadata,
                        "archive": f"tar.{codec}",
                        "tensors": {
                            n: {"dtype": str(a.dtype), "shape": list(a.shape)}
                            for n, a in sorted(state.items())
                        },
                    },
                }
            )
    kit.write_outputs(args.out, outputs)
    kit.write_environment(args.out, {"stage": STAGE, "converter_version": CONVERTER_VERSION})
    sys.stderr.write(f"{len(outputs)} archives\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
