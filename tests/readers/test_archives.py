"""Streaming archive reader: the hostile archive corpus (a case per rule), extraction, write_tar."""

from __future__ import annotations

import io
import os
import tarfile
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixture_store import limits
from fixture_store.errors import UnsafeArchiveError
from fixture_store.limits import DEFAULT, MiB
from fixture_store.objects import digests
from fixture_store.objects.digests import Digest
from fixture_store.objects.store import Store
from fixture_store.readers import archives
from tests.support.hostile import (
    compress,
    files_under,
    manifest,
    patch,
    regular_tar,
    tar_bytes,
    tar_info,
    zip_bytes,
    zip_central,
    zip_local,
)

GOOD = {"data/a.bin": b"alpha" * 100, "b.txt": b"bravo\n"}
TAR_FORMATS = ("tar", "tar.lz4", "tar.zst")
SUFFIX = {"tar": ".tar", "tar.lz4": ".tar.lz4", "tar.zst": ".tar.zst", "zip": ".zip"}


@dataclass(frozen=True)
class Case:
    name: str
    fmt: str
    data: bytes
    rule: str
    manifest: dict[str, Digest] = field(default_factory=lambda: manifest(GOOD))
    profile: limits.Limits = DEFAULT


def _tar_with(*extra: tuple[tarfile.TarInfo, bytes], base: dict[str, bytes] = GOOD) -> bytes:
    entries = [(tar_info(n, len(d)), d) for n, d in base.items()]
    return tar_bytes([*entries, *extra])


def _sparse_tar() -> bytes:
    """A GNU sparse member (type 'S') declaring 1 MiB of holes around 512 stored bytes."""
    buf = bytearray(tar_bytes([(tar_info("b.txt", 512), b"x" * 512)], fmt=tarfile.GNU_FORMAT))
    head = bytearray(buf[:512])
    head[156:157] = tarfile.GNUTYPE_SPARSE
    # One sparse map entry (offset 0, 512 bytes) and a real size of 1 MiB.
    head[386:398] = b"%011o\0" % 0
    head[398:410] = b"%011o\0" % 512
    head[483:495] = b"%011o\0" % (1 << 20)
    head[148:156] = b" " * 8
    head[148:156] = b"%06o\0 " % sum(head)
    buf[:512] = head
    return bytes(buf)


