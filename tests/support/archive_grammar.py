"""Random archives built from the formats' grammar, for the differential tests.

Byte mutations (:mod:`tests.support.fuzzing`) are mostly refused by a checksum or a CRC before
any interesting rule runs. These generators build well-formed containers whose *fields* vary:
tar header chains (pax, global pax, GNU long names, prefix fields, magic variants, odd number
fields) with valid checksums, and zips whose attributes, extra fields, flags and local headers
vary while sizes and CRCs stay right. Most of them are read the same way by every reader; the
others show where readers disagree.
"""

from __future__ import annotations

import io
import random
import struct
import tarfile
import zipfile

from tests.support.hostile import (
    GNU_MAGIC,
    TAR_END,
    USTAR_MAGIC,
    pax_record,
    tar_pad,
    unicode_path_extra,
)

_NAMES = [
    b"a.txt",
    b"b/c.txt",
    b"d",
    b"e/f/g.bin",
    b"h" * 99,
    b"i" * 100,
    b"j" * 101,
    b"k" * 40 + b"/" + b"l" * 80,
    b"m" * 60 + b"/" + b"n" * 70 + b"/o.txt",
    b"p/",
    b"./q",
    b"r\0junk",
]
_MAGICS = [USTAR_MAGIC, GNU_MAGIC, bytes(8), b"ustar\x00  ", b"ustarX00", b"ustar \x0000"]
_TYPES = [b"0", b"0", b"0", b"\0", b"5", b"7", b"x", b"g", b"L", b"K", b"1", b"2", b"S", b"V", b"Z"]
_OCTAL = [
    b"0000644\0",
    b"000644 \0",
    b"   644 \0",
    b"0000644 ",
    b"\0" * 8,
    b" " * 8,
    b"0000644\0junk"[:8],
    b"\x80\0\0\0\0\0\x01\xa4",
    b"\xff" * 8,
    b"0000999\0",
]


def _octal(n: int, width: int) -> bytes:
    return b"%0*o\0" % (width - 1, n)


def _header(
    rng: random.Random,
    name: bytes,
    size: int,
    *,
    kind: bytes,
    magic: bytes,
    prefix: bytes = b"",
) -> bytes:
    block = bytearray(tarfile.BLOCKSIZE)
    block[0:100] = name[:100].ljust(100, b"\0")
    block[100:108] = rng.choice(_OCTAL) if rng.random() < 0.15 else b"0000644\0"
    block[108:116] = b"0000000\0" if rng.random() < 0.9 else rng.choice(_OCTAL)
    block[116:124] = b"0000000\0"
    block[124:136] = _octal(size, 12)
    if rng.random() < 0.05:
        block[124:136] = b"\x80" + size.to_bytes(11, "big")  # base-256 size
    block[136:148] = _octal(0, 12) if rng.random() < 0.9 else b"\xff" * 12
    block[156:157] = kind
    if kind in (b"1", b"2", b"K"):
        block[157:257] = rng.choice(_NAMES)[:100].ljust(100, b"\0")
    block[257:265] = magic
    block[345 : 345 + len(prefix)] = prefix[:155]
    if rng.random() < 0.05:
        block[rng.randrange(329, 512)] = rng.randrange(256)
    block[148:156] = b" " * 8
    checksum = _octal(sum(block), 7) + b" "
    if rng.random() < 0.05:
        checksum = rng.choice([b"%06o\0\xa0" % sum(block), b" %06o\0" % sum(block)])
    block[148:156] = checksum
    return bytes(block)


def _pax(rng: random.Random) -> bytes:
    keys = [b"path", b"size", b"linkpath", b"mtime", b"comment", b"uid", b"GNU.sparse.name"]
    out = b""
    for _ in range(rng.randint(1, 3)):
        key = rng.choice(keys)
        if key in (b"path", b"linkpath", b"GNU.sparse.name"):
            value = rng.choice(_NAMES).replace(b"\0", b"")
        elif key == b"size":
            value = str(rng.choice([0, 3, 5, 512])).encode()
        else:
            value = b"0"
        out += pax_record(key, value)
    return out


