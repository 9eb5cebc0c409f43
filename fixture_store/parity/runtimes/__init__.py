"""Comparators: run a verified ONNX case with a runtime and compare its outputs.

A runtime is a plain callable ``prepare(case) -> run`` where ``run(feeds) -> outputs``; the
built-in ones are ONNX Runtime (``ort``) and onnx's ReferenceEvaluator (``reference``). Any other
runtime is named ``package.module:attribute`` and imported in the worker.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from fixture_store._extras import require
from fixture_store.errors import UsageError
from fixture_store.readers.onnxcase import OnnxCase
from fixture_store.registry.environment import Environment

BUILTIN = {
    "ort": "fixture_store.parity.runtimes.ort:prepare",
    "reference": "fixture_store.parity.runtimes.reference:prepare",
}
# What each built-in runtime imports (from the 'onnx' extra): checked before any case is verified
# or a worker started, so a missing package is one usage error rather than an error per case.
NEEDS = {"ort": ("onnx", "onnxruntime"), "reference": ("onnx",)}
# Where each built-in runtime computes, the facts a tolerance's expectations are keyed by.
ENVIRONMENTS = {
    "ort": Environment(device="cpu", runtime="onnxruntime", provider="CPUExecutionProvider"),
    "reference": Environment(device="cpu", runtime="onnx-reference"),
}

RunFn = Callable[[Mapping[str, Any]], Sequence[Any]]


class Prepare(Protocol):
    def __call__(self, case: OnnxCase) -> RunFn: ...


def check_runtime(name: str) -> str:
    """Return ``name`` if it names a built-in runtime or a ``module:attribute`` spec.

    A built-in runtime whose packages are missing is a ``MissingExtraError``.
    """
    if name in BUILTIN:
        require("onnx", for_what=f"fixture-store compare --runtime {name}", modules=NEEDS[name])
        return name
    if ":" in name and all(name.partition(":")[::2]):
        return name
    raise UsageError(
        f"unknown runtime {name!r}",
        fix=f"use one of {', '.join(BUILTIN)} or package.module:prepare",
    )


def resolve(name: str) -> Prepare:
    spec = BUILTIN.get(check_runtime(name), name)
    module, _, attr = spec.partition(":")
    found: Prepare = getattr(importlib.import_module(module), attr)
    return found


def environment(name: str) -> Environment:
    """Where runtime ``name`` computes: a built-in's facts, a ``module:attribute`` runtime's
    module as its runtime, and this machine's platform."""
    known = ENVIRONMENTS.get(name)
    if known is None:
        module = re.sub(r"[^A-Za-z0-9._-]", "_", name.partition(":")[0]).lstrip("._-")
        known = Environment(runtime=module or None)
    return Environment(platform=sys.platform).over(known)


__all__ = ["BUILTIN", "ENVIRONMENTS", "NEEDS", "Prepare", "check_runtime", "environment", "resolve"]
