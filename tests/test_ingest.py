"""``add`` of archives and arrays: the content manifest is written at ingest, hostile bytes are
refused before anything is stored or recorded, and the format comes from the leading bytes."""

from __future__ import annotations

import dataclasses
import io
import json
import re
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fixture_store import ingest
from fixture_store import registry as registry_mod
from fixture_store.access import Fixtures
from fixture_store.errors import UnsafeContentError, UsageError
from fixture_store.limits import DEFAULT
from fixture_store.objects import digests, trees
from fixture_store.objects.store import Store
from fixture_store.readers import archives
from fixture_store.registry import Record
from fixture_store.verify import Status, verify_names
from tests.support.cli import run
from tests.support.hostile import compress, manifest, regular_tar, tar_bytes, tar_info

GOOD = {"weights/a.npy": b"alpha" * 100, "metadata.json": b"{}"}


def _write(project: Path, rel: str, data: bytes) -> Path:
    path = project / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _add(store: Store, project: Path, path: Path, name: str, kind: str) -> Record:
    return ingest.add(store, registry_mod.load(project), path, name=name, kind=kind)


def _npy(arr: np.ndarray[Any, Any], *, pickle: bool = False) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, allow_pickle=pickle)
    return buf.getvalue()


def _raw(project: Path, name: str) -> dict[str, Any]:
    family, _ = name.split("/", 1)
    doc = json.loads((project / "provenance" / f"{family}.json").read_text())
    record: dict[str, Any] = doc["records"][name]
    return record


@pytest.mark.parametrize(
    ("fmt", "media_type"),
    [
        ("tar.zst", "application/zstd"),
        ("tar.lz4", "application/x-lz4"),
        ("tar", "application/x-tar"),
    ],
)
def test_add_records_the_members_of_an_archive_whatever_its_kind(
    project: Path, store: Store, fmt: str, media_type: str
) -> None:
    path = _write(project, f"data/ckpt.{fmt}", compress(regular_tar(GOOD), fmt))
    record = _add(store, project, path, "ckpt/tiny", "checkpoint")
    assert record.media_type == media_type
    assert record.members is not None and dict(record.members.members) == manifest(GOOD)
    assert record.digest == digests.of_file(path) and not record.is_tree
    raw = _raw(project, "ckpt/tiny")
    assert raw["media_type"] == media_type and set(raw["members"]) == set(GOOD)
    [result] = verify_names(store, registry_mod.load(project), ["ckpt/tiny"], full=True)
    assert result.status is Status.VERIFIED


def test_add_records_the_arrays_of_npy_and_npz(project: Path, store: Store) -> None:
    npy = _write(project, "data/ref.npy", _npy(np.zeros((2, 3), np.float32)))
    record = _add(store, project, npy, "ref/out", "fixture")
    assert record.media_type == "application/x-npy"
    # The manifest as written: the arrays grouped by dtype and shape (docs/registry.md).
    assert _raw(project, "ref/out")["arrays"] == {"float32[2,3]": ["ref"]}
    buf = io.BytesIO()
    np.savez(buf, x=np.arange(4, dtype=">i4"), y=np.ones((1, 2), bool))
    npz = _write(project, "data/pair.npz", buf.getvalue())
    record = _add(store, project, npz, "ref/pair", "array")
    assert record.media_type == "application/x-npz"
    assert _raw(project, "ref/pair")["arrays"] == {">i4[4]": ["x"], "bool[1,2]": ["y"]}
    registry = registry_mod.load(project)
    results = verify_names(store, registry, ["ref/out", "ref/pair"], full=True)
    assert [r.status for r in results] == [Status.VERIFIED, Status.VERIFIED]


def test_an_npz_of_another_kind_is_read_as_arrays_a_zip_as_an_archive(
    project: Path, store: Store
) -> None:
    buf = io.BytesIO()
    np.savez(buf, x=np.arange(2))
    record = _add(store, project, _write(project, "data/x.bin", buf.getvalue()), "f/x", "video")
    assert record.media_type == "application/x-npz"
    assert dict(record.arrays or {}) == {"x": {"dtype": "int64", "shape": [2]}}
    zbuf = io.BytesIO()
    with zipfile.ZipFile(zbuf, "w") as zf:
        zf.writestr("notes.txt", "hello")
    record = _add(store, project, _write(project, "data/z.npz", zbuf.getvalue()), "f/z", "fixture")
    assert record.media_type == "application/zip"
    assert record.members is not None and set(record.members.members) == {"notes.txt"}


