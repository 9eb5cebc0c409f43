"""JAX implementations of the torch.nn modules the checkpoint chain covers.

Each takes the PyTorch state dict names and layouts (NCHW activations, OIHW kernels) so a converted
checkpoint loads without renaming; all run in float32 on CPU.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp

Array = Any


def linear(state: Mapping[str, Array], _config: Mapping[str, Any], x: Array) -> Array:
    y = jnp.matmul(x, jnp.asarray(state["weight"]).T, precision=jax.lax.Precision.HIGHEST)
    return y + state["bias"] if "bias" in state else y


def conv2d(state: Mapping[str, Array], config: Mapping[str, Any], x: Array) -> Array:
    top, left, bottom, right = config["pads"]
    y = jax.lax.conv_general_dilated(
        x,
        jnp.asarray(state["weight"]),
        window_strides=tuple(config["strides"]),
        padding=((top, bottom), (left, right)),
        rhs_dilation=tuple(config["dilations"]),
        dimension_numbers=("NCHW", "OIHW", "NCHW"),
        feature_group_count=int(config["groups"]),
        precision=jax.lax.Precision.HIGHEST,
    )
    if "bias" in state:
        y = y + jnp.asarray(state["bias"]).reshape(1, -1, 1, 1)
    return y


def batch_norm2d(state: Mapping[str, Array], config: Mapping[str, Any], x: Array) -> Array:
    """Inference mode: normalise with the running statistics."""
    shape = (1, -1) + (1,) * (x.ndim - 2)
    mean = jnp.asarray(state["running_mean"]).reshape(shape)
    var = jnp.asarray(state["running_var"]).reshape(shape)
    scale = jnp.asarray(state["weight"]).reshape(shape)
    shift = jnp.asarray(state["bias"]).reshape(shape)
    return (x - mean) / jnp.sqrt(var + jnp.float32(config["eps"])) * scale + shift


MODULES: Mapping[str, Callable[[Mapping[str, Array], Mapping[str, Any], Array], Array]] = {
    "Linear": linear,
    "Conv2d": conv2d,
    "BatchNorm2d": batch_norm2d,
}


def apply(
    module_type: str, state: Mapping[str, Array], config: Mapping[str, Any], x: Array
) -> Array:
    try:
        fn = MODULES[module_type]
    except KeyError:
        raise SystemExit(f"error: no JAX implementation of {module_type!r}") from None
    return jax.jit(lambda xx: fn(state, config, xx))(jnp.asarray(x))
