"""A throwaway project with a toy generator stage, shared by the regeneration tests."""

from __future__ import annotations

import importlib.metadata
import sys
import textwrap
from pathlib import Path

import yaml

MODELS = Path(__file__).resolve().parents[2] / "models"

TOY = textwrap.dedent('''
    """Toy generator: values scaled by --scale, one file and one folder output."""
    import argparse, json, sys
    from pathlib import Path
    import fixture_store_generator as kit

    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--inputs", type=Path)
    parser.add_argument("--require", action="append", default=[])
    parser.add_argument("--without", action="append", default=[])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--family", default="toy")
    args = parser.parse_args()
    kit.require(args.require, stage="toy")
    import numpy as np

    args.out.mkdir(parents=True, exist_ok=True)
    values = np.linspace(0.5, 2.0, 64, dtype=np.float32)
    np.save(args.out / "values.npy", values)
    (args.out / "case").mkdir()
    np.save(args.out / "case" / "input_0.npy", values)
    scaled = (values * np.float32(args.scale)).astype(np.float32)
    np.save(args.out / "case" / "output_0.npy", scaled)
    outputs = [
        {"name": f"{args.family}/values.npy", "kind": "fixture", "path": "values.npy",
         "metadata": {"note": "plain"}},
        {"name": f"{args.family}/case", "kind": "tree", "path": "case",
         "parents": [f"{args.family}/values.npy"]},
    ]
    (args.out / "outputs.json").write_text(json.dumps({"outputs": outputs}))
    kit.write_environment(args.out, {"stage": "toy"})
''')


def numpy_pin() -> str:
    return f"numpy=={importlib.metadata.version('numpy')}"


def make_project(
    root: Path,
    *,
    scale: float = 1.0,
    requirements: list[str] | None = None,
    stages: tuple[str, ...] = ("toy",),
) -> Path:
    (root / "models").mkdir(parents=True, exist_ok=True)
    (root / "provenance").mkdir(exist_ok=True)
    (root / "models" / "toy.py").write_text(TOY)
    params = {
        "regenerate": {
            name: {
                "generator": "models/toy.py",
                "family": name,
                "requirements": requirements or [numpy_pin()],
                "args": {"scale": scale, "family": name},
                "tolerance": {"metric": "allclose", "rtol": 1e-3, "atol": 1e-7},
            }
            for name in stages
        }
    }
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=True))
    return root


def set_scale(root: Path, scale: float, stage: str = "toy") -> None:
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["regenerate"][stage]["args"]["scale"] = scale
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=True))


PYTHON = sys.executable
