"""What a zip stores twice must agree: end records, central entries, local headers, descriptors.

zipfile reads a member's name, sizes and CRC from the central directory; unzip and bsdtar also
read the local header, its extra fields (a zip64 size, an Info-ZIP Unicode path) and the data
descriptor, and refuse a central directory or end record that lies about its length or its disks.
The differential tests (``tests/readers/archives/test_differential.py``) found each of these read
differently; here every copy must match the central directory, or the archive is refused.
"""

from __future__ import annotations

import struct
import zipfile
from typing import BinaryIO, NamedTuple

from fixture_store.readers.archives._common import fail

_ZIP_CENTRAL_MAGIC = b"PK\x01\x02"
_ZIP_CENTRAL_LEN = 46  # a central directory entry, before its name, extra and comment
_ZIP64_LOCATOR_LEN = 20
_ZIP64_END_LEN = 56  # the zip64 end record, before its extensible data
_ZIP64_END_MAGIC = b"PK\x06\x06"
_ZIP64_LOCATOR_MAGIC = b"PK\x06\x07"
_ZIP_DESCRIPTOR_MAGIC = b"PK\x07\x08"
_ZIP_DESCRIPTOR_FLAG = 0x8
_ZIP64_EXTRA = 0x0001
_UNICODE_PATH_EXTRA = 0x7075
_MAX32 = 0xFFFFFFFF
# The newest zip version unzip 6.0 extracts ("can do v4.6"); stored and deflated need at most 4.5.
_UNZIP_VERSION = 46


class ZipEnd(NamedTuple):
    """What the end records say: where the central directory ends, how many entries it has."""

    central_end: int
    entries: int


def read_zip_end(f: BinaryIO, at: int, label: str) -> ZipEnd:
    """The end record at ``at`` (and its zip64 record, if located): one disk only."""
    f.seek(at + 4)
    disk, cd_disk, on_disk, entries = struct.unpack("<HHHH", f.read(8))
    end = ZipEnd(at, entries)
    if at >= _ZIP64_LOCATOR_LEN:
        f.seek(at - _ZIP64_LOCATOR_LEN)
        locator = f.read(_ZIP64_LOCATOR_LEN)
        if locator[:4] == _ZIP64_LOCATOR_MAGIC:
            (offset,) = struct.unpack("<Q", locator[8:16])
            f.seek(offset)
            record = f.read(_ZIP64_END_LEN)
            if len(record) < _ZIP64_END_LEN or record[:4] != _ZIP64_END_MAGIC:
                raise fail(label, "corrupt", "the zip64 end record is missing")
            disk, cd_disk, on_disk, entries = struct.unpack("<IIQQ", record[16:40])
            end = ZipEnd(offset, entries)
    if disk or cd_disk or on_disk != entries:
        # unzip refuses a multi-part archive that zipfile would read.
        raise fail(label, "corrupt", "a multi-part zip archive (its end record names other disks)")
    return end


def check_zip_central(zf: zipfile.ZipFile, f: BinaryIO, end: ZipEnd, label: str) -> None:
    """The central directory holds exactly the entries the end record counts, nothing else.

    zipfile trusts an entry's declared lengths as far as the directory goes (a comment length
    may swallow what follows); unzip and bsdtar refuse such a directory.
    """
    infos = zf.infolist()
    at, count = zf.start_dir, 0
    while at < end.central_end:
        f.seek(at)
        head = f.read(_ZIP_CENTRAL_LEN)
        if len(head) < _ZIP_CENTRAL_LEN or head[:4] != _ZIP_CENTRAL_MAGIC:
            break
        nlen, xlen, clen = struct.unpack("<HHH", head[28:34])
        at += _ZIP_CENTRAL_LEN + nlen + xlen + clen
        count += 1
    if not count == len(infos) == end.entries or at != end.central_end:
        raise fail(
            label,
            "corrupt",
            f"the central directory holds {count} entries ending at {at}; the end record says "
            f"{end.entries} entries ending at {end.central_end}",
        )
    if any(i.volume for i in infos):
        raise fail(label, "corrupt", "a multi-part zip archive (a member is on another disk)")


def _raw_name(info: zipfile.ZipInfo) -> bytes:
    """The name's bytes as the central directory stores them."""
    return info.orig_filename.encode("utf-8" if info.flag_bits & 0x800 else "cp437")


