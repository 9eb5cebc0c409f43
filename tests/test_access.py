"""Verified access to safetensors artifacts: ``Fixtures.tensors`` and ``Fixtures.tensor``."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import save

from fixture_store import ingest
from fixture_store import registry as registry_mod
from fixture_store.access import Fixtures
from fixture_store.errors import (
    ArtifactError,
    DigestMismatchError,
    StoreError,
    UnsafeContentError,
    UsageError,
)
from fixture_store.objects import digests, fsutil
from fixture_store.objects.store import Store
from fixture_store.readers.pinned import PinnedFile
from fixture_store.registry.files import write_family
from tests.support import planted

WEIGHTS = {
    "w": np.arange(6, dtype=np.float32).reshape(2, 3),
    "bf": np.ones(4, ml_dtypes.bfloat16),
    "empty": np.zeros((0, 2), np.int16),
}


def _add(project: Path, store: Store, name: str = "ckpt/model") -> Path:
    path = project / "model.safetensors"
    path.write_bytes(save(WEIGHTS, metadata={"format": "pt"}))
    ingest.add(store, registry_mod.load(project), path, name=name, kind="checkpoint")
    return path


def _damage_object(store: Store, project: Path, name: str) -> None:
    digest = registry_mod.load(project).get(name).digest
    assert digest is not None
    path = store.object_path(digest)
    path.chmod(0o644)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # a tensor byte: the header still checks, the digest does not
    path.write_bytes(bytes(data))


def test_tensors_are_the_verified_objects_read_only_memory_maps(
    project: Path, store: Store
) -> None:
    _add(project, store)
    fixtures = Fixtures(store, registry_mod.load(project))
    tensors = fixtures.tensors("ckpt/model")
    assert sorted(tensors) == ["bf", "empty", "w"] and tensors.metadata == {"format": "pt"}
    assert tensors.path == fixtures.path("ckpt/model")  # the object, not a copy
    for key, expected in WEIGHTS.items():
        got = tensors[key]
        assert got.dtype == expected.dtype and got.shape == expected.shape
        assert got.tobytes() == expected.tobytes() and not got.flags.writeable
    np.testing.assert_array_equal(fixtures.tensor("ckpt/model", "w"), WEIGHTS["w"])


def test_a_tensor_is_read_only_when_asked_for(
    project: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    _add(project, store)
    reads: list[int] = []
    original = PinnedFile.read

    def counted(self: PinnedFile, at: int, n: int) -> Any:
        reads.append(n)
        return original(self, at, n)

    monkeypatch.setattr(PinnedFile, "read", counted)
    tensors = Fixtures(store, registry_mod.load(project)).tensors("ckpt/model")
    assert not reads
    assert tensors["w"].shape == (2, 3) and reads == [24]


def test_nothing_is_handed_out_from_an_object_that_fails_verification(
    project: Path, store: Store
) -> None:
    _add(project, store)
    _damage_object(store, project, "ckpt/model")
    fixtures = Fixtures(store, registry_mod.load(project))
    with pytest.raises(DigestMismatchError):
        fixtures.tensors("ckpt/model")
    with pytest.raises(DigestMismatchError):
        fixtures.tensor("ckpt/model", "w")


def test_a_manifest_the_header_does_not_match_is_refused(project: Path, store: Store) -> None:
    _add(project, store)
    registry = registry_mod.load(project)
    record = registry.get("ckpt/model")
    assert record.arrays is not None
    lying = {**record.arrays, "w": {"dtype": "float64", "shape": [2, 3]}}
    write_family(registry, "ckpt", [dataclasses.replace(record, arrays=lying)])
    with pytest.raises(UnsafeContentError, match=r"manifest-dtype"):
        Fixtures(store, registry_mod.load(project)).tensors("ckpt/model")


def test_tensors_of_another_artifact_or_an_unknown_tensor_is_a_usage_error(
    project: Path, store: Store
) -> None:
    _add(project, store)
    (project / "blob.bin").write_bytes(b"plain")
    ingest.add(
        store, registry_mod.load(project), project / "blob.bin", name="misc/b", kind="fixture"
    )
    fixtures = Fixtures(store, registry_mod.load(project))
    with pytest.raises(UsageError, match="not a safetensors artifact"):
        fixtures.tensors("misc/b")
    with pytest.raises(UsageError, match="no tensor 'nope'") as info:
        fixtures.tensor("ckpt/model", "nope")
    assert info.value.fix is not None and "w" in info.value.fix
    with pytest.raises(ArtifactError):
        fixtures.tensors("ckpt/absent")


def _tree_project(project: Path, store: Store) -> Fixtures:
    """``fam/case``, a tree of two members (one in a sub-folder), added through the library."""
    (project / "data" / "case" / "sub").mkdir(parents=True)
    (project / "data" / "case" / "model.onnx").write_bytes(b"model")
    (project / "data" / "case" / "sub" / "input_0.pb").write_bytes(b"input")
    reg = registry_mod.load(project)
    ingest.add(store, reg, project / "data" / "case", name="fam/case", kind="onnx-case")
    return Fixtures(store, registry_mod.load(project))


def _no_hard_links(monkeypatch: pytest.MonkeyPatch) -> None:
    """The store's filesystem cannot hard-link (a checkout on another filesystem): copies."""
    import errno

    from fixture_store.objects import anchored

    def cannot_link(*_: object) -> None:
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(anchored.Folder, "link", cannot_link)


