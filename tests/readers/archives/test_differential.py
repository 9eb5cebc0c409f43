"""Differential tests: the archive readers against the reference decoders (DESIGN decision 6).

Whatever ``zstd -dc``, ``lz4 -dc``, GNU tar, bsdtar and ``unzip`` produce from an archive, our
reader either produces exactly the same members and bytes or refuses the archive with a rule.
The reference tools run only on archives our reader accepted (:mod:`tests.support.reference`),
over four corpora: valid archives written by the project, Python, numpy and the tools themselves
(multi-frame streams included); archives the tools disagree on, each refused by a rule; the
hostile corpus of ``test_archives``; and generated inputs (the fuzzer's mutations of its seeds
and archives built from the formats' grammar, :mod:`tests.support.archive_grammar`).
"""

from __future__ import annotations

import io
import os
import random
import struct
import subprocess
import tarfile
import time
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lz4.frame
import numpy as np
import pytest
import zstandard

from fixture_store.errors import UnsafeArchiveError
from fixture_store.limits import DEFAULT, Limits
from fixture_store.readers import archives
from tests.support import archive_grammar, fuzzing, reference
from tests.support.archive_corpus import CASES as HOSTILE_CASES
from tests.support.archive_corpus import Case
from tests.support.hostile import (
    GNU_MAGIC,
    TAR_END,
    manifest,
    pax_record,
    raw_tar_header,
    regular_tar,
    tar_extended,
    tar_member,
    tar_set_field,
    unicode_path_extra,
    zip_bytes,
    zip_central,
    zip_local,
    zip_rename_local,
    zip_single,
)

SMALL = {"data/a.bin": b"alpha" * 100, "b.txt": b"bravo\n", "empty": b""}
_RNG = random.Random(12)
BIG = {"r.bin": _RNG.randbytes(200_000), "z/zeros.bin": bytes(100_000), "z/t.txt": b"t" * 70_000}
LONG = {
    "d" * 60 + "/" + "f" * 70: b"long\n",
    "x" * 130: b"x",
    "a" * 50 + "/" + "b" * 120 + "/" + "c" * 120: b"deep",
    "s" * 200: b"one long segment",
    "short.txt": b"short",
}
SPLITTABLE = {"d" * 60 + "/" + "f" * 70: b"prefix and name\n", **SMALL}
MEMBER_SETS = {"small": SMALL, "big": BIG, "long": LONG}
COMPRESSIONS: dict[str, archives.Compression] = {"tar": "none", "tar.lz4": "lz4", "tar.zst": "zstd"}
Build = Callable[[Path], bytes]


# -- valid archives --------------------------------------------------------------------------
@dataclass(frozen=True)
class Valid:
    label: str
    fmt: str
    build: Build
    members: dict[str, bytes]
    npz: bool = False


def _project_tar(members: dict[str, bytes], fmt: str) -> Build:
    def build(tmp: Path) -> bytes:
        out = tmp / f"w{reference.SUFFIX[fmt]}"
        archives.write_tar(members, out, COMPRESSIONS[fmt])
        return out.read_bytes()

    return build


def _python_tar(members: dict[str, bytes], fmt: int, dirs: tuple[str, ...] = ()) -> Build:
    def build(_tmp: Path) -> bytes:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=fmt) as tf:
            for name in dirs:
                info = tarfile.TarInfo(name)
                info.type = tarfile.DIRTYPE
                tf.addfile(info)
            for name, data in members.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
        return buf.getvalue()

    return build


def _tool_archive(members: dict[str, bytes], argv: list[str]) -> Build:
    """An archive written by a reference tool (``argv`` up to ``-f``) from files on disk."""

    def build(tmp: Path) -> bytes:
        src = tmp / "src"
        src.mkdir()
        for name, data in members.items():
            path = src.joinpath(*name.split("/"))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        tops = sorted({name.split("/")[0] for name in members})
        out = tmp / "tool.out"
        reference.require(argv[0])
        subprocess.run([*argv, "-f", str(out), "-C", str(src), *tops], check=True)
        return out.read_bytes()

    return build