def _extras(data: bytes, name: str, label: str) -> list[tuple[int, bytes]]:
    """The (id, body) fields of an extra field; one overrunning it is refused, as bsdtar does.

    Fewer than 4 bytes left (alignment padding) are not a field, for bsdtar as for zipfile.
    """
    out, at = [], 0
    while at + 4 <= len(data):
        kind, n = struct.unpack("<HH", data[at : at + 4])
        if at + 4 + n > len(data):
            raise fail(label, "corrupt", f"member {name!r}: an extra field overruns its space")
        out.append((kind, data[at + 4 : at + 4 + n]))
        at += 4 + n
    return out


def check_zip_local(info: zipfile.ZipInfo, f: BinaryIO, local: bytes, label: str) -> bool:
    """Check a local header (``local``, its 30 fixed bytes; ``f`` just past them).

    Its name, Unicode path extras, CRC and sizes (from a zip64 extra when the fields are full)
    must be the central directory's. Returns whether its extra field carries zip64 sizes (then a
    data descriptor holds 8-byte sizes).
    """
    name = info.filename
    (flags,) = struct.unpack("<H", local[6:8])
    crc, csize, usize, nlen, xlen = struct.unpack("<IIIHH", local[14:30])
    raw = _raw_name(info)
    needed = max(info.extract_version, local[4])
    if needed > _UNZIP_VERSION:
        raise fail(label, "method", f"member {name!r} needs zip version {needed / 10:.1f}")
    local_name, local_extra = f.read(nlen), f.read(xlen)
    if len(local_extra) != xlen:
        raise fail(label, "corrupt", f"member {name!r}: truncated local header")
    if local_name != raw:
        raise fail(
            label, "name-mismatch", f"member {name!r} is named {local_name!r} in its local header"
        )
    if "\0" in info.orig_filename:
        # zipfile and unzip cut the name at the NUL, other readers may not.
        raise fail(label, "member-path", f"member {name!r} has a NUL byte in its name")
    local_fields = _extras(local_extra, name, label)
    for kind, body in [*_extras(info.extra, name, label), *local_fields]:
        if kind == _UNICODE_PATH_EXTRA and body[5:] != raw:
            raise fail(
                label,
                "name-mismatch",
                f"member {name!r} is named {body[5:]!r} in a Unicode path extra field",
            )
    zip64 = [body for kind, body in local_fields if kind == _ZIP64_EXTRA]
    if (flags ^ info.flag_bits) & _ZIP_DESCRIPTOR_FLAG:
        raise fail(label, "corrupt", f"member {name!r}: headers disagree on a data descriptor")
    if not flags & _ZIP_DESCRIPTOR_FLAG:
        sizes = [usize, csize]
        if _MAX32 in sizes and zip64:
            body = zip64[0]
            values = iter(struct.unpack(f"<{len(body) // 8}Q", body[: len(body) // 8 * 8]))
            sizes = [next(values, -1) if v == _MAX32 else v for v in sizes]
        if crc != info.CRC or sizes != [info.file_size, info.compress_size]:
            raise fail(
                label,
                "size-lie" if crc == info.CRC else "corrupt",
                f"member {name!r}: local header sizes or CRC differ from the central directory",
            )
    return bool(zip64)


def check_zip_descriptor(
    info: zipfile.ZipInfo, f: BinaryIO, at: int, zip64: bool, label: str
) -> int:
    """Check the data descriptor at ``at`` against the central directory; return its length."""
    fmt = "<IQQ" if zip64 else "<III"
    n = struct.calcsize(fmt)
    f.seek(at)
    raw = f.read(n + 4)
    signed = raw[:4] == _ZIP_DESCRIPTOR_MAGIC
    body = raw[4:] if signed else raw[:n]
    if len(body) < n:
        raise fail(label, "corrupt", f"member {info.filename!r}: truncated data descriptor")
    if struct.unpack(fmt, body) != (info.CRC, info.compress_size, info.file_size):
        raise fail(
            label,
            "size-lie",
            f"member {info.filename!r}: data descriptor differs from the central directory",
        )
    return n + (4 if signed else 0)


def deflate_ended(reader: object) -> bool:
    """Whether a member's deflate stream ended exactly with its compressed bytes.

    zipfile stops at the declared size even when the stream lacks its final block (and ignores
    bytes after a final block); unzip and bsdtar refuse both. zipfile keeps the decompressor in
    private attributes: without them every deflated member is refused, never one let through.
    """
    dec = getattr(reader, "_decompressor", None)
    left = getattr(reader, "_compress_left", None)
    return bool(getattr(dec, "eof", False)) and not getattr(dec, "unused_data", b"x") and left == 0
