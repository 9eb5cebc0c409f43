"""Run the JAX implementations on converted checkpoints and check parity with PyTorch's outputs.

For each upstream case: load its verified ``.tar.zst`` and ``.tar.lz4`` archives (both must hold
the same tensors), run the module on the case's input, compare with the output PyTorch produced
upstream, and write the JAX output as a reference fixture whose parents are the archive and the
upstream case. A case outside tolerance fails the stage.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import _checkpoint_format as ckpt
import fixture_store_generator as kit
import numpy as np

STAGE = "jax-parity"
UPSTREAM = ("jax==0.10.2", "onnx==1.22.0")


def read_pb(path: Path) -> np.ndarray[Any, Any]:
    import onnx
    from onnx import numpy_helper

    tensor = onnx.TensorProto()
    tensor.ParseFromString(path.read_bytes())
    return numpy_helper.to_array(tensor)


def main() -> int:
    parser = kit.parser(__doc__, family="jax-parity", inputs_required=True)
    parser.add_argument("--checkpoints", default="checkpoints")
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("--atol", type=float, default=1e-5)
    args = kit.checked(parser, upstream=UPSTREAM, stage=STAGE)
    import jax

    jax.config.update("jax_platforms", "cpu")  # type: ignore[no-untyped-call]
    import jax_modules

    items = {i["name"]: i for i in json.loads(args.inputs.read_text())}
    cases = sorted(n for n in items if not n.startswith(args.checkpoints + "/"))
    args.out.mkdir(parents=True, exist_ok=True)
    outputs, failures = [], []
    for upstream in cases:
        case = upstream.rsplit("/", 1)[1]
        archives = {
            codec: items[f"{args.checkpoints}/{case}.tar.{codec}"] for codec in ("zst", "lz4")
        }
        loaded = {c: ckpt.read(Path(a["path"]).read_bytes(), c) for c, a in archives.items()}
        meta, state = loaded["zst"]
        if loaded["lz4"][0] != meta or any(
            not np.array_equal(loaded["lz4"][1][k], v) for k, v in state.items()
        ):
            failures.append(f"{case}: the .tar.lz4 and .tar.zst archives differ")
            continue
        if meta["parent"]["digest"] != items[upstream]["digest"]:
            failures.append(
                f"{case}: archive was converted from {meta['parent']['digest']}, "
                f"not the verified upstream {items[upstream]['digest']}"
            )
            continue
        data = Path(items[upstream]["path"]) / "test_data_set_0"
        x, expected = read_pb(data / "input_0.pb"), read_pb(data / "output_0.pb")
        y = np.asarray(
            jax_modules.apply(meta["module"]["type"], state, meta["module"]["config"], x)
        )
        diff = np.abs(y.astype(np.float64) - expected.astype(np.float64))
        scale = np.abs(expected.astype(np.float64))
        parity = {
            "reference": f"{upstream}:test_data_set_0/output_0.pb (PyTorch)",
            "max_abs": float(diff.max()),
            "mean_abs": float(diff.mean()),
            "max_rel": float((diff / np.maximum(scale, 1e-30)).max()),
            "rtol": args.rtol,
            "atol": args.atol,
            "within": bool(np.all(diff <= args.atol + args.rtol * scale)),
        }
        if y.shape != expected.shape or y.dtype != expected.dtype or not parity["within"]:
            failures.append(
                f"{case}: JAX {meta['module']['type']} differs from PyTorch: "
                f"max abs {parity['max_abs']:.3g}, max rel {parity['max_rel']:.3g}"
            )
        rel = f"{case}/output_0.npy"
        (args.out / case).mkdir(exist_ok=True)
        (args.out / rel).write_bytes(ckpt.npy_bytes(y))
        outputs.append(
            {
                "name": f"{args.family}/{case}/output_0.npy",
                "kind": "fixture",
                "path": rel,
                "parents": [f"{args.checkpoints}/{case}.tar.zst", upstream],
                "arrays": {"output_0": {"dtype": str(y.dtype), "shape": list(y.shape)}},
                "tolerance": {"metric": "allclose", "rtol": args.rtol, "atol": args.atol},
                "metadata": {"module": meta["module"]["type"], "parity": parity},
            }
        )
        sys.stderr.write(
            f"{case}: {meta['module']['type']} max abs {parity['max_abs']:.3g} "
            f"max rel {parity['max_rel']:.3g}\n"
        )
    if failures:
        sys.stderr.write("error: " + "\nerror: ".join(failures) + "\n")
        return 1
    kit.write_outputs(args.out, outputs)
    kit.write_environment(args.out, {"stage": STAGE})
    return 0


if __name__ == "__main__":
    sys.exit(main())
