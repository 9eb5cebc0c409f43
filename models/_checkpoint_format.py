"""The checkpoint archive: a deterministic tar of .npy tensors plus a metadata member.

Same tensors and metadata give byte-identical archives: members in a fixed order (metadata.json,
then tensors sorted by name), mtime 0, uid/gid 0, no user or group names, mode 0644, USTAR headers,
and fixed compressor settings. Used by the converter (writer) and by the JAX implementation
(reader); both run in pinned environments, so this module needs only numpy, lz4 and zstandard.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Mapping
from typing import Any

import lz4.frame
import numpy as np
import zstandard

FORMAT = "fixture-store.checkpoint/1"
METADATA = "metadata.json"
ZSTD_LEVEL = 19
LZ4_LEVEL = 9
MAX_ARCHIVE_BYTES = 64 << 20
MAX_MEMBERS = 64


def npy_bytes(array: np.ndarray[Any, Any]) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.ascontiguousarray(array), version=(1, 0), allow_pickle=False)
    return buf.getvalue()


def _member(name: str, data: bytes) -> tuple[tarfile.TarInfo, io.BytesIO]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = 0
    info.mode = 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.type = tarfile.REGTYPE
    return info, io.BytesIO(data)


def tar_bytes(tensors: Mapping[str, np.ndarray[Any, Any]], metadata: Mapping[str, Any]) -> bytes:
    """The uncompressed archive; ``metadata`` gains the tensor manifest."""
    blobs = {name: npy_bytes(tensors[name]) for name in sorted(tensors)}
    manifest = {
        name: {
            "member": f"tensors/{name}.npy",
            "dtype": str(tensors[name].dtype),
            "shape": list(tensors[name].shape),
            "sha256": hashlib.sha256(blob).hexdigest(),
            "size": len(blob),
        }
        for name, blob in blobs.items()
    }
    meta = {**metadata, "format": FORMAT, "tensors": manifest}
    meta_bytes = (json.dumps(meta, indent=1, sort_keys=True) + "\n").encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        tar.addfile(*_member(METADATA, meta_bytes))
        for name, blob in blobs.items():
            tar.addfile(*_member(f"tensors/{name}.npy", blob))
    return buf.getvalue()


def compress(raw: bytes, codec: str) -> bytes:
    if codec == "zst":
        return zstandard.ZstdCompressor(
            level=ZSTD_LEVEL, write_content_size=True, write_checksum=True, threads=0
        ).compress(raw)
    if codec == "lz4":
        packed: bytes = lz4.frame.compress(
            raw, compression_level=LZ4_LEVEL, content_checksum=True, store_size=True
        )
        return packed
    raise ValueError(f"unknown codec {codec!r}")


class CheckpointError(Exception):
    """The archive does not match its own manifest or breaks the reading limits."""


def read(data: bytes, codec: str) -> tuple[dict[str, Any], dict[str, np.ndarray[Any, Any]]]:
    """Metadata and tensors of an archive, refusing anything its manifest does not list."""
    meta: dict[str, Any] | None = None
    tensors: dict[str, np.ndarray[Any, Any]] = {}
    seen: set[str] = set()
    with tarfile.open(fileobj=io.BytesIO(_decompress(data, codec)), mode="r:") as tar:
        for i, info in enumerate(tar):
            blob = _member_bytes(tar, info, i, seen)
            if i == 0:
                meta = _metadata(info, blob)
                continue
            assert meta is not None
            name, array = _tensor(meta, info, blob)
            tensors[name] = array
    if meta is None:
        raise CheckpointError("empty archive")
    missing = set(meta["tensors"]) - set(tensors)
    if missing:
        raise CheckpointError(f"truncated: tensors {sorted(missing)} are missing")
    return meta, tensors


def _decompress(data: bytes, codec: str) -> bytes:
    if len(data) > MAX_ARCHIVE_BYTES:
        raise CheckpointError(f"archive is {len(data)} bytes, over {MAX_ARCHIVE_BYTES}")
    if codec == "zst":
        return zstandard.ZstdDecompressor().decompress(data, max_output_size=MAX_ARCHIVE_BYTES)
    raw: bytes = lz4.frame.decompress(data)
    return raw


def _member_bytes(tar: tarfile.TarFile, info: tarfile.TarInfo, i: int, seen: set[str]) -> bytes:
    """The bytes of member ``i``, a plain file whose name is new (kept in ``seen``)."""
    if i >= MAX_MEMBERS:
        raise CheckpointError("too many members")
    if (
        not info.isreg()
        or info.name in seen
        or info.name.startswith("/")
        or (".." in info.name.split("/"))
    ):
        raise CheckpointError(f"member {info.name!r} is not a plain, unique file")
    seen.add(info.name)
    f = tar.extractfile(info)
    assert f is not None
    return f.read()


def _metadata(info: tarfile.TarInfo, blob: bytes) -> dict[str, Any]:
    """The first member: the metadata, in this format."""
    if info.name != METADATA:
        raise CheckpointError(f"first member is {info.name!r}, not {METADATA}")
    meta: dict[str, Any] = json.loads(blob)
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"unknown format {meta.get('format')!r}")
    return meta


def _tensor(
    meta: Mapping[str, Any], info: tarfile.TarInfo, blob: bytes
) -> tuple[str, np.ndarray[Any, Any]]:
    """A tensor member, as its manifest entry describes it (name, digest, dtype and shape)."""
    entry = {e["member"]: (n, e) for n, e in meta["tensors"].items()}.get(info.name)
    if entry is None:
        raise CheckpointError(f"member {info.name!r} is not in the manifest")
    name, spec = entry
    if hashlib.sha256(blob).hexdigest() != spec["sha256"]:
        raise CheckpointError(f"tensor {name!r} does not match its manifest digest")
    array = np.load(io.BytesIO(blob), allow_pickle=False)
    if str(array.dtype) != spec["dtype"] or list(array.shape) != spec["shape"]:
        raise CheckpointError(f"tensor {name!r} has the wrong dtype or shape")
    return name, array
