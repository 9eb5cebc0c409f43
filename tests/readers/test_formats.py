"""Formats by leading bytes: safetensors (no magic) is told apart from every other format."""

from __future__ import annotations

import io
import json
import struct
import zipfile

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from safetensors.numpy import save

from fixture_store.readers import formats
from tests.support.hostile import compress, regular_tar

GOOD = {"a.bin": b"alpha" * 100}


def _npy() -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.arange(3))
    return buf.getvalue()


def _npz() -> bytes:
    buf = io.BytesIO()
    np.savez(buf, x=np.arange(3))
    return buf.getvalue()


def _empty_zip() -> bytes:
    buf = io.BytesIO()
    zipfile.ZipFile(buf, "w").close()
    return buf.getvalue()


@pytest.mark.parametrize(
    ("data", "fmt"),
    [
        (save({"a": np.ones(2, np.float32)}), "safetensors"),
        (save({}), "safetensors"),
        (_npy(), "npy"),
        (_npz(), "zip"),
        (_empty_zip(), "zip"),
        (regular_tar(GOOD), "tar"),
        (compress(regular_tar(GOOD), "tar.lz4"), "tar.lz4"),
        (compress(regular_tar(GOOD), "tar.zst"), "tar.zst"),
        (json.dumps({"a": 1}).encode(), "unknown"),
        (b"", "unknown"),
        (b"\x02\0\0\0\0\0\0\0", "unknown"),  # a length and nothing after it
        (struct.pack("<Q", 1) + b"{", "unknown"),  # no JSON object is one byte
        (struct.pack("<Q", 100_000_001) + b"{}", "unknown"),  # past the format's own ceiling
        (struct.pack("<Q", 2) + b"[]", "unknown"),
    ],
)
def test_each_format_is_told_by_its_leading_bytes(data: bytes, fmt: str) -> None:
    assert formats.sniff_bytes(data[: formats.HEAD_BYTES]) == fmt


def test_a_safetensors_header_holding_ustar_at_the_tar_offset_is_safetensors() -> None:
    name = "x" * 300
    data = save({name: np.ones(1, np.uint8)})
    head = data[: formats.HEAD_BYTES]
    padded = head[: formats.TAR_MAGIC_OFFSET] + b"ustar"
    assert formats.sniff_bytes(padded) == "safetensors"


@given(st.binary(max_size=formats.HEAD_BYTES))
def test_text_never_sniffs_as_safetensors(data: bytes) -> None:
    """Printable text (a JSON document, a name) cannot carry zero bytes in a length's top half."""
    text = bytes(b % 95 + 32 for b in data)
    assert formats.sniff_bytes(text) != "safetensors"
