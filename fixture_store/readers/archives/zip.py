"""Zip container checks: a ``.zip``/``.npz`` is read through its central directory only after the
container is exactly what it claims.

No bytes before the first member or after the end record, no gaps or overlaps between members,
local and central headers agreeing, only stored or deflated members, no encryption, links or
devices; declared sizes are held to the profile before anything is inflated.
"""

from __future__ import annotations

import contextlib
import stat
import struct
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, NamedTuple

from fixture_store.limits import DEFAULT, Limits
from fixture_store.readers.archives._common import RATIO_FLOOR, RAW_CHUNK, fail
from fixture_store.readers.archives._members import Checker, MemberSink

# The signatures of a member's local header and of the end-of-central-directory record.
ZIP_LOCAL_MAGIC = b"PK\x03\x04"
ZIP_END_MAGIC = b"PK\x05\x06"
_ZIP_METHODS = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED}
_ZIP_ENCRYPTED = 0x1 | 0x40 | 0x2000
# Deflate options, data descriptor, UTF-8 names: everything else (patches, encryption) is refused.
_ZIP_FLAGS_OK = 0x2 | 0x4 | 0x8 | 0x800
# Sizes and CRC follow the data, in a descriptor that may start with this signature.
_ZIP_DESCRIPTOR_FLAG = 0x8
_ZIP_DESCRIPTOR_MAGIC = b"PK\x07\x08"
_ZIP_END_LEN = 22  # the end-of-central-directory record, before its comment
_ZIP_LOCAL_LEN = 30  # a local file header, before its name and extra field
_ZIP_SIZE_MAX = 0xFFFFFFFF  # a 4-byte size at its largest: the true size is in the ZIP64 extra


@contextlib.contextmanager
def open_zip(
    path: Path, limits: Limits = DEFAULT, artifact: str | None = None
) -> Iterator[tuple[zipfile.ZipFile, list[zipfile.ZipInfo]]]:
    """Open a zip after checking its container; yields the file members in stored order."""
    label = artifact or str(path)
    size = path.stat().st_size
    if size > limits.archive_bytes:
        raise fail(
            label,
            "archive-bytes",
            f"archive of {size} bytes exceeds the profile's {limits.archive_bytes}",
        )
    with open(path, "rb") as f:
        _check_zip_end(f, size, label)
        try:
            zf = zipfile.ZipFile(f)
        except (
            zipfile.BadZipFile,
            OSError,
            ValueError,
            NotImplementedError,
            struct.error,
            OverflowError,
            IndexError,
            KeyError,
        ) as e:
            raise fail(label, "corrupt", f"not a readable zip: {e}") from None
        with zf:
            infos = _check_zip_layout(zf, f, size, limits, label)
            yield zf, infos


def _check_zip_end(f: BinaryIO, size: int, label: str) -> None:
    tail_len = min(size, _ZIP_END_LEN + 0xFFFF)
    f.seek(size - tail_len)
    tail = f.read(tail_len)
    at = tail.rfind(ZIP_END_MAGIC)
    if at < 0 or len(tail) - at < _ZIP_END_LEN:
        raise fail(label, "corrupt", "no zip end-of-central-directory record")
    (comment_len,) = struct.unpack("<H", tail[at + 20 : at + 22])
    if at + _ZIP_END_LEN + comment_len != len(tail):
        raise fail(label, "trailing-garbage", "bytes after the zip end record")


class _LocalHeader(NamedTuple):
    """The fields of a member's local header that the checks compare or need."""

    flags: int
    method: int
    compress_size: int
    file_size: int
    name_len: int
    extra_len: int


def _check_zip_layout(
    zf: zipfile.ZipFile, f: BinaryIO, size: int, limits: Limits, label: str
) -> list[zipfile.ZipInfo]:
    infos = sorted(zf.infolist(), key=lambda i: i.header_offset)
    if len(infos) > limits.member_count:
        raise fail(
            label,
            "member-count",
            f"{len(infos)} members exceed the profile's {limits.member_count}",
        )
    expected_offset = 0
    declared = 0
    files: list[zipfile.ZipInfo] = []
    names: set[str] = set()
    for info in infos:
        local = _read_local_header(f, info, expected_offset, label)
        _check_zip_name(info, names, label)
        _check_zip_kind(info, label)
        _check_zip_storage(info, local, label)
        expected_offset = _member_end(f, info, local)
        declared = _count_declared(info, declared, limits, label)
        if info.is_dir():
            if info.file_size:
                raise fail(label, "corrupt", f"directory {info.filename!r} has content")
            continue
        files.append(info)
    _check_zip_tail(
        zf.start_dir, expected_offset, declared=declared, size=size, limits=limits, label=label
    )
    return files


def _read_local_header(
    f: BinaryIO, info: zipfile.ZipInfo, expected_offset: int, label: str
) -> _LocalHeader:
    """The member's local header, which must start where the previous member ended."""
    if info.header_offset != expected_offset:
        rule = "overlap" if info.header_offset < expected_offset else "gap"
        raise fail(
            label,
            rule,
            f"member {info.filename!r} starts at {info.header_offset}, expected "
            f"{expected_offset} (hidden or overlapping data)",
        )
    f.seek(info.header_offset)
    local = f.read(_ZIP_LOCAL_LEN)
    if len(local) < _ZIP_LOCAL_LEN or local[:4] != ZIP_LOCAL_MAGIC:
        raise fail(label, "corrupt", f"member {info.filename!r}: bad local header")
    flags, method = struct.unpack("<HH", local[6:10])
    csize, usize, nlen, xlen = struct.unpack("<IIHH", local[18:30])
    return _LocalHeader(flags, method, csize, usize, nlen, xlen)


