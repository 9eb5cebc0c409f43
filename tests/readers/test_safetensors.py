"""The safetensors reader, differentially against the ``safetensors`` package.

On a valid corpus both load the same tensors (bytes, dtype, shape) and metadata; on the hostile
corpus this reader refuses every file with the rule named, and where the package loads a file
anyway the case says why the rules refuse it; hypothesis-generated headers and mutated files
hold both readers to the same contract.
"""

from __future__ import annotations

import os
import re
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.numpy import save

from fixture_store import limits
from fixture_store._extras import MissingExtraError
from fixture_store.errors import DigestMismatchError, UnsafeArrayError
from fixture_store.limits import DEFAULT
from fixture_store.readers import formats
from fixture_store.readers import safetensors as reader
from fixture_store.readers.pinned import PinnedFile
from tests.support.safetensors_corpus import entry, ours, st_bytes, theirs

# Every dtype the allowlist has, as numpy (with ml_dtypes) holds it.
NUMPY_DTYPES: dict[str, Any] = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "BF16": ml_dtypes.bfloat16,
    "F8_E4M3": ml_dtypes.float8_e4m3fn,
    "F8_E5M2": ml_dtypes.float8_e5m2,
    "I64": np.int64,
    "I32": np.int32,
    "I16": np.int16,
    "I8": np.int8,
    "U64": np.uint64,
    "U32": np.uint32,
    "U16": np.uint16,
    "U8": np.uint8,
    "BOOL": np.bool_,
}
TIGHT = limits.tighten(
    DEFAULT, metadata_bytes=256, tensor_count=2, tensor_dimension=8, tensor_bytes=64
)
TIGHT_TOTAL = limits.tighten(DEFAULT, total_array_bytes=6)


def _write(tmp_path: Path, data: bytes, name: str = "f.safetensors") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _values(dtype: Any, shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
    count = int(np.prod(shape))
    raw = np.arange(count) % 7 - 3
    if np.dtype(dtype) == np.bool_:
        return (raw > 0).reshape(shape)
    if np.dtype(dtype).kind == "u":
        raw = np.abs(raw)
    return raw.astype(dtype).reshape(shape)


# -- the valid corpus: both readers load the same ----------------------------------------------
VALID: dict[str, bytes] = {
    **{
        f"dtype-{code}": save({"t": _values(dt, (2, 3)), "s": _values(dt, ())})
        for code, dt in NUMPY_DTYPES.items()
    },
    "empty-file": save({}),
    "empty-tensors": save({"e": np.zeros((0, 3), np.float32), "z": np.zeros(0, np.int8)}),
    "scalars": save({"a": np.array(1.5, np.float32), "b": np.ones((), np.int64)}),
    "metadata": save({"w": np.ones((4,), np.float16)}, metadata={"format": "pt", "note": "é"}),
    "metadata-only": save({}, metadata={"k": "v"}),
    "rank-8": save({"r": np.ones((1, 2, 1, 2, 1, 2, 1, 2), np.uint8)}),
    # Offsets need not follow key order; header order and file order may differ.
    "reordered": st_bytes(
        {"b": entry("U8", [2], 2, 4), "a": entry("U8", [2], 0, 2)}, bytes([1, 2, 3, 4])
    ),
    # Two empty tensors at the same offset share no byte: not an overlap.
    "empty-at-one-offset": st_bytes(
        {"x": entry("F32", [0], 4, 4), "y": entry("F32", [1], 0, 4), "z": entry("I8", [0], 4, 4)},
        b"\0\0\x80?",
    ),
    # Header padding with spaces (the package pads to 8 bytes) is JSON whitespace.
    "padded-header": st_bytes(b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}   ', b"\7"),
}


@pytest.mark.parametrize("case", sorted(VALID))
def test_valid_corpus_loads_as_the_package_loads_it(tmp_path: Path, case: str) -> None:
    path = _write(tmp_path, VALID[case])
    mine, reference = ours(path), theirs(path)
    assert reference.loaded, reference.refused
    assert mine.loaded, mine.refused
    assert mine == reference
    assert formats.sniff(path) == "safetensors"


def test_every_allowed_dtype_is_in_the_valid_corpus() -> None:
    assert set(NUMPY_DTYPES) == set(reader.DTYPES)
    for code, dt in NUMPY_DTYPES.items():
        assert reader.DTYPES[code] == (np.dtype(dt).name, np.dtype(dt).itemsize)


def test_tensors_are_read_only_arrays_of_their_own_read_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path, save({"a": np.arange(6, dtype=np.float32).reshape(2, 3)}))
    reads: list[tuple[int, int]] = []
    original = PinnedFile.read

    def counted(self: PinnedFile, at: int, n: int) -> Any:
        reads.append((at, n))
        return original(self, at, n)

    monkeypatch.setattr(PinnedFile, "read", counted)
    tensors = reader.open_tensors(path)
    assert not reads  # checking the header reads no tensor
    a = tensors["a"]
    assert reads == [(tensors.header.data_offset, 24)]
    assert not a.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        a[0, 0] = 1
    np.testing.assert_array_equal(a, np.arange(6, dtype=np.float32).reshape(2, 3))
    with pytest.raises(KeyError):
        tensors["missing"]


