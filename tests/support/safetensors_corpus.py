"""safetensors files by hand, and both readers' view of one: this project's and the package's.

:func:`st_bytes` writes the layout (8-byte little-endian header length, JSON header, data) from
a header given as a mapping or as raw bytes, so a test can write what no serializer would.
:func:`ours` and :func:`theirs` reduce a reading to an :class:`Outcome` the differential tests
compare: the tensors (dtype name, shape, bytes) and metadata, or the refusal.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ml_dtypes  # noqa: F401 - registers bfloat16 with numpy, which the package's reader needs
import numpy as np
import safetensors

from fixture_store import limits
from fixture_store.errors import UnsafeArrayError
from fixture_store.readers import safetensors as reader

Tensor = tuple[str, tuple[int, ...], bytes]


@dataclass(frozen=True)
class Outcome:
    """What one reader made of a file: its tensors and metadata, or the reason it refused."""

    tensors: Mapping[str, Tensor] | None = None
    metadata: Mapping[str, str] | None = None
    refused: str | None = None

    @property
    def loaded(self) -> bool:
        return self.refused is None


def entry(dtype: str, shape: list[int], begin: int, end: int) -> dict[str, Any]:
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def st_bytes(header: Mapping[str, Any] | bytes, data: bytes = b"") -> bytes:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


def ours(path: Path, profile: limits.Limits = limits.DEFAULT) -> Outcome:
    try:
        tensors = reader.open_tensors(path, profile)
        got = {k: _tensor(v) for k, v in tensors.items()}
    except UnsafeArrayError as e:
        return Outcome(refused=e.rule)
    return Outcome(got, dict(tensors.metadata))


def theirs(path: Path) -> Outcome:
    """The package's reading; a tensor its numpy framework cannot represent (float8: numpy has
    no such type without ml_dtypes, and the package asks numpy for it) is the file's bytes."""
    try:
        with safetensors.safe_open(str(path), framework="numpy") as f:
            got = {k: _theirs_tensor(f, k, path) for k in f.keys()}  # noqa: SIM118 - not a dict
            metadata = f.metadata() or {}
    except (safetensors.SafetensorError, ValueError, TypeError) as e:
        return Outcome(refused=f"{type(e).__name__}: {e}")
    return Outcome(got, metadata)


def _theirs_tensor(f: Any, key: str, path: Path) -> Tensor:
    try:
        return _tensor(f.get_tensor(key))
    except AttributeError as e:  # module 'numpy' has no attribute 'float8_e4m3fn'
        # The package parsed this header, so plain JSON reads it too.
        data = path.read_bytes()
        (length,) = struct.unpack("<Q", data[:8])
        spec = json.loads(data[8 : 8 + length])[key]
        if spec["dtype"] not in ("F8_E4M3", "F8_E5M2"):
            raise TypeError(f"the package's numpy reader cannot represent {spec['dtype']}") from e
        begin, end = spec["data_offsets"]
        name = reader.DTYPES[spec["dtype"]][0]
        return name, tuple(spec["shape"]), data[8 + length + begin : 8 + length + end]


def _tensor(arr: np.ndarray[Any, Any]) -> Tensor:
    return str(arr.dtype), tuple(int(d) for d in arr.shape), arr.tobytes()