def _gnu(fmt: str) -> list[str]:
    return ["tar", f"--format={fmt}", "--sort=name", "--mtime=@0", "--numeric-owner", "-c"]


def _bsd(fmt: str) -> list[str]:
    return ["bsdtar", f"--format={fmt}", "-c"]


def _piped(inner: Build, tool: str) -> Build:
    """``inner`` compressed by the ``zstd`` or ``lz4`` command."""

    def build(tmp: Path) -> bytes:
        reference.require(tool)
        done = subprocess.run([tool, "-q", "-c"], input=inner(tmp), capture_output=True, check=True)
        return done.stdout

    return build


def _zip(members: dict[str, bytes], method: int, *, zip64: bool = False) -> Build:
    def build(_tmp: Path) -> bytes:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", compression=method) as zf:
            for name in sorted({n.rsplit("/", 1)[0] + "/" for n in members if "/" in n}):
                zf.mkdir(name)
            for name, data in members.items():
                with zf.open(name, "w", force_zip64=zip64) as f:
                    f.write(data)
        return buf.getvalue()

    return build


class _Unseekable(io.RawIOBase):
    def __init__(self) -> None:
        self.data = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        self.data += b
        return len(b)


def _streamed_zip(members: dict[str, bytes], method: int, *, zip64: bool = False) -> Build:
    """A zip written to an unseekable stream: sizes and CRCs in data descriptors."""

    def build(_tmp: Path) -> bytes:
        sink = _Unseekable()
        with zipfile.ZipFile(sink, "w", compression=method) as zf:
            for name, data in members.items():
                with zf.open(name, "w", force_zip64=zip64) as f:
                    f.write(data)
        return bytes(sink.data)

    return build


NPZ_ARRAYS: dict[str, Any] = {
    "x": np.arange(12, dtype="<f4").reshape(3, 4),
    "fortran": np.asfortranarray(np.arange(6, dtype=">i8").reshape(2, 3)),
    "flags": np.array([True, False, True]),
    "text": np.array(["ab", "cde"]),
    "empty": np.zeros((0, 3), dtype="<f8"),
}


def _npz(compressed: bool) -> Build:
    def build(_tmp: Path) -> bytes:
        buf = io.BytesIO()
        if compressed:
            np.savez_compressed(buf, **NPZ_ARRAYS)
        else:
            np.savez(buf, **NPZ_ARRAYS)
        return buf.getvalue()

    return build


def _npz_members() -> dict[str, bytes]:
    return {f"{name}.npy": reference.npy_file(arr) for name, arr in NPZ_ARRAYS.items()}


def _zstd(data: bytes, level: int = 3, *, sized: bool = True, checked: bool = True) -> bytes:
    comp = zstandard.ZstdCompressor(level=level, write_content_size=sized, write_checksum=checked)
    return bytes(comp.compress(data))


def _lz4(data: bytes, **options: Any) -> bytes:
    return bytes(lz4.frame.compress(data, **options))


def _skippable(size: int, nibble: int = 0) -> bytes:
    """A skippable frame (magic 0x184D2A5<nibble>), which lz4 and zstd share."""
    return struct.pack("<II", 0x184D2A50 + nibble, size) + b"s" * size


def _chunked(frame: Callable[[bytes], bytes], data: bytes, step: int) -> bytes:
    return b"".join(frame(data[i : i + step]) for i in range(0, len(data), step))


