"""Safe safetensors reader under a limits profile (DESIGN decision 6); no ``safetensors`` package.

A safetensors file is an 8-byte little-endian header length, a JSON header (tensor name ->
``dtype``, ``shape``, ``data_offsets`` relative to the data section; optionally
``__metadata__``, a map of strings) and the data section. Everything is checked from the
header and the file's size before one byte of tensor data is read or mapped, and each refusal
names its rule:

- ``truncated``: fewer than 8 bytes; ``metadata-size``: a header length past the profile's
  metadata bytes; ``safetensors-header-length``: a header length past the end of the file;
- ``safetensors-header-start``: a header that does not begin with ``{``; ``metadata-json`` and
  ``metadata-duplicate-key``: a header that is not JSON, or repeats a key (the JSON reader of
  :func:`~fixture_store.readers.npy.read_metadata`); ``safetensors-header``: an entry that is not
  exactly ``{dtype, shape, data_offsets}`` of the right types; ``safetensors-metadata``: a
  ``__metadata__`` that is not a map of strings;
- ``safetensors-dtype``: a dtype outside :data:`DTYPES`;
- ``tensor-count``, ``tensor-rank``, ``tensor-dimension``, ``tensor-bytes``,
  ``total-array-bytes``: the profile's bounds;
- ``safetensors-length``: a byte length that is not the shape times the item size;
- ``safetensors-bounds``, ``safetensors-overlap``, ``safetensors-hole``, ``trailing-data``: the
  offsets must tile the data section exactly, in bounds, without overlaps, holes or bytes after.

Tensors are then handed out read-only, one at a time (:class:`Tensors`), each read with
``pread`` into a buffer of its own from the file the header was checked in, never through a
memory map (see :mod:`.pinned`: a file truncated or rewritten since is a clear error, never a
``SIGBUS`` or other values). bfloat16
and float8 tensors need ``ml_dtypes`` (not a core dependency; the ``onnx`` extra brings it): only
reading one asks for it.
"""

from __future__ import annotations

import math
import os
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, BinaryIO

import numpy as np

from fixture_store._extras import require
from fixture_store.errors import UnsafeArrayError
from fixture_store.limits import DEFAULT, Limits
from fixture_store.readers.npy import read_metadata
from fixture_store.readers.pinned import PinnedFile, Source, label_of, pin

PREFIX_BYTES = 8
METADATA_KEY = "__metadata__"
# safetensors dtype -> (the numpy name a record's manifest uses, item size in bytes)
DTYPES: Mapping[str, tuple[str, int]] = MappingProxyType(
    {
        "F64": ("float64", 8),
        "F32": ("float32", 4),
        "F16": ("float16", 2),
        "BF16": ("bfloat16", 2),
        "F8_E4M3": ("float8_e4m3fn", 1),
        "F8_E5M2": ("float8_e5m2", 1),
        "I64": ("int64", 8),
        "I32": ("int32", 4),
        "I16": ("int16", 2),
        "I8": ("int8", 1),
        "U64": ("uint64", 8),
        "U32": ("uint32", 4),
        "U16": ("uint16", 2),
        "U8": ("uint8", 1),
        "BOOL": ("bool", 1),
    }
)
# The dtypes numpy has only through ml_dtypes.
ML_DTYPES = frozenset({"bfloat16", "float8_e4m3fn", "float8_e5m2"})
_PAIR = len(("begin", "end"))
_ENTRY_KEYS = frozenset({"dtype", "shape", "data_offsets"})
_FIX = "re-fetch the file from its pinned source; if the source itself is hostile, report it"


def _fail(artifact: str, rule: str, message: str) -> UnsafeArrayError:
    return UnsafeArrayError(artifact, rule, message, fix=_FIX)


@dataclass(frozen=True, slots=True)
class TensorInfo:
    """One checked header entry: where a tensor's bytes are in the data section."""

    name: str
    dtype: str  # the numpy name (``float32``, ``bfloat16``)
    shape: tuple[int, ...]
    begin: int
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.begin

    def spec(self) -> dict[str, Any]:
        """This tensor's entry of a record's ``arrays`` manifest."""
        return {"dtype": self.dtype, "shape": list(self.shape)}