def _two_tensors(tmp_path: Path) -> Path:
    return _write(
        tmp_path,
        save({"a": np.arange(4096, dtype=np.float32), "b": np.ones(4096, dtype=np.float32)}),
    )


@pytest.mark.parametrize("change", ["truncated", "rewritten-in-place"])
def test_a_file_changed_after_its_header_was_checked_is_refused_naming_it(
    tmp_path: Path, change: str
) -> None:
    """The trust model leaves store writers out, but the reader says what happened: no bare
    ValueError from a map longer than the file, no other values than the ones checked."""
    path = _two_tensors(tmp_path)
    tensors = reader.open_tensors(path, artifact="fam/model")
    if change == "truncated":
        os.truncate(path, path.stat().st_size - 4096)
    else:
        data = bytearray(path.read_bytes())
        data[-4:] = b"\xff\xff\xff\xff"
        with open(path, "r+b") as f:  # in place: same inode, same size
            f.write(data)
    for name in ("a", "b"):
        with pytest.raises(DigestMismatchError) as info:
            tensors[name]
        assert "fam/model" in str(info.value) and "changed after it was verified" in str(info.value)
        assert info.value.fix


def test_truncation_while_tensors_are_in_use_cannot_kill_the_process(tmp_path: Path) -> None:
    """With a memory map, truncating the file after the first tensor was read made the next
    read die of SIGBUS; run in a child, so that would fail this test, not end the run."""
    path = _two_tensors(tmp_path)
    code = (
        "import os\n"
        "from fixture_store.errors import DigestMismatchError\n"
        "from fixture_store.readers import safetensors\n"
        f"t = safetensors.open_tensors({str(path)!r}, artifact='fam/model')\n"
        "a = t['a']\n"
        f"os.truncate({str(path)!r}, 200)\n"
        "print(float(a.sum()))\n"
        "try:\n"
        "    t['b'].sum()\n"
        "except DigestMismatchError as e:\n"
        "    print('refused:', e)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, (done.returncode, done.stderr)
    first, refused = done.stdout.splitlines()[:2]
    assert float(first) == float(np.arange(4096).sum())
    assert refused.startswith("refused: fam/model:")


def test_the_manifest_is_the_header_and_must_match(tmp_path: Path) -> None:
    path = _write(tmp_path, save({"w": np.ones((2, 3), ml_dtypes.bfloat16), "b": np.ones(3)}))
    manifest = reader.read_header(path).manifest()
    assert manifest == {
        "b": {"dtype": "float64", "shape": [3]},
        "w": {"dtype": "bfloat16", "shape": [2, 3]},
    }
    reader.check(path, DEFAULT, manifest)
    wrong: list[tuple[dict[str, Any], str]] = [
        ({**manifest, "x": {"dtype": "float64", "shape": []}}, "manifest-missing"),
        ({"w": manifest["w"]}, "manifest-extra"),
        ({**manifest, "b": {"dtype": "float32", "shape": [3]}}, "manifest-dtype"),
        ({**manifest, "w": {"dtype": "bfloat16", "shape": [3, 2]}}, "manifest-shape"),
    ]
    for spec, rule in wrong:
        with pytest.raises(UnsafeArrayError) as info:
            reader.check(path, DEFAULT, spec)
        assert info.value.rule == rule


def test_bfloat16_needs_ml_dtypes_only_when_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path, save({"w": np.ones(2, ml_dtypes.bfloat16), "f": np.ones(2)}))
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # as if it were not installed
    tensors = reader.open_tensors(path)  # the header check needs no ml_dtypes
    np.testing.assert_array_equal(tensors["f"], np.ones(2))
    with pytest.raises(MissingExtraError, match=r"reading bfloat16 tensor 'w'.*ml_dtypes") as info:
        tensors["w"]
    assert info.value.fix is not None and "fixture-store[onnx]" in info.value.fix