_SMALL_TAR = regular_tar(SMALL)
_BIG_TAR = regular_tar(BIG)
_64K = lz4.frame.BLOCKSIZE_MAX64KB
# Multi-frame streams: (label, format, stream of the SMALL or BIG tar, members). The CLIs read
# concatenated frames as one stream and skip skippable frames.
FRAMES: list[tuple[str, str, Callable[[bytes], bytes], dict[str, bytes]]] = [
    ("zstd-two-frames", "tar.zst", lambda t: _zstd(t[:1024]) + _zstd(t[1024:]), SMALL),
    ("zstd-tiny-second-frame", "tar.zst", lambda t: _zstd(t[:-1024]) + _zstd(t[-1024:]), SMALL),
    ("zstd-frame-per-block", "tar.zst", lambda t: _chunked(_zstd, t, 512), SMALL),
    ("zstd-two-big-frames", "tar.zst", lambda t: _zstd(t[:300_000], 1) + _zstd(t[300_000:]), BIG),
    ("zstd-skippable-first", "tar.zst", lambda t: _skippable(7, 15) + _zstd(t), SMALL),
    (
        "zstd-skippable-between",
        "tar.zst",
        lambda t: _zstd(t[:1024]) + _skippable(10) + _zstd(t[1024:]),
        SMALL,
    ),
    ("zstd-skippable-last", "tar.zst", lambda t: _zstd(t) + _skippable(0, 3), SMALL),
    (
        "zstd-big-skippable",
        "tar.zst",
        lambda t: _zstd(t[:200_000]) + _skippable(150_000) + _zstd(t[200_000:]),
        BIG,
    ),
    ("zstd-empty-frame-last", "tar.zst", lambda t: _zstd(t) + _zstd(b""), SMALL),
    (
        "zstd-no-size-no-checksum",
        "tar.zst",
        lambda t: _zstd(t, sized=False, checked=False),
        SMALL,
    ),
    ("lz4-two-frames", "tar.lz4", lambda t: _lz4(t[:1024]) + _lz4(t[1024:]), SMALL),
    ("lz4-tiny-second-frame", "tar.lz4", lambda t: _lz4(t[:-1024]) + _lz4(t[-1024:]), SMALL),
    ("lz4-frame-per-block", "tar.lz4", lambda t: _chunked(_lz4, t, 512), SMALL),
    ("lz4-two-big-frames", "tar.lz4", lambda t: _lz4(t[:300_000]) + _lz4(t[300_000:]), BIG),
    (
        "lz4-skippable-between",
        "tar.lz4",
        lambda t: _lz4(t[:1024]) + _skippable(10) + _lz4(t[1024:]),
        SMALL,
    ),
    ("lz4-skippable-last", "tar.lz4", lambda t: _lz4(t) + _skippable(2, 1), SMALL),
    ("lz4-empty-frame-last", "tar.lz4", lambda t: _lz4(t) + _lz4(b""), SMALL),
    (
        "lz4-independent-blocks",
        "tar.lz4",
        lambda t: _lz4(t, block_size=_64K, block_linked=False, store_size=False),
        SMALL,
    ),
    (
        "lz4-block-checksums",
        "tar.lz4",
        lambda t: _lz4(t, block_size=_64K, block_checksum=True, content_checksum=True),
        BIG,
    ),
]


def _framed(stream: Callable[[bytes], bytes], members: dict[str, bytes]) -> Build:
    tar = _BIG_TAR if members is BIG else _SMALL_TAR
    return lambda _tmp: stream(tar)


