"""Zip container checks: a ``.zip``/``.npz`` is read through its central directory only after the
container is exactly what it claims.

No bytes before the first member or after the end record, no gaps or overlaps between members,
local and central headers agreeing (:mod:`.zipheaders`), only stored or deflated members, no
encryption, links or devices; declared sizes are held to the profile before anything is inflated.
"""

from __future__ import annotations

import contextlib
import io
import stat
import struct
import zipfile
import zlib
from collections.abc import Iterator
from typing import BinaryIO, NamedTuple, cast

from fixture_store.limits import DEFAULT, Limits
from fixture_store.readers.archives._common import RATIO_FLOOR, RAW_CHUNK, fail
from fixture_store.readers.archives._members import (
    Checker,
    MemberSink,
    check_folders,
    check_path,
)
from fixture_store.readers.archives.zipheaders import (
    ZipEnd,
    check_zip_central,
    check_zip_descriptor,
    check_zip_local,
    deflate_ended,
    read_zip_end,
)
from fixture_store.readers.formats import ZIP_END_MAGIC, ZIP_LOCAL_MAGIC
from fixture_store.readers.pinned import Source, label_of, pin

_ZIP_METHODS = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED}
_ZIP_ENCRYPTED = 0x1 | 0x40 | 0x2000
# Deflate options, data descriptor, UTF-8 names: everything else (patches, encryption) is refused.
_ZIP_FLAGS_OK = 0x2 | 0x4 | 0x8 | 0x800
# Sizes and CRC follow the data, in a data descriptor (checked by :mod:`.zipheaders`).
_ZIP_DESCRIPTOR_FLAG = 0x8
_ZIP_END_LEN = 22  # the end-of-central-directory record, before its comment
_ZIP_LOCAL_LEN = 30  # a local file header, before its name and extra field
_ZIP_UNIX = 3  # "made by" a Unix host: the high external attributes are a mode
_ZIP_DOS_FOLDER = 0x10  # the MS-DOS folder attribute, read by bsdtar from other hosts


@contextlib.contextmanager
def open_zip(
    path: Source, limits: Limits = DEFAULT, artifact: str | None = None
) -> Iterator[tuple[zipfile.ZipFile, list[zipfile.ZipInfo]]]:
    """Open a zip after checking its container; yields the file members in stored order.
    ``path`` is the user's file, or a store object the store opened, pinned
    (:func:`~fixture_store.readers.pinned.pin_object`: never through a link)."""
    label = label_of(path, artifact)
    with pin(path, label) as pinned:
        size = pinned.size
        if size > limits.archive_bytes:
            raise fail(
                label,
                "archive-bytes",
                f"archive of {size} bytes exceeds the profile's {limits.archive_bytes}",
            )
        f = io.BufferedReader(cast(io.RawIOBase, pinned.file))
        f.seek(0)
        end = _check_zip_end(f, size, label)
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
            check_zip_central(zf, f, end, label)
            yield zf, infos


def _check_zip_end(f: BinaryIO, size: int, label: str) -> ZipEnd:
    tail_len = min(size, _ZIP_END_LEN + 0xFFFF)
    f.seek(size - tail_len)
    tail = f.read(tail_len)
    at = tail.rfind(ZIP_END_MAGIC)
    if at < 0 or len(tail) - at < _ZIP_END_LEN:
        raise fail(label, "corrupt", "no zip end-of-central-directory record")
    (comment_len,) = struct.unpack("<H", tail[at + 20 : at + 22])
    if at + _ZIP_END_LEN + comment_len != len(tail):
        raise fail(label, "trailing-garbage", "bytes after the zip end record")
    return read_zip_end(f, size - tail_len + at, label)


class _LocalHeader(NamedTuple):
    """The fields of a member's local header that the checks compare or need."""

    flags: int
    method: int
    compress_size: int
    file_size: int
    name_len: int
    extra_len: int
    raw: bytes


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
        zip64 = check_zip_local(info, f, local.raw, label)
        expected_offset = _member_end(f, info, local, zip64, label)
        declared = _count_declared(info, declared, limits, label)
        if info.is_dir():
            if info.file_size:
                raise fail(label, "corrupt", f"directory {info.filename!r} has content")
            continue
        files.append(info)
    # A folder entry's path is held to the members' rule: no traversal, nothing absolute.
    folders = [check_path(label, i.filename.rstrip("/")) for i in infos if i.is_dir()]
    check_folders(label, folders, {i.filename for i in files})
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
    return _LocalHeader(flags, method, csize, usize, nlen, xlen, local)


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
    folder = kind == stat.S_IFDIR or (
        info.create_system != _ZIP_UNIX and info.external_attr & _ZIP_DOS_FOLDER
    )
    if folder and not info.is_dir():
        # bsdtar makes it a folder (by its Unix mode or MS-DOS attribute), zipfile and unzip a file.
        raise fail(
            label,
            "member-type",
            f"member {info.filename!r} is a folder by its attributes, a file by its name",
        )


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


def _member_end(
    f: BinaryIO, info: zipfile.ZipInfo, local: _LocalHeader, zip64: bool, label: str
) -> int:
    """The offset just past the member's data and its data descriptor, if it has one (checked)."""
    end = (
        info.header_offset + _ZIP_LOCAL_LEN + local.name_len + local.extra_len + info.compress_size
    )
    if local.flags & _ZIP_DESCRIPTOR_FLAG:
        end += check_zip_descriptor(info, f, end, zip64, label)
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
            if info.compress_type == zipfile.ZIP_DEFLATED and not deflate_ended(r):
                raise fail(
                    artifact,
                    "corrupt",
                    f"member {info.filename!r}: its deflate stream does not end where the "
                    "member ends",
                )
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


def read_zip_members(path: Source, limits: Limits, checker: Checker, sink: MemberSink) -> None:
    """Read the zip at ``path``: each member is admitted by ``checker`` and read by ``sink``."""
    with open_zip(path, limits, checker.artifact) as (zf, infos):
        for info in infos:
            member = checker.admit(info.filename, info.file_size)
            actual = sink(member, _zip_chunks(zf, info, checker.artifact))
            checker.done(member, actual)
