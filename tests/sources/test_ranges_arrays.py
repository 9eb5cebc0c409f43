"""Verified partial fetch of NPY rows (by their chunks) and NPZ members over a loopback server."""

from __future__ import annotations

import hashlib
import io
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixture_store.access import Fixtures
from fixture_store.errors import IntegrityError, MissingObjectError, UsageError
from fixture_store.objects.store import Store
from fixture_store.readers import array_ranges, content, tensor_ranges
from fixture_store.registry import Kind
from tests.sources.test_ranges import Server, https  # noqa: F401 - fixture
from tests.support.fetchutil import make_registry, online_env  # noqa: F401 - autouse

# 9 MiB of float32 in rows of 1 KiB (4,096 rows a chunk): three chunks, the last 1 MiB
BIG = np.arange(9 * 1024 * 256, dtype=np.float32).reshape(-1, 256) + 0.5
ROWS_PER_CHUNK = tensor_ranges.CHUNK_BYTES // BIG[0].nbytes
SMALL = np.linspace(-1, 1, 300)


@pytest.fixture
def loopback(request: pytest.FixtureRequest) -> tuple[str, Server]:
    """The loopback HTTPS server of :mod:`tests.sources.test_ranges` (its ``https`` fixture)."""
    served: tuple[str, Server] = request.getfixturevalue("https")
    return served


def _file(kind: str, arrays: dict[str, np.ndarray[Any, Any]]) -> bytes:
    buffer = io.BytesIO()
    if kind == "npy":
        np.save(buffer, next(iter(arrays.values())))
    else:
        np.savez(buffer, **arrays)  # type: ignore[arg-type]
    return buffer.getvalue()


def _project(
    root: Path, kind: str, source: dict[str, str], arrays: dict[str, np.ndarray[Any, Any]]
) -> tuple[Fixtures, bytes]:
    """A project whose one record is the NPY/NPZ of ``arrays`` behind ``source``, described as
    ``add`` describes it."""
    data = _file(kind, arrays)
    file = root / "p" / f"big.{kind}"
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_bytes(data)
    described = content.describe(file, kind=Kind.ARRAY, array_name=next(iter(arrays)))
    raw = {
        "kind": "array",
        "source": source,
        "digest": "sha256:" + hashlib.sha256(data).hexdigest(),
        "size": len(data),
        "media_type": described.media_type,
        "arrays": described.arrays,
    }
    registry = make_registry(root / "p", {f"ref/big.{kind}": raw})
    return Fixtures(Store.at(root / "store"), registry), data


def _url(base: str, kind: str) -> dict[str, str]:
    return {"type": "url", "url": f"{base}/big.{kind}"}


@pytest.mark.parametrize(
    ("rows", "chunks"),
    [
        ((10, 20), 1),
        ((ROWS_PER_CHUNK - 5, ROWS_PER_CHUNK + 5), 2),  # across a chunk boundary
        ((len(BIG) - 3, len(BIG)), 1),  # in the short last chunk
    ],
)
def test_npy_rows_are_read_by_the_chunks_that_cover_them(
    loopback: tuple[str, Server], tmp_path: Path, rows: tuple[int, int], chunks: int
) -> None:
    base, server = loopback
    fixtures, data = _project(tmp_path, "npy", _url(base, "npy"), {"big": BIG})
    server.body = data
    got = fixtures.tensor("ref/big.npy", "big", rows=rows)
    np.testing.assert_array_equal(got, BIG[rows[0] : rows[1]])
    assert not got.flags.writeable
    last_chunk = BIG.nbytes - 2 * tensor_ranges.CHUNK_BYTES
    covering = last_chunk if rows[0] >= 2 * ROWS_PER_CHUNK else chunks * tensor_ranges.CHUNK_BYTES
    assert server.sent == [covering]  # the covering chunks, never the file
    assert not fixtures.store.has(fixtures.record("ref/big.npy").object)
    with pytest.raises(MissingObjectError):
        fixtures.arrays("ref/big.npy")  # the whole object is needed for the whole object