def _valid_cases() -> list[Valid]:
    cases: list[Valid] = []
    for set_name, members in MEMBER_SETS.items():
        for fmt in COMPRESSIONS:
            cases.append(Valid(f"write_tar-{set_name}", fmt, _project_tar(members, fmt), members))
        for method_name, method in (
            ("stored", zipfile.ZIP_STORED),
            ("deflated", zipfile.ZIP_DEFLATED),
        ):
            cases.append(
                Valid(f"zipfile-{method_name}-{set_name}", "zip", _zip(members, method), members)
            )
            cases.append(
                Valid(
                    f"zipfile-streamed-{method_name}-{set_name}",
                    "zip",
                    _streamed_zip(members, method),
                    members,
                )
            )
    cases += [
        Valid(label, fmt, _framed(stream, members), members)
        for label, fmt, stream, members in FRAMES
    ]
    gnu_big = _tool_archive(BIG, _gnu("posix"))
    bsd_long = _tool_archive(LONG, _bsd("pax"))
    cases += [
        Valid("python-gnu-long", "tar", _python_tar(LONG, tarfile.GNU_FORMAT), LONG),
        Valid(
            "python-ustar-split", "tar", _python_tar(SPLITTABLE, tarfile.USTAR_FORMAT), SPLITTABLE
        ),
        Valid("python-folders-only", "tar", _python_tar({}, tarfile.PAX_FORMAT, ("a", "a/b")), {}),
        Valid("gnu-tar-posix-long", "tar", _tool_archive(LONG, _gnu("posix")), LONG),
        Valid("gnu-tar-gnu-long", "tar", _tool_archive(LONG, _gnu("gnu")), LONG),
        Valid("gnu-tar-ustar-split", "tar", _tool_archive(SPLITTABLE, _gnu("ustar")), SPLITTABLE),
        Valid("gnu-tar-v7", "tar", _tool_archive(SMALL, _gnu("v7")), SMALL),
        Valid("bsdtar-pax-long", "tar", bsd_long, LONG),
        Valid("bsdtar-gnutar-long", "tar", _tool_archive(LONG, _bsd("gnutar")), LONG),
        Valid("bsdtar-ustar-split", "tar", _tool_archive(SPLITTABLE, _bsd("ustar")), SPLITTABLE),
        Valid("gnu-tar-posix-big|zstd", "tar.zst", _piped(gnu_big, "zstd"), BIG),
        Valid("gnu-tar-posix-big|lz4", "tar.lz4", _piped(gnu_big, "lz4"), BIG),
        Valid("bsdtar-pax-long|zstd", "tar.zst", _piped(bsd_long, "zstd"), LONG),
        Valid("bsdtar-pax-long|lz4", "tar.lz4", _piped(bsd_long, "lz4"), LONG),
        Valid("bsdtar-zip-small", "zip", _tool_archive(SMALL, _bsd("zip")), SMALL),
        Valid("bsdtar-zip-big", "zip", _tool_archive(BIG, _bsd("zip")), BIG),
        Valid("zipfile-zip64", "zip", _zip(SMALL, zipfile.ZIP_DEFLATED, zip64=True), SMALL),
        Valid(
            "zipfile-streamed-zip64",
            "zip",
            _streamed_zip(SMALL, zipfile.ZIP_DEFLATED, zip64=True),
            SMALL,
        ),
        Valid("zipfile-folders-only", "zip", lambda _tmp: zip_bytes({"a/": b"", "a/b/": b""}), {}),
        Valid("numpy-savez", "zip", _npz(False), _npz_members(), npz=True),
        Valid("numpy-savez-compressed", "zip", _npz(True), _npz_members(), npz=True),
    ]
    return cases


VALID = _valid_cases()


@pytest.mark.parametrize("tool", sorted(reference.PACKAGES))
def test_reference_tools_are_installed(tool: str) -> None:
    reference.require(tool)


@pytest.mark.parametrize("case", VALID, ids=[f"{c.fmt}-{c.label}" for c in VALID])
def test_valid_archive_is_read_exactly_as_the_reference_tools_read_it(
    tmp_path: Path, case: Valid
) -> None:
    verdict = reference.differ(
        case.fmt,
        case.build(tmp_path),
        DEFAULT,
        manifest(case.members),
        label=case.label,
        npz=case.npz,
    )
    assert verdict.accepted, f"{case.label}: a valid archive was refused [{verdict.rule}]"
    assert not verdict.disagreements, "\n\n".join(verdict.disagreements)


# -- archives the tools read differently: each is refused by a rule ---------------------------
@dataclass(frozen=True)
class Ambiguous:
    label: str
    fmt: str
    data: bytes
    rule: str
    why: str


def _zip_entry(name: str, data: bytes, system: int, attr: int, extra: bytes = b"") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        info = zipfile.ZipInfo(name)
        info.create_system = system
        info.external_attr = attr
        info.extra = extra
        zf.writestr(info, data)
        zf.writestr("b.txt", b"bravo\n")
    return buf.getvalue()


def _zip_file_then_folder() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("d", b"data\n")
        zf.mkdir("d")
    return buf.getvalue()


