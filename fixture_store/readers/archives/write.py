"""The reproducible tar writer: the same members give the same bytes, on any machine."""

from __future__ import annotations

import contextlib
import io
import os
import tarfile
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import BinaryIO, Literal

import lz4.frame
import zstandard

from fixture_store.objects import digests, trees
from fixture_store.objects.digests import Digest

Compression = Literal["none", "lz4", "zstd"]
MemberSource = bytes | str | os.PathLike[str]


def write_tar(
    members: Mapping[str, MemberSource] | Iterable[tuple[str, MemberSource]],
    path: str | os.PathLike[str],
    compression: Compression = "none",
) -> Digest:
    """Write a byte-reproducible tar (optionally lz4/zstd) and return its digest.

    Members in sorted path order, regular files only, mtime 0, uid/gid 0, no user or group names,
    mode 0644, PAX format; written to a temp file beside ``path`` and renamed into place.
    """
    items = sorted(members.items() if isinstance(members, Mapping) else members)
    paths = [trees.check_member_path(name) for name, _ in items]
    if len(set(paths)) != len(paths):
        raise trees.TreePathError("write_tar: a member path is listed twice")
    out_path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=out_path.parent, prefix=f".{out_path.name}.")
    try:
        with os.fdopen(fd, "wb") as raw:
            sink = _compressing(raw, compression)
            with tarfile.open(fileobj=sink, mode="w|", format=tarfile.PAX_FORMAT) as tf:
                for name, source in items:
                    data = source if isinstance(source, bytes) else None
                    info = tarfile.TarInfo(name)
                    info.size = len(data) if data is not None else os.stat(source).st_size
                    info.mtime = 0
                    info.mode = 0o644
                    info.uid = info.gid = 0
                    info.uname = info.gname = ""
                    info.type = tarfile.REGTYPE
                    if data is not None:
                        tf.addfile(info, io.BytesIO(data))
                    else:
                        with open(source, "rb") as src:
                            tf.addfile(info, src)
            sink.close()
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, out_path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return digests.of_file(out_path)


class _CompressingSink(io.RawIOBase):
    def __init__(self, raw: BinaryIO, compression: Compression) -> None:
        self._raw = raw
        self._comp: lz4.frame.LZ4FrameCompressor | zstandard.ZstdCompressionObj | None = None
        if compression == "lz4":
            lz4_comp = lz4.frame.LZ4FrameCompressor(content_checksum=True)
            self._raw.write(lz4_comp.begin())
            self._comp = lz4_comp
        elif compression == "zstd":
            self._comp = zstandard.ZstdCompressor(level=19, write_checksum=True).compressobj()
        elif compression != "none":
            raise ValueError(f"unknown compression {compression!r}; none, lz4 or zstd")
        self._finished = False

    def writable(self) -> bool:
        return True

    def write(self, b: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        data = bytes(b)
        if self._comp is None:
            self._raw.write(data)
        else:
            self._raw.write(self._comp.compress(data))
        return len(data)

    def close(self) -> None:
        if not self._finished:
            self._finished = True
            if self._comp is not None:
                self._raw.write(self._comp.flush())
        super().close()


def _compressing(raw: BinaryIO, compression: Compression) -> _CompressingSink:
    return _CompressingSink(raw, compression)
