"""Where a comparison runs: an :class:`Environment`, the facts expectations are keyed by.

An environment is a set of facts, each written as the condition it satisfies (the condition
language of :mod:`fixture_store.registry.conditions`), joined by commas::

    device:cuda,runtime:onnxruntime,provider:CUDAExecutionProvider,dtype:float32,platform:linux

- ``device``: the kind of device the computation runs on, one of :data:`DEVICES`;
- ``runtime``: the framework or runtime that computes (``torch``, ``jax``, ``onnxruntime``, ...);
- ``provider``: its execution provider or backend (an ONNX Runtime EP, the JAX backend);
- ``dtype``: the dtype the run computes in (a numpy or ``ml_dtypes`` name);
- ``platform``: ``sys.platform`` of the machine (``linux``, ``darwin``, ``win32``).

A fact left out is unknown: a condition on it does not hold. The value prints itself back in
that order, so ``Environment.parse(str(env)) == env``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace

from fixture_store.errors import UsageError

KINDS = ("device", "runtime", "provider", "dtype", "platform")
DEVICES = ("cpu", "cuda", "rocm", "xpu", "tpu", "mps")
# A runtime, provider, dtype or platform name: letters, digits and . _ - (no separator).
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
SEPARATOR = ","


def check_fact(kind: str, value: str) -> str | None:
    """Why ``value`` is no ``kind`` fact (``None`` when it is one)."""
    if kind == "device":
        return None if value in DEVICES else f"device {value!r} is none of {', '.join(DEVICES)}"
    if kind == "dtype":
        from fixture_store.registry.dtypes import DTYPES

        return None if value in DTYPES else f"dtype {value!r} is no dtype name"
    if not _NAME.fullmatch(value):
        return f"{kind} {value!r} is not a name (letters, digits and . _ -)"
    return None


@dataclass(frozen=True)
class Environment:
    """The facts of where a comparison runs; ``None`` where a fact is unknown."""

    device: str | None = None
    runtime: str | None = None
    provider: str | None = None
    dtype: str | None = None
    platform: str | None = None

    def __post_init__(self) -> None:
        for kind, value in self.items():
            problem = check_fact(kind, value)
            if problem is not None:
                raise UsageError(f"environment: {problem}", fix=_FIX)

    @classmethod
    def parse(cls, text: str) -> Environment:
        """``device:cuda,runtime:torch`` (spaces around the commas allowed; empty: nothing
        known); a UsageError names a fact that is malformed, unknown or given twice."""
        given: dict[str, str] = {}
        for part in (p.strip() for p in text.split(SEPARATOR)):
            if not part:
                continue
            kind, sep, value = part.partition(":")
            if not sep or kind not in KINDS or not value:
                raise UsageError(f"environment {text!r}: {part!r} is no KIND:VALUE fact", fix=_FIX)
            if kind in given:
                raise UsageError(f"environment {text!r}: {kind} is given twice", fix=_FIX)
            given[kind] = value
        return cls(**given)

    def items(self) -> list[tuple[str, str]]:
        """The known facts as ``(kind, value)``, in :data:`KINDS` order."""
        return [(f.name, v) for f in fields(self) if (v := getattr(self, f.name)) is not None]

    def get(self, kind: str) -> str | None:
        return getattr(self, kind) if kind in KINDS else None

    def over(self, base: Environment) -> Environment:
        """This environment's facts over ``base``'s (a fact given here wins)."""
        return replace(base, **dict(self.items()))

    def __str__(self) -> str:
        return SEPARATOR.join(f"{kind}:{value}" for kind, value in self.items())


_FIX = (
    "write the environment as KIND:VALUE facts joined by commas, KIND one of "
    f"{', '.join(KINDS)} (device one of {', '.join(DEVICES)}), e.g. device:cuda,runtime:torch"
)