def _hostile_archive() -> bytes:
    entries = [(tar_info(n, len(d)), d) for n, d in GOOD.items()]
    return compress(tar_bytes([*entries, (tar_info("../evil", 4), b"evil")]), "tar.zst")


def _object_array_npz() -> bytes:
    buf = io.BytesIO()
    np.savez(buf, x=np.array([{"a": 1}], dtype=object))
    return buf.getvalue()


@pytest.mark.parametrize(
    ("rel", "data", "kind", "rule"),
    [
        ("data/ckpt.tar.zst", _hostile_archive(), "checkpoint", "traversal"),
        (
            "data/evil.npy",
            _npy(np.array([None, 1], dtype=object), pickle=True),
            "fixture",
            "npy-object",
        ),
        ("data/evil.npz", _object_array_npz(), "array", "npy-object"),
        (
            "data/big-meta.tar",
            regular_tar({"metadata.json": b" " * (DEFAULT.metadata_bytes + 1)}),
            "checkpoint",
            "metadata-size",
        ),
        ("data/not-an-archive.bin", b"plain bytes", "archive", "by its leading bytes"),
    ],
)
def test_add_refuses_hostile_content_before_anything_is_stored_or_recorded(
    project: Path, store: Store, rel: str, data: bytes, kind: str, rule: str
) -> None:
    path = _write(project, rel, data)
    with pytest.raises(UnsafeContentError, match=rule) as info:
        _add(store, project, path, "bad/one", kind)
    assert "nothing was stored or recorded" in info.value.message and info.value.fix
    assert not (project / "provenance" / "bad.json").exists()
    assert not store.has(digests.of_bytes(data))


def test_the_format_comes_from_the_leading_bytes_not_the_name(project: Path, store: Store) -> None:
    archive = compress(regular_tar(GOOD), "tar.lz4")
    record = _add(store, project, _write(project, "data/weights", archive), "ckpt/w", "checkpoint")
    assert record.media_type == "application/x-lz4" and record.members is not None
    # The verified object's path has no name to go by: the scan reads its leading bytes.
    path = Fixtures(store, registry_mod.load(project)).path("ckpt/w")
    assert path.name == record.object.hex[2:]
    assert dict(archives.scan(path, DEFAULT, record.members).members) == manifest(GOOD)
    # Named .npy, but not an NPY: no array media type, nothing for verification to read.
    fake = _add(store, project, _write(project, "data/v.npy", b"v"), "ckpt/v", "video")
    assert fake.media_type is None and fake.arrays is None
    assert verify_names(store, registry_mod.load(project), ["ckpt/v"])[0].ok


def test_adding_the_same_bytes_again_fills_the_manifest_a_record_lacks(
    project: Path, store: Store
) -> None:
    path = _write(project, "data/ckpt.tar.zst", compress(regular_tar(GOOD), "tar.zst"))
    record = _add(store, project, path, "ckpt/tiny", "checkpoint")
    bare = {k: v for k, v in _raw(project, "ckpt/tiny").items() if k != "members"}
    bare["license"] = "MIT"  # reviewed by hand: kept
    (project / "provenance" / "ckpt.json").write_text(
        registry_mod.dumps({"format_version": 1, "records": {"ckpt/tiny": bare}})
    )
    [before] = verify_names(store, registry_mod.load(project), ["ckpt/tiny"], full=True)
    assert before.status is Status.UNSAFE and "member manifest" in before.message
    again = _add(store, project, path, "ckpt/tiny", "checkpoint")
    assert again.members == record.members and again.license == "MIT"
    [after] = verify_names(store, registry_mod.load(project), ["ckpt/tiny"], full=True)
    assert after.status is Status.VERIFIED


def test_a_tree_member_manifest_is_untouched_by_content_checks(project: Path, store: Store) -> None:
    folder = project / "data" / "case"
    _write(project, "data/case/model.onnx", b"model")
    _write(project, "data/case/test_data_set_0/input_0.npy", _npy(np.arange(2)))
    record = _add(store, project, folder, "case/one", "tree")
    assert record.is_tree and record.media_type is None and record.arrays is None
    tree = trees.hash_folder(folder)[0]
    assert record.members == tree and record.digest == tree.digest