# -- the hostile corpus: (case, bytes, rule, profile, why the package loads it or None) --------
U8 = entry("U8", [2], 0, 2)
HOSTILE: list[tuple[str, bytes, str, limits.Limits, str | None]] = [
    ("short-file", b"\x02\0\0", "truncated", DEFAULT, None),
    (
        "header-past-the-file",
        struct.pack("<Q", 1000) + b"{}",
        "safetensors-header-length",
        DEFAULT,
        None,
    ),
    # The profile bounds the length itself, before the file's size is consulted or a byte read.
    ("length-over-the-profile", struct.pack("<Q", 1 << 62) + b"{}", "metadata-size", DEFAULT, None),
    (
        "header-over-the-profile",
        st_bytes({"a": U8, "pad": "x" * 300}, b"\0\0"),
        "metadata-size",
        TIGHT,
        None,  # the pad entry is no tensor: the package refuses it too
    ),
    (
        "header-over-the-profile-valid",
        st_bytes({"__metadata__": {"pad": "x" * 300}, "a": U8}, b"\0\0"),
        "metadata-size",
        TIGHT,
        "the package takes headers up to 100 MB; the profile bounds what a record reviewed",
    ),
    (
        "header-starts-with-space",
        st_bytes(b' {"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}', b"\0\0"),
        "safetensors-header-start",
        DEFAULT,
        "the format says the header MUST begin with '{'; the package skips leading whitespace",
    ),
    ("header-not-json", st_bytes(b"{nope", b""), "metadata-json", DEFAULT, None),
    ("header-trailing-text", st_bytes(b"{} x", b""), "metadata-json", DEFAULT, None),
    ("header-not-utf8", st_bytes(b'{"\xff":1}', b""), "metadata-json", DEFAULT, None),
    (
        "header-nan-offset",
        st_bytes(b'{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,NaN]}}', b"\0\0"),
        "metadata-json",
        DEFAULT,
        None,
    ),
    (
        "duplicate-key",
        st_bytes(
            b'{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},'
            b'"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}',
            b"\0\0",
        ),
        "metadata-duplicate-key",
        DEFAULT,
        "the package keeps the last of two equal keys; JSON leaves duplicates undefined, so two "
        "readers may see different tensors: refused",
    ),
    (
        "duplicate-metadata-key",
        st_bytes(b'{"__metadata__":{"k":"1","k":"2"}}', b""),
        "metadata-duplicate-key",
        DEFAULT,
        "as for tensor names: the package keeps the last value",
    ),
    (
        "metadata-not-strings",
        st_bytes({"__metadata__": {"epoch": 3}, "a": U8}, b"\0\0"),
        "safetensors-metadata",
        DEFAULT,
        None,
    ),
    (
        "metadata-a-list",
        st_bytes({"__metadata__": ["a"]}, b""),
        "safetensors-metadata",
        DEFAULT,
        None,
    ),
    (
        "metadata-null",
        st_bytes({"__metadata__": None}, b""),
        "safetensors-metadata",
        DEFAULT,
        "the package reads null as no metadata; the rule is a map of strings, nothing else",
    ),
    (
        "unknown-dtype",
        st_bytes({"a": entry("X9", [1], 0, 1)}, b"\0"),
        "safetensors-dtype",
        DEFAULT,
        None,
    ),
    (
        "dtype-outside-the-allowlist",
        st_bytes({"a": entry("C64", [1], 0, 8)}, b"\0" * 8),
        "safetensors-dtype",
        DEFAULT,
        "the package knows complex64; the allowlist holds the float, int and bool types only",
    ),
    (
        "dtype-sub-byte",
        st_bytes({"a": entry("F4", [2], 0, 1)}, b"\0"),
        "safetensors-dtype",
        DEFAULT,
        None,  # the package's numpy reader fails on it (AttributeError): not a load
    ),
    (
        "rank-9",
        st_bytes({"a": entry("U8", [1] * 9, 0, 1)}, b"\0"),
        "tensor-rank",
        DEFAULT,
        "the package has no rank bound; the profile's is 8",
    ),
    (
        "dimension-over-the-profile",
        st_bytes({"a": entry("U8", [9], 0, 9)}, b"\0" * 9),
        "tensor-dimension",
        TIGHT,
        "the package has no dimension bound",
    ),
    (
        "tensor-count-over-the-profile",
        st_bytes({n: entry("U8", [1], i, i + 1) for i, n in enumerate("abc")}, b"\0" * 3),
        "tensor-count",
        TIGHT,
        "the package has no count bound",
    ),
    (
        "tensor-bytes-over-the-profile",
        st_bytes({"a": entry("F64", [8, 2], 0, 128)}, b"\0" * 128),
        "tensor-bytes",
        TIGHT,
        "the package has no size bound but the file's",
    ),
    (
        "total-bytes-over-the-profile",
        st_bytes({"a": entry("U8", [4], 0, 4), "b": entry("U8", [4], 4, 8)}, b"\0" * 8),
        "total-array-bytes",
        TIGHT_TOTAL,
        "the package has no size bound but the file's",
    ),
    (
        "length-disagrees-with-shape",
        st_bytes({"a": entry("U16", [2], 0, 2)}, b"\0\0"),
        "safetensors-length",
        DEFAULT,
        None,
    ),
    (
        "overlapping-offsets",
        st_bytes({"a": U8, "b": entry("U8", [2], 1, 3)}, b"\0" * 3),
        "safetensors-overlap",
        DEFAULT,
        None,
    ),
    (
        "same-offsets",
        st_bytes({"a": U8, "b": U8}, b"\0\0"),
        "safetensors-overlap",
        DEFAULT,
        None,
    ),
    (
        "hole-between-tensors",
        st_bytes({"a": U8, "b": entry("U8", [2], 3, 5)}, b"\0" * 5),
        "safetensors-hole",
        DEFAULT,
        None,
    ),
    (
        "hole-at-the-start",
        st_bytes({"a": entry("U8", [2], 1, 3)}, b"\0" * 3),
        "safetensors-hole",
        DEFAULT,
        None,
    ),
    ("trailing-bytes", st_bytes({"a": U8}, b"\0" * 3), "trailing-data", DEFAULT, None),
    ("trailing-bytes-no-tensors", st_bytes({}, b"\0"), "trailing-data", DEFAULT, None),
    (
        "offset-past-the-data",
        st_bytes({"a": entry("U8", [2], 0, 2)}, b"\0"),
        "safetensors-bounds",
        DEFAULT,
        None,
    ),
    (
        "end-before-begin",
        st_bytes({"a": entry("U8", [0], 2, 0)}, b"\0\0"),
        "safetensors-bounds",
        DEFAULT,
        None,
    ),
    (
        "entry-with-an-extra-field",
        st_bytes({"a": {**U8, "extra": 1}}, b"\0\0"),
        "safetensors-header",
        DEFAULT,
        "the package ignores unknown fields; an entry is exactly {dtype, shape, data_offsets}",
    ),
    (
        "entry-missing-shape",
        st_bytes({"a": {"dtype": "U8", "data_offsets": [0, 0]}}, b""),
        "safetensors-header",
        DEFAULT,
        None,
    ),
    (
        "float-shape",
        st_bytes({"a": {**U8, "shape": [2.0]}}, b"\0\0"),
        "safetensors-header",
        DEFAULT,
        None,
    ),
    (
        "negative-shape",
        st_bytes({"a": entry("U8", [-2], 0, 2)}, b"\0\0"),
        "safetensors-header",
        DEFAULT,
        None,
    ),
    (
        "bool-shape",
        st_bytes({"a": {**U8, "shape": [True, True]}}, b"\0\0"),
        "safetensors-header",
        DEFAULT,
        None,
    ),
    (
        "three-offsets",
        st_bytes({"a": {**U8, "data_offsets": [0, 1, 2]}}, b"\0\0"),
        "safetensors-header",
        DEFAULT,
        None,
    ),
    ("header-an-array", st_bytes(b"[]"), "safetensors-header-start", DEFAULT, None),
    (
        "tensor-name-lone-surrogate",
        st_bytes(b'{"\\ud800":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}', b"\0\0"),
        "metadata-value",
        DEFAULT,
        None,
    ),
    (
        "metadata-value-lone-surrogate",
        st_bytes(
            b'{"__metadata__":{"k":"x\\udc80"},"a":{"dtype":"U8","shape":[2],'
            b'"data_offsets":[0,2]}}',
            b"\0\0",
        ),
        "metadata-value",
        DEFAULT,
        None,
    ),
]