def _patch(data: bytes, at: int, value: bytes) -> bytes:
    return data[:at] + value + data[at + len(value) :]


def _deflate(data: bytes, finish: bool) -> bytes:
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    return comp.compress(data) + comp.flush(zlib.Z_FINISH if finish else zlib.Z_SYNC_FLUSH)


def _ambiguous_cases() -> list[Ambiguous]:
    x, g, long_name = tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.GNUTYPE_LONGNAME
    body = tar_member(b"header.txt", b"data\n")

    def pax(value: bytes, kind: bytes = x, key: bytes = b"path") -> bytes:
        return tar_extended(kind, pax_record(key, value))

    def long(value: bytes) -> bytes:
        return tar_extended(long_name, value + b"\0")

    tar = [
        ("pax-path-vs-ustar-name", pax(b"good.txt") + body, "name-mismatch", "two names"),
        ("gnu-longname-vs-name", long(b"good.txt") + body, "name-mismatch", "two names"),
        (
            "two-gnu-longnames",
            long(b"header.txt") + long(b"b.txt") + body,
            "name-mismatch",
            "tarfile takes the first (header.txt), GNU tar and bsdtar the last (b.txt)",
        ),
        (
            "two-pax-headers",
            pax(b"header.txt") + pax(b"b.txt") + body,
            "name-mismatch",
            "tarfile takes the first (header.txt), GNU tar and bsdtar the last (b.txt)",
        ),
        (
            "pax-then-longname",
            pax(b"pax.txt") + long(b"long.txt") + body,
            "name-mismatch",
            "two names",
        ),
        (
            "longname-then-pax",
            long(b"header.txt") + pax(b"pax.txt") + body,
            "name-mismatch",
            "GNU tar takes pax.txt, tarfile and bsdtar header.txt",
        ),
        (
            "global-path",
            pax(b"all.txt", g) + body,
            "name-mismatch",
            "bsdtar ignores global headers",
        ),
        (
            "global-size",
            pax(b"3", g, b"size") + body,
            "name-mismatch",
            "bsdtar ignores global headers",
        ),
        (
            "gnu-prefix-field",
            tar_member(b"name.txt", b"data\n", prefix=b"14000000000", magic=GNU_MAGIC),
            "name-mismatch",
            "tarfile prepends a GNU header's atime as a folder",
        ),
        (
            "v7-prefix-field",
            tar_member(b"name.txt", b"data\n", prefix=b"pre", magic=bytes(8)),
            "name-mismatch",
            "tarfile prepends the prefix field outside POSIX headers",
        ),
        (
            "long-fallback-escapes",
            pax(b"p" * 120) + tar_member(b"../" + b"p" * 97, b"data\n"),
            "name-mismatch",
            "a ustar-only reader writes outside the folder",
        ),
        (
            "gnu-real-size-on-a-plain-file",
            tar_set_field(
                tar_member(b"r.bin", b"data\n" * 10, magic=GNU_MAGIC), 0, 483, b"%011o\0" % 3
            ),
            "corrupt",
            "bsdtar truncates it to 3 bytes, tarfile and GNU tar read 50",
        ),
        (
            "checksum-field-garbage",
            tar_set_field(_SMALL_TAR, 0, 155, b"\xa0"),
            "corrupt",
            "bsdtar refuses the header",
        ),
        (
            "digits-after-a-nul",
            tar_set_field(_SMALL_TAR, 0, 136, b"000\x000000000\x00"),
            "corrupt",
            "bsdtar refuses the header, tarfile reads mtime 0",
        ),
        ("blank-uid", tar_set_field(_SMALL_TAR, 0, 108, b" " * 8), "corrupt", "GNU tar refuses it"),
        (
            "blank-mode",
            tar_set_field(_SMALL_TAR, 0, 100, b" " * 8),
            "corrupt",
            "GNU tar refuses it",
        ),
        (
            "base-256-mode",
            tar_set_field(_SMALL_TAR, 0, 100, b"\x80" + bytes(6) + b"\x01"),
            "corrupt",
            "bsdtar refuses the header",
        ),
        (
            "pax-record-without-length",
            tar_extended(x, b"data\n" + pax_record(b"path", b"evil.txt")) + body,
            "corrupt",
            "tarfile stops reading the records, GNU tar and bsdtar refuse them",
        ),
        (
            "pax-record-without-newline",
            tar_extended(x, pax_record(b"path", b"good.txt")[:-1] + b"X") + body,
            "corrupt",
            "tarfile reads good.txt, GNU tar and bsdtar refuse the record",
        ),
        (
            "pax-record-after-a-space",
            tar_extended(x, b" " + pax_record(b"path", b"good.txt")) + body,
            "corrupt",
            "tarfile ignores the record, GNU tar and bsdtar refuse it",
        ),
        (
            "negative-uid",
            tar_set_field(_SMALL_TAR, 0, 108, b"\xff" * 8),
            "corrupt",
            "GNU tar refuses uid -1",
        ),
        (
            "folder-with-a-size",
            tar_extended(x, pax_record(b"size", b"512"))
            + raw_tar_header(b"d/", 0, tarfile.DIRTYPE)
            + tar_member(b"a.txt", b"data\n"),
            "corrupt",
            "bsdtar skips 512 bytes after the folder (and loses a.txt), tarfile and GNU tar none",
        ),
        (
            "file-then-folder",
            tar_member(b"d", b"data\n") + raw_tar_header(b"d/", 0, tarfile.DIRTYPE),
            "duplicate",
            "the tools replace the file d by a folder",
        ),
        (
            "folder-then-file",
            raw_tar_header(b"d/", 0, tarfile.DIRTYPE) + tar_member(b"d", b"data\n"),
            "duplicate",
            "d is both",
        ),
    ]
    out = [
        Ambiguous(label, "tar", data if data.endswith(TAR_END) else data + TAR_END, rule, why)
        for label, data, rule, why in tar
    ]
    dirs = zip_bytes({"data/": b"", "b.txt": b"bravo\n"})
    two = zip_bytes({"a.txt": b"alpha\n", "b.txt": b"bravo\n"})
    streamed = _streamed_zip({"b.txt": b"bravo\n"}, zipfile.ZIP_STORED)(Path())
    descriptor = streamed.find(b"PK\x07\x08")
    zip64 = _zip({"b.txt": b"bravo\n"}, zipfile.ZIP_STORED, zip64=True)(Path())
    end = two.rfind(b"PK\x05\x06")
    text = b"hello world\n" * 10
    out += [
        Ambiguous(
            "local-name-vs-central",
            "zip",
            zip_rename_local(dirs, "b.txt", b"e.txt"),
            "name-mismatch",
            "bsdtar extracts e.txt, unzip b.txt",
        ),
        Ambiguous(
            "local-folder-name-vs-central",
            "zip",
            zip_rename_local(dirs, "data/", b"evil1"),
            "name-mismatch",
            "bsdtar creates evil1",
        ),
        Ambiguous(
            "unicode-path-extra",
            "zip",
            _zip_entry("a.txt", b"x", 3, 0o100644 << 16, unicode_path_extra(b"u.txt", b"a.txt")),
            "name-mismatch",
            "unzip and bsdtar extract u.txt",
        ),
        Ambiguous(
            "nul-in-name",
            "zip",
            zip_bytes({"b.txt~evil.txt": b"bravo\n"}).replace(b"b.txt~", b"b.txt\0"),
            "member-path",
            "zipfile and unzip cut the name at the NUL",
        ),
        Ambiguous(
            "unix-folder-mode-on-a-file",
            "zip",
            _zip_entry("data.bin", b"xyz", 3, 0o040755 << 16),
            "member-type",
            "bsdtar creates a folder, unzip a file",
        ),
        Ambiguous(
            "dos-folder-attribute-on-a-file",
            "zip",
            _zip_entry("data.bin", b"", 0, 0x10),
            "member-type",
            "bsdtar creates a folder, unzip a file",
        ),
        Ambiguous(
            "file-then-folder",
            "zip",
            _zip_file_then_folder(),
            "duplicate",
            "bsdtar replaces the file d by a folder, unzip fails",
        ),
        Ambiguous(
            "local-crc-differs",
            "zip",
            _patch(two, zip_local(two, "b.txt") + 14, b"\0\0\0\0"),
            "corrupt",
            "unzip and bsdtar check the local CRC",
        ),
        Ambiguous(
            "data-descriptor-differs",
            "zip",
            _patch(streamed, descriptor + 4, b"\0\0\0\0"),
            "size-lie",
            "unzip and bsdtar check the descriptor",
        ),
        Ambiguous(
            "zip64-local-size-differs",
            "zip",
            _patch(zip64, zip_local(zip64, "b.txt") + 30 + 5 + 4, struct.pack("<Q", 1 << 40)),
            "size-lie",
            "unzip and bsdtar read the local zip64 sizes",
        ),
        Ambiguous(
            "extra-field-overruns",
            "zip",
            _patch(zip64, zip_local(zip64, "b.txt") + 30 + 5 + 2, struct.pack("<H", 20)),
            "corrupt",
            "bsdtar refuses a zip64 extra longer than its space, unzip reads past it",
        ),
        Ambiguous(
            "needs-zip-version-4.7",
            "zip",
            _patch(two, zip_central(two, "b.txt") + 6, b"\x2f"),
            "method",
            "unzip skips a member needing a version newer than 4.6; zipfile reads it",
        ),
        Ambiguous(
            "central-comment-length-lies",
            "zip",
            _patch(two, zip_central(two, "b.txt") + 32, struct.pack("<H", 31488)),
            "corrupt",
            "unzip and bsdtar refuse the central directory",
        ),
        Ambiguous(
            "end-record-counts-more",
            "zip",
            _patch(two, end + 8, struct.pack("<HH", 3, 3)),
            "corrupt",
            "unzip refuses the end record",
        ),
        Ambiguous(
            "multi-disk-end-record",
            "zip",
            _patch(two, end + 4, struct.pack("<H", 1)),
            "corrupt",
            "unzip refuses a multi-part archive",
        ),
        Ambiguous(
            "deflate-without-final-block",
            "zip",
            zip_single("b.txt", _deflate(text, False), 8, zlib.crc32(text), len(text)),
            "corrupt",
            "zipfile stops at the size; unzip and bsdtar refuse the stream",
        ),
        Ambiguous(
            "lz4-skippable-first",
            "tar.lz4",
            _skippable(3, 9) + _lz4(_SMALL_TAR),
            "format",
            "bsdtar takes a leading skippable frame for zstd",
        ),
    ]
    return out