def test_register_writes_a_batch_in_one_transaction_or_nothing(project: Path, store: Store) -> None:
    from fixture_store.errors import UsageError
    from fixture_store.ingest import Change, Registration

    a = _write(project, "data/a.bin", b"a" * 10)
    b = _write(project, "data/b.bin", b"b" * 10)
    _add(store, project, a, "fam/a", "fixture")
    path = project / "provenance" / "fam.json"
    before = path.read_bytes()
    batch = [
        Registration("fam/b", "fixture", b),
        Registration("fam/a", "checkpoint", a),  # differs from the record: refused
    ]
    with pytest.raises(UsageError, match="fam/a is already registered") as e:
        ingest.register(store, registry_mod.load(project), batch)
    assert 'kind: "fixture" -> "checkpoint"' in e.value.message
    assert path.read_bytes() == before  # fam/b was not registered either
    done = ingest.register(store, registry_mod.load(project), batch, replace=True)
    assert [d.change for d in done] == [Change.ADDED, Change.REPLACED]
    again = ingest.register(store, registry_mod.load(project), batch)
    assert [d.change for d in again] == [Change.UNCHANGED, Change.UNCHANGED]
    with pytest.raises(UsageError, match="named twice"):
        ingest.register(store, registry_mod.load(project), [batch[0], batch[0]])


def test_a_gap_is_filled_with_its_bytes_only_by_an_explicit_replace(
    project: Path, store: Store
) -> None:
    from fixture_store.errors import UsageError
    from fixture_store.registry import Gap

    registry = registry_mod.load(project)
    data = _write(project, "data/later.bin", b"bytes at last")
    with pytest.raises(UsageError, match="a declared gap has no bytes"):
        ingest.add(store, registry, data, name="fam/later", kind="fixture", gap=Gap("soon"))
    gap = ingest.add(store, registry, None, name="fam/later", kind="fixture", gap=Gap("soon"))
    assert gap.is_gap and gap.digest is None and gap.source.type == "none"
    with pytest.raises(UsageError, match=re.escape('gap: {"reason": "soon"} -> (none)')):
        _add(store, project, data, "fam/later", "fixture")
    filled = ingest.add(
        store, registry_mod.load(project), data, name="fam/later", kind="fixture", replace=True
    )
    assert filled.gap is None and filled.digest == digests.of_file(data)
    [result] = verify_names(store, registry_mod.load(project), ["fam/later"], full=True)
    assert result.status is Status.VERIFIED


def test_an_arrays_manifest_is_stated_only_as_the_bytes_hold_it(
    project: Path, store: Store
) -> None:
    from fixture_store.errors import UsageError
    from fixture_store.registry import Annotations

    buf = io.BytesIO()
    np.savez(buf, x=np.arange(4, dtype=np.int32))
    path = _write(project, "data/x.npz", buf.getvalue())
    wrong = Annotations(arrays={"y": {"dtype": "int32", "shape": [4]}})
    with pytest.raises(UsageError, match="the arrays manifest given for fam/x is not what"):
        ingest.add(
            store, registry_mod.load(project), path, name="fam/x", kind="array", annotations=wrong
        )
    assert not (project / "provenance" / "fam.json").exists()
    _add(store, project, path, "fam/x", "array")
    doc = json.loads((project / "provenance" / "fam.json").read_text())
    doc["records"]["fam/x"]["arrays"] = {"y": {"dtype": "int32", "shape": [4]}}  # edited by hand
    (project / "provenance" / "fam.json").write_text(registry_mod.dumps(doc))
    right = Annotations(arrays={"x": {"dtype": "int32", "shape": [4]}})
    with pytest.raises(UsageError, match="arrays: "):
        ingest.add(
            store, registry_mod.load(project), path, name="fam/x", kind="array", annotations=right
        )
    fixed = ingest.add(
        store,
        registry_mod.load(project),
        path,
        name="fam/x",
        kind="array",
        annotations=right,
        replace=True,
    )
    assert dict(fixed.arrays or {}) == {"x": {"dtype": "int32", "shape": [4]}}
    assert verify_names(store, registry_mod.load(project), ["fam/x"], full=True)[0].ok