@dataclass(frozen=True, slots=True)
class Header:
    """A checked header: the tensors, the metadata, and where the data section starts."""

    tensors: Mapping[str, TensorInfo]
    metadata: Mapping[str, str]
    data_offset: int

    def manifest(self) -> dict[str, dict[str, Any]]:
        """The ``arrays`` manifest a record of this file carries: name -> dtype, shape."""
        return {name: info.spec() for name, info in self.tensors.items()}


def read_header(path: Source, limits: Limits = DEFAULT, *, artifact: str | None = None) -> Header:
    """Read and check the header of the safetensors file at ``path`` (or a store object,
    pinned: :func:`~fixture_store.readers.pinned.pin_object`) against its size."""
    label = label_of(path, artifact)
    with pin(path, label) as pinned:
        return parse_header(pinned.file, pinned.size, limits, label)


def parse_header(stream: BinaryIO, size: int, limits: Limits, artifact: str) -> Header:
    """Check the header at the start of ``stream``, a file of ``size`` bytes."""
    prefix = stream.read(PREFIX_BYTES)
    if len(prefix) != PREFIX_BYTES:
        raise _fail(artifact, "truncated", f"{len(prefix)} bytes: no 8-byte header length")
    (length,) = struct.unpack("<Q", prefix)
    if length > limits.metadata_bytes:
        raise _fail(
            artifact,
            "metadata-size",
            f"header of {length} bytes exceeds the profile's {limits.metadata_bytes}",
        )
    if length > size - PREFIX_BYTES:
        raise _fail(
            artifact,
            "safetensors-header-length",
            f"header length {length} runs past the end of the file "
            f"({size - PREFIX_BYTES} bytes after the length)",
        )
    raw = stream.read(length)
    if len(raw) != length:
        raise _fail(artifact, "truncated", f"header is truncated: {len(raw)} of {length} bytes")
    if not raw.startswith(b"{"):
        raise _fail(artifact, "safetensors-header-start", "the header does not begin with '{'")
    # JSON text that begins with '{' and parses is an object.
    doc: dict[str, Any] = read_metadata(raw, limits, artifact=artifact)
    metadata = _metadata(doc.pop(METADATA_KEY, {}), artifact)
    if len(doc) > limits.tensor_count:
        raise _fail(
            artifact,
            "tensor-count",
            f"{len(doc)} tensors exceed the profile's {limits.tensor_count}",
        )
    tensors = [_entry(name, raw_entry, limits, artifact) for name, raw_entry in doc.items()]
    data_offset = PREFIX_BYTES + length
    _check_layout(tensors, size - data_offset, limits, artifact)
    return Header(
        MappingProxyType({t.name: t for t in tensors}), MappingProxyType(metadata), data_offset
    )


def _metadata(raw: object, artifact: str) -> dict[str, str]:
    if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
        raise _fail(
            artifact, "safetensors-metadata", f"{METADATA_KEY} must be a map of strings to strings"
        )
    return raw


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _entry(name: str, raw: object, limits: Limits, artifact: str) -> TensorInfo:
    where = f"tensor {name!r}"
    if not isinstance(raw, dict) or set(raw) != _ENTRY_KEYS:
        raise _fail(
            artifact,
            "safetensors-header",
            f"{where} must be exactly {{dtype, shape, data_offsets}}",
        )
    dtype = raw["dtype"]
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise _fail(
            artifact,
            "safetensors-dtype",
            f"{where}: dtype {dtype!r} is not one of {', '.join(DTYPES)}",
        )
    shape = _shape(raw["shape"], where, limits, artifact)
    offsets = raw["data_offsets"]
    if not (isinstance(offsets, list) and len(offsets) == _PAIR and all(map(_is_count, offsets))):
        raise _fail(
            artifact, "safetensors-header", f"{where}: data_offsets must be [begin, end] integers"
        )
    begin, end = offsets
    if end < begin:
        raise _fail(artifact, "safetensors-bounds", f"{where} ends ({end}) before it begins")
    numpy_name, itemsize = DTYPES[dtype]
    nbytes = math.prod(shape) * itemsize
    if nbytes > limits.tensor_bytes:
        raise _fail(
            artifact,
            "tensor-bytes",
            f"{where} of {nbytes} bytes exceeds the profile's {limits.tensor_bytes}",
        )
    if end - begin != nbytes:
        raise _fail(
            artifact,
            "safetensors-length",
            f"{where} spans {end - begin} bytes; shape {list(shape)} of {dtype} is {nbytes}",
        )
    return TensorInfo(name, numpy_name, shape, begin, end)


