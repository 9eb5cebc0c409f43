"""Safe NPY/NPZ readers: the hostile tensor corpus (one case per rule) and property tests."""

from __future__ import annotations

import io
import os
import pickle
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from fixture_store import limits
from fixture_store.errors import UnsafeArrayError
from fixture_store.limits import DEFAULT
from fixture_store.readers import npy as arrays
from tests.support.hostile import header, npy_bytes


def _npy(arr: np.ndarray[Any, Any]) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    return buf.getvalue()


# -- hostile NPY corpus: (case, bytes, rule, limits) -----------------------------------------
TIGHT_HEADER = limits.tighten(DEFAULT, tensor_header_bytes=128)
NPY_CASES: list[tuple[str, bytes, str, limits.Limits]] = [
    ("bad-magic", b"\x93NUMPX\x01\x00" + b"\0" * 70, "npy-magic", DEFAULT),
    ("version-4", npy_bytes(header(), b"\0" * 8, version=(4, 0)), "npy-version", DEFAULT),
    ("version-0", npy_bytes(header(), b"\0" * 8, version=(0, 9)), "npy-version", DEFAULT),
    (
        "header-too-large",
        npy_bytes(header() + " " * 200, b"\0" * 8),
        "npy-header-size",
        TIGHT_HEADER,
    ),
    ("header-code", npy_bytes("__import__('os').system('true')"), "npy-header", DEFAULT),
    ("header-not-dict", npy_bytes("('<f4', False, (2,))"), "npy-header", DEFAULT),
    (
        "header-extra-key",
        npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", b"\0" * 8),
        "npy-header",
        DEFAULT,
    ),
    (
        "header-missing-key",
        npy_bytes("{'descr': '<f4', 'shape': (2,)}", b"\0" * 8),
        "npy-header",
        DEFAULT,
    ),
    ("header-nested", npy_bytes("(" * 300 + ")" * 300), "npy-header", DEFAULT),
    ("fortran-not-bool", npy_bytes(header(fortran="1"), b"\0" * 8), "npy-header", DEFAULT),
    ("shape-not-ints", npy_bytes(header(shape="(2.0,)"), b"\0" * 8), "npy-header", DEFAULT),
    ("shape-negative", npy_bytes(header(shape="(-2,)")), "npy-header", DEFAULT),
    ("object-dtype", npy_bytes(header(descr="'|O'"), b"\0" * 16), "npy-object", DEFAULT),
    (
        "structured-dtype",
        npy_bytes(header(descr="[('a', '<f4'), ('b', '|O')]"), b"\0" * 24),
        "npy-dtype",
        DEFAULT,
    ),
    ("structured-string", npy_bytes(header(descr="'f4,f4'"), b"\0" * 16), "npy-dtype", DEFAULT),
    ("subarray-dtype", npy_bytes(header(descr="'(2,)<f4'"), b"\0" * 16), "npy-dtype", DEFAULT),
    ("void-dtype", npy_bytes(header(descr="'|V8'"), b"\0" * 16), "npy-dtype", DEFAULT),
    ("unknown-dtype", npy_bytes(header(descr="'<q99'"), b"\0" * 16), "npy-dtype", DEFAULT),
    ("deprecated-dtype", npy_bytes(header(descr="'|a2'"), b"\0" * 4), "npy-dtype", DEFAULT),
    ("rank-9", npy_bytes(header(shape="(" + "1," * 9 + ")"), b"\0" * 4), "tensor-rank", DEFAULT),
    (
        "dimension",
        npy_bytes(header(shape="(65537,)"), b"\0" * 4 * 65537),
        "tensor-dimension",
        DEFAULT,
    ),
    # 32 GiB declared: refused from the header alone, nothing allocated.
    (
        "tensor-bytes",
        npy_bytes(header(descr="'<f8'", shape="(65536, 65536)")),
        "tensor-bytes",
        DEFAULT,
    ),
    ("truncated-header", npy_bytes(header(), b"", header_len=500), "truncated", DEFAULT),
    ("truncated-payload", npy_bytes(header(shape="(4,)"), b"\0" * 15), "truncated", DEFAULT),
    ("trailing-data", npy_bytes(header(shape="(4,)"), b"\0" * 17), "trailing-data", DEFAULT),
    ("empty", b"", "truncated", DEFAULT),
]