def test_add_records_the_tensor_manifest_of_a_safetensors_file(project: Path, store: Store) -> None:
    from safetensors.numpy import save

    data = save({"w": np.ones((2, 3), np.float16), "b": np.arange(3)}, metadata={"format": "pt"})
    path = _write(project, "weights/model.safetensors", data)
    record = _add(store, project, path, "ckpt/model", "checkpoint")
    assert record.media_type == "application/x-safetensors"
    assert _raw(project, "ckpt/model")["arrays"] == {"int64[3]": ["b"], "float16[2,3]": ["w"]}
    [result] = verify_names(store, registry_mod.load(project), ["ckpt/model"], full=True)
    assert result.status is Status.VERIFIED


def test_add_refuses_a_hostile_safetensors_file_storing_nothing(
    project: Path, store: Store
) -> None:
    from tests.support.safetensors_corpus import entry, st_bytes

    data = st_bytes({"a": entry("U8", [2], 0, 2), "b": entry("U8", [2], 1, 3)}, b"\0" * 3)
    path = _write(project, "weights/model.safetensors", data)
    with pytest.raises(UnsafeContentError, match="safetensors-overlap") as info:
        _add(store, project, path, "ckpt/model", "checkpoint")
    assert "nothing was stored or recorded" in info.value.message
    assert not (project / "provenance" / "ckpt.json").exists()
    assert not store.has(digests.of_bytes(data))


def test_a_batch_is_read_whole_before_any_byte_is_stored(project: Path, store: Store) -> None:
    from fixture_store.ingest import Registration

    good = _write(project, "data/good.bin", b"good" * 10)
    bad = _write(project, "data/bad.tar", _hostile_archive())
    batch = [Registration("fam/good", "fixture", good), Registration("fam/bad", "archive", bad)]
    with pytest.raises(UnsafeContentError):
        ingest.register(store, registry_mod.load(project), batch)
    assert not store.has(digests.of_file(good))  # the refusal came before the batch was stored
    assert not (project / "provenance" / "fam.json").exists()


def test_bytes_that_are_not_the_ones_checked_are_refused(project: Path, store: Store) -> None:
    from fixture_store.errors import IntegrityError
    from fixture_store.ingest import Registration

    path = _write(project, "data/a.bin", b"changed")
    checked = digests.of_bytes(b"as checked")
    with pytest.raises(IntegrityError, match="changed while it was registered") as e:
        ingest.register(
            store,
            registry_mod.load(project),
            [Registration("fam/a", "fixture", path, digest=checked)],
        )
    assert checked.text in e.value.message
    assert not (project / "provenance" / "fam.json").exists()


def test_a_suggested_registration_keeps_a_reviewed_record_of_the_same_bytes(
    project: Path, store: Store
) -> None:
    from fixture_store.ingest import Change, Registration
    from fixture_store.registry import Annotations

    path = _write(project, "data/a.bin", b"a" * 10)
    ingest.add(store, registry_mod.load(project), path, name="fam/a", kind="fixture")
    before = (project / "provenance" / "fam.json").read_bytes()
    said = Annotations(license="MIT")
    stated = Registration("fam/a", "fixture", path, annotations=said)
    suggested = dataclasses.replace(stated, suggested=True)
    (done,) = ingest.register(store, registry_mod.load(project), [suggested])
    assert done.change is Change.UNCHANGED and done.record.license is None
    assert (project / "provenance" / "fam.json").read_bytes() == before
    with pytest.raises(UsageError, match="license"):  # stated, the same field is a difference
        ingest.register(store, registry_mod.load(project), [stated])


def test_a_declared_gap_never_replaces_a_record(project: Path, store: Store) -> None:
    from fixture_store.ingest import Change, Registration
    from fixture_store.registry import Gap

    path = _write(project, "data/a.bin", b"a" * 10)
    ingest.add(store, registry_mod.load(project), path, name="fam/a", kind="fixture")
    gaps = [
        Registration("fam/a", "fixture", gap=Gap("absent")),
        Registration("fam/b", "fixture", gap=Gap("absent")),
    ]
    done = ingest.register(store, registry_mod.load(project), [], gaps=gaps)
    assert [(d.record.name, d.change) for d in done] == [("fam/b", Change.ADDED)]
    registry = registry_mod.load(project)
    assert registry.get("fam/a").gap is None and registry.get("fam/b").is_gap


def _damage(store: Store, digest: digests.Digest) -> None:
    """The store's copy of ``digest`` loses its bytes in place (same size)."""
    path = store.object_path(digest)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.chmod(0o644)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("kind", ["fixture", "array"])