def _tar_cases(fmt: str) -> list[Case]:
    z: Callable[[bytes], bytes] = lambda data: compress(data, fmt)  # noqa: E731
    good = regular_tar(GOOD)
    zeros = {"zeros.bin": bytes(8 * MiB)}
    cut_in_member = good[: 512 + 100]  # first header and part of its data
    return [
        Case("absolute", fmt, z(_tar_with((tar_info("/tmp/evil", 4), b"evil"))), "absolute-path"),
        Case("dotdot", fmt, z(_tar_with((tar_info("../evil", 4), b"evil"))), "traversal"),
        Case(
            "dotdot-deep",
            fmt,
            z(_tar_with((tar_info("data/../../../evil", 4), b"evil"))),
            "traversal",
        ),
        Case("backslash", fmt, z(_tar_with((tar_info("..\\evil", 4), b"evil"))), "backslash"),
        Case("drive", fmt, z(_tar_with((tar_info("C:/evil", 4), b"evil"))), "drive-letter"),
        Case("bad-char", fmt, z(_tar_with((tar_info("a\nb", 4), b"evil"))), "member-path"),
        Case("long-name", fmt, z(_tar_with((tar_info("a" * 300, 4), b"evil"))), "member-path"),
        Case("sparse", fmt, z(_sparse_tar()), "sparse"),
        Case(
            "symlink",
            fmt,
            z(_tar_with((tar_info("link", kind=tarfile.SYMTYPE, linkname="/etc/passwd"), b""))),
            "symlink",
        ),
        Case(
            "hardlink",
            fmt,
            z(_tar_with((tar_info("hard", kind=tarfile.LNKTYPE, linkname="b.txt"), b""))),
            "hardlink",
        ),
        Case("chardev", fmt, z(_tar_with((tar_info("dev", kind=tarfile.CHRTYPE), b""))), "device"),
        Case("blockdev", fmt, z(_tar_with((tar_info("blk", kind=tarfile.BLKTYPE), b""))), "device"),
        Case("fifo", fmt, z(_tar_with((tar_info("fifo", kind=tarfile.FIFOTYPE), b""))), "fifo"),
        Case("duplicate", fmt, z(_tar_with((tar_info("b.txt", 6), b"bravo\n"))), "duplicate"),
        Case("extra", fmt, z(_tar_with((tar_info("extra.bin", 3), b"xyz"))), "extra-member"),
        Case("missing", fmt, z(regular_tar({"b.txt": GOOD["b.txt"]})), "missing-member"),
        Case("size-lie", fmt, z(regular_tar({**GOOD, "b.txt": b"bravo\nand more"})), "size-lie"),
        Case("digest", fmt, z(regular_tar({**GOOD, "b.txt": b"BRAVO\n"})), "member-digest"),
        Case("truncated-member", fmt, z(cut_in_member), "truncated"),
        Case("no-end-marker", fmt, z(good[: len(good.rstrip(b"\0")) + 511 & ~511]), "truncated"),
        Case("trailing-garbage", fmt, z(good + b"garbage"), "trailing-garbage"),
        Case("not-a-tar", fmt, z(b"\x01" * 4096), "corrupt"),
        Case(
            "member-count",
            fmt,
            z(good),
            "member-count",
            profile=limits.tighten(DEFAULT, member_count=1),
        ),
        Case(
            "member-bytes",
            fmt,
            z(good),
            "member-bytes",
            profile=limits.tighten(DEFAULT, member_bytes=100),
        ),
        Case(
            "expanded-bytes",
            fmt,
            z(regular_tar({"big.bin": bytes(2 * MiB)})),
            "expanded-bytes",
            manifest({"big.bin": bytes(2 * MiB)}),
            limits.tighten(DEFAULT, expanded_bytes=MiB),
        ),
        Case(
            "archive-bytes",
            fmt,
            z(good),
            "archive-bytes",
            profile=limits.tighten(DEFAULT, archive_bytes=100),
        ),
        *(
            [Case("bomb-ratio", fmt, z(regular_tar(zeros)), "compression-ratio", manifest(zeros))]
            if fmt != "tar"
            else []
        ),
        *(
            [
                Case("truncated-stream", fmt, z(good)[:-6], "truncated"),
                Case("garbage-after-frame", fmt, z(good) + b"\x00junk", "trailing-garbage"),
            ]
            if fmt != "tar"
            else []
        ),
    ]


def _zip_cases() -> list[Case]:
    good = zip_bytes(GOOD)
    sym = zipfile.ZipInfo("link")
    sym.external_attr = 0o120777 << 16
    dev = zipfile.ZipInfo("dev")
    dev.external_attr = 0o020644 << 16
    two = zip_bytes({"b.txt": GOOD["b.txt"], "c.txt": b"charlie"})
    overlap = patch(two, zip_central(two, "c.txt") + 42, "<I", zip_local(two, "b.txt"))
    lie = patch(good, zip_central(good, "b.txt") + 24, "<I", 60)
    both_lie = patch(
        patch(lie, zip_local(good, "b.txt") + 22, "<I", 60),
        zip_central(good, "b.txt") + 20,
        "<I",
        60,
    )
    both_lie = patch(both_lie, zip_local(good, "b.txt") + 18, "<I", 60)
    body = zip_local(good, "b.txt") + 30 + len("b.txt")
    crc = good[:body] + b"X" + good[body + 1 :]
    enc = patch(
        patch(good, zip_central(good, "b.txt") + 8, "<H", 1), zip_local(good, "b.txt") + 6, "<H", 1
    )
    zeros = {"zeros.bin": bytes(8 * MiB)}
    buf = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buf, "w") as zf:
        warnings.simplefilter("ignore")
        for name, data in GOOD.items():
            zf.writestr(name, data)
        zf.writestr("b.txt", GOOD["b.txt"])
    with_dup = buf.getvalue()
    return [
        Case("absolute", "zip", zip_bytes({**GOOD, "/tmp/evil": b"evil"}), "absolute-path"),
        Case("dotdot", "zip", zip_bytes({**GOOD, "../evil": b"evil"}), "traversal"),
        Case("backslash", "zip", zip_bytes({**GOOD, "..\\evil": b"evil"}), "backslash"),
        Case("drive", "zip", zip_bytes({**GOOD, "C:/evil": b"evil"}), "drive-letter"),
        Case("symlink", "zip", zip_bytes(GOOD, infos=[sym]), "symlink"),
        Case("device", "zip", zip_bytes(GOOD, infos=[dev]), "device"),
        Case("duplicate", "zip", with_dup, "duplicate"),
        Case("extra", "zip", zip_bytes({**GOOD, "extra.bin": b"xyz"}), "extra-member"),
        Case("missing", "zip", zip_bytes({"b.txt": GOOD["b.txt"]}), "missing-member"),
        Case("digest", "zip", zip_bytes({**GOOD, "b.txt": b"BRAVO\n"}), "member-digest"),
        Case("trailing-garbage", "zip", good + b"garbage", "trailing-garbage"),
        Case("prepended-data", "zip", b"#!/bin/sh\n" + good, "gap"),
        Case(
            "overlap",
            "zip",
            overlap,
            "overlap",
            manifest({"b.txt": GOOD["b.txt"], "c.txt": b"charlie"}),
        ),
        Case("size-lie-headers", "zip", lie, "size-lie"),
        Case("size-lie-content", "zip", both_lie, "size-lie"),
        Case("bad-crc", "zip", crc, "corrupt"),
        Case("encrypted", "zip", enc, "encrypted"),
        Case("method", "zip", zip_bytes(GOOD, method=zipfile.ZIP_BZIP2), "method"),
        Case(
            "bomb-ratio",
            "zip",
            zip_bytes(zeros, method=zipfile.ZIP_DEFLATED),
            "compression-ratio",
            manifest(zeros),
        ),
        Case(
            "expanded-bytes",
            "zip",
            zip_bytes(GOOD),
            "expanded-bytes",
            profile=limits.tighten(DEFAULT, expanded_bytes=100),
        ),
        Case(
            "member-count",
            "zip",
            zip_bytes(GOOD),
            "member-count",
            profile=limits.tighten(DEFAULT, member_count=1),
        ),
        Case(
            "archive-bytes",
            "zip",
            zip_bytes(GOOD),
            "archive-bytes",
            profile=limits.tighten(DEFAULT, archive_bytes=100),
        ),
        Case("truncated", "zip", good[:-30], "corrupt"),
        Case("not-a-zip", "zip", b"PK" + b"\x00" * 100, "corrupt"),
    ]