@pytest.mark.parametrize(
    ("case", "data", "rule", "profile"), NPY_CASES, ids=[c[0] for c in NPY_CASES]
)
def test_hostile_npy_is_refused_from_a_file(
    tmp_path: Path, case: str, data: bytes, rule: str, profile: limits.Limits
) -> None:
    path = tmp_path / f"{case}.npy"
    path.write_bytes(data)
    with pytest.raises(UnsafeArrayError) as info:
        arrays.read_npy(path, profile, artifact=f"hostile/{case}")
    assert info.value.rule == rule
    assert f"hostile/{case}" in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


@pytest.mark.parametrize(
    ("data", "rule", "profile"), [c[1:] for c in NPY_CASES], ids=[c[0] for c in NPY_CASES]
)
def test_hostile_npy_is_refused_from_a_stream(
    data: bytes, rule: str, profile: limits.Limits
) -> None:
    with pytest.raises(UnsafeArrayError) as info:
        arrays.read_npy(io.BytesIO(data), profile)
    assert info.value.rule == rule


class _Boom:
    """Unpickling this would create a file: proof that no pickle ever runs."""

    def __init__(self, target: str) -> None:
        self.target = target

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.target, "w"))


def test_a_pickled_object_array_never_loads(tmp_path: Path) -> None:
    target = tmp_path / "pwned"
    obj = np.empty(1, dtype=object)
    obj[0] = _Boom(str(target))
    path = tmp_path / "evil.npy"
    with open(path, "wb") as f:
        np.lib.format.write_array(f, obj, allow_pickle=True)
    assert pickle.dumps(obj)  # the payload really is a pickle
    with pytest.raises(UnsafeArrayError) as info:
        arrays.read_npy(path)
    assert info.value.rule == "npy-object"
    assert not target.exists()


def test_valid_arrays_round_trip_read_only_in_buffers_of_their_own(tmp_path: Path) -> None:
    a = np.asfortranarray(np.arange(24, dtype=">i4").reshape(2, 3, 4))
    path = tmp_path / "a.npy"
    np.save(path, a)
    got = arrays.read_npy(path, expected={"dtype": ">i4", "shape": [2, 3, 4]})
    np.testing.assert_array_equal(got, a)
    assert got.flags.f_contiguous and not got.flags.writeable
    assert not isinstance(got.base, np.memmap) and not isinstance(got, np.memmap)
    empty = tmp_path / "e.npy"
    np.save(empty, np.zeros((0, 3), np.float16))
    assert arrays.read_npy(empty).shape == (0, 3)


def test_fortran_order_is_read_under_the_same_limits_as_its_c_order_twin(tmp_path: Path) -> None:
    """Read, not refused (docs/hostile-input.md): the layout changes no byte count."""
    c = np.arange(24, dtype="<f4").reshape(4, 6)
    f = np.asfortranarray(c)
    for name, arr in (("c", c), ("f", f)):
        path = tmp_path / f"{name}.npy"
        np.save(path, arr)
        with open(path, "rb") as fh:
            assert arrays.read_header(fh).fortran_order is (name == "f")
        np.testing.assert_array_equal(arrays.read_npy(path), c)
        tight = limits.tighten(DEFAULT, tensor_bytes=c.nbytes - 1)
        with pytest.raises(UnsafeArrayError, match="tensor-bytes"):
            arrays.read_npy(path, tight)
        with pytest.raises(UnsafeArrayError, match="tensor-dimension"):
            arrays.read_npy(path, limits.tighten(DEFAULT, tensor_dimension=5))


@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
def test_versions_1_to_3_are_read(version: tuple[int, int]) -> None:
    data = npy_bytes(header(descr="'<u2'", shape="(3,)"), b"\x01\x00\x02\x00\x03\x00", version)
    np.testing.assert_array_equal(arrays.read_npy(io.BytesIO(data)), [1, 2, 3])


@pytest.mark.parametrize(
    ("spec", "rule"),
    [
        ({"dtype": "float64", "shape": [2, 2]}, "manifest-dtype"),
        ({"dtype": "float32", "shape": [4]}, "manifest-shape"),
        ({"dtype": "float32", "shape": [2, 2, 1]}, "manifest-shape"),
        ({"dtype": "no-such-type", "shape": [2, 2]}, "manifest"),
    ],
)
def test_expected_dtype_and_shape_are_exact(
    tmp_path: Path, spec: dict[str, Any], rule: str
) -> None:
    path = tmp_path / "a.npy"
    np.save(path, np.zeros((2, 2), np.float32))
    with pytest.raises(UnsafeArrayError) as info:
        arrays.read_npy(path, expected=spec)
    assert info.value.rule == rule