def random_tar(rng: random.Random) -> bytes:
    """A tar of 1-3 members, each behind a random chain of extended headers."""
    out = b""
    for _ in range(rng.choice([1, 1, 2, 3])):
        for _ in range(rng.choice([0, 0, 0, 1, 1, 2])):
            kind = rng.choice([b"x", b"x", b"g", b"L", b"K"])
            if kind in (b"x", b"g"):
                payload = _pax(rng)
                name = b"PaxHeader/x"
            else:
                payload = rng.choice(_NAMES).replace(b"\0", b"") + b"\0"
                name = b"././@LongLink"
            out += _header(
                rng, name, len(payload), kind=kind, magic=rng.choice(_MAGICS[:2])
            ) + tar_pad(payload)
        name = rng.choice(_NAMES) if rng.random() < 0.5 else rng.choice(_NAMES[:4])
        kind = rng.choice(_TYPES) if rng.random() < 0.15 else b"0"
        data = rng.choice([b"", b"data\n", bytes(range(256)) * 3])
        prefix = rng.choice([b"pre", b"k" * 40, b"14000000000"]) if rng.random() < 0.2 else b""
        magic = rng.choice(_MAGICS) if rng.random() < 0.3 else USTAR_MAGIC
        size = len(data) if kind in (b"0", b"\0", b"7") else rng.choice([0, 0, len(data)])
        out += _header(rng, name, size, kind=kind, magic=magic, prefix=prefix) + tar_pad(
            data[:size]
        )
    return out + rng.choice([TAR_END, TAR_END, TAR_END + bytes(512), bytes(512), b""])


def random_zip(rng: random.Random) -> bytes:
    """A zip of 1-3 entries with random attributes, extras, flags and local-header edits."""
    buf = io.BytesIO()
    entries: list[tuple[str, bytes]] = []
    with zipfile.ZipFile(buf, "w") as zf:
        used: set[str] = set()
        for _ in range(rng.choice([1, 1, 2, 3])):
            name = rng.choice(_NAMES).replace(b"\0", b"~").decode()
            if name in used:
                continue
            used.add(name)
            data = b"" if name.endswith("/") else rng.choice([b"", b"bravo\n", bytes(300)])
            info = zipfile.ZipInfo(name)
            info.compress_type = rng.choice([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
            info.create_system = rng.choice([0, 3, 3, 3, 11, 19])
            mode = rng.choice([0, 0o100644, 0o100755, 0o000644])
            if rng.random() < 0.15:
                mode = rng.choice([0o040755, 0o120777, 0o010644, 0o140644])
            info.external_attr = (mode << 16) | rng.choice([0, 0, 0, 0x10, 0x20, 0x01])
            extra = b""
            if rng.random() < 0.2:
                other = rng.choice(_NAMES).replace(b"\0", b"")
                extra += unicode_path_extra(
                    rng.choice([name.encode(), other]),
                    name.encode() if rng.random() < 0.8 else b"x",
                )
            if rng.random() < 0.1:
                extra += struct.pack("<HH", 0xCAFE, 4) + b"\0\0\0\0"
            info.extra = extra
            if rng.random() < 0.1:
                info.comment = b"a comment"
            if rng.random() < 0.1:
                info.flag_bits |= 0x800
            zf.writestr(info, data)
            entries.append((name, data))
    raw = bytearray(buf.getvalue())
    # Occasionally edit one local header field in place (name byte, flags, version, CRC).
    if entries and rng.random() < 0.15:
        at = raw.find(b"PK\x03\x04", rng.randrange(len(raw)) // 2)
        if at < 0:
            at = raw.find(b"PK\x03\x04")
        field = rng.choice([(4, 2), (6, 2), (14, 4), (30, 1)])
        start = at + field[0]
        raw[start : start + field[1]] = rng.randbytes(field[1])
    if rng.random() < 0.05:
        end = raw.rfind(b"PK\x05\x06")
        raw[end + 4 : end + 6] = b"\x01\x00"  # a multi-disk end record
    return bytes(raw)
