"""onnx's ReferenceEvaluator as a comparator runtime."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fixture_store._extras import require
from fixture_store.parity.runtimes import RunFn
from fixture_store.readers.onnxcase import OnnxCase

RUNTIME = "the reference runtime (onnx ReferenceEvaluator)"


def prepare(case: OnnxCase) -> RunFn:
    require("onnx", for_what=RUNTIME, modules=("onnx",))
    from onnx.reference import ReferenceEvaluator

    # The model proto was loaded without external data; the evaluator resolves it from the
    # model's folder (inside the verified tree, checked when the case was loaded).
    evaluator = ReferenceEvaluator(str(case.model_path))

    def run(feeds: Mapping[str, Any]) -> Sequence[Any]:
        import numpy as np

        # log(0), 0/0 and friends are the operators' IEEE semantics, checked by the comparison
        # against the expected outputs; numpy's warnings about them are noise in the report.
        with np.errstate(all="ignore"):
            return list(evaluator.run(None, dict(feeds)))

    return run
