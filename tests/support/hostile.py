"""Builders of hostile inputs: the corpus is made here by code, never shipped as bytes."""

from __future__ import annotations

import io
import struct
import tarfile
import zipfile
from collections.abc import Iterable
from pathlib import Path

import lz4.frame
import zstandard

from fixture_store.objects import digests
from fixture_store.objects.digests import Digest


def npy_bytes(
    header: str,
    payload: bytes = b"",
    version: tuple[int, int] = (1, 0),
    *,
    header_len: int | None = None,
) -> bytes:
    """An NPY file with exactly this header text (padded with spaces and a newline)."""
    enc = header.encode("utf-8" if version == (3, 0) else "latin1")
    len_size = 2 if version == (1, 0) else 4
    pad = (-(8 + len_size + len(enc) + 1)) % 64
    text = enc + b" " * pad + b"\n"
    n = len(text) if header_len is None else header_len
    length = struct.pack("<H" if len_size == 2 else "<I", n)
    return b"\x93NUMPY" + bytes(version) + length + text + payload


def header(descr: str = "'<f4'", fortran: object = False, shape: str = "(2,)") -> str:
    return f"{{'descr': {descr}, 'fortran_order': {fortran}, 'shape': {shape}, }}"


def tar_info(
    name: str, size: int = 0, kind: bytes = tarfile.REGTYPE, linkname: str = ""
) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    info.type = kind
    info.linkname = linkname
    info.mode = 0o644
    info.mtime = 0
    return info


def tar_bytes(
    entries: Iterable[tuple[tarfile.TarInfo, bytes]], fmt: int = tarfile.PAX_FORMAT
) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tf:
        for info, data in entries:
            tf.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return buf.getvalue()


def regular_tar(members: dict[str, bytes]) -> bytes:
    return tar_bytes((tar_info(name, len(data)), data) for name, data in members.items())


def compress(data: bytes, how: str) -> bytes:
    if how == "tar.lz4":
        return bytes(lz4.frame.compress(data))
    if how == "tar.zst":
        return bytes(zstandard.ZstdCompressor().compress(data))
    return data


def zip_bytes(
    members: dict[str, bytes],
    method: int = zipfile.ZIP_STORED,
    infos: Iterable[zipfile.ZipInfo] = (),
) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=method) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        for info in infos:
            zf.writestr(info, b"target")
    return buf.getvalue()


def manifest(members: dict[str, bytes]) -> dict[str, Digest]:
    return {name: digests.of_bytes(data) for name, data in members.items()}


def files_under(root: Path) -> set[str]:
    """Every non-directory path under ``root`` (relative), lock files excluded."""
    return {
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if not p.is_dir() and "locks" not in p.relative_to(root).parts
    }


def zip_central(data: bytes, name: str) -> int:
    """Offset of ``name``'s central directory entry."""
    at = data.find(b"PK\x01\x02")
    while at >= 0:
        (nlen,) = struct.unpack("<H", data[at + 28 : at + 30])
        if data[at + 46 : at + 46 + nlen] == name.encode():
            return at
        at = data.find(b"PK\x01\x02", at + 4)
    raise KeyError(name)


def zip_local(data: bytes, name: str) -> int:
    (offset,) = struct.unpack("<I", data[zip_central(data, name) + 42 :][:4])
    return int(offset)


def patch(data: bytes, at: int, fmt: str, value: int) -> bytes:
    raw = struct.pack(fmt, value)
    return data[:at] + raw + data[at + len(raw) :]