CASES = [c for fmt in TAR_FORMATS for c in _tar_cases(fmt)] + _zip_cases()


@pytest.mark.parametrize("case", CASES, ids=[f"{c.fmt}-{c.name}" for c in CASES])
def test_hostile_archive_is_refused_and_nothing_is_written(tmp_path: Path, case: Case) -> None:
    archive = tmp_path / f"input{SUFFIX[case.fmt]}"
    archive.write_bytes(case.data)
    store = Store.at(tmp_path / "a" / "b" / "store").ensure()
    before = files_under(tmp_path)
    with pytest.raises(UnsafeArchiveError) as info:
        archives.extract(
            store, archive, case.manifest, case.profile, artifact=f"hostile/{case.name}"
        )
    assert info.value.rule == case.rule, str(info.value)
    assert f"hostile/{case.name}" in str(info.value)
    assert files_under(tmp_path) == before
    assert list(store.tmp_dir.iterdir()) == []
    assert not (store.root / "extracted").exists() or not any((store.root / "extracted").iterdir())
    # The scanning reader refuses it the same way.
    with pytest.raises(UnsafeArchiveError) as again:
        archives.scan(archive, case.profile, case.manifest)
    assert again.value.rule == case.rule


def test_every_documented_rule_has_a_case() -> None:
    rules = {c.rule for c in CASES}
    for rule in (
        "absolute-path",
        "traversal",
        "sparse",
        "member-path",
        "backslash",
        "drive-letter",
        "symlink",
        "hardlink",
        "device",
        "fifo",
        "duplicate",
        "extra-member",
        "missing-member",
        "truncated",
        "trailing-garbage",
        "size-lie",
        "compression-ratio",
        "expanded-bytes",
        "member-count",
        "member-bytes",
        "archive-bytes",
        "overlap",
        "gap",
    ):
        assert rule in rules, rule


# -- valid archives ----------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", [*TAR_FORMATS, "zip"])
def test_valid_archive_extracts_into_place_with_a_sentinel(tmp_path: Path, fmt: str) -> None:
    archive = tmp_path / f"ok{SUFFIX[fmt]}"
    archive.write_bytes(compress(regular_tar(GOOD), fmt) if fmt != "zip" else zip_bytes(GOOD))
    store = Store.at(tmp_path / "store")
    man = manifest(GOOD)
    digest = digests.of_file(archive)
    folder = archives.extract(store, archive, man, archive_digest=digest)
    assert folder == archives.extraction_path(store, digest) / "members"
    for name, data in GOOD.items():
        assert (folder / name).read_bytes() == data
    assert (folder.parent / archives.SENTINEL).is_file()
    assert list(store.tmp_dir.iterdir()) == []
    assert archives.check_extraction(store, archive, man, archive_digest=digest) == folder
    # Idempotent: a second extraction reuses the checked folder.
    assert archives.extract(store, archive, man, archive_digest=digest) == folder


