"""Builders of hostile inputs: the corpus is made here by code, never shipped as bytes."""

from __future__ import annotations

import io
import struct
import tarfile
import zipfile
import zlib
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


# -- raw tar headers: names stored in more than one place ----------------------------------------
USTAR_MAGIC = b"ustar\x0000"
GNU_MAGIC = b"ustar  \x00"


def raw_tar_header(
    name: bytes,
    size: int = 0,
    kind: bytes = tarfile.REGTYPE,
    *,
    prefix: bytes = b"",
    magic: bytes = USTAR_MAGIC,
) -> bytes:
    """One 512-byte tar header block with exactly these fields (and a valid checksum)."""
    block = bytearray(tarfile.BLOCKSIZE)
    block[0 : len(name)] = name
    block[100:108] = b"0000644\0"
    block[108:116] = block[116:124] = b"0000000\0"
    block[124:136] = b"%011o\0" % size
    block[136:148] = b"%011o\0" % 0
    block[156:157] = kind
    block[257:265] = magic
    block[345 : 345 + len(prefix)] = prefix
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block)
    return bytes(block)


def tar_pad(data: bytes) -> bytes:
    return data + bytes(-len(data) % tarfile.BLOCKSIZE)


def pax_record(key: bytes, value: bytes) -> bytes:
    body = b" %s=%s\n" % (key, value)
    n = len(body)
    while len(str(n)) + len(body) != n:
        n = len(str(n)) + len(body)
    return str(n).encode() + body


def tar_extended(kind: bytes, payload: bytes) -> bytes:
    """A pax ('x', global 'g') or GNU long-name ('L') header and its payload."""
    name = b"././@LongLink" if kind == tarfile.GNUTYPE_LONGNAME else b"PaxHeader/x"
    return raw_tar_header(name, len(payload), kind) + tar_pad(payload)


def tar_member(name: bytes, data: bytes, **fields: bytes) -> bytes:
    return raw_tar_header(name, len(data), **fields) + tar_pad(data)


TAR_END = bytes(2 * tarfile.BLOCKSIZE)


# -- zip names in the local header, the central directory and the Unicode path extra -------------
def zip_rename_local(data: bytes, name: str, new: bytes) -> bytes:
    """The zip with ``name``'s local header naming ``new`` (same length) instead."""
    at = zip_local(data, name) + 30
    assert len(new) == len(name.encode())
    return data[:at] + new + data[at + len(new) :]


def unicode_path_extra(name: bytes, header_name: bytes) -> bytes:
    """An Info-ZIP Unicode Path extra field (0x7075) naming ``name`` for ``header_name``."""
    body = b"\x01" + struct.pack("<I", zlib.crc32(header_name)) + name
    return struct.pack("<HH", 0x7075, len(body)) + body


def tar_set_field(data: bytes, header_at: int, start: int, value: bytes) -> bytes:
    """``data`` with one field of the header block at ``header_at`` replaced, checksum redone."""
    block = bytearray(data[header_at : header_at + tarfile.BLOCKSIZE])
    block[start : start + len(value)] = value
    if not 148 <= start < 156:
        block[148:156] = b" " * 8
        block[148:156] = b"%06o\0 " % sum(block)
    return data[:header_at] + bytes(block) + data[header_at + tarfile.BLOCKSIZE :]


def zip_single(name: str, payload: bytes, method: int, crc: int, size: int) -> bytes:
    """A one-member zip around ``payload`` exactly as given (compressed bytes, CRC, size)."""
    raw = name.encode()
    fields = struct.pack("<HHHHIIIH", 0, method, 0, 0x21, crc, len(payload), size, len(raw))
    local = b"PK\x03\x04" + struct.pack("<H", 20) + fields + struct.pack("<H", 0) + raw
    central = (
        b"PK\x01\x02"
        + struct.pack("<HH", 0x0314, 20)  # made by Unix
        + fields
        + struct.pack("<HHHHII", 0, 0, 0, 0, 0o100644 << 16, 0)
        + raw
    )
    start = len(local) + len(payload)
    end = b"PK\x05\x06" + struct.pack("<HHHHIIH", 0, 0, 1, 1, len(central), start, 0)
    return local + payload + central + end
