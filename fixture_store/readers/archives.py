"""Streaming archive reader and extraction under a limits profile (DESIGN decision 6).

``.tar``, ``.tar.lz4`` and ``.tar.zst`` are read as one forward stream: the compressed bytes are
decoded in bounded slices, every decoded byte (tar headers included) is counted against the
profile, and the tar layer is walked in stream mode (``r|``), so nothing is ever seeked or
buffered whole. ``.zip``/``.npz`` are read through their central directory after checking that
the container is exactly what it claims: no bytes before the first member or after the end
record, no gaps or overlaps between members, local and central headers agreeing.

Each member must be a regular file with a safe relative path that the manifest lists, with the
manifest's size and digest; links, devices, FIFOs, duplicates, extras and missing members are
refused. Extraction writes into a staging folder under the store's ``tmp/`` and renames it into
``extracted/<archive hex>`` only when complete: ``members/`` holds the files and ``sentinel.json``
binds them to the archive digest and the member manifest, so a tampered extraction or an archive
edited in place is caught.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import struct
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import BinaryIO, Literal

import lz4.frame
import zstandard

from fixture_store.errors import StoreError, UnsafeArchiveError
from fixture_store.limits import DEFAULT, Limits, MiB
from fixture_store.objects import digests, fsutil, trees
from fixture_store.objects.digests import Digest
from fixture_store.objects.store import Store, io_error

Format = Literal["tar", "tar.lz4", "tar.zst", "zip"]
Compression = Literal["none", "lz4", "zstd"]
SENTINEL = "sentinel.json"
MEMBERS = "members"
SENTINEL_FORMAT = "fixture-store.extracted/1"
# Small archives compress well (a block of zeros): only judge the ratio past this many bytes.
RATIO_FLOOR = 1 * MiB
_RAW_CHUNK = 64 * 1024
# Bounds the output of one zstd call: a 4-byte RLE block can regenerate 128 KiB.
_ZSTD_SLICE = 1024
_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_ZIP_LOCAL = b"PK\x03\x04"
_ZIP_END = b"PK\x05\x06"
_NAME_MAX = 255
_PATH_MAX = 4096
_FIX = "re-fetch the archive from its pinned source; if the source itself is hostile, report it"

ManifestLike = trees.Tree | Mapping[str, Digest]


def _fail(artifact: str, rule: str, message: str) -> UnsafeArchiveError:
    return UnsafeArchiveError(artifact, rule, message, fix=_FIX)


def detect_format(path: str | os.PathLike[str]) -> Format:
    name = Path(path).name.lower()
    for suffix, fmt in (
        (".tar.lz4", "tar.lz4"),
        (".tar.zst", "tar.zst"),
        (".tar", "tar"),
        (".zip", "zip"),
        (".npz", "zip"),
    ):
        if name.endswith(suffix):
            return fmt  # type: ignore[return-value]
    raise _fail(
        str(path),
        "format",
        "unknown archive format; expected .tar, .tar.lz4, .tar.zst, .zip or .npz",
    )


def _manifest_members(manifest: ManifestLike | None) -> Mapping[str, Digest] | None:
    if manifest is None:
        return None
    if isinstance(manifest, trees.Tree):
        return manifest.members
    return trees.Tree(dict(manifest)).members


# -- decoded byte stream -----------------------------------------------------------------------
class _Budget:
    """Counts raw and decoded bytes against the profile; refuses bombs as they happen."""

    def __init__(self, limits: Limits, artifact: str) -> None:
        self.limits = limits
        self.artifact = artifact
        self.raw = 0
        self.decoded = 0

    def add_raw(self, n: int) -> None:
        self.raw += n
        if self.raw > self.limits.archive_bytes:
            raise _fail(
                self.artifact,
                "archive-bytes",
                f"archive is larger than the profile's {self.limits.archive_bytes} bytes",
            )

    def add_decoded(self, n: int) -> None:
        self.decoded += n
        if self.decoded > self.limits.expanded_bytes:
            raise _fail(
                self.artifact,
                "expanded-bytes",
                f"archive expands past the profile's {self.limits.expanded_bytes} bytes "
                "(decompression bomb)",
            )
        if self.decoded > RATIO_FLOOR and self.decoded > self.limits.compression_ratio * max(
            self.raw, 1
        ):
            raise _fail(
                self.artifact,
                "compression-ratio",
                f"archive expands {self.decoded} bytes from {self.raw}: more than "
                f"{self.limits.compression_ratio}x (decompression bomb)",
            )


def _raw_chunks(f: BinaryIO, budget: _Budget) -> Iterator[bytes]:
    while True:
        chunk = f.read(_RAW_CHUNK)
        if not chunk:
            return
        budget.add_raw(len(chunk))
        yield chunk


def _decode_plain(f: BinaryIO, budget: _Budget) -> Iterator[bytes]:
    yield from _raw_chunks(f, budget)


def _decode_zstd(f: BinaryIO, budget: _Budget) -> Iterator[bytes]:
    dctx = zstandard.ZstdDecompressor()
    obj = dctx.decompressobj()
    started = False
    pending = b""
    batch: list[bytes] = []
    batched = 0
    for chunk in _raw_chunks(f, budget):
        view = memoryview(pending + chunk if pending else chunk)
        pending = b""
        while view:
            if obj.eof:
                rest = obj.unused_data + bytes(view)
                if len(rest) < len(_ZSTD_MAGIC) and _ZSTD_MAGIC.startswith(rest):
                    pending = rest  # the next frame's magic is split across reads
                    break
                if not rest.startswith(_ZSTD_MAGIC):
                    raise _fail(
                        budget.artifact,
                        "trailing-garbage",
                        "bytes after the end of the zstd stream",
                    )
                obj = dctx.decompressobj()
                view = memoryview(rest)
            piece, view = view[:_ZSTD_SLICE], view[_ZSTD_SLICE:]
            started = True
            try:
                out = obj.decompress(piece)
            except zstandard.ZstdError as e:
                raise _fail(budget.artifact, "corrupt", f"zstd stream is corrupt: {e}") from None
            if out:
                batch.append(out)
                batched += len(out)
                # Small slices bound each call's output; batching keeps the Python overhead low.
                if batched >= _RAW_CHUNK:
                    yield b"".join(batch)
                    batch, batched = [], 0
    if batch:
        yield b"".join(batch)
    if pending or (obj.eof and obj.unused_data):
        if (pending or obj.unused_data).startswith(_ZSTD_MAGIC[: len(pending or obj.unused_data)]):
            raise _fail(budget.artifact, "truncated", "zstd stream ends inside a frame")
        raise _fail(budget.artifact, "trailing-garbage", "bytes after the end of the zstd stream")
    if not started or not obj.eof:
        raise _fail(budget.artifact, "truncated", "zstd stream ends before its frame is complete")


def _decode_lz4(f: BinaryIO, budget: _Budget) -> Iterator[bytes]:
    dec = lz4.frame.LZ4FrameDecompressor()
    started = False
    pending = b""
    for chunk in _raw_chunks(f, budget):
        data = pending + chunk
        pending = b""
        while data or (started and not dec.needs_input and not dec.eof):
            if dec.eof:
                rest = dec.unused_data + data
                if not rest.startswith(_LZ4_MAGIC[: len(rest)]):
                    raise _fail(
                        budget.artifact, "trailing-garbage", "bytes after the end of the lz4 stream"
                    )
                if len(rest) < len(_LZ4_MAGIC):
                    pending = rest
                    data = b""
                    break
                dec = lz4.frame.LZ4FrameDecompressor()
                data = rest
            started = True
            try:
                out = dec.decompress(data, max_length=_RAW_CHUNK)
            except RuntimeError as e:
                raise _fail(budget.artifact, "corrupt", f"lz4 stream is corrupt: {e}") from None
            data = b""
            if out:
                yield out
    if pending:
        raise _fail(budget.artifact, "trailing-garbage", "bytes after the end of the lz4 stream")
    if not started or not dec.eof:
        raise _fail(budget.artifact, "truncated", "lz4 stream ends before its frame is complete")
    if dec.unused_data:
        raise _fail(budget.artifact, "trailing-garbage", "bytes after the end of the lz4 stream")


_DECODERS: dict[str, Callable[[BinaryIO, _Budget], Iterator[bytes]]] = {
    "tar": _decode_plain,
    "tar.lz4": _decode_lz4,
    "tar.zst": _decode_zstd,
}


class _DecodedStream(io.RawIOBase):
    """A read-only forward stream over decoded chunks; tracks the last non-zero byte."""

    def __init__(self, chunks: Iterator[bytes], budget: _Budget) -> None:
        self._chunks = chunks
        self._budget = budget
        self._buf = b""
        self._pos = 0
        self.position = 0
        self.last_nonzero_end = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: memoryview | bytearray) -> int:  # type: ignore[override]
        while self._pos >= len(self._buf):
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._budget.add_decoded(len(chunk))
            stripped = len(chunk.rstrip(b"\0"))
            if stripped:
                self.last_nonzero_end = self.position + (len(self._buf) - self._pos) + stripped
            self._buf, self._pos = chunk, 0
        n = min(len(b), len(self._buf) - self._pos)
        b[:n] = self._buf[self._pos : self._pos + n]
        self._pos += n
        self.position += n
        return n

    def drain(self) -> None:
        while self.read(_RAW_CHUNK):
            pass


# -- walking members ---------------------------------------------------------------------------
MemberSink = Callable[[str, Iterator[bytes]], Digest]


def _hash_only(path: str, chunks: Iterator[bytes]) -> Digest:
    return digests.of_chunks(chunks)


class _Checker:
    """The per-member rules shared by tar and zip."""

    def __init__(self, limits: Limits, artifact: str, manifest: Mapping[str, Digest] | None):
        self.limits = limits
        self.artifact = artifact
        self.manifest = manifest
        self.seen: dict[str, Digest] = {}
        self.count = 0

    def admit(self, name: str, size: int) -> str:
        self.count += 1
        if self.count > self.limits.member_count:
            raise _fail(
                self.artifact,
                "member-count",
                f"more than the profile's {self.limits.member_count} members",
            )
        path = self.check_path(name)
        if path in self.seen:
            raise _fail(self.artifact, "duplicate", f"member {path!r} appears twice")
        if size < 0 or size > self.limits.member_bytes:
            raise _fail(
                self.artifact,
                "member-bytes",
                f"member {path!r} declares {size} bytes; the profile allows "
                f"{self.limits.member_bytes}",
            )
        if self.manifest is not None:
            want = self.manifest.get(path)
            if want is None:
                raise _fail(
                    self.artifact,
                    "extra-member",
                    f"member {path!r} is not in the record's manifest",
                )
            if want.size != size:
                raise _fail(
                    self.artifact,
                    "size-lie",
                    f"member {path!r} declares {size} bytes, the manifest {want.size}",
                )
        return path

    def check_path(self, name: str) -> str:
        if "\\" in name:
            raise _fail(self.artifact, "backslash", f"member {name!r} contains a backslash")
        if name.startswith("/"):
            raise _fail(self.artifact, "absolute-path", f"member {name!r} is absolute")
        if len(name) >= 2 and name[1] == ":" and name[0].isalpha():
            raise _fail(self.artifact, "drive-letter", f"member {name!r} starts with a drive")
        if ".." in name.split("/"):
            raise _fail(self.artifact, "traversal", f"member {name!r} escapes with '..'")
        if len(name.encode()) > _PATH_MAX or any(
            len(seg.encode()) > _NAME_MAX for seg in name.split("/")
        ):
            raise _fail(
                self.artifact,
                "member-path",
                f"member path {name[:64]!r}... is longer than a filesystem allows",
            )
        try:
            return trees.check_member_path(name)
        except trees.TreePathError as e:
            raise _fail(self.artifact, "member-path", e.message) from None

    def done(self, path: str, actual: Digest) -> None:
        if self.manifest is not None:
            want = self.manifest[path]
            if actual.size != want.size:
                raise _fail(
                    self.artifact,
                    "size-lie",
                    f"member {path!r} holds {actual.size} bytes, the manifest {want.size}",
                )
            if actual != want:
                raise _fail(
                    self.artifact,
                    "member-digest",
                    f"member {path!r} is {actual}, the manifest says {want}",
                )
        self.seen[path] = actual

    def finish(self) -> trees.Tree:
        if self.manifest is not None:
            missing = sorted(set(self.manifest) - set(self.seen))
            if missing:
                raise _fail(
                    self.artifact,
                    "missing-member",
                    f"{len(missing)} manifest member(s) not in the archive, first {missing[0]!r}",
                )
        try:
            return trees.Tree(self.seen)
        except trees.TreePathError as e:
            raise _fail(self.artifact, "member-path", e.message) from None


_TAR_KIND = {
    tarfile.SYMTYPE: ("symlink", "is a symbolic link"),
    tarfile.LNKTYPE: ("hardlink", "is a hard link"),
    tarfile.CHRTYPE: ("device", "is a character device"),
    tarfile.BLKTYPE: ("device", "is a block device"),
    tarfile.FIFOTYPE: ("fifo", "is a FIFO"),
}


def _tar_members(
    f: BinaryIO, fmt: Format, checker: _Checker, budget: _Budget, sink: MemberSink
) -> None:
    stream = _DecodedStream(_DECODERS[fmt](f, budget), budget)
    artifact = checker.artifact
    try:
        tf = tarfile.open(fileobj=stream, mode="r|")  # noqa: SIM115
    except tarfile.ReadError as e:
        raise _fail(artifact, "corrupt", f"not a readable tar stream: {e}") from None
    try:
        with tf:
            while True:
                try:
                    info = tf.next()
                except tarfile.ReadError as e:
                    raise _fail(artifact, "corrupt", f"bad tar header: {e}") from None
                if info is None:
                    break
                if info.type in _TAR_KIND:
                    rule, what = _TAR_KIND[info.type]
                    checker.check_path(info.name)
                    raise _fail(artifact, rule, f"member {info.name!r} {what}")
                if info.isdir():
                    checker.check_path(info.name.rstrip("/"))
                    continue
                if info.issparse():
                    # Holes expand outside the decoded-byte count: a cheap bomb, never needed.
                    raise _fail(artifact, "sparse", f"member {info.name!r} is a sparse file")
                if not info.isreg():
                    raise _fail(
                        artifact,
                        "member-type",
                        f"member {info.name!r} has unsupported type {info.type!r}",
                    )
                path = checker.admit(info.name, info.size)
                reader = tf.extractfile(info)
                assert reader is not None
                actual = sink(path, _chunks_of(reader, artifact, path))  # type: ignore[arg-type]
                checker.done(path, actual)
            end = tf.offset
    except EOFError as e:  # from the decoders through tarfile
        raise _fail(artifact, "truncated", f"archive ends early: {e}") from None
    stream.drain()
    if stream.last_nonzero_end > end:
        raise _fail(
            artifact, "trailing-garbage", "non-zero bytes after the tar end-of-archive marker"
        )
    if stream.position - end < 2 * tarfile.BLOCKSIZE:
        raise _fail(artifact, "truncated", "tar stream lacks its end-of-archive marker")


def _chunks_of(reader: BinaryIO, artifact: str, path: str) -> Iterator[bytes]:
    while True:
        try:
            chunk = reader.read(_RAW_CHUNK)
        except (tarfile.ReadError, EOFError) as e:
            raise _fail(artifact, "truncated", f"member {path!r} is truncated: {e}") from None
        if not chunk:
            return
        yield chunk


# -- zip ---------------------------------------------------------------------------------------
_ZIP_METHODS = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED}
_ZIP_ENCRYPTED = 0x1 | 0x40 | 0x2000
# Deflate options, data descriptor, UTF-8 names: everything else (patches, encryption) is refused.
_ZIP_FLAGS_OK = 0x2 | 0x4 | 0x8 | 0x800


@contextlib.contextmanager
def open_zip(
    path: Path, limits: Limits = DEFAULT, artifact: str | None = None
) -> Iterator[tuple[zipfile.ZipFile, list[zipfile.ZipInfo]]]:
    """Open a zip after checking its container; yields the file members in stored order."""
    label = artifact or str(path)
    size = path.stat().st_size
    if size > limits.archive_bytes:
        raise _fail(
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
            raise _fail(label, "corrupt", f"not a readable zip: {e}") from None
        with zf:
            infos = _check_zip_layout(zf, f, size, limits, label)
            yield zf, infos


def _check_zip_end(f: BinaryIO, size: int, label: str) -> None:
    tail_len = min(size, 22 + 0xFFFF)
    f.seek(size - tail_len)
    tail = f.read(tail_len)
    at = tail.rfind(_ZIP_END)
    if at < 0 or len(tail) - at < 22:
        raise _fail(label, "corrupt", "no zip end-of-central-directory record")
    (comment_len,) = struct.unpack("<H", tail[at + 20 : at + 22])
    if at + 22 + comment_len != len(tail):
        raise _fail(label, "trailing-garbage", "bytes after the zip end record")


def _check_zip_layout(
    zf: zipfile.ZipFile, f: BinaryIO, size: int, limits: Limits, label: str
) -> list[zipfile.ZipInfo]:
    infos = sorted(zf.infolist(), key=lambda i: i.header_offset)
    if len(infos) > limits.member_count:
        raise _fail(
            label,
            "member-count",
            f"{len(infos)} members exceed the profile's {limits.member_count}",
        )
    expected_offset = 0
    declared = 0
    files: list[zipfile.ZipInfo] = []
    names: set[str] = set()
    for info in infos:
        if info.header_offset != expected_offset:
            rule = "overlap" if info.header_offset < expected_offset else "gap"
            raise _fail(
                label,
                rule,
                f"member {info.filename!r} starts at {info.header_offset}, expected "
                f"{expected_offset} (hidden or overlapping data)",
            )
        f.seek(info.header_offset)
        local = f.read(30)
        if len(local) < 30 or local[:4] != _ZIP_LOCAL:
            raise _fail(label, "corrupt", f"member {info.filename!r}: bad local header")
        flags, method = struct.unpack("<HH", local[6:10])
        csize, usize, nlen, xlen = struct.unpack("<IIHH", local[18:30])
        if not info.filename or info.filename == "/":
            raise _fail(label, "member-path", "a member has an empty name")
        if info.filename in names:
            raise _fail(label, "duplicate", f"member {info.filename!r} appears twice")
        names.add(info.filename)
        mode = info.external_attr >> 16
        kind = mode & 0o170000
        if kind == 0o120000:
            raise _fail(label, "symlink", f"member {info.filename!r} is a symbolic link")
        if kind not in (0, 0o100000, 0o040000):
            raise _fail(label, "device", f"member {info.filename!r} is not a regular file")
        if (info.flag_bits | flags) & _ZIP_ENCRYPTED:
            raise _fail(label, "encrypted", f"member {info.filename!r} is encrypted")
        if (info.flag_bits | flags) & ~_ZIP_FLAGS_OK:
            raise _fail(
                label, "corrupt", f"member {info.filename!r} uses unsupported zip flags {flags:#x}"
            )
        if info.compress_type not in _ZIP_METHODS or method != info.compress_type:
            raise _fail(
                label,
                "method",
                f"member {info.filename!r} uses compression method {info.compress_type}",
            )
        if (
            not flags & 0x8
            and (csize, usize) != (0xFFFFFFFF, 0xFFFFFFFF)
            and (csize != info.compress_size or usize != info.file_size)
        ):
            raise _fail(
                label,
                "size-lie",
                f"member {info.filename!r}: local header sizes differ from the central directory",
            )
        end = info.header_offset + 30 + nlen + xlen + info.compress_size
        if flags & 0x8:
            f.seek(end)
            sig = f.read(4)
            desc = 16 if sig == b"PK\x07\x08" else 12
            if info.file_size >= 0xFFFFFFFF or info.compress_size >= 0xFFFFFFFF:
                desc += 8
            end += desc
        expected_offset = end
        if info.file_size > limits.member_bytes:
            raise _fail(
                label,
                "member-bytes",
                f"member {info.filename!r} declares {info.file_size} bytes; the profile "
                f"allows {limits.member_bytes}",
            )
        declared += info.file_size
        if declared > limits.expanded_bytes:
            raise _fail(
                label,
                "expanded-bytes",
                f"members declare more than the profile's {limits.expanded_bytes} bytes",
            )
        if info.is_dir():
            if info.file_size:
                raise _fail(label, "corrupt", f"directory {info.filename!r} has content")
            continue
        files.append(info)
    if expected_offset > zf.start_dir:
        raise _fail(
            label, "size-lie", "the last member's declared size runs into the central directory"
        )
    if expected_offset < zf.start_dir:
        raise _fail(label, "gap", "hidden bytes between the last member and the central directory")
    if declared > RATIO_FLOOR and declared > limits.compression_ratio * max(size, 1):
        raise _fail(
            label,
            "compression-ratio",
            f"members declare {declared} bytes from {size}: more than "
            f"{limits.compression_ratio}x (decompression bomb)",
        )
    return files


def read_zip_member(
    zf: zipfile.ZipFile, info: zipfile.ZipInfo, limits: Limits, artifact: str
) -> bytes:
    """The bytes of one checked member; a size lie or a bad CRC is refused."""
    return b"".join(_zip_chunks(zf, info, artifact))


def _zip_chunks(zf: zipfile.ZipFile, info: zipfile.ZipInfo, artifact: str) -> Iterator[bytes]:
    got = 0
    try:
        with zf.open(info) as r:
            while True:
                chunk = r.read(_RAW_CHUNK)
                if not chunk:
                    break
                got += len(chunk)
                yield chunk
    except EOFError as e:
        raise _fail(artifact, "truncated", f"member {info.filename!r} is truncated: {e}") from None
    except (
        zipfile.BadZipFile,
        zlib.error,
        ValueError,
        NotImplementedError,
        struct.error,
        OverflowError,
    ) as e:
        raise _fail(artifact, "corrupt", f"member {info.filename!r}: {e}") from None
    if got != info.file_size:
        raise _fail(
            artifact,
            "size-lie",
            f"member {info.filename!r} declares {info.file_size} bytes, holds {got}",
        )


def _zip_members(path: Path, limits: Limits, checker: _Checker, sink: MemberSink) -> None:
    with open_zip(path, limits, checker.artifact) as (zf, infos):
        for info in infos:
            member = checker.admit(info.filename, info.file_size)
            actual = sink(member, _zip_chunks(zf, info, checker.artifact))
            checker.done(member, actual)


# -- public API --------------------------------------------------------------------------------
def scan(
    path: str | os.PathLike[str],
    limits: Limits = DEFAULT,
    manifest: ManifestLike | None = None,
    *,
    artifact: str | None = None,
    fmt: Format | None = None,
    sink: MemberSink = _hash_only,
) -> trees.Tree:
    """Read an archive as a stream under ``limits``; return the tree of its members.

    With a ``manifest`` every member must be listed with its exact size and digest and every
    listed member must be present. ``sink`` receives each member's bytes (default: hash only).
    """
    p = Path(path)
    label = artifact or str(p)
    fmt = fmt or detect_format(p)
    checker = _Checker(limits, label, _manifest_members(manifest))
    if fmt == "zip":
        _zip_members(p, limits, checker, sink)
    else:
        budget = _Budget(limits, label)
        with open(p, "rb") as f:
            _tar_members(f, fmt, checker, budget, sink)
    return checker.finish()


def extraction_path(store: Store, archive: Digest) -> Path:
    return store.root / "extracted" / archive.hex


def extract(
    store: Store,
    path: str | os.PathLike[str],
    manifest: ManifestLike,
    limits: Limits = DEFAULT,
    *,
    archive_digest: Digest | None = None,
    artifact: str | None = None,
    fmt: Format | None = None,
) -> Path:
    """Extract a checked archive into ``extracted/<archive hex>``; return its ``members`` folder.

    The archive is hashed while it is read when ``archive_digest`` is given (a mismatch refuses
    it). Members go to a staging folder in ``tmp/``; only a complete, checked extraction is
    renamed into place. An existing extraction is reused only if :func:`check_extraction` passes.
    """
    p = Path(path)
    label = artifact or str(p)
    actual_archive = digests.of_file(p)
    if archive_digest is not None and actual_archive != archive_digest:
        raise _fail(
            label, "archive-digest", f"archive is {actual_archive}, expected {archive_digest}"
        )
    final = extraction_path(store, actual_archive)
    tree = trees.Tree(dict(_manifest_members(manifest) or {}))
    if final.is_dir():
        with contextlib.suppress(UnsafeArchiveError):
            return check_extraction(store, p, tree, archive_digest=actual_archive, artifact=label)
    store.ensure()
    try:
        staging = Path(tempfile.mkdtemp(dir=store.tmp_dir, prefix="extract-"))
    except OSError as e:
        raise StoreError(f"cannot create a staging folder in {store.tmp_dir}: {e}") from e
    try:
        sink = _writer(staging / MEMBERS)
        scan(p, limits, tree, artifact=label, fmt=fmt, sink=sink)
        sentinel = {
            "format": SENTINEL_FORMAT,
            "archive": actual_archive.text,
            "archive_size": actual_archive.size,
            "tree": tree.digest.text,
            "tree_size": tree.digest.size,
        }
        fsutil.write_synced(staging / SENTINEL, json.dumps(sentinel, sort_keys=True).encode())
        fsutil.fsync_path(staging)
        final.parent.mkdir(parents=True, exist_ok=True)
        with store.lock(actual_archive):
            if final.exists():
                try:
                    # Another process finished the same extraction first: keep theirs.
                    return check_extraction(
                        store, None, tree, archive_digest=actual_archive, artifact=label
                    )
                except UnsafeArchiveError:
                    # A damaged one is moved aside in one rename, so no reader sees it half gone.
                    os.rename(final, Path(tempfile.mkdtemp(dir=store.tmp_dir, prefix="old-")) / "x")
            os.rename(staging, final)
            fsutil.fsync_path(final.parent)
    except OSError as e:
        raise io_error(e, store.root) from e
    finally:
        if staging.exists():
            fsutil.remove_tree(staging)
        for old in store.tmp_dir.glob("old-*"):
            with contextlib.suppress(OSError):
                fsutil.remove_tree(old)
    return final / MEMBERS


def _writer(staging: Path) -> MemberSink:
    def write(member: str, chunks: Iterator[bytes]) -> Digest:
        target = staging.joinpath(*member.split("/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        # O_EXCL | O_NOFOLLOW: never follow or overwrite anything already in staging.
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        h = digests.Hasher()
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                h.update(chunk)
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(target, 0o444)
        return h.digest()

    return write


def check_extraction(
    store: Store,
    path: str | os.PathLike[str] | None,
    manifest: ManifestLike,
    *,
    archive_digest: Digest,
    artifact: str = "<archive>",
) -> Path:
    """Check an extraction folder: sentinel bound to the archive, every member re-hashed.

    With ``path``, the archive on disk is re-hashed too, so an archive edited in place (even with
    its size and mtime restored) no longer matches the sentinel.
    """
    folder = extraction_path(store, archive_digest)
    tree = trees.Tree(dict(_manifest_members(manifest) or {}))
    try:
        sentinel = json.loads((folder / SENTINEL).read_bytes())
    except (OSError, ValueError) as e:
        raise _fail(
            artifact, "extraction-sentinel", f"extraction has no valid sentinel: {e}"
        ) from None
    if (
        not isinstance(sentinel, dict)
        or sentinel.get("format") != SENTINEL_FORMAT
        or sentinel.get("archive") != archive_digest.text
        or sentinel.get("tree") != tree.digest.text
    ):
        raise _fail(
            artifact,
            "extraction-sentinel",
            "extraction sentinel is bound to another archive or manifest",
        )
    if path is not None:
        actual = digests.of_file(Path(path))
        if actual != archive_digest:
            raise _fail(
                artifact,
                "archive-digest",
                f"archive was edited: it is {actual}, the extraction is of {archive_digest}",
            )
    try:
        found = trees.scan_folder(folder / MEMBERS) if (folder / MEMBERS).is_dir() else {}
    except trees.TreePathError as e:
        raise _fail(artifact, "extraction-tampered", e.message) from None
    if set(found) != set(tree.members):
        raise _fail(
            artifact,
            "extraction-tampered",
            "extracted files differ from the manifest (added or removed files)",
        )
    for member, want in tree:
        if digests.of_file(found[member]) != want:
            raise _fail(artifact, "extraction-tampered", f"extracted member {member!r} changed")
    return folder / MEMBERS


# -- deterministic writing ---------------------------------------------------------------------
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