# -- NPZ ---------------------------------------------------------------------------------------
def _npz(path: Path, members: dict[str, bytes], method: int = zipfile.ZIP_STORED) -> Path:
    with zipfile.ZipFile(path, "w", compression=method) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def test_npz_round_trip_with_manifest(tmp_path: Path) -> None:
    path = tmp_path / "a.npz"
    np.savez_compressed(path, x=np.ones((2, 3), np.float32), y=np.arange(4))
    manifest = {"x": {"dtype": "float32", "shape": [2, 3]}, "y": {"dtype": "int64", "shape": [4]}}
    got = arrays.read_npz(path, manifest=manifest)
    assert sorted(got) == ["x", "y"]
    np.testing.assert_array_equal(got["y"], np.arange(4))


NPZ_CASES: list[tuple[str, dict[str, bytes], str, limits.Limits, Any]] = [
    (
        "tensor-count",
        {f"a{i}.npy": _npy(np.zeros(1)) for i in range(3)},
        "tensor-count",
        limits.tighten(DEFAULT, tensor_count=2),
        None,
    ),
    (
        "total-array-bytes",
        {"a.npy": _npy(np.zeros(100)), "b.npy": _npy(np.zeros(100))},
        "total-array-bytes",
        limits.tighten(DEFAULT, total_array_bytes=1000),
        None,
    ),
    (
        "not-npy-member",
        {"a.npy": _npy(np.zeros(1)), "notes.txt": b"hi"},
        "npz-member",
        DEFAULT,
        None,
    ),
    ("nested-member", {"sub/a.npy": _npy(np.zeros(1))}, "npz-member", DEFAULT, None),
    (
        "object-member",
        {"a.npy": npy_bytes(header(descr="'|O'"), b"\0" * 16)},
        "npy-object",
        DEFAULT,
        None,
    ),
    ("trailing-in-member", {"a.npy": _npy(np.zeros(2)) + b"x"}, "trailing-data", DEFAULT, None),
    ("truncated-member", {"a.npy": _npy(np.zeros(2))[:-1]}, "truncated", DEFAULT, None),
    (
        "manifest-extra",
        {"a.npy": _npy(np.zeros(1)), "b.npy": _npy(np.zeros(1))},
        "manifest-extra",
        DEFAULT,
        {"a": {"dtype": "float64", "shape": [1]}},
    ),
    (
        "manifest-missing",
        {"a.npy": _npy(np.zeros(1))},
        "manifest-missing",
        DEFAULT,
        {"a": {"dtype": "float64", "shape": [1]}, "b": {"dtype": "float64", "shape": [1]}},
    ),
    (
        "manifest-shape",
        {"a.npy": _npy(np.zeros(1))},
        "manifest-shape",
        DEFAULT,
        {"a": {"dtype": "float64", "shape": [2]}},
    ),
]


@pytest.mark.parametrize(
    ("case", "members", "rule", "profile", "manifest"), NPZ_CASES, ids=[c[0] for c in NPZ_CASES]
)
def test_hostile_npz_is_refused(
    tmp_path: Path,
    case: str,
    members: dict[str, bytes],
    rule: str,
    profile: limits.Limits,
    manifest: Any,
) -> None:
    path = _npz(tmp_path / f"{case}.npz", members)
    with pytest.raises(UnsafeArrayError) as info:
        arrays.read_npz(path, profile, manifest)
    assert info.value.rule == rule
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


# -- metadata JSON -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("data", "rule"),
    [
        (b'{"a": 1, "a": 2}', "metadata-duplicate-key"),
        (b'{"outer": {"k": 1, "k": 1}}', "metadata-duplicate-key"),
        (b'{"a": NaN}', "metadata-json"),
        (b'{"a\\ud800": 1}', "metadata-value"),
        (b'{"a": ["\\udc80"]}', "metadata-value"),
        (b'{"a": ' + b"1" * 21 + b"}", "metadata-value"),
        (b'{"a": ' + b"[" * 70 + b"]" * 70 + b"}", "metadata-value"),
        (b'{"a": ', "metadata-json"),
        (b"\xff\xfe{}", "metadata-json"),
        (b"[" * 100_000 + b"]" * 100_000, "metadata-size"),
    ],
)
def test_hostile_metadata_is_refused(tmp_path: Path, data: bytes, rule: str) -> None:
    with pytest.raises(UnsafeArrayError) as info:
        arrays.read_metadata(data, limits.tighten(DEFAULT, metadata_bytes=64 * 1024))
    assert info.value.rule == rule
    path = tmp_path / "meta.json"
    path.write_bytes(data)
    with pytest.raises(UnsafeArrayError) as info:
        arrays.read_metadata(path, limits.tighten(DEFAULT, metadata_bytes=64 * 1024))
    assert info.value.rule == rule


