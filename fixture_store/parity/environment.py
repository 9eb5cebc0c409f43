"""The environment a parity comparison runs in: given, or asked of the frameworks already loaded.

:func:`resolve` is what the pytest plugin judges by: the facts given (``--fixture-store-env``,
else ``$FIXTURE_STORE_ENV``: ``device:cuda,dtype:bfloat16``) over the facts :func:`detect` finds.
:func:`detect` never imports a framework: it asks only those already in ``sys.modules`` (a test
that computes with torch has imported it), so a run that uses none pays nothing and learns only
the platform. What it asks:

- torch: ``runtime:torch``; ``device:cuda`` (``rocm`` on a HIP build) when CUDA is available,
  else ``xpu``, else ``mps``, else ``cpu``;
- jax: ``runtime:jax``, ``provider:`` the default backend (``cpu``, ``gpu``, ``tpu``) and the
  device it implies (``gpu``: ``cuda``, or ``rocm`` on a ROCm build);
- onnxruntime: ``runtime:onnxruntime``, ``provider:`` the first available execution provider
  (the one a session uses unless told otherwise) and the device it implies.

When more than one of them is loaded the runtime (and provider) is not known and is left out:
name it with ``--fixture-store-env runtime:...``. The dtype a run computes in is the test's
choice: it is only ever given.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from fixture_store.errors import UsageError
from fixture_store.registry.environment import Environment

ENV_VAR = "FIXTURE_STORE_ENV"
_SHOWN = 80
_ORT_DEVICES = {
    "CPUExecutionProvider": "cpu",
    "CUDAExecutionProvider": "cuda",
    "TensorrtExecutionProvider": "cuda",
    "ROCMExecutionProvider": "rocm",
    "MIGraphXExecutionProvider": "rocm",
    "OpenVINOExecutionProvider": None,
    "CoreMLExecutionProvider": None,
}


def resolve(given: str | None = None) -> Environment:
    """The facts of ``given`` (else ``$FIXTURE_STORE_ENV``) over those :func:`detect` finds;
    a UsageError names a malformed fact."""
    text = given if given is not None else os.environ.get(ENV_VAR, "")
    return Environment.parse(text).over(detect())


def check(given: str | None) -> None:
    """Refuse a malformed environment given to the plugin before any test runs: a UsageError
    naming the option or variable, its value quoted only when short (never control characters
    as they are, never a long value repeated)."""
    source = "--fixture-store-env" if given is not None else ENV_VAR
    text = given if given is not None else os.environ.get(ENV_VAR, "")
    try:
        Environment.parse(text)
    except UsageError as e:
        shown = repr(text) if len(text) <= _SHOWN else f"(a value of {len(text)} characters)"
        raise UsageError(f"{source}={shown} is not an environment", fix=e.fix) from None


def detect(modules: dict[str, Any] | None = None) -> Environment:
    """What the frameworks already imported (``modules``, default ``sys.modules``) say."""
    loaded = sys.modules if modules is None else modules
    found = [facts(loaded[name]) for name, facts in _ASKED.items() if loaded.get(name) is not None]
    device = next((f["device"] for f in found if f.get("device") not in (None, "cpu")), None)
    device = device or next((f["device"] for f in found if f.get("device")), None)
    if len(found) == 1:
        return Environment(platform=sys.platform, **found[0])
    return Environment(device=device, platform=sys.platform)


def _torch(torch: Any) -> dict[str, str]:
    if _asks(torch, "cuda.is_available"):
        return {
            "runtime": "torch",
            "device": "rocm" if getattr(torch.version, "hip", None) else "cuda",
        }
    if _asks(torch, "xpu.is_available"):
        return {"runtime": "torch", "device": "xpu"}
    if _asks(torch, "backends.mps.is_available"):
        return {"runtime": "torch", "device": "mps"}
    return {"runtime": "torch", "device": "cpu"}


def _jax(jax: Any) -> dict[str, str]:
    backend = _value(lambda: str(jax.default_backend()))
    out = {"runtime": "jax"}
    if backend is None:
        return out
    out["provider"] = backend
    if backend == "gpu":
        version = _value(lambda: str(jax.devices()[0].client.platform_version)) or ""
        out["device"] = "rocm" if "rocm" in version.lower() else "cuda"
    elif backend in ("cpu", "tpu"):
        out["device"] = backend
    return out


def _onnxruntime(ort: Any) -> dict[str, str]:
    providers = _value(lambda: list(ort.get_available_providers())) or []
    out = {"runtime": "onnxruntime"}
    if providers:
        out["provider"] = str(providers[0])
        device = _ORT_DEVICES.get(out["provider"])
        if device is not None:
            out["device"] = device
    return out


_ASKED: dict[str, Callable[[Any], dict[str, str]]] = {
    "torch": _torch,
    "jax": _jax,
    "onnxruntime": _onnxruntime,
}


def _asks(module: Any, path: str) -> bool:
    """``module.<path>()`` is true (an attribute this build lacks: false)."""

    def ask() -> Any:
        found = module
        for part in path.split("."):
            found = getattr(found, part)
        return found()

    return bool(_value(ask))


def _value(question: Callable[[], Any]) -> Any:
    """A framework's answer, or ``None`` where this build cannot answer (an attribute it does
    not have, a backend that fails to initialise): an unknown fact, not a failed test."""
    try:
        return question()
    except Exception:  # any failure to answer leaves the fact unknown
        return None