@pytest.mark.parametrize(
    ("case", "data", "rule", "profile", "why"), HOSTILE, ids=[c[0] for c in HOSTILE]
)
def test_hostile_corpus_is_refused_naming_the_rule(
    tmp_path: Path, case: str, data: bytes, rule: str, profile: limits.Limits, why: str | None
) -> None:
    path = _write(tmp_path, data)
    with pytest.raises(UnsafeArrayError) as info:
        reader.open_tensors(path, profile, artifact="fam/model")
    assert info.value.rule == rule, info.value.message
    assert f"[{rule}]" in str(info.value) and "fam/model" in str(info.value)
    assert info.value.fix
    reference = theirs(path)
    if why is None:
        assert not reference.loaded, f"{case}: the package loads it, so say why the rules refuse it"
    else:
        assert reference.loaded, f"{case}: the package refuses it too ({reference.refused})"


def test_every_rule_of_the_reader_is_in_the_hostile_corpus() -> None:
    source = Path(reader.__file__).read_text()
    rules = set(re.findall(r'_fail\(\s*\w+,\s*"([a-z0-9-]+)"', source))
    manifest_rules = {"manifest-extra", "manifest-missing", "manifest-dtype", "manifest-shape"}
    # read_metadata's, for the header
    json_rules = {"metadata-json", "metadata-duplicate-key", "metadata-value"}
    assert {c[2] for c in HOSTILE} == (rules - manifest_rules) | json_rules