def test_the_whole_npy_array_is_read_chunk_by_chunk_verified(
    loopback: tuple[str, Server], tmp_path: Path
) -> None:
    base, server = loopback
    fixtures, data = _project(tmp_path, "npy", _url(base, "npy"), {"big": BIG})
    server.body = data
    np.testing.assert_array_equal(fixtures.tensor("ref/big.npy", "big"), BIG)
    assert server.sent == [BIG.nbytes]


def test_an_npz_member_is_read_by_its_range_alone(
    loopback: tuple[str, Server], tmp_path: Path
) -> None:
    base, server = loopback
    fixtures, data = _project(tmp_path, "npz", _url(base, "npz"), {"big": BIG, "small": SMALL})
    server.body = data
    np.testing.assert_array_equal(fixtures.tensor("ref/big.npz", "small"), SMALL)
    assert server.sent == [SMALL.nbytes]
    got = fixtures.tensor("ref/big.npz", "big", rows=(3, 7))  # a member has one digest: all of it
    np.testing.assert_array_equal(got, BIG[3:7])
    assert server.sent == [SMALL.nbytes, BIG.nbytes]


def test_a_chunk_the_server_lies_about_is_refused_naming_it(
    loopback: tuple[str, Server], tmp_path: Path
) -> None:
    base, server = loopback
    fixtures, data = _project(tmp_path, "npy", _url(base, "npy"), {"big": BIG})
    server.body, server.mode = data, "lying"
    rows = (ROWS_PER_CHUNK + 1, ROWS_PER_CHUNK + 2)
    with pytest.raises(IntegrityError, match=r"ref/big\.npy: tensor 'big' chunk 1 of 3") as caught:
        fixtures.tensor("ref/big.npy", "big", rows=rows)
    assert caught.value.fix is not None and "fixture-store fetch ref/big.npy" in caught.value.fix


def test_only_the_chunk_whose_bytes_changed_is_refused(
    loopback: tuple[str, Server], tmp_path: Path
) -> None:
    base, server = loopback
    fixtures, data = _project(tmp_path, "npy", _url(base, "npy"), {"big": BIG})
    other = BIG.copy()
    other[-1, -1] += 1  # a value of the last chunk
    served = _file("npy", {"big": other})
    assert len(served) == len(data)
    server.body = served
    np.testing.assert_array_equal(fixtures.tensor("ref/big.npy", "big", rows=(0, 9)), BIG[:9])
    middle = (ROWS_PER_CHUNK, 2 * ROWS_PER_CHUNK)
    got = fixtures.tensor("ref/big.npy", "big", rows=middle)
    np.testing.assert_array_equal(got, BIG[middle[0] : middle[1]])
    with pytest.raises(IntegrityError, match=r"tensor 'big' chunk 2 of 3: .*do not have the chunk"):
        fixtures.tensor("ref/big.npy", "big", rows=(len(BIG) - 1, len(BIG)))


def test_an_npz_member_digest_the_bytes_do_not_have_is_refused(
    loopback: tuple[str, Server], tmp_path: Path
) -> None:
    base, server = loopback
    fixtures, data = _project(tmp_path, "npz", _url(base, "npz"), {"big": BIG, "small": SMALL})
    served = _file("npz", {"big": BIG, "small": SMALL + 1})
    assert len(served) == len(data)
    server.body = served
    np.testing.assert_array_equal(fixtures.tensor("ref/big.npz", "big", rows=(0, 2)), BIG[:2])
    with pytest.raises(IntegrityError, match=r"ref/big\.npz: tensor 'small': .*sha256"):
        fixtures.tensor("ref/big.npz", "small")


