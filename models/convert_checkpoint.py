"""Convert PyTorch weights (``model.safetensors``) into checkpoint archives (.tar.zst, .tar.lz4).

The input is the verified output of the ``pytorch-weights`` stage: one ``model.safetensors`` per
PyTorch-exported ONNX case of the pinned onnx release, read with the pinned ``safetensors``
package. Its tensors are the module's state dict under PyTorch's own names (``weight``,
``bias``, ``running_mean``, ``running_var``); its ``__metadata__`` (one key, ``fixture_store``,
holding JSON) gives the module type and hyper-parameters and the upstream case's name and
digest, which the archive's metadata keeps next to the tensors.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import _checkpoint_format as ckpt
import fixture_store_generator as kit

STAGE = "checkpoints"
CONVERTER_VERSION = "1"
UPSTREAM = ("safetensors==0.8.0",)
METADATA_KEY = "fixture_store"  # the one __metadata__ key models/pytorch_weights.py writes


def read_weights(path: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(module, parent, state dict) of a ``model.safetensors`` the weights stage wrote."""
    from safetensors import safe_open

    with safe_open(path, framework="numpy") as f:
        header = f.metadata() or {}
        state = {name: f.get_tensor(name) for name in f.keys()}  # noqa: SIM118 - not a dict
    doc = json.loads(header.get(METADATA_KEY, "{}"))
    if doc.get("format") != "pt" or not {"module", "parent"} <= set(doc):
        raise SystemExit(f"error: {path} is no PyTorch state dict of the pytorch-weights stage")
    return doc["module"], doc["parent"], state


def main() -> int:
    parser = kit.parser(__doc__, family="checkpoints", inputs_required=True)
    args = kit.checked(parser, upstream=UPSTREAM, stage=STAGE)
    args.out.mkdir(parents=True, exist_ok=True)
    outputs = []
    for item in json.loads(args.inputs.read_text()):
        # pytorch-weights/<case>/model.safetensors
        case = item["name"].split("/")[1]
        module, parent, state = read_weights(item["path"])
        metadata = {
            "converter": {"name": "models/convert_checkpoint.py", "version": CONVERTER_VERSION},
            "parent": parent,
            "module": module,
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
