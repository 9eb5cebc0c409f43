"""Ranges and digests of the arrays of a large NPY (fixed chunks) and NPZ (stored members)."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fixture_store import ingest
from fixture_store import registry as registry_mod
from fixture_store.errors import InvalidRecordError
from fixture_store.objects.store import Store
from fixture_store.readers.tensor_ranges import CHUNK_BYTES, MIN_BYTES
from fixture_store.registry.files import write_family
from fixture_store.verify import verify_names

# 9 MiB of float32 in rows of 1 KiB: three chunks, the last shorter
BIG = np.arange(9 * 1024 * 256, dtype=np.float32).reshape(-1, 256) + 0.5
SMALL = np.linspace(0, 1, 1000)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _add(project: Path, store: Store, file: str, name: str) -> bytes:
    ingest.add(store, registry_mod.load(project), project / file, name=name, kind="fixture")
    return (project / file).read_bytes()


def _arrays(project: Path, name: str) -> dict[str, Any]:
    arrays = registry_mod.load(project).get(name).arrays
    assert arrays is not None
    return {k: dict(v) for k, v in arrays.items()}


def _rewrite(project: Path, name: str, key: str, **changed: object) -> None:
    registry = registry_mod.load(project)
    record = registry.get(name)
    arrays = _arrays(project, name)
    arrays[key].update(changed)
    write_family(
        registry, name.split("/", maxsplit=1)[0], [dataclasses.replace(record, arrays=arrays)]
    )


def _verify(project: Path, store: Store, name: str, *, full: bool) -> str | None:
    result = verify_names(store, registry_mod.load(project), [name], full=full)[0]
    return None if result.ok else str(result.error)


def test_a_large_npy_records_its_array_in_chunks_of_whole_digests(
    project: Path, store: Store
) -> None:
    np.save(project / "big.npy", BIG)
    data = _add(project, store, "big.npy", "ref/big.npy")
    spec = _arrays(project, "ref/big.npy")["big"]
    offset, length = spec["offset"], spec["length"]
    assert length == BIG.nbytes and offset == len(data) - BIG.nbytes
    assert spec["chunk"] == CHUNK_BYTES and "sha256" not in spec
    assert list(spec["chunks"]) == [
        _sha(data[offset + s : offset + min(s + CHUNK_BYTES, length)])
        for s in range(0, length, CHUNK_BYTES)
    ]
    assert len(spec["chunks"]) == 3
    assert _verify(project, store, "ref/big.npy", full=True) is None


def test_a_large_npz_records_each_stored_members_array_bytes(project: Path, store: Store) -> None:
    np.savez(project / "big.npz", big=BIG, small=SMALL, fortran=np.asfortranarray(BIG[:4]))
    data = _add(project, store, "big.npz", "ref/big.npz")
    arrays = _arrays(project, "ref/big.npz")
    for key, array in (("big", BIG), ("small", SMALL)):
        spec = arrays[key]
        got = data[spec["offset"] : spec["offset"] + spec["length"]]
        assert got == array.tobytes() and spec["sha256"] == _sha(got)
    # a Fortran-order array's rows are no range of C-order bytes: not indexed
    assert set(arrays["fortran"]) == {"dtype", "shape"}
    assert _verify(project, store, "ref/big.npz", full=True) is None


def test_deflated_members_small_files_and_fortran_npys_keep_the_plain_manifest(
    project: Path, store: Store
) -> None:
    np.savez_compressed(project / "c.npz", big=BIG)
    np.save(project / "f.npy", np.asfortranarray(BIG))
    np.save(project / "s.npy", BIG[: MIN_BYTES // BIG[0].nbytes - 1])
    for file in ("c.npz", "f.npy", "s.npy"):
        _add(project, store, file, f"ref/{file}")
        for spec in _arrays(project, f"ref/{file}").values():
            assert set(spec) == {"dtype", "shape"}, file


def test_full_verify_refuses_exactly_the_npy_chunk_whose_digest_lies(
    project: Path, store: Store
) -> None:
    np.save(project / "big.npy", BIG)
    _add(project, store, "big.npy", "ref/big.npy")
    chunks = list(_arrays(project, "ref/big.npy")["big"]["chunks"])
    _rewrite(project, "ref/big.npy", "big", chunks=[*chunks[:1], "0" * 64, *chunks[2:]])
    assert _verify(project, store, "ref/big.npy", full=False) is None  # the header alone holds
    error = _verify(project, store, "ref/big.npy", full=True)
    assert error is not None and "tensor-digest" in error and "'big' chunk 1 of 3" in error


def test_full_verify_refuses_an_npz_member_digest_that_lies(project: Path, store: Store) -> None:
    np.savez(project / "big.npz", big=BIG, small=SMALL)
    _add(project, store, "big.npz", "ref/big.npz")
    _rewrite(project, "ref/big.npz", "small", sha256="f" * 64)
    error = _verify(project, store, "ref/big.npz", full=True)
    assert error is not None and "tensor-digest" in error and "'small'" in error


@pytest.mark.parametrize("file", ["big.npy", "big.npz"])
def test_verify_refuses_a_range_the_headers_do_not_give(
    project: Path, store: Store, file: str
) -> None:
    if file.endswith(".npy"):
        np.save(project / file, BIG)
    else:
        np.savez(project / file, big=BIG, small=SMALL)
    _add(project, store, file, f"ref/{file}")
    spec = _arrays(project, f"ref/{file}")["big"]
    # the same length one row later: bytes of the object, but not the array's
    _rewrite(project, f"ref/{file}", "big", offset=spec["offset"] + 1024)
    error = _verify(project, store, f"ref/{file}", full=False)
    assert error is not None and "tensor-range" in error and "'big'" in error


def test_verify_refuses_a_range_recorded_for_a_deflated_member(project: Path, store: Store) -> None:
    path = project / "mixed.npz"
    np.savez(path, big=BIG)
    with (
        zipfile.ZipFile(path, "a", compression=zipfile.ZIP_DEFLATED) as zf,
        zf.open("small.npy", "w") as f,
    ):
        np.lib.format.write_array(f, SMALL)
    data = _add(project, store, "mixed.npz", "ref/mixed.npz")
    assert set(_arrays(project, "ref/mixed.npz")["small"]) == {"dtype", "shape"}
    # a record that claims the deflated member's array is a plain range of the zip
    _rewrite(project, "ref/mixed.npz", "small", offset=0, length=8000, sha256=_sha(data[:8000]))
    error = _verify(project, store, "ref/mixed.npz", full=False)
    assert error is not None and "tensor-range" in error and "no plain range" in error


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"offset": 8, "length": 4, "chunk": 0, "chunks": ["0" * 64]}, "arrays.x.chunk"),
        ({"offset": 8, "length": 9, "chunk": 4, "chunks": ["0" * 64] * 2}, "arrays.x.chunks"),
        ({"offset": 8, "length": 4, "chunk": 4, "chunks": "0" * 64}, "arrays.x.chunks"),
        ({"offset": 8, "length": 4, "chunk": 4, "chunks": ["0" * 64], "sha256": "0" * 64}, "x"),
    ],
)
def test_malformed_chunk_digests_are_refused_when_the_registry_is_read(
    project: Path, extra: dict[str, object], field: str
) -> None:
    raw = {
        "kind": "fixture",
        "source": {"type": "url", "url": "https://example.org/x.npy"},
        "digest": "sha256:" + "0" * 64,
        "size": 12,
        "media_type": "application/x-npy",
        "arrays": {"x": {"dtype": "float32", "shape": [1], **extra}},
    }
    from tests.support.fetchutil import make_registry

    with pytest.raises(InvalidRecordError, match=rf"arrays\.{field.removeprefix('arrays.')}"):
        make_registry(project, {"ref/x.npy": raw}).get("ref/x.npy")


class _Unseekable(io.RawIOBase):
    """A write-only stream zipfile cannot seek back in: it writes each member's sizes and CRC
    after its data, in a data descriptor (the local header's sizes are zero)."""

    def __init__(self) -> None:
        self.data = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        self.data += bytes(b)
        return len(b)


def test_npz_ranges_come_from_the_central_sizes_and_each_local_headers_own_lengths(
    project: Path, store: Store
) -> None:
    """Data descriptors (sizes after the data) and zip64 extra fields (a longer local header)
    move where a member's bytes start; the range is still exactly the array's bytes."""
    stream = _Unseekable()
    with zipfile.ZipFile(stream, "w", zipfile.ZIP_STORED) as zf:
        for key, array in (("big", BIG), ("small", SMALL)):
            with zf.open(f"{key}.npy", "w", force_zip64=key == "small") as f:
                np.lib.format.write_array(f, array)
    (project / "streamed.npz").write_bytes(bytes(stream.data))
    data = _add(project, store, "streamed.npz", "ref/streamed.npz")
    with zipfile.ZipFile(project / "streamed.npz") as zf:
        assert all(info.flag_bits & 0x8 for info in zf.infolist())  # descriptors, as meant
    arrays = _arrays(project, "ref/streamed.npz")
    for key, array in (("big", BIG), ("small", SMALL)):
        spec = arrays[key]
        assert data[spec["offset"] : spec["offset"] + spec["length"]] == array.tobytes(), key
    assert _verify(project, store, "ref/streamed.npz", full=True) is None