def test_rows_outside_the_array_are_a_usage_error_before_any_request(
    loopback: tuple[str, Server], tmp_path: Path
) -> None:
    base, server = loopback
    fixtures, data = _project(tmp_path, "npy", _url(base, "npy"), {"big": BIG})
    server.body = data
    for rows in ((5, 3), (0, len(BIG) + 1)):
        with pytest.raises(UsageError, match=r"tensor 'big' has 9216 rows"):
            fixtures.tensor("ref/big.npy", "big", rows=rows)
    assert fixtures.tensor("ref/big.npy", "big", rows=(7, 7)).shape == (0, 256)
    assert server.sent == []


def test_rows_from_the_store_once_the_object_is_there(tmp_path: Path) -> None:
    fixtures, _data = _project(tmp_path, "npy", {"type": "local", "path": "big.npy"}, {"big": BIG})
    from fixture_store.fetch import fetch_names

    assert fetch_names(fixtures.store, fixtures.registry, ["ref/big.npy"]).results[0].ok
    got = Fixtures(fixtures.store, fixtures.registry).tensor("ref/big.npy", "big", rows=(2, 5))
    np.testing.assert_array_equal(got, BIG[2:5])


_DTYPES = st.sampled_from(["<f4", ">f8", "<i2", "|u1", "|b1", "<c8", "<U3"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    dtype=_DTYPES,
    shape=st.lists(st.integers(0, 9), min_size=1, max_size=3).map(tuple),
    chunk=st.integers(1, 97),
    kind=st.sampled_from(["npy", "npz"]),
    data=st.data(),
)
def test_rows_read_by_ranges_equal_np_load_slicing(
    dtype: str, shape: tuple[int, ...], chunk: int, kind: str, data: st.DataObject
) -> None:
    """Any array, any chunk size, any rows: what the ranges give is ``np.load(...)[start:stop]``
    (a local source, read by ``pread``; thresholds lowered so small arrays are indexed)."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    array = (rng.random(shape) * 100).astype(dtype)
    start = data.draw(st.integers(0, shape[0]))
    stop = data.draw(st.integers(start, shape[0]))
    with (
        tempfile.TemporaryDirectory() as folder,
        mock.patch.object(tensor_ranges, "CHUNK_BYTES", chunk),
        mock.patch.object(array_ranges, "wants_ranges", return_value=True),
    ):
        fixtures, raw = _project(
            Path(folder), kind, {"type": "local", "path": f"big.{kind}"}, {"a": array}
        )
        arrays = fixtures.record(f"ref/big.{kind}").arrays
        assert arrays is not None
        assert ("offset" in arrays["a"]) == (array.nbytes > 0)
        if array.nbytes == 0:  # no range to read: an empty array is the object's to give
            with pytest.raises(MissingObjectError):
                fixtures.tensor(f"ref/big.{kind}", "a", rows=(start, stop))
            return
        got = fixtures.tensor(f"ref/big.{kind}", "a", rows=(start, stop))
        loaded = np.load(io.BytesIO(raw))
        want = loaded[start:stop] if kind == "npy" else loaded["a"][start:stop]
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("short", r"sent \d+ bytes for a range of 8388608"),
        ("wrong-range", r"Content-Range 'bytes \d+-\d+/\d+'"),
        ("ignore-range", r"answered 200 to a range request.*not 206"),
    ],
)
def test_a_careless_server_is_refused_for_npy_rows_as_for_a_tensor(
    loopback: tuple[str, Server], tmp_path: Path, mode: str, said: str
) -> None:
    base, server = loopback
    fixtures, data = _project(tmp_path, "npy", _url(base, "npy"), {"big": BIG})
    server.body, server.mode = data, mode
    rows = (ROWS_PER_CHUNK - 1, ROWS_PER_CHUNK + 1)  # two chunks: 8 MiB asked
    with pytest.raises(IntegrityError, match=r"ref/big\.npy: .*" + said) as caught:
        fixtures.tensor("ref/big.npy", "big", rows=rows)
    assert caught.value.fix is not None and "fixture-store fetch ref/big.npy" in caught.value.fix
