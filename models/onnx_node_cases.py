"""Regenerate the ONNX backend node corpus with onnx's own case generators.

Runs the ``generate-data`` step of the pinned onnx release (``onnx.backend.test.cmd_tools``) into
``OUT/node/<case>/``: each case's ``model.onnx`` and ``test_data_set_*/{input,output}_*.pb``,
produced by the expect() machinery of ``onnx.backend.test.case.node``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

import fixture_store_generator as kit

STAGE = "onnx-node"
UPSTREAM = ("onnx==1.22.0",)


def main() -> int:
    parser = kit.parser(__doc__, family="onnx-node")  # this stage has no inputs
    parser.add_argument("--op-type", default=None, help="Only cases of this operator (debugging).")
    args = kit.checked(parser, upstream=UPSTREAM, stage=STAGE)

    from onnx.backend.test import cmd_tools

    out: Path = args.out
    if out.exists():
        shutil.rmtree(out)
    (out / "node").mkdir(parents=True)
    started = time.perf_counter()
    cmd_tools.generate_data(
        argparse.Namespace(output=str(out), clean=False, diff=False, op_type=args.op_type)
    )
    # generate-data also writes the model-zoo pointers and simple model cases; this stage owns
    # the node cases only.
    for child in out.iterdir():
        if child.name != "node":
            shutil.rmtree(child)
    cases = sorted(p.name for p in (out / "node").iterdir())
    kit.write_environment(out, {"stage": STAGE, "upstream": list(UPSTREAM), "cases": len(cases)})
    sys.stderr.write(f"{len(cases)} node cases in {time.perf_counter() - started:.1f} s\n")
    outputs = [
        {"name": f"{args.family}/{case}", "kind": "onnx-case", "path": f"node/{case}"}
        for case in cases
    ]
    kit.write_outputs(out, outputs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