AMBIGUOUS = _ambiguous_cases()


@pytest.mark.parametrize("case", AMBIGUOUS, ids=[f"{c.fmt}-{c.label}" for c in AMBIGUOUS])
def test_archive_the_tools_disagree_on_is_refused(tmp_path: Path, case: Ambiguous) -> None:
    path = tmp_path / f"input{reference.SUFFIX[case.fmt]}"
    path.write_bytes(case.data)
    with pytest.raises(UnsafeArchiveError) as info:
        archives.scan(path, DEFAULT)
    assert info.value.rule == case.rule, f"{case.why}: {info.value}"


def test_a_deflate_stream_ending_with_its_member_is_accepted(tmp_path: Path) -> None:
    # The counterpart of deflate-without-final-block: the same member, finished, is read.
    text = b"hello world\n" * 10
    path = tmp_path / "ok.zip"
    path.write_bytes(zip_single("b.txt", _deflate(text, True), 8, zlib.crc32(text), len(text)))
    verdict = reference.differ("zip", path.read_bytes(), DEFAULT, manifest({"b.txt": text}))
    assert verdict.accepted and not verdict.disagreements, verdict


@pytest.mark.parametrize("case", HOSTILE_CASES, ids=[f"{c.fmt}-{c.name}" for c in HOSTILE_CASES])
def test_hostile_archive_is_refused_or_read_as_the_tools_read_it(case: Case) -> None:
    verdict = reference.differ(case.fmt, case.data, case.profile, case.manifest, label=case.name)
    assert not verdict.accepted and verdict.rule == case.rule
    # Without the record's manifest only the structural rules apply: whatever is then accepted
    # (an extra or a missing member, other bytes) must be read as the tools read it.
    verdict = reference.differ(case.fmt, case.data, case.profile, label=case.name)
    assert not verdict.disagreements, "\n\n".join(verdict.disagreements)