def test_adding_bytes_whose_stored_copy_is_damaged_repairs_it(
    store: Store, project: Path, kind: str
) -> None:
    data = _npy(np.arange(64, dtype=np.float32))
    good = _write(project, "data/x.npy", data)
    d = digests.of_bytes(data)
    store.put_bytes(data, d)  # an earlier add, say, of the same bytes under another name
    _damage(store, d)
    code, _out, err = run("add", "data/x.npy", "--name", "fam/x", "--kind", kind)
    assert code == 0, err
    assert "changed while it was added" not in err
    assert store.object_path(d).read_bytes() == data  # the user's intact bytes replaced it
    [result] = verify_names(store, registry_mod.load(project), ["fam/x"], full=True)
    assert result.status is Status.VERIFIED
    # Damaged again under a registered record: add --replace repairs it too.
    _damage(store, d)
    code, _out, err = run("add", "data/x.npy", "--name", "fam/x", "--kind", kind, "--replace")
    assert code == 0, err
    [result] = verify_names(store, registry_mod.load(project), ["fam/x"], full=True)
    assert result.status is Status.VERIFIED
    assert good.read_bytes() == data


# -- how many times add reads a large file: each pass over a multi-GB checkpoint is minutes --
_PASS_MIB = (
    16  # past the range threshold and the kernel-copy threshold: every path a big file takes
)


def _big_file(folder: Path, fmt: str) -> Path:
    rows = _PASS_MIB * 1024 * 1024 // (4 * 1024)
    arr = np.arange(rows * 1024, dtype=np.float32).reshape(rows, 1024)
    if fmt == "safetensors":
        from safetensors.numpy import save_file

        save_file({"a": arr[: rows // 2], "b": arr[rows // 2 :]}, str(folder / "m.safetensors"))
        return folder / "m.safetensors"
    if fmt == "npy":
        np.save(folder / "a.npy", arr)
        return folder / "a.npy"
    if fmt == "npz":
        np.savez(folder / "b.npz", a=arr[: rows // 2], b=arr[rows // 2 :])
        return folder / "b.npz"
    (folder / "blob.bin").write_bytes(arr.tobytes())
    return folder / "blob.bin"


def _bytes_read() -> int:
    """Bytes this process has read through read-like calls (``copy_file_range`` included)."""
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("rchar:"))


# Passes over the file (bytes read / its size). Copied: the kernel copy, then the one read of the
# stored copy that proves its SHA-256, BLAKE3 and range digests; linked: that read alone. An NPZ
# is read twice more, as verify reads its arrays: before it is stored, and as it was stored.
PASSES = {"plain": 2, "safetensors": 2, "npy": 2, "npz": 4}


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="counts bytes read with procfs")
@pytest.mark.parametrize("link", [False, True], ids=["copied", "linked"])
@pytest.mark.parametrize("fmt", sorted(PASSES))
def test_add_reads_a_large_file_no_more_often_than_it_must(
    project: Path, store: Store, fmt: str, link: bool
) -> None:
    warm = _write(project, "warm.bin", b"x")  # imports and first-use costs before counting
    ingest.add(store, registry_mod.load(project), warm, name="warm/up", kind="fixture")
    path = _big_file(project, fmt)
    registry = registry_mod.load(project)
    before = _bytes_read()
    record = ingest.add(
        store,
        registry,
        path,
        name="big/one",
        kind="checkpoint",
        extra={"profile": "1GiB"},
        link=link,
    )
    passes = (_bytes_read() - before) / path.stat().st_size
    assert round(passes, 1) == PASSES[fmt] - link, passes
    if fmt != "plain":  # and the digests read in that pass are the stored bytes' own
        assert record.arrays is not None and any("offset" in s for s in record.arrays.values())
        [result] = verify_names(store, registry_mod.load(project), ["big/one"], full=True)
        assert result.status is Status.VERIFIED, result


def test_a_name_that_collides_with_a_registered_one_is_refused(store: Store, project: Path) -> None:
    (project / "a.bin").write_bytes(b"a")
    ingest.add(
        store, registry_mod.load(project), project / "a.bin", name="fam/Model.onnx", kind="fixture"
    )
    with pytest.raises(UsageError, match=r"collides with 'fam/Model\.onnx'"):
        ingest.add(
            store,
            registry_mod.load(project),
            project / "a.bin",
            name="fam/model.onnx",
            kind="fixture",
        )
    assert [r.name for r in registry_mod.load(project).records()] == [
        "fam/Model.onnx"
    ]  # it stays valid