def test_a_checkout_with_a_member_deleted_is_rebuilt(project: Path, store: Store) -> None:
    fixtures = _tree_project(project, store)
    folder = fixtures.tree("fam/case")
    (folder / "sub").chmod(0o755)
    (folder / "sub" / "input_0.pb").unlink()
    again = fixtures.tree("fam/case")
    assert (again / "sub" / "input_0.pb").read_bytes() == b"input"
    assert (again / "model.onnx").read_bytes() == b"model"


def test_a_copied_checkout_edited_in_place_with_its_size_is_rebuilt(
    project: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without hard links a checkout holds copies; one edited in place keeps its size (and its
    inode is not the object's either way), so only its bytes tell: it is rebuilt, never handed
    out."""
    fixtures = _tree_project(project, store)
    _no_hard_links(monkeypatch)
    folder = fixtures.tree("fam/case")
    member = folder / "model.onnx"
    assert member.stat().st_ino != store.object_path(digests.of_bytes(b"model")).stat().st_ino
    member.chmod(0o644)
    member.write_bytes(b"MODEL")  # same size, other bytes
    again = fixtures.tree("fam/case")
    assert (again / "model.onnx").read_bytes() == b"model"
    assert fixtures.tree_files("fam/case")["model.onnx"].read_bytes() == b"model"


@pytest.mark.parametrize("where", ["member", "folder"])
def test_a_link_in_a_checkout_is_rebuilt_and_never_followed(
    project: Path, store: Store, tmp_path: Path, where: str
) -> None:
    fixtures = _tree_project(project, store)
    folder = fixtures.tree("fam/case")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "input_0.pb").write_bytes(b"input")  # the right bytes, outside the store
    target = folder / "sub" if where == "folder" else folder / "sub" / "input_0.pb"
    (folder / "sub").chmod(0o755)
    if where == "folder":
        fsutil.remove_tree(target)
        target.symlink_to(outside, target_is_directory=True)
    else:
        target.unlink()
        target.symlink_to(outside / "input_0.pb")
    again = fixtures.tree("fam/case")
    assert not (again / "sub").is_symlink() and not (again / "sub" / "input_0.pb").is_symlink()
    assert sorted(p.name for p in outside.iterdir()) == ["input_0.pb"]
    assert (outside / "input_0.pb").read_bytes() == b"input"


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("at", "kind"), planted.cases())
@pytest.mark.parametrize(
    ("name", "read"),
    [
        ("ckpt/model", lambda f, n: f.tensors(n)),
        ("arr/a", lambda f, n: f.arrays(n)),
        ("arr/z", lambda f, n: f.arrays(n)),
        ("blob/b", lambda f, n: f.read_bytes(n)),
        ("blob/b", lambda f, n: f.open_bytes(n).close()),
    ],
)
def test_a_reader_refuses_an_entry_planted_after_verification(
    project: Path,
    store: Store,
    monkeypatch: pytest.MonkeyPatch,
    at: str,
    kind: str,
    name: str,
    read: Any,
) -> None:
    """Every reader of a verified object opens it through the path primitive: a link (to the
    right bytes), FIFO or folder planted at the object's name or its shard's once it verified is
    the store's refusal naming it, never followed, never waited on."""
    _add(project, store)
    np.save(project / "a.npy", np.arange(3, dtype=np.int32))
    ingest.add(store, registry_mod.load(project), project / "a.npy", name="arr/a", kind="array")
    np.savez(project / "z.npz", z=np.arange(3, dtype=np.int32))
    ingest.add(store, registry_mod.load(project), project / "z.npz", name="arr/z", kind="array")
    (project / "b.bin").write_bytes(b"plain bytes")
    ingest.add(store, registry_mod.load(project), project / "b.bin", name="blob/b", kind="fixture")
    registry = registry_mod.load(project)
    digest = registry.get(name).digest
    assert digest is not None
    planted_at: list[Path] = []
    check = Fixtures.check

    def check_then_plant(self: Fixtures, artifact: str) -> Any:
        result = check(self, artifact)
        if not planted_at:
            planted_at.append(planted.plant(store, digest, kind, at, project / "outside"))
        return result

    monkeypatch.setattr(Fixtures, "check", check_then_plant)
    with pytest.raises(StoreError) as info:
        read(Fixtures(store, registry), name)
    assert str(planted_at[0]) in info.value.message
    assert planted.WHAT[kind] in info.value.message
    assert "fixture-store verify" in str(info.value.fix)


@pytest.mark.parametrize("order", ["C", "F"])
def test_tensor_rows_of_a_stored_npy_read_only_those_rows(
    project: Path, store: Store, order: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = np.arange(600, dtype=np.int32).reshape(50, 12)
    array = np.asfortranarray(plain) if order == "F" else plain
    np.save(project / "acts.npy", array)
    ingest.add(
        store, registry_mod.load(project), project / "acts.npy", name="ref/acts.npy", kind="array"
    )
    fixtures = Fixtures(store, registry_mod.load(project))
    reads: list[int] = []
    real = PinnedFile.read

    def counted(self: PinnedFile, offset: int, size: int) -> Any:
        reads.append(size)
        return real(self, offset, size)

    monkeypatch.setattr(PinnedFile, "read", counted)
    got = fixtures.tensor("ref/acts.npy", "acts", rows=(7, 11))
    np.testing.assert_array_equal(got, array[7:11])
    assert not got.flags.writeable
    # C order: the four rows' bytes alone; Fortran order: its rows are not contiguous, all of it
    assert reads == ([4 * 12 * 4] if order == "C" else [array.nbytes])
    with pytest.raises(UsageError, match=r"tensor 'acts' has 50 rows; rows \[40, 51\)"):
        fixtures.tensor("ref/acts.npy", "acts", rows=(40, 51))
    with pytest.raises(UsageError, match="no tensor 'other'"):
        fixtures.tensor("ref/acts.npy", "other", rows=(0, 1))


def test_tensor_of_plain_bytes_is_a_usage_error(project: Path, store: Store) -> None:
    (project / "blob.bin").write_bytes(b"plain")
    ingest.add(
        store, registry_mod.load(project), project / "blob.bin", name="misc/b", kind="fixture"
    )
    with pytest.raises(UsageError, match="holds no tensors"):
        Fixtures(store, registry_mod.load(project)).tensor("misc/b", "x")