def test_a_name_utf8_cannot_hold_is_refused_escaped_naming_the_artifact(tmp_path: Path) -> None:
    """A tensor name holding a lone surrogate would reach the registry, and output, as text
    UTF-8 cannot write: it is refused where the header is read, the name shown escaped."""
    header = b'{"ok\\ud800":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}'
    path = _write(tmp_path, st_bytes(header, b"\0\0"))
    with pytest.raises(UnsafeArrayError) as info:
        reader.check(path, artifact="fam/model")
    shown = str(info.value)
    assert "fam/model" in shown and "'ok\\ud800'" in shown and "lone surrogate" in shown
    shown.encode("utf-8")  # printable as it is


# -- generated files: what the package loads, this reader loads identically --------------------
# Rules stricter than the package, and why: where the package loads a file this reader refuses,
# the rule must be one of these.
STRICTER = {
    "safetensors-dtype": "complex and sub-byte dtypes are outside the allowlist",
    "safetensors-header": "an entry is exactly {dtype, shape, data_offsets}",
    "safetensors-header-start": "the format says the header begins with '{'",
    "safetensors-metadata": "null metadata is not a map of strings",
    "metadata-duplicate-key": "duplicate JSON keys are ambiguous",
    "metadata-size": "the profile bounds the header",
    "tensor-rank": "the profile bounds the rank",
    "tensor-dimension": "the profile bounds each dimension",
    "tensor-count": "the profile bounds the count",
    "tensor-bytes": "the profile bounds a tensor",
    "total-array-bytes": "the profile bounds the total",
}
CODES = sorted(reader.DTYPES)
SPECS = st.dictionaries(
    st.text(st.characters(codec="utf-8", exclude_characters='"\\'), min_size=1, max_size=6).filter(
        lambda k: k != "__metadata__"
    ),
    st.tuples(st.sampled_from(CODES), st.lists(st.integers(0, 4), max_size=3)),
    max_size=5,
)


def _tiled(specs: dict[str, tuple[str, list[int]]], order: list[int]) -> tuple[dict[str, Any], int]:
    """A header laying the tensors end to end in the file order ``order`` gives."""
    names = list(specs)
    ranked = sorted(range(len(names)), key=lambda i: order[i % len(order)] if order else i)
    header: dict[str, Any] = {}
    cursor = 0
    for i in ranked:
        code, shape = specs[names[i]]
        nbytes = int(np.prod(shape)) * reader.DTYPES[code][1]
        header[names[i]] = entry(code, shape, cursor, cursor + nbytes)
        cursor += nbytes
    return dict(sorted(header.items(), key=lambda kv: names.index(kv[0]))), cursor


def _agree(path: Path) -> None:
    """The differential contract on one file."""
    mine, reference = ours(path), theirs(path)
    if mine.loaded:
        assert reference.loaded, f"this reader loads what the package refuses: {reference.refused}"
        assert mine == reference
    elif reference.loaded:
        assert mine.refused in STRICTER, f"refused ({mine.refused}) what the package loads"


FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(specs=SPECS, order=st.lists(st.integers(0, 9), max_size=5), data=st.data())
def test_generated_files_load_as_the_package_loads_them(
    specs: dict[str, tuple[str, list[int]]], order: list[int], data: st.DataObject
) -> None:
    header, size = _tiled(specs, order)
    payload = data.draw(st.binary(min_size=size, max_size=size))
    metadata = data.draw(st.none() | st.dictionaries(st.text(max_size=4), st.text(max_size=4)))
    if metadata is not None:
        header["__metadata__"] = metadata
    with tempfile.TemporaryDirectory() as folder:
        path = _write(Path(folder), st_bytes(header, payload))
        mine, reference = ours(path), theirs(path)
        assert mine.loaded, mine.refused
        assert mine == reference


PERTURB = st.sampled_from(
    [
        "begin",
        "end",
        "shift",
        "slide",
        "slide",
        "shape",
        "dtype",
        "trailing",
        "short",
        "rank",
        "extra-key",
        "metadata",
    ]
)


@FUZZ
@given(
    specs=SPECS.filter(bool),
    order=st.lists(st.integers(0, 9), max_size=5),
    how=st.lists(st.tuples(PERTURB, st.integers(-3, 3)), min_size=1, max_size=2),
    data=st.data(),
)
def test_perturbed_files_are_refused_as_the_package_refuses_them(
    specs: dict[str, tuple[str, list[int]]],
    order: list[int],
    how: list[tuple[str, int]],
    data: st.DataObject,
) -> None:
    header, size = _tiled(specs, order)
    for what, delta in how:
        victim = header[data.draw(st.sampled_from(sorted(specs)))]
        size = _perturb(header, victim, what, delta, size, data)
    with tempfile.TemporaryDirectory() as folder:
        path = _write(Path(folder), st_bytes(header, bytes(max(size, 0))))
        _agree(path)


def _slide(header: dict[str, Any], victim: dict[str, Any], delta: int) -> int:
    """Move ``victim`` and every tensor after it by ``delta``: a pure hole, or a pure overlap;
    returns the shift, by which the data section grows."""
    begin: int = victim["data_offsets"][0]
    shift = max(delta, -begin)
    for spec in header.values():
        if isinstance(spec, dict) and "data_offsets" in spec and spec["data_offsets"][0] >= begin:
            spec["data_offsets"] = [o + shift for o in spec["data_offsets"]]
    return shift


def _perturb(
    header: dict[str, Any],
    victim: dict[str, Any],
    what: str,
    delta: int,
    size: int,
    data: st.DataObject,
) -> int:
    """Break one thing of ``header`` (or of the data size, which it returns)."""
    if what in ("begin", "end"):
        i = 0 if what == "begin" else 1
        victim["data_offsets"][i] = max(0, victim["data_offsets"][i] + delta)
    elif what == "shift":  # the same length elsewhere: overlaps, holes, out of bounds
        begin, end = victim["data_offsets"]
        shift = max(delta, -begin)
        victim["data_offsets"] = [begin + shift, end + shift]
    elif what == "slide":
        return size + _slide(header, victim, delta)
    elif what == "shape":
        victim["shape"] = [*victim["shape"], max(0, delta)]
    elif what == "rank":
        victim["shape"] = [1] * (9 + abs(delta))
    elif what == "dtype":
        victim["dtype"] = data.draw(st.sampled_from([*CODES, "C64", "F4", "X9", "f32"]))
    elif what == "extra-key":
        victim["extra"] = delta
    elif what == "metadata":
        header["__metadata__"] = data.draw(
            st.sampled_from([None, {"k": delta}, ["k"], "k", {"k": str(delta)}])
        )
    elif what == "trailing":
        return size + abs(delta) + 1
    elif what == "short":
        return size - abs(delta) - 1
    return size


@FUZZ
@given(
    base=st.sampled_from(sorted(VALID)),
    flips=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 255)), min_size=1, max_size=4),
)
def test_mutated_bytes_are_refused_with_a_rule_or_load_as_the_package_loads_them(
    base: str, flips: list[tuple[int, int]]
) -> None:
    data = bytearray(VALID[base])
    for at, value in flips:
        data[at % len(data)] = value
    with tempfile.TemporaryDirectory() as folder:
        path = _write(Path(folder), bytes(data))
        _agree(path)
