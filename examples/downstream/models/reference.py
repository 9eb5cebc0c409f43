"""The upstream: the MLP in float64 with the exact GELU, run in its pinned environment.

Writes, for each seed, the inputs (``inputs_seed<N>.npz``: x and the weights) and the reference
outputs (``mlp_seed<N>.npz``: hidden, logits, float32 like the port's), the outputs naming the
inputs as their parent. Generator protocol 1: the runner puts ``fixture_store_generator`` on the
path; nothing else of fixture-store is installed here.
"""

from __future__ import annotations

import io
import math
import sys
import zipfile
from pathlib import Path
from typing import Any

import fixture_store_generator as kit

STAGE = "reference"


def save_npz(path: Path, **arrays: Any) -> None:
    """``np.savez``, but the same bytes on every run: ``np.savez`` stamps each member with the
    current time, so a regenerated file would never be bit-identical to its record."""
    import numpy as np

    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for name, array in arrays.items():
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, np.asanyarray(array), allow_pickle=False)
            zf.writestr(
                zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0)), buffer.getvalue()
            )


def main() -> int:
    parser = kit.parser(__doc__, family="tinynet-reference")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--mean-abs", type=float, default=5e-4)
    args = kit.checked(parser, upstream=(), stage=STAGE)  # exit 3 outside the pins
    import numpy as np  # only once the pinned numpy is known to be the one installed

    erf = np.vectorize(math.erf)
    args.out.mkdir(parents=True, exist_ok=True)
    outputs = []
    for seed in range(args.seeds):
        rng = np.random.default_rng(seed)
        x = rng.standard_normal((args.batch, 16)).astype(np.float32)
        w1 = (rng.standard_normal((16, args.width)) / 4).astype(np.float32)
        b1 = (rng.standard_normal(args.width) / 10).astype(np.float32)
        w2 = (rng.standard_normal((args.width, 10)) / 6).astype(np.float32)
        b2 = (rng.standard_normal(10) / 10).astype(np.float32)
        pre = x.astype(np.float64) @ w1.astype(np.float64) + b1
        hidden = 0.5 * pre * (1.0 + erf(pre / math.sqrt(2.0)))
        logits = hidden @ w2.astype(np.float64) + b2
        inputs, refs = f"inputs_seed{seed}.npz", f"mlp_seed{seed}.npz"
        save_npz(args.out / inputs, x=x, w1=w1, b1=b1, w2=w2, b2=b2)
        save_npz(
            args.out / refs, hidden=hidden.astype(np.float32), logits=logits.astype(np.float32)
        )
        outputs += [
            {"name": f"{args.family}/{inputs}", "kind": "fixture", "path": inputs},
            {
                "name": f"{args.family}/{refs}",
                "kind": "fixture",
                "path": refs,
                "parents": [f"{args.family}/{inputs}"],
                # how a port's outputs are judged against these: the mean absolute error
                "tolerance": {"metric": "mean_abs", "max": args.mean_abs},
                "metadata": {"seed": seed, "upstream": "float64, exact GELU"},
            },
        ]
    kit.write_outputs(args.out, outputs)
    kit.write_environment(args.out, {"stage": STAGE})
    sys.stderr.write(f"{len(outputs)} files\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