def _check_zip_name(info: zipfile.ZipInfo, names: set[str], label: str) -> None:
    """A member has a name, and one no other member has; ``names`` collects them."""
    if not info.filename or info.filename == "/":
        raise fail(label, "member-path", "a member has an empty name")
    if info.filename in names:
        raise fail(label, "duplicate", f"member {info.filename!r} appears twice")
    names.add(info.filename)


def _check_zip_kind(info: zipfile.ZipInfo, label: str) -> None:
    """A member is a regular file or a folder: no links, no devices."""
    kind = stat.S_IFMT(info.external_attr >> 16)
    if kind == stat.S_IFLNK:
        raise fail(label, "symlink", f"member {info.filename!r} is a symbolic link")
    if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
        raise fail(label, "device", f"member {info.filename!r} is not a regular file")


def _check_zip_storage(info: zipfile.ZipInfo, local: _LocalHeader, label: str) -> None:
    """Stored or deflated, not encrypted, local and central headers agreeing."""
    flags = local.flags
    if (info.flag_bits | flags) & _ZIP_ENCRYPTED:
        raise fail(label, "encrypted", f"member {info.filename!r} is encrypted")
    if (info.flag_bits | flags) & ~_ZIP_FLAGS_OK:
        raise fail(
            label, "corrupt", f"member {info.filename!r} uses unsupported zip flags {flags:#x}"
        )
    if info.compress_type not in _ZIP_METHODS or local.method != info.compress_type:
        raise fail(
            label,
            "method",
            f"member {info.filename!r} uses compression method {info.compress_type}",
        )
    if (
        not flags & _ZIP_DESCRIPTOR_FLAG
        and (local.compress_size, local.file_size) != (_ZIP_SIZE_MAX, _ZIP_SIZE_MAX)
        and (local.compress_size != info.compress_size or local.file_size != info.file_size)
    ):
        raise fail(
            label,
            "size-lie",
            f"member {info.filename!r}: local header sizes differ from the central directory",
        )


def _member_end(f: BinaryIO, info: zipfile.ZipInfo, local: _LocalHeader) -> int:
    """The offset just past the member's data and its data descriptor, if it has one."""
    end = (
        info.header_offset + _ZIP_LOCAL_LEN + local.name_len + local.extra_len + info.compress_size
    )
    if local.flags & _ZIP_DESCRIPTOR_FLAG:
        f.seek(end)
        sig = f.read(4)
        desc = 16 if sig == _ZIP_DESCRIPTOR_MAGIC else 12
        if info.file_size >= _ZIP_SIZE_MAX or info.compress_size >= _ZIP_SIZE_MAX:
            desc += 8
        end += desc
    return end


def _count_declared(info: zipfile.ZipInfo, declared: int, limits: Limits, label: str) -> int:
    """The bytes members declare so far, this one included, held to the profile."""
    if info.file_size > limits.member_bytes:
        raise fail(
            label,
            "member-bytes",
            f"member {info.filename!r} declares {info.file_size} bytes; the profile "
            f"allows {limits.member_bytes}",
        )
    declared += info.file_size
    if declared > limits.expanded_bytes:
        raise fail(
            label,
            "expanded-bytes",
            f"members declare more than the profile's {limits.expanded_bytes} bytes",
        )
    return declared


def _check_zip_tail(
    start_dir: int, members_end: int, *, declared: int, size: int, limits: Limits, label: str
) -> None:
    """The members end where the central directory starts, and declare no bomb."""
    if members_end > start_dir:
        raise fail(
            label, "size-lie", "the last member's declared size runs into the central directory"
        )
    if members_end < start_dir:
        raise fail(label, "gap", "hidden bytes between the last member and the central directory")
    if declared > RATIO_FLOOR and declared > limits.compression_ratio * max(size, 1):
        raise fail(
            label,
            "compression-ratio",
            f"members declare {declared} bytes from {size}: more than "
            f"{limits.compression_ratio}x (decompression bomb)",
        )


def read_zip_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, artifact: str) -> bytes:
    """The bytes of one checked member; a size lie or a bad CRC is refused."""
    return b"".join(_zip_chunks(zf, info, artifact))


def _zip_chunks(zf: zipfile.ZipFile, info: zipfile.ZipInfo, artifact: str) -> Iterator[bytes]:
    got = 0
    try:
        with zf.open(info) as r:
            while True:
                chunk = r.read(RAW_CHUNK)
                if not chunk:
                    break
                got += len(chunk)
                yield chunk
    except EOFError as e:
        raise fail(artifact, "truncated", f"member {info.filename!r} is truncated: {e}") from None
    except (
        zipfile.BadZipFile,
        zlib.error,
        ValueError,
        NotImplementedError,
        struct.error,
        OverflowError,
    ) as e:
        raise fail(artifact, "corrupt", f"member {info.filename!r}: {e}") from None
    if got != info.file_size:
        raise fail(
            artifact,
            "size-lie",
            f"member {info.filename!r} declares {info.file_size} bytes, holds {got}",
        )


def read_zip_members(path: Path, limits: Limits, checker: Checker, sink: MemberSink) -> None:
    """Read the zip at ``path``: each member is admitted by ``checker`` and read by ``sink``."""
    with open_zip(path, limits, checker.artifact) as (zf, infos):
        for info in infos:
            member = checker.admit(info.filename, info.file_size)
            actual = sink(member, _zip_chunks(zf, info, checker.artifact))
            checker.done(member, actual)
