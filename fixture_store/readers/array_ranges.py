"""Where the arrays of an NPY or NPZ are in the file: the ranges :mod:`.tensor_ranges` records.

- An NPY's one array is the bytes after its header, when it is in C order: recorded in fixed
  chunks, so a range of rows is a range of bytes covered by a few chunks. A Fortran-order array's
  rows are not contiguous (a row range would be the whole array), so it gets no range; an
  object array never loads at all (:mod:`.npy` refuses it).
- An NPZ member stored uncompressed (``ZIP_STORED``, what ``numpy.savez`` writes) holds an NPY
  whose array is a contiguous range of the zip: after the member's local header (its name and
  extra field) and the NPY header inside. The zip is opened by the one container check
  (:func:`~fixture_store.readers.archives.open_zip`: no gaps, overlaps, trailing bytes, local
  and central headers and data descriptors agreeing, sizes within the profile), so the range
  comes from headers that were already held to each other. A deflated member
  (``numpy.savez_compressed``) gets no range: its array is no range of the file, and fetching
  and inflating its compressed bytes would make a second kind of record entry for what is, for
  the references this serves, a minority of files; such an NPZ is fetched whole.
"""

from __future__ import annotations

import io
import os
import struct
import zipfile
from collections.abc import Mapping
from typing import Any

from fixture_store.errors import UnsafeArrayError
from fixture_store.limits import Limits
from fixture_store.readers.npy import NpyHeader, read_header
from fixture_store.readers.pinned import PinnedFile, pin
from fixture_store.readers.tensor_ranges import (
    Pending,
    check_recorded,
    range_entry,
    wants_ranges,
)

_ZIP_LOCAL_LEN = 30
_NPY_PREFIX = 12  # magic, version and the longest header-length field


def npy_range(header: NpyHeader) -> tuple[int, int] | None:
    """The (offset, length) of an NPY's array in its file, or None (Fortran order, empty)."""
    if header.fortran_order or header.nbytes == 0:
        return None
    return header.data_offset, header.nbytes


def npz_ranges(pinned: PinnedFile, limits: Limits, label: str) -> dict[str, tuple[int, int] | None]:
    """Array name -> (offset, length) of its bytes in the NPZ, or None for a member that is
    deflated, in Fortran order or empty. The zip is checked first; ``pinned`` is closed."""
    from fixture_store.readers.archives import open_zip

    found: dict[str, tuple[int, int] | None] = {}
    fd = pinned.file.fileno()
    with open_zip(pinned, limits, label) as (_zf, infos):
        for info in infos:
            name = info.filename.removesuffix(".npy")
            found[name] = _member_range(fd, info, limits, label)
        pinned.check()
    return found


def _member_range(
    fd: int, info: zipfile.ZipInfo, limits: Limits, label: str
) -> tuple[int, int] | None:
    if info.compress_type != zipfile.ZIP_STORED:
        return None
    local = os.pread(fd, _ZIP_LOCAL_LEN, info.header_offset)
    name_len, extra_len = struct.unpack("<HH", local[26:30])
    start = info.header_offset + _ZIP_LOCAL_LEN + name_len + extra_len
    member = f"{label}:{info.filename}"
    head = os.pread(fd, min(info.file_size, _NPY_PREFIX + limits.tensor_header_bytes), start)
    header = read_header(io.BytesIO(head), limits, member)
    if info.compress_size != info.file_size or header.data_offset + header.nbytes != info.file_size:
        raise UnsafeArrayError(
            member,
            "npz-member",
            f"a stored member of {info.file_size} bytes ({info.compress_size} in the zip) does "
            f"not hold exactly its NPY header and {header.nbytes} array bytes",
            fix="regenerate or re-fetch the artifact; the bytes do not satisfy its limits profile",
        )
    inner = npy_range(header)
    return None if inner is None else (start + inner[0], inner[1])


def ranged(
    manifest: Mapping[str, Mapping[str, Any]],
    found: Mapping[str, tuple[int, int] | None],
    file: PinnedFile,
    *,
    chunked: bool,
    pending: Pending | None = None,
) -> dict[str, dict[str, Any]]:
    """``manifest`` with each array's range and digests added where ``found`` gives a range, for
    a file :func:`~.tensor_ranges.wants_ranges` gives them; ``manifest`` as it is otherwise.
    The digests are left to ``pending`` when given (taken in the read that stores the file,
    see :mod:`.range_tap`)."""
    out = {name: dict(spec) for name, spec in manifest.items()}
    if not wants_ranges(file.size, len(out)):
        return out
    for name, where in found.items():
        if where is not None and name in out:
            out[name].update(
                range_entry(file, *where, chunked=chunked)
                if pending is None
                else pending.add(name, *where, chunked=chunked)
            )
    return out


def describe_npy(
    path: str | os.PathLike[str],
    header: NpyHeader,
    name: str,
    label: str,
    pending: Pending | None = None,
) -> Any:
    """The manifest of an NPY whose header is ``header``: its one array, with chunk digests for
    a file :func:`~.tensor_ranges.wants_ranges` gives them, in C order (left to ``pending``,
    see :func:`ranged`)."""
    spec = {"dtype": str(header.dtype), "shape": [int(d) for d in header.shape]}
    with pin(path, label) as pinned:
        found = {name: npy_range(header)}
        return ranged({name: spec}, found, pinned, chunked=True, pending=pending)


def describe_npz(
    path: str | os.PathLike[str],
    manifest: Mapping[str, Mapping[str, Any]],
    limits: Limits,
    label: str,
    pending: Pending | None = None,
) -> dict[str, dict[str, Any]]:
    """The manifest of a checked NPZ, with each stored member's range and sha256 for a file of
    :func:`~.tensor_ranges.wants_ranges` gives them (left to ``pending``, see :func:`ranged`)."""
    with pin(path, label) as pinned:
        if not wants_ranges(pinned.size, len(manifest)):
            return {name: dict(spec) for name, spec in manifest.items()}
        found = npz_ranges(pin(path, label), limits, label)
        return ranged(manifest, found, pinned, chunked=False, pending=pending)


def check_npy_ranges(
    header: NpyHeader,
    manifest: Mapping[str, Mapping[str, Any]],
    file: PinnedFile,
    *,
    artifact: str,
    full: bool,
) -> None:
    """:func:`~.tensor_ranges.check_recorded` of an NPY (its one entry, against its header)."""
    found = {name: npy_range(header) for name in manifest}
    check_recorded(found, manifest, file, artifact=artifact, full=full)


def check_npz_ranges(
    open_file: Any,
    manifest: Mapping[str, Mapping[str, Any]],
    limits: Limits,
    *,
    artifact: str,
    full: bool,
) -> None:
    """:func:`~.tensor_ranges.check_recorded` of an NPZ whose manifest records ranges, against
    its checked zip headers; ``open_file()`` pins the object (twice: the zip check closes one)."""
    if not any("offset" in spec for spec in manifest.values()):
        return
    found = npz_ranges(open_file(), limits, artifact)
    with open_file() as pinned:
        check_recorded(found, manifest, pinned, artifact=artifact, full=full)


__all__ = [
    "check_npy_ranges",
    "check_npz_ranges",
    "describe_npy",
    "describe_npz",
    "npy_range",
    "npz_ranges",
]