# -- generated inputs ------------------------------------------------------------------------
FUZZ_FORMATS = ("tar", "tar.lz4", "tar.zst", "zip")
MUTATIONS = int(os.environ.get("FIXTURE_STORE_DIFF_MUTATIONS", "250"))
GENERATED = int(os.environ.get("FIXTURE_STORE_DIFF_GENERATED", "300"))
GENERATORS = {"tar": archive_grammar.random_tar, "zip": archive_grammar.random_zip}


def fuzz_corpus(fmt: str, count: int, seed: int) -> list[tuple[str, bytes]]:
    """The fuzzer's seeds for ``fmt`` and ``count`` mutations of them from a fixed seed."""
    rng = random.Random(f"{seed}-{fmt}")
    seeds = fuzzing.seeds()[fmt]
    out = [(f"{fmt}-seed-{i}", data) for i, data in enumerate(seeds)]
    out += [(f"{fmt}-mutation-{i}", fuzzing.mutate(rng.choice(seeds), rng)) for i in range(count)]
    return out


def generated_corpus(fmt: str, count: int, seed: int) -> list[tuple[str, bytes]]:
    """``count`` archives built from the grammar of ``fmt`` from a fixed seed."""
    rng = random.Random(f"{seed}-generated-{fmt}")
    return [(f"{fmt}-generated-{i}", GENERATORS[fmt](rng)) for i in range(count)]