def test_metadata_within_limits_is_parsed() -> None:
    assert arrays.read_metadata(b'{"b": [1, 2], "a": {"c": null}}') == {
        "b": [1, 2],
        "a": {"c": None},
    }


def test_deeply_nested_metadata_is_a_typed_error() -> None:
    with pytest.raises(UnsafeArrayError) as info:
        arrays.read_metadata(
            b"[" * 200_000 + b"]" * 200_000,
            limits.tighten(DEFAULT, metadata_bytes=1 << 20)
            if DEFAULT.metadata_bytes > 1 << 20
            else DEFAULT,
        )
    assert info.value.rule in {"metadata-json", "metadata-size"}


# -- properties --------------------------------------------------------------------------------
_PLAIN = st.one_of(
    hnp.integer_dtypes(),
    hnp.unsigned_integer_dtypes(),
    hnp.floating_dtypes(),
    hnp.complex_number_dtypes(),
    hnp.boolean_dtypes(),
    hnp.byte_string_dtypes(min_len=1, max_len=4),
    hnp.unicode_string_dtypes(min_len=1, max_len=4),
)
_ARRAYS = hnp.arrays(_PLAIN, hnp.array_shapes(min_dims=0, max_dims=4, max_side=5))


@settings(max_examples=150, deadline=None)
@given(arr=_ARRAYS, fortran=st.booleans())
def test_any_plain_array_round_trips(arr: np.ndarray[Any, Any], fortran: bool) -> None:
    if fortran:
        arr = np.asfortranarray(arr)
    got = arrays.read_npy(
        io.BytesIO(_npy(arr)), expected={"dtype": arr.dtype.str, "shape": list(arr.shape)}
    )
    assert got.dtype == arr.dtype and got.shape == arr.shape
    np.testing.assert_array_equal(got, arr)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(arr=_ARRAYS.filter(lambda a: a.nbytes > 0), data=st.data())
def test_any_truncation_or_extension_is_refused(
    arr: np.ndarray[Any, Any], data: st.DataObject
) -> None:
    raw = _npy(arr)
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(UnsafeArrayError) as info:
        arrays.read_npy(io.BytesIO(raw[:cut]))
    assert info.value.rule == "truncated"
    extra = data.draw(st.binary(min_size=1, max_size=64))
    with pytest.raises(UnsafeArrayError) as info:
        arrays.read_npy(io.BytesIO(raw + extra))
    assert info.value.rule == "trailing-data"


def test_file_reader_does_not_read_the_payload_to_check_it(tmp_path: Path) -> None:
    # A sparse 1 GiB file: the header check and size arithmetic must not touch the payload.
    path = tmp_path / "sparse.npy"
    head = npy_bytes(header(descr="'<f8'", shape="(8192, 16384)"))
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(len(head) + 8192 * 16384 * 8 - 1)
    with pytest.raises(UnsafeArrayError) as info:
        arrays.read_npy(path, limits.GIB_1)
    assert info.value.rule == "truncated"
    assert os.stat(path).st_blocks * 512 < 1 << 20


def test_an_array_handed_out_survives_its_file_being_truncated(tmp_path: Path) -> None:
    """An array read from a file owns its bytes: truncating the file afterwards cannot kill the
    process (with a memory map, touching the lost pages raised SIGBUS). In a child process, so
    that a SIGBUS fails this test instead of ending the run."""
    path = tmp_path / "a.npy"
    np.save(path, np.arange(4096, dtype="<f8"))
    code = (
        "import os, sys\n"
        "from fixture_store.readers import npy\n"
        f"a = npy.read_npy({str(path)!r})\n"
        f"os.truncate({str(path)!r}, 128)\n"
        "print(float(a.sum()))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, (done.returncode, done.stderr)
    assert float(done.stdout) == float(np.arange(4096).sum())
