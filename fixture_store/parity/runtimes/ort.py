"""ONNX Runtime (CPU provider) as a comparator runtime.

``InferenceSession.run`` only takes and returns numpy dtypes it knows; bfloat16, float8, float4
and 4-bit integers (ml_dtypes arrays) are bridged through OrtValue: the raw bytes are copied
into an OrtValue of the ONNX element type (4-bit types packed two per byte, low nibble first)
and read back the same way.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fixture_store._extras import require
from fixture_store.parity.runtimes import RunFn
from fixture_store.readers.onnxcase import OnnxCase

RUNTIME = "the ort runtime (ONNX Runtime)"
MODULES = ("onnx", "onnxruntime")

_BYTE_BITS = 8  # a type this wide is stored one value per byte, as is
# ONNX element types numpy does not know natively (ml_dtypes provides them).
_BRIDGED_NAMES = ("bfloat16", "float8", "float4", "int4", "uint4", "int2", "uint2")


def _bridged(type_string: str) -> bool:
    return any(n in type_string for n in _BRIDGED_NAMES)


def prepare(case: OnnxCase) -> RunFn:
    require("onnx", for_what=RUNTIME, modules=MODULES)
    import onnxruntime as ort

    options = ort.SessionOptions()
    # Workers run cases side by side, one per core: more threads only contend.
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 4  # errors become results; keep stderr for the report
    session = ort.InferenceSession(
        str(case.model_path), options, providers=["CPUExecutionProvider"]
    )
    types = [i.type for i in session.get_inputs()] + [o.type for o in session.get_outputs()]
    if not any(_bridged(t) for t in types):

        def run(feeds: Mapping[str, Any]) -> Sequence[Any]:
            return list(session.run(None, dict(feeds)))

        return run

    def run_bridged(feeds: Mapping[str, Any]) -> Sequence[Any]:
        values = {k: to_ortvalue(v) for k, v in feeds.items()}
        outputs = session.run_with_ort_values(None, values)
        return [from_ortvalue(o) for o in outputs]

    return run_bridged


def _onnx_type(dtype: np.dtype[Any]) -> int:
    require("onnx", for_what=RUNTIME, modules=MODULES)
    from onnx import helper

    return int(helper.np_dtype_to_tensor_dtype(dtype))


def _packed_bits(onnx_type: int) -> int:
    require("onnx", for_what=RUNTIME, modules=MODULES)
    from onnx import TensorProto

    if onnx_type in (TensorProto.INT4, TensorProto.UINT4, TensorProto.FLOAT4E2M1):
        return 4
    if onnx_type in (getattr(TensorProto, "INT2", -1), getattr(TensorProto, "UINT2", -1)):
        return 2
    return _BYTE_BITS


def to_ortvalue(value: Any) -> Any:
    require("onnx", for_what=RUNTIME, modules=MODULES)
    import onnxruntime as ort

    array = np.ascontiguousarray(value)
    onnx_type = _onnx_type(array.dtype)
    ortvalue = ort.OrtValue.ortvalue_from_shape_and_type(list(array.shape), onnx_type)
    raw = _pack(array.view(np.uint8).reshape(-1), _packed_bits(onnx_type))
    if raw.nbytes != ortvalue.tensor_size_in_bytes():
        raise ValueError(
            f"cannot bridge a {array.dtype} array of shape {array.shape}: "
            f"{raw.nbytes} bytes for a tensor of {ortvalue.tensor_size_in_bytes()}"
        )
    if raw.nbytes:
        ctypes.memmove(ortvalue.data_ptr(), raw.ctypes.data, raw.nbytes)
    return ortvalue


def from_ortvalue(ortvalue: Any) -> Any:
    if not ortvalue.is_tensor() or not _bridged(ortvalue.data_type()):
        return ortvalue.numpy()
    require("onnx", for_what=RUNTIME, modules=MODULES)
    from onnx import helper

    onnx_type = int(ortvalue.element_type())
    dtype = helper.tensor_dtype_to_np_dtype(onnx_type)
    shape = tuple(ortvalue.shape())
    nbytes = ortvalue.tensor_size_in_bytes()
    raw = np.empty(nbytes, np.uint8)
    if nbytes:
        ctypes.memmove(raw.ctypes.data, ortvalue.data_ptr(), nbytes)
    count = math.prod(shape)
    return _unpack(raw, _packed_bits(onnx_type), count).view(dtype).reshape(shape)


def _pack(raw: np.ndarray[Any, Any], bits: int) -> np.ndarray[Any, Any]:
    if bits == _BYTE_BITS:
        return raw
    per_byte = _BYTE_BITS // bits
    mask = (1 << bits) - 1
    padded = np.zeros(-(-raw.size // per_byte) * per_byte, np.uint8)
    padded[: raw.size] = raw & mask
    packed = np.zeros(padded.size // per_byte, np.uint8)
    for k in range(per_byte):
        packed |= padded[k::per_byte] << (bits * k)
    return packed


def _unpack(raw: np.ndarray[Any, Any], bits: int, count: int) -> np.ndarray[Any, Any]:
    if bits == _BYTE_BITS:
        return raw
    per_byte = _BYTE_BITS // bits
    mask = (1 << bits) - 1
    out = np.empty(raw.size * per_byte, np.uint8)
    for k in range(per_byte):
        out[k::per_byte] = (raw >> (bits * k)) & mask
    # ml_dtypes keeps a 2/4-bit value in the low bits of a byte and reads the sign from them.
    return out[:count]
