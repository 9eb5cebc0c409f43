"""The hostile archive corpus: a case per rule, for tar (plain, lz4, zstd) and zip.

Every case is built by code from one good pair of members (``GOOD``); ``assert_refused`` is what
each case must do: be refused by extraction and by the scanning reader with its rule, leaving
nothing behind.
"""

from __future__ import annotations

import io
import random
import tarfile
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fixture_store import limits
from fixture_store.errors import UnsafeArchiveError
from fixture_store.limits import DEFAULT, MiB
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


def metadata_json(size: int) -> bytes:
    """A JSON document of exactly ``size`` bytes that compresses poorly (so no ratio rule)."""
    pad = random.Random(size).randbytes(size).hex()[: size - len('{"pad":""}')]
    return b'{"pad":"' + pad.encode() + b'"}'


# One byte over the 1 GiB profile's metadata bytes (1 MiB), beside the good members.
BIG_METADATA = {**GOOD, "ckpt/metadata.json": metadata_json(limits.GIB_1.metadata_bytes + 1)}
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
        Case(
            "metadata-size",
            fmt,
            z(regular_tar(BIG_METADATA)),
            "metadata-size",
            manifest(BIG_METADATA),
            limits.GIB_1,
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


def _zip_folder(name: str) -> bytes:
    """The good zip with one more folder entry named ``name``."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for member, data in GOOD.items():
            zf.writestr(member, data)
        zf.writestr(zipfile.ZipInfo(name), b"")
    return buf.getvalue()


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
        Case("dotdot-folder", "zip", _zip_folder("../../x/"), "traversal"),
        Case("absolute-folder", "zip", _zip_folder("/tmp/evil/"), "absolute-path"),
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
        Case(
            "metadata-size",
            "zip",
            zip_bytes(BIG_METADATA, method=zipfile.ZIP_DEFLATED),
            "metadata-size",
            manifest(BIG_METADATA),
            limits.GIB_1,
        ),
        Case("truncated", "zip", good[:-30], "corrupt"),
        Case("not-a-zip", "zip", b"PK" + b"\x00" * 100, "corrupt"),
    ]


CASES = [c for fmt in TAR_FORMATS for c in _tar_cases(fmt)] + _zip_cases()


def case_id(case: Case) -> str:
    return f"{case.fmt}-{case.name}"


def assert_refused(tmp_path: Path, case: Case) -> None:
    """Extraction refuses the case with its rule and writes nothing; so does the scan."""
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
