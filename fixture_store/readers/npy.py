"""Safe tensor readers: NPY and NPZ under a limits profile (DESIGN decision 6).

Every header is parsed and checked before a single byte of payload is allocated: format version
1-3 only, a plain numeric/bool/fixed-width-string dtype (no object, structured or subarray dtypes,
so pickles can never load), rank, dimension, element bytes and tensor count within the profile.
The payload must be exactly as long as the header says: shorter is truncation, longer is trailing
data. Files on disk are memory-mapped read-only where the layout allows it.
"""

from __future__ import annotations

import ast
import functools
import io
import math
import os
import struct
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np

from fixture_store.errors import UnsafeArrayError
from fixture_store.limits import DEFAULT, Limits
from fixture_store.readers.formats import NPY_MAGIC as MAGIC
from fixture_store.readers.pinned import PinnedFile, Source, label_of, pin
from fixture_store.registry import nesting

_PREFIX = len(MAGIC) + 2
_HEADER_KEYS = {"descr", "fortran_order", "shape"}
# Kinds whose bytes are plain values: bool, signed, unsigned, float, complex, bytes, unicode.
_PLAIN_KINDS = frozenset("biufcSU")


@dataclass(frozen=True)
class NpyHeader:
    """A checked NPY header: what the payload must be."""

    version: tuple[int, int]
    dtype: np.dtype[Any]
    shape: tuple[int, ...]
    fortran_order: bool
    data_offset: int

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


def _fail(artifact: str, rule: str, message: str) -> UnsafeArrayError:
    return UnsafeArrayError(
        artifact,
        rule,
        message,
        fix="regenerate or re-fetch the artifact; the bytes do not satisfy its limits profile",
    )


def _read_exact(stream: BinaryIO, n: int, artifact: str, what: str) -> bytes:
    data = stream.read(n)
    if data is None or len(data) != n:
        got = 0 if data is None else len(data)
        raise _fail(artifact, "truncated", f"{what} is truncated: expected {n} bytes, got {got}")
    return data


def read_header(stream: BinaryIO, limits: Limits = DEFAULT, artifact: str = "<npy>") -> NpyHeader:
    """Read and check an NPY header from ``stream``; the stream is left at the payload."""
    prefix = _read_exact(stream, _PREFIX, artifact, "NPY magic and version")
    if prefix[: len(MAGIC)] != MAGIC:
        raise _fail(artifact, "npy-magic", "not an NPY file (bad magic bytes)")
    version = (prefix[6], prefix[7])
    if version not in ((1, 0), (2, 0), (3, 0)):
        raise _fail(
            artifact,
            "npy-version",
            f"NPY format version {version[0]}.{version[1]} is not 1.0, 2.0 or 3.0",
        )
    len_format = "<H" if version == (1, 0) else "<I"
    len_size = struct.calcsize(len_format)
    raw_len = _read_exact(stream, len_size, artifact, "NPY header length")
    (header_len,) = struct.unpack(len_format, raw_len)
    if header_len > limits.tensor_header_bytes:
        raise _fail(
            artifact,
            "npy-header-size",
            f"NPY header of {header_len} bytes exceeds the profile's {limits.tensor_header_bytes}",
        )
    raw = _read_exact(stream, header_len, artifact, "NPY header")
    try:
        text = raw.decode("utf-8" if version == (3, 0) else "latin1")
        header = _literal(text)
    except (
        UnicodeDecodeError,
        ValueError,
        SyntaxError,
        TypeError,
        MemoryError,
        RecursionError,
    ) as e:
        raise _fail(artifact, "npy-header", f"NPY header is not a Python literal: {e}") from None
    if not isinstance(header, dict) or set(header) != _HEADER_KEYS:
        raise _fail(
            artifact,
            "npy-header",
            "NPY header must be a dict with exactly descr, fortran_order and shape",
        )
    dtype = _check_dtype(header["descr"], artifact)
    fortran = header["fortran_order"]
    if not isinstance(fortran, bool):
        raise _fail(artifact, "npy-header", "fortran_order must be True or False")
    shape = _check_shape(header["shape"], limits, artifact)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > limits.tensor_bytes:
        raise _fail(
            artifact,
            "tensor-bytes",
            f"tensor of {nbytes} bytes exceeds the profile's {limits.tensor_bytes}",
        )
    return NpyHeader(version, dtype, shape, fortran, _PREFIX + len_size + header_len)