def _shape(raw: object, where: str, limits: Limits, artifact: str) -> tuple[int, ...]:
    if not isinstance(raw, list) or not all(map(_is_count, raw)):
        raise _fail(
            artifact, "safetensors-header", f"{where}: shape must be a list of integers >= 0"
        )
    if len(raw) > limits.tensor_rank:
        raise _fail(
            artifact,
            "tensor-rank",
            f"{where}: rank {len(raw)} exceeds the profile's {limits.tensor_rank}",
        )
    for d in raw:
        if d > limits.tensor_dimension:
            raise _fail(
                artifact,
                "tensor-dimension",
                f"{where}: dimension {d} exceeds the profile's {limits.tensor_dimension}",
            )
    return tuple(raw)


def _check_layout(
    tensors: list[TensorInfo], data_bytes: int, limits: Limits, artifact: str
) -> None:
    """The tensors tile the data section exactly: in bounds, no overlap, no hole, nothing after."""
    total = sum(t.nbytes for t in tensors)
    if total > limits.total_array_bytes:
        raise _fail(
            artifact,
            "total-array-bytes",
            f"tensors total {total} bytes, more than the profile's {limits.total_array_bytes}",
        )
    cursor = 0
    for t in sorted(tensors, key=lambda t: (t.begin, t.end)):
        if t.end > data_bytes:
            raise _fail(
                artifact,
                "safetensors-bounds",
                f"tensor {t.name!r} ends at {t.end}, past the data section of {data_bytes} bytes",
            )
        if t.begin < cursor:
            raise _fail(
                artifact,
                "safetensors-overlap",
                f"tensor {t.name!r} begins at {t.begin}, inside the tensor before it (to {cursor})",
            )
        if t.begin > cursor:
            raise _fail(
                artifact,
                "safetensors-hole",
                f"bytes {cursor}..{t.begin} before tensor {t.name!r} belong to no tensor",
            )
        cursor = t.end
    if cursor != data_bytes:
        raise _fail(
            artifact,
            "trailing-data",
            f"{data_bytes - cursor} bytes after the last tensor belong to no tensor",
        )


def check_manifest(
    header: Header, manifest: Mapping[str, Mapping[str, Any]], *, artifact: str
) -> None:
    """Names, dtypes and shapes exactly as a record's ``arrays`` manifest says."""
    extra = sorted(set(header.tensors) - set(manifest))
    if extra:
        raise _fail(artifact, "manifest-extra", f"tensors not in the manifest: {extra}")
    missing = sorted(set(manifest) - set(header.tensors))
    if missing:
        raise _fail(artifact, "manifest-missing", f"tensors missing from the file: {missing}")
    for name in sorted(manifest):
        info, spec = header.tensors[name], manifest[name]
        if info.dtype != spec["dtype"]:
            raise _fail(
                artifact,
                "manifest-dtype",
                f"tensor {name!r} is {info.dtype}; the manifest says {spec['dtype']!r}",
            )
        if list(info.shape) != list(spec["shape"]):
            raise _fail(
                artifact,
                "manifest-shape",
                f"tensor {name!r} has shape {list(info.shape)}; the manifest says "
                f"{list(spec['shape'])}",
            )


def check(
    path: Source,
    limits: Limits = DEFAULT,
    manifest: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    artifact: str | None = None,
) -> Header:
    """The checked header of the file at ``path``, matched against ``manifest`` when given.

    Every byte of tensor data is a valid value of an allowed dtype, so the header is the whole
    of what can be hostile: the data section is never read here.
    """
    label = label_of(path, artifact)
    header = read_header(path, limits, artifact=label)
    if manifest is not None:
        check_manifest(header, manifest, artifact=label)
    return header


