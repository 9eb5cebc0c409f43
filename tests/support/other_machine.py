"""ONNX Runtime as another machine runs it, for the tests of what tracked reports may hold.

The same CPU kernels with every graph optimization disabled and ``THREADS`` threads, and each
float output then moved by one ULP up or down at places ``SEED`` draws: the outputs of another
CPU, within any tolerance a passing case has. Used in the comparing process (``--jobs 0``):
the test sets ``SEED`` and ``THREADS`` between runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fixture_store.parity.runtimes import RunFn
from fixture_store.readers.onnxcase import OnnxCase

SEED = 0
THREADS = 1


def _nudged(value: Any, rng: np.random.Generator) -> Any:
    if not isinstance(value, np.ndarray) or value.dtype not in (np.float32, np.float64):
        return value
    direction = rng.choice(np.array([-np.inf, 0.0, np.inf], value.dtype), size=value.shape)
    moved = np.nextafter(value, direction)
    return np.where((direction == 0) | ~np.isfinite(value), value, moved).astype(value.dtype)


def prepare(case: OnnxCase) -> RunFn:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = THREADS
    options.log_severity_level = 4
    session = ort.InferenceSession(
        str(case.model_path), options, providers=["CPUExecutionProvider"]
    )
    rng = np.random.default_rng(SEED)

    def run(feeds: Mapping[str, Any]) -> Sequence[Any]:
        return [_nudged(o, rng) for o in session.run(None, dict(feeds))]

    return run