@functools.lru_cache(maxsize=64)
def _literal(text: str) -> Any:
    """The header's Python literal. literal_eval evaluates literals only: no names, calls or
    attribute access; hostile text makes the compiler warn (e.g. '1a') and the caller's refusal
    is the only report. Kept for the last headers seen: the members of an NPZ of many arrays
    usually share one header, and parsing it was a third of reading each small member (an error
    is raised again each time, never kept)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.literal_eval(text)


def _check_dtype(descr: object, artifact: str) -> np.dtype[Any]:
    if not isinstance(descr, str):
        # A list descr is a structured dtype: fields may hide objects, and nothing needs them.
        raise _fail(artifact, "npy-dtype", f"dtype {descr!r} is structured; only plain dtypes")
    try:
        with warnings.catch_warnings():
            # A deprecated alias ('a') is nothing np.save writes: refuse it like any unknown name.
            warnings.simplefilter("error", DeprecationWarning)
            dtype = np.dtype(descr)
    except (TypeError, ValueError, SyntaxError, DeprecationWarning) as e:
        raise _fail(artifact, "npy-dtype", f"dtype {descr!r} is not understood: {e}") from None
    if dtype.hasobject:
        raise _fail(artifact, "npy-object", f"dtype {descr!r} holds Python objects (a pickle)")
    if dtype.fields is not None or dtype.subdtype is not None:
        raise _fail(artifact, "npy-dtype", f"dtype {descr!r} is structured or a subarray")
    if dtype.kind not in _PLAIN_KINDS or dtype.itemsize <= 0:
        raise _fail(artifact, "npy-dtype", f"dtype {descr!r} is not a plain value dtype")
    return dtype


def plain_dtype(name: str, *, artifact: str) -> np.dtype[Any]:
    """The dtype a manifest names, held to the rule an NPY header's is (plain values only)."""
    return _check_dtype(name, artifact)


def _check_shape(shape: object, limits: Limits, artifact: str) -> tuple[int, ...]:
    if not isinstance(shape, tuple) or not all(
        isinstance(d, int) and not isinstance(d, bool) for d in shape
    ):
        raise _fail(artifact, "npy-header", f"shape {shape!r} is not a tuple of integers")
    if len(shape) > limits.tensor_rank:
        raise _fail(
            artifact, "tensor-rank", f"rank {len(shape)} exceeds the profile's {limits.tensor_rank}"
        )
    for d in shape:
        if d < 0:
            raise _fail(artifact, "npy-header", f"shape {shape!r} has a negative dimension")
        if d > limits.tensor_dimension:
            raise _fail(
                artifact,
                "tensor-dimension",
                f"dimension {d} exceeds the profile's {limits.tensor_dimension}",
            )
    return shape


def _from_buffer(
    header: NpyHeader, data: bytes | bytearray | np.ndarray[Any, Any]
) -> np.ndarray[Any, Any]:
    arr: np.ndarray[Any, Any] = np.frombuffer(
        data, dtype=header.dtype, count=math.prod(header.shape)
    )
    out: np.ndarray[Any, Any] = arr.reshape(
        list(header.shape), order="F" if header.fortran_order else "C"
    )
    out.flags.writeable = False
    return out


def read_npy_stream(
    stream: BinaryIO,
    limits: Limits = DEFAULT,
    artifact: str = "<npy>",
    expected: Mapping[str, Any] | None = None,
    *,
    allow_trailing: bool = False,
) -> np.ndarray[Any, Any]:
    """Read one NPY from a stream; the whole remaining stream must be exactly its payload."""
    header = read_header(stream, limits, artifact)
    if expected is not None:
        _check_spec(header.dtype, header.shape, expected, artifact)
    data = _read_exact(stream, header.nbytes, artifact, "NPY payload")
    if not allow_trailing and stream.read(1):
        raise _fail(
            artifact, "trailing-data", f"data after the NPY payload of {header.nbytes} bytes"
        )
    return _from_buffer(header, data)