def numpy_dtype(name: str, *, artifact: str, tensor: str) -> np.dtype[Any]:
    """The numpy dtype of a manifest dtype name; bfloat16 and float8 through ml_dtypes."""
    if name not in ML_DTYPES:
        return np.dtype(name)
    # ml_dtypes is no core dependency; the onnx extra is the one that brings it.
    require(
        "onnx", for_what=f"reading {name} tensor {tensor!r} of {artifact}", modules=("ml_dtypes",)
    )
    import ml_dtypes

    dtype: np.dtype[Any] = np.dtype(getattr(ml_dtypes, name))
    return dtype


def tensor_at(buffer: Any, header: Header, name: str, *, artifact: str) -> np.ndarray[Any, Any]:
    """Tensor ``name`` of a checked file whose bytes are ``buffer`` (a memory map, or the bytes
    in memory): a read-only array over them, nothing copied."""
    info = header.tensors[name]
    dtype = numpy_dtype(info.dtype, artifact=artifact, tensor=name)
    if info.nbytes == 0:
        empty: np.ndarray[Any, Any] = np.empty(info.shape, dtype)
        empty.flags.writeable = False
        return empty
    flat: np.ndarray[Any, Any] = np.frombuffer(
        buffer, dtype=dtype, count=math.prod(info.shape), offset=header.data_offset + info.begin
    )
    return flat.reshape(info.shape)


class Tensors(Mapping[str, "np.ndarray[Any, Any]"]):
    """The tensors of one checked file, by name: each read when it is asked for (nothing is
    read before) into a read-only array of its own, from the file as it was when its header
    was checked (``pinned``); a file changed since is a clear error (see :mod:`.pinned`)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        header: Header,
        *,
        artifact: str,
        pinned: PinnedFile | None = None,
    ) -> None:
        self.path = Path(path)
        self.header = header
        self.artifact = artifact
        self.pinned = pinned if pinned is not None else PinnedFile(path, artifact)

    @property
    def metadata(self) -> Mapping[str, str]:
        return self.header.metadata

    def __getitem__(self, key: str) -> np.ndarray[Any, Any]:
        info = self.header.tensors[key]
        data = self.pinned.read(self.header.data_offset + info.begin, info.nbytes)
        dtype = numpy_dtype(info.dtype, artifact=self.artifact, tensor=key)
        flat: np.ndarray[Any, Any] = np.frombuffer(data, dtype=dtype, count=math.prod(info.shape))
        array = flat.reshape(info.shape)
        array.flags.writeable = False
        return array

    def close(self) -> None:
        """Close the file (taking a tensor after it is an error)."""
        self.pinned.close()

    def __iter__(self) -> Iterator[str]:
        return iter(self.header.tensors)

    def __len__(self) -> int:
        return len(self.header.tensors)

    def __repr__(self) -> str:
        return f"Tensors({self.artifact!r}, {len(self)} tensors)"


def open_tensors(
    path: Source,
    limits: Limits = DEFAULT,
    manifest: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    artifact: str | None = None,
) -> Tensors:
    """The checked file at ``path`` as a lazy, read-only mapping of its tensors, read from the
    file its header was checked in (a store object comes pinned: see
    :func:`~fixture_store.readers.pinned.pin_object`)."""
    label = label_of(path, artifact)
    pinned = pin(path, label)
    try:
        header = parse_header(pinned.file, pinned.size, limits, label)
        if manifest is not None:
            check_manifest(header, manifest, artifact=label)
    except BaseException:
        pinned.close()
        raise
    return Tensors(pinned.path, header, artifact=label, pinned=pinned)


__all__ = [
    "DTYPES",
    "ML_DTYPES",
    "Header",
    "TensorInfo",
    "Tensors",
    "check",
    "check_manifest",
    "numpy_dtype",
    "open_tensors",
    "parse_header",
    "read_header",
    "tensor_at",
]
