"""tinynet: a two-layer MLP in float32, the "port" whose parity this example checks.

The upstream (``models/reference.py``) computes the same network in float64 with the exact,
erf-based GELU; this port uses float32 and the tanh approximation, as ports often do. The two
agree to a mean absolute error far below 5e-4, the tolerance the references are registered with.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]


def gelu_tanh(x: F32) -> F32:
    c = np.float32(np.sqrt(2.0 / np.pi))
    return np.float32(0.5) * x * (np.float32(1) + np.tanh(c * (x + np.float32(0.044715) * x**3)))


def mlp(x: F32, w1: F32, b1: F32, w2: F32, b2: F32) -> dict[str, F32]:
    """The network's two outputs: the hidden activations and the logits."""
    f = np.float32
    hidden = gelu_tanh(x.astype(f) @ w1.astype(f) + b1.astype(f))
    logits = hidden @ w2.astype(f) + b2.astype(f)
    return {"hidden": hidden.astype(f), "logits": logits.astype(f)}