def read_npy(
    source: str | os.PathLike[str] | BinaryIO | PinnedFile,
    limits: Limits = DEFAULT,
    expected: Mapping[str, Any] | None = None,
    *,
    artifact: str | None = None,
) -> np.ndarray[Any, Any]:
    """Read a checked NPY file or stream into a read-only array of its own.

    ``expected`` is one entry of a record's ``arrays`` manifest: ``{"dtype": ..., "shape": [...]}``.
    A file is read with ``pread`` from the file its header was checked in, never memory-mapped:
    one truncated or rewritten since is a clear error, never a ``SIGBUS`` (see :mod:`.pinned`).
    """
    if not isinstance(source, str | os.PathLike | PinnedFile):
        return read_npy_stream(source, limits, artifact or "<npy>", expected)
    label = label_of(source, artifact)
    with pin(source, label) as pinned:
        header = _checked_header(pinned, limits, expected, label)
        if header.nbytes == 0:
            return _from_buffer(header, b"")
        return _from_buffer(header, pinned.read(header.data_offset, header.nbytes))


def read_npy_rows(
    source: Source,
    limits: Limits,
    expected: Mapping[str, Any] | None,
    rows: tuple[int, int],
    *,
    artifact: str | None = None,
) -> np.ndarray[Any, Any]:
    """Rows ``[start, stop)`` of the first axis of a checked NPY file (``0 <= start <= stop <=``
    its first dimension: the caller's to check), read alone (``pread``) when the array is in C
    order; a Fortran-order array is read whole and sliced. A read-only array."""
    label = label_of(source, artifact)
    with pin(source, label) as pinned:
        header = _checked_header(pinned, limits, expected, label)
        start, stop = rows
        if header.fortran_order or not header.shape:
            whole = _from_buffer(header, pinned.read(header.data_offset, header.nbytes))
            return whole[start:stop]
        row = header.nbytes // header.shape[0] if header.shape[0] else 0
        shape = (stop - start, *header.shape[1:])
        data = pinned.read(header.data_offset + start * row, (stop - start) * row)
        out: np.ndarray[Any, Any] = np.frombuffer(data, header.dtype).reshape(shape)
        out.flags.writeable = False
        return out


def check_npy(
    path: Source,
    limits: Limits = DEFAULT,
    expected: Mapping[str, Any] | None = None,
    *,
    artifact: str | None = None,
) -> NpyHeader:
    """The checked header of the NPY file at ``path`` (against ``expected`` and the file's
    size); no byte of the payload is read. ``path`` may be a store object, pinned."""
    label = label_of(path, artifact)
    with pin(path, label) as pinned:
        return _checked_header(pinned, limits, expected, label)


def _checked_header(
    pinned: PinnedFile, limits: Limits, expected: Mapping[str, Any] | None, label: str
) -> NpyHeader:
    header = read_header(pinned.file, limits, label)
    if expected is not None:
        _check_spec(header.dtype, header.shape, expected, label)
    payload = pinned.size - header.data_offset
    if payload < header.nbytes:
        raise _fail(
            label,
            "truncated",
            f"NPY payload is truncated: header declares {header.nbytes} bytes, "
            f"file holds {payload}",
        )
    if payload > header.nbytes:
        raise _fail(
            label, "trailing-data", f"{payload - header.nbytes} bytes of data after the NPY payload"
        )
    return header


def read_npz(
    path: Source,
    limits: Limits = DEFAULT,
    manifest: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    artifact: str | None = None,
) -> dict[str, np.ndarray[Any, Any]]:
    """Read every array of a checked NPZ; with ``manifest`` the names, dtypes, shapes must match.

    The zip container is checked by :func:`fixture_store.readers.archives.open_zip`
    (no traversal, links,
    duplicates, overlaps, trailing garbage, size lies or bombs); each member must be ``<name>.npy``.
    """
    from fixture_store.readers.archives import open_zip, read_zip_member

    label = label_of(path, artifact)
    arrays: dict[str, np.ndarray[Any, Any]] = {}
    total = 0
    with open_zip(path, limits, label) as (zf, infos):
        if len(infos) > limits.tensor_count:
            raise _fail(
                label,
                "tensor-count",
                f"{len(infos)} tensors exceed the profile's {limits.tensor_count}",
            )
        for info in infos:
            if not info.filename.endswith(".npy") or "/" in info.filename:
                raise _fail(
                    label, "npz-member", f"member {info.filename!r} is not a top-level '<name>.npy'"
                )
            name = info.filename[: -len(".npy")]
            member_label = f"{label}:{info.filename}"
            data = read_zip_member(zf, info, label)
            spec = manifest.get(name) if manifest is not None else None
            if manifest is not None and spec is None:
                raise _fail(label, "manifest-extra", f"array {name!r} is not in the manifest")
            arr = read_npy_stream(io.BytesIO(data), limits, member_label, spec)
            total += arr.nbytes
            if total > limits.total_array_bytes:
                raise _fail(
                    label,
                    "total-array-bytes",
                    f"arrays total more than the profile's {limits.total_array_bytes} bytes",
                )
            arrays[name] = arr
    if manifest is not None:
        check_manifest(arrays, manifest, artifact=label)
    return arrays