def differential(
    fmt: str, corpus: list[tuple[str, bytes]], limits: Limits = fuzzing.FUZZ_LIMITS
) -> reference.Tally:
    tally = reference.Tally()
    for label, data in corpus:
        tally.add(fmt, reference.differ(fmt, data, limits, label=label, npz=fmt == "zip"))
    return tally


@pytest.mark.parametrize("fmt", FUZZ_FORMATS)
def test_fuzzer_outputs_are_refused_or_read_as_the_tools_read_them(fmt: str) -> None:
    tally = differential(fmt, fuzz_corpus(fmt, MUTATIONS, seed=0))
    assert not tally.disagreements, tally.summary() + "\n\n" + "\n\n".join(tally.disagreements)
    assert tally.agreed.get(fmt, 0) >= len(fuzzing.seeds()[fmt]), tally.summary()


@pytest.mark.parametrize("fmt", sorted(GENERATORS))
def test_generated_archives_are_refused_or_read_as_the_tools_read_them(fmt: str) -> None:
    tally = differential(fmt, generated_corpus(fmt, GENERATED, seed=0))
    assert not tally.disagreements, tally.summary() + "\n\n" + "\n\n".join(tally.disagreements)
    assert tally.agreed.get(fmt, 0) > GENERATED // 10, tally.summary()


@pytest.mark.slow
def test_differential_campaign(campaign_summary: list[str]) -> None:
    count = int(os.environ.get("FIXTURE_STORE_DIFF_CAMPAIGN", "2000"))
    seed = int(os.environ.get("FIXTURE_STORE_FUZZ_SEED", "1"))
    started = time.monotonic()
    lines, problems = [], []
    for name, corpus, fmts in (
        ("mutations", fuzz_corpus, FUZZ_FORMATS),
        ("generated", generated_corpus, tuple(GENERATORS)),
    ):
        for fmt in fmts:
            tally = differential(fmt, corpus(fmt, count, seed))
            lines.append(f"{name} {tally.summary()}")
            problems += tally.disagreements
    campaign_summary.append(
        f"differential campaign, {time.monotonic() - started:.0f} s: " + "; ".join(lines)
    )
    assert not problems, "\n\n".join(problems)