def _extracted(tmp_path: Path) -> tuple[Store, Path, dict[str, Digest], Digest, Path]:
    archive = tmp_path / "ok.tar.zst"
    archive.write_bytes(compress(regular_tar(GOOD), "tar.zst"))
    store = Store.at(tmp_path / "store")
    man = manifest(GOOD)
    digest = digests.of_file(archive)
    return store, archive, man, digest, archives.extract(store, archive, man)


def test_archive_edited_in_place_with_same_size_and_mtime_is_detected(tmp_path: Path) -> None:
    store, archive, man, digest, _folder = _extracted(tmp_path)
    st = archive.stat()
    data = bytearray(archive.read_bytes())
    data[-5] ^= 0xFF
    archive.write_bytes(bytes(data))
    os.utime(archive, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert archive.stat().st_size == st.st_size and archive.stat().st_mtime_ns == st.st_mtime_ns
    with pytest.raises(UnsafeArchiveError) as info:
        archives.check_extraction(store, archive, man, archive_digest=digest)
    assert info.value.rule == "archive-digest"
    with pytest.raises(UnsafeArchiveError) as info:
        archives.extract(store, archive, man, archive_digest=digest)
    assert info.value.rule == "archive-digest"


@pytest.mark.parametrize("tamper", ["edit", "add", "remove", "sentinel"])
def test_tampered_extraction_is_detected_and_repaired(tmp_path: Path, tamper: str) -> None:
    store, archive, man, digest, folder = _extracted(tmp_path)
    target = folder / "b.txt"
    if tamper == "edit":
        target.chmod(0o644)
        target.write_bytes(b"BRAVO\n")
    elif tamper == "add":
        (folder / "data" / "new.bin").write_bytes(b"x")
    elif tamper == "remove":
        target.unlink()
    else:
        (folder.parent / archives.SENTINEL).write_text('{"format": "x"}')
    with pytest.raises(UnsafeArchiveError) as info:
        archives.check_extraction(store, archive, man, archive_digest=digest)
    assert info.value.rule == (
        "extraction-sentinel" if tamper == "sentinel" else "extraction-tampered"
    )
    repaired = archives.extract(store, archive, man, archive_digest=digest)
    assert repaired == folder
    assert target.read_bytes() == GOOD["b.txt"]
    archives.check_extraction(store, archive, man, archive_digest=digest)


def test_sentinel_is_bound_to_the_manifest(tmp_path: Path) -> None:
    store, archive, _man, digest, _folder = _extracted(tmp_path)
    other = manifest({**GOOD, "b.txt": b"other\n"})
    with pytest.raises(UnsafeArchiveError) as info:
        archives.check_extraction(store, archive, other, archive_digest=digest)
    assert info.value.rule == "extraction-sentinel"


# -- deterministic writer ----------------------------------------------------------------------
@pytest.mark.parametrize("compression", ["none", "lz4", "zstd"])
def test_write_tar_is_byte_identical_and_normalised(
    tmp_path: Path, compression: archives.Compression
) -> None:
    src = tmp_path / "src.bin"
    src.write_bytes(b"from a file")
    os.chmod(src, 0o755)
    members: dict[str, bytes | Path] = {"z/last.bin": b"z", "a.bin": b"a", "m/src.bin": src}
    suffix = {"none": ".tar", "lz4": ".tar.lz4", "zstd": ".tar.zst"}[compression]
    one = archives.write_tar(members, tmp_path / f"one{suffix}", compression)
    os.utime(src, (12345, 12345))
    two = archives.write_tar(
        dict(reversed(members.items())), tmp_path / f"two{suffix}", compression
    )
    assert one == two
    expected = {"z/last.bin": b"z", "a.bin": b"a", "m/src.bin": b"from a file"}
    tree = archives.scan(tmp_path / f"one{suffix}", DEFAULT, manifest(expected))
    assert list(tree.members) == sorted(expected)
    if compression == "none":
        with tarfile.open(tmp_path / "one.tar") as tf:
            infos = tf.getmembers()
        assert [i.name for i in infos] == sorted(expected)
        assert all(
            i.mtime == 0
            and i.uid == 0
            and i.gid == 0
            and i.mode == 0o644
            and i.uname == ""
            and i.gname == ""
            for i in infos
        )


# -- properties --------------------------------------------------------------------------------
_NAMES = st.from_regex(
    r"[a-z0-9_][a-z0-9_.-]{0,8}(/[a-z0-9_][a-z0-9_.-]{0,8}){0,2}", fullmatch=True
)
_MEMBERS = st.dictionaries(_NAMES, st.binary(max_size=2000), min_size=1, max_size=6).filter(
    lambda m: not any(a != b and b.startswith(a + "/") for a in m for b in m)
)


@settings(max_examples=60, deadline=None)
@given(members=_MEMBERS, fmt=st.sampled_from([*TAR_FORMATS, "zip"]))
def test_any_written_archive_scans_back_to_its_manifest(
    tmp_path_factory: pytest.TempPathFactory, members: dict[str, bytes], fmt: str
) -> None:
    folder = tmp_path_factory.mktemp("prop")
    path = folder / f"x{SUFFIX[fmt]}"
    if fmt == "zip":
        path.write_bytes(zip_bytes(members, method=zipfile.ZIP_DEFLATED))
    else:
        compression = {"tar": "none", "tar.lz4": "lz4", "tar.zst": "zstd"}[fmt]
        archives.write_tar(members, path, compression)  # type: ignore[arg-type]
    tree = archives.scan(path, DEFAULT, manifest(members))
    assert dict(tree.members) == manifest(members)


@settings(max_examples=60, deadline=None)
@given(members=_MEMBERS, fmt=st.sampled_from(["tar.lz4", "tar.zst", "zip"]), data=st.data())
def test_any_truncated_archive_is_refused(
    tmp_path_factory: pytest.TempPathFactory,
    members: dict[str, bytes],
    fmt: str,
    data: st.DataObject,
) -> None:
    folder = tmp_path_factory.mktemp("trunc")
    path = folder / f"x{SUFFIX[fmt]}"
    raw = zip_bytes(members) if fmt == "zip" else compress(regular_tar(members), fmt)
    cut = data.draw(st.integers(0, len(raw) - 1))
    path.write_bytes(raw[:cut])
    with pytest.raises(UnsafeArchiveError):
        archives.scan(path, DEFAULT, manifest(members))


@pytest.mark.parametrize("fmt", ["tar.lz4", "tar.zst"])
@pytest.mark.parametrize("split_at", [1, 2, 3])
def test_concatenated_frames_are_one_stream_even_when_a_magic_straddles_reads(
    tmp_path: Path, fmt: str, split_at: int
) -> None:
    import random as random_mod

    import lz4.frame
    import zstandard

    def frame(data: bytes) -> bytes:
        if fmt == "tar.lz4":
            return bytes(lz4.frame.compress(data))
        return bytes(zstandard.ZstdCompressor(level=1).compress(data))

    members = {"r.bin": random_mod.Random(5).randbytes(200_000), "b.txt": b"bravo\n"}
    tar = regular_tar(members)
    # Find a first frame ending ``split_at`` bytes before the reader's 64 KiB read boundary, so
    # the second frame's magic number is split across two reads.
    for n in range(65_000, 66_000):
        first = frame(tar[:n])
        if len(first) == 65_536 - split_at:
            break
    else:
        pytest.skip(f"no frame length lands on the boundary for {fmt}")
    path = tmp_path / f"two{SUFFIX[fmt]}"
    path.write_bytes(first + frame(tar[n:]))
    assert dict(archives.scan(path, DEFAULT, manifest(members)).members) == manifest(members)


class _Unseekable(io.RawIOBase):
    def __init__(self) -> None:
        self.data = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, b: bytes) -> int:  # type: ignore[override]
        self.data += b
        return len(b)


@pytest.mark.parametrize("method", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_zip_with_data_descriptors_and_folder_entries_is_accepted(
    tmp_path: Path, method: int
) -> None:
    sink = _Unseekable()
    with zipfile.ZipFile(sink, "w", compression=method) as zf:
        zf.mkdir("data")
        for name, data in GOOD.items():
            with zf.open(name, "w") as f:
                f.write(data)
    path = tmp_path / "streamed.zip"
    path.write_bytes(bytes(sink.data))
    with zipfile.ZipFile(path) as zf:
        assert all(i.flag_bits & 0x8 for i in zf.infolist() if not i.is_dir())
    assert dict(archives.scan(path, DEFAULT, manifest(GOOD)).members) == manifest(GOOD)