def _check_spec(
    dtype: np.dtype[Any], shape: tuple[int, ...], spec: Mapping[str, Any], artifact: str
) -> None:
    try:
        want_dtype = np.dtype(spec["dtype"])
    except (TypeError, ValueError, KeyError) as e:
        raise _fail(
            artifact, "manifest", f"manifest dtype {spec.get('dtype')!r} is invalid: {e}"
        ) from None
    if dtype != want_dtype:
        raise _fail(
            artifact,
            "manifest-dtype",
            f"dtype {dtype.str} ({dtype.name}) differs from the manifest's {spec['dtype']!r}",
        )
    want_shape = tuple(spec.get("shape", ()))
    if shape != want_shape:
        raise _fail(
            artifact,
            "manifest-shape",
            f"shape {list(shape)} differs from the manifest's {list(want_shape)}",
        )


def check_manifest(
    arrays: Mapping[str, np.ndarray[Any, Any]],
    manifest: Mapping[str, Mapping[str, Any]],
    *,
    artifact: str = "<arrays>",
) -> None:
    """Names, dtypes and shapes exactly as the record's ``arrays`` manifest says."""
    extra = sorted(set(arrays) - set(manifest))
    if extra:
        raise _fail(artifact, "manifest-extra", f"arrays not in the manifest: {extra}")
    missing = sorted(set(manifest) - set(arrays))
    if missing:
        raise _fail(artifact, "manifest-missing", f"arrays missing from the file: {missing}")
    for name in sorted(manifest):
        arr = arrays[name]
        _check_spec(arr.dtype, tuple(arr.shape), manifest[name], f"{artifact}:{name}")


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def read_metadata(
    source: bytes | str | os.PathLike[str],
    limits: Limits = DEFAULT,
    *,
    artifact: str | None = None,
) -> Any:
    """Parse tensor metadata JSON: size-limited before reading, duplicate keys refused, and
    every value within the registry's bounds (names and strings that are Unicode text, integers
    of at most 20 digits, a few levels deep): a tensor name or metadata value becomes a record's
    field or a line of output, and must be one UTF-8 can write."""
    if isinstance(source, bytes):
        label = artifact or "<metadata>"
        if len(source) > limits.metadata_bytes:
            raise _fail(
                label,
                "metadata-size",
                f"metadata of {len(source)} bytes exceeds the profile's {limits.metadata_bytes}",
            )
        data = source
    else:
        label = artifact or str(source)
        with open(source, "rb") as f:
            data = f.read(limits.metadata_bytes + 1)
        if len(data) > limits.metadata_bytes:
            raise _fail(
                label,
                "metadata-size",
                f"metadata exceeds the profile's {limits.metadata_bytes} bytes",
            )
    try:
        doc, _ = nesting.loads(
            data.decode("utf-8"), object_pairs_hook=_no_duplicates, constants=False
        )
    except _DuplicateKey as e:
        key = nesting.quoted(e.args[0])
        raise _fail(label, "metadata-duplicate-key", f"duplicate key {key}") from None
    except ValueError as e:  # not UTF-8, not JSON, nested too deep
        raise _fail(label, "metadata-json", f"metadata is not valid JSON: {e}") from None
    flaw = nesting.first_flaw(doc)  # a small document: walked whole, for its depth too
    if flaw is not None:
        path, message = flaw
        raise _fail(label, "metadata-value", f"{_field(path)}: {message}")
    return doc


def _field(path: nesting.Path) -> str:
    """Where a value is in a metadata document, each key quoted (and escaped)."""
    return (
        "".join(p if p.startswith("[") else f"[{nesting.quoted(p)}]" for p in path)
        or "the document"
    )


__all__ = [
    "NpyHeader",
    "check_manifest",
    "check_npy",
    "plain_dtype",
    "read_header",
    "read_metadata",
    "read_npy",
    "read_npy_rows",
    "read_npy_stream",
    "read_npz",
]
