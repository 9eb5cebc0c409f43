"""Verification of archive and array records: digest first, then the content under its profile."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fixture_store import registry as registry_mod
from fixture_store.access import Fixtures
from fixture_store.errors import MissingObjectError, StoreError, UnsafeContentError, UsageError
from fixture_store.objects import digests, trees
from fixture_store.objects.store import Store
from fixture_store.readers import content
from fixture_store.verify import Status, verify_names
from tests.support import planted
from tests.support.hostile import (
    compress,
    manifest,
    regular_tar,
    tar_bytes,
    tar_info,
    zip_bytes,
)

GOOD = {"data/a.bin": b"alpha" * 100, "b.txt": b"bravo\n"}


def _project(tmp_path: Path, records: dict[str, dict[str, Any]]) -> registry_mod.Registry:
    (tmp_path / "provenance").mkdir(exist_ok=True)
    (tmp_path / "provenance" / "fam.json").write_text(
        registry_mod.dumps({"format_version": 1, "records": records})
    )
    return registry_mod.load(tmp_path)


def _record(store: Store, data: bytes, kind: str, **extra: Any) -> dict[str, Any]:
    d = store.put_bytes(data)
    return {
        "kind": kind,
        "digest": d.text,
        "size": d.size,
        "source": {"type": "local", "path": "x"},
        **extra,
    }


def _members(m: dict[str, bytes]) -> dict[str, Any]:
    return trees.to_json(trees.Tree(manifest(m)))


def _npy(arr: np.ndarray[Any, Any], *, pickle: bool = False) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, allow_pickle=pickle)
    return buf.getvalue()


def test_archive_and_array_records_verify_or_are_unsafe(tmp_path: Path) -> None:
    store = Store.at(tmp_path / "store")
    evil = tar_bytes(
        [(tar_info(n, len(d)), d) for n, d in GOOD.items()] + [(tar_info("../evil", 4), b"evil")]
    )
    npz = io.BytesIO()
    np.savez(npz, x=np.zeros((2, 3), np.float32))
    obj = np.empty(1, dtype=object)
    records = {
        "fam/good-archive": _record(
            store, compress(regular_tar(GOOD), "tar.zst"), "archive", members=_members(GOOD)
        ),
        "fam/evil-archive": _record(store, evil, "archive", members=_members(GOOD)),
        "fam/extra-member": _record(
            store,
            compress(regular_tar({**GOOD, "c": b"c"}), "tar.lz4"),
            "archive",
            members=_members(GOOD),
        ),
        "fam/no-manifest": _record(store, regular_tar(GOOD), "archive"),
        "fam/good-npy": _record(
            store, _npy(np.arange(3)), "array", arrays={"a": {"dtype": "int64", "shape": [3]}}
        ),
        "fam/wrong-shape": _record(
            store, _npy(np.arange(3)), "array", arrays={"a": {"dtype": "int64", "shape": [4]}}
        ),
        "fam/pickle": _record(store, _npy(obj, pickle=True), "array"),
        "fam/good-npz": _record(
            store,
            npz.getvalue(),
            "array",
            profile="1GiB",
            arrays={"x": {"dtype": "float32", "shape": [2, 3]}},
        ),
    }
    registry = _project(tmp_path, records)
    assert not dict(registry.invalid())
    results = {r.name: r for r in verify_names(store, registry, registry.names(), workers=1)}
    status = {n: r.status for n, r in results.items()}
    assert status == {
        "fam/good-archive": Status.VERIFIED,
        "fam/evil-archive": Status.UNSAFE,
        "fam/extra-member": Status.UNSAFE,
        "fam/no-manifest": Status.UNSAFE,
        "fam/good-npy": Status.VERIFIED,
        "fam/wrong-shape": Status.UNSAFE,
        "fam/pickle": Status.UNSAFE,
        "fam/good-npz": Status.VERIFIED,
    }
    assert "[traversal]" in results["fam/evil-archive"].message
    assert "[extra-member]" in results["fam/extra-member"].message
    assert "[manifest-shape]" in results["fam/wrong-shape"].message
    assert "[npy-object]" in results["fam/pickle"].message
    assert results["fam/evil-archive"].fix

    fixtures = Fixtures(store, registry)
    with pytest.raises(UnsafeContentError, match="traversal"):
        fixtures.path("fam/evil-archive")
    folder = content.extract(store, registry.get("fam/good-archive"))
    assert (folder / "data" / "a.bin").read_bytes() == GOOD["data/a.bin"]


def test_a_forged_pass_marker_does_not_survive_full_verification(tmp_path: Path) -> None:
    store = Store.at(tmp_path / "store")
    evil = regular_tar({**GOOD, "extra": b"x"})
    registry = _project(
        tmp_path, {"fam/a": _record(store, evil, "archive", members=_members(GOOD))}
    )
    record = registry.get("fam/a")
    assert content.check(store, record) is not None
    marker = content._marker(store, record)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()
    assert content.check(store, record) is None  # the fast path trusts its own state
    [result] = verify_names(store, registry, ["fam/a"], full=True)
    assert result.status is Status.UNSAFE


def test_a_pass_is_remembered_per_digest_manifest_and_profile(tmp_path: Path) -> None:
    store = Store.at(tmp_path / "store")
    data = regular_tar(GOOD)
    registry = _project(
        tmp_path, {"fam/a": _record(store, data, "archive", members=_members(GOOD))}
    )
    record = registry.get("fam/a")
    assert content.check(store, record) is None
    assert content._marker(store, record).exists()
    other = _project(
        tmp_path, {"fam/a": _record(store, data, "archive", profile="1GiB", members=_members(GOOD))}
    ).get("fam/a")
    assert content._marker(store, other) != content._marker(store, record)


def test_archive_record_digest_is_the_archives_not_the_manifests(tmp_path: Path) -> None:
    store = Store.at(tmp_path / "store")
    data = regular_tar(GOOD)
    registry = _project(
        tmp_path, {"fam/a": _record(store, data, "archive", members=_members(GOOD))}
    )
    record = registry.get("fam/a")
    assert record.digest == digests.of_bytes(data)
    assert not record.is_tree
    assert Fixtures(store, registry).read_bytes("fam/a") == data


def test_cli_verify_reports_unsafe_with_its_rule_and_exit_code_1(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from fixture_store.cli import main

    store = Store.at(tmp_path / "store")
    evil = tar_bytes([(tar_info("b.txt", 6), b"bravo\n"), (tar_info("../evil", 4), b"evil")])
    _project(
        tmp_path,
        {"fam/w": _record(store, evil, "archive", members=_members({"b.txt": b"bravo\n"}))},
    )
    result = CliRunner().invoke(
        main, ["--store", str(store.root), "--registry", str(tmp_path), "verify", "fam/w"]
    )
    assert result.exit_code == 1
    assert "[traversal]" in result.output
    assert "fam/w: fam/w" not in result.output


def test_a_caller_may_tighten_the_records_profile_but_not_loosen_it(tmp_path: Path) -> None:
    store = Store.at(tmp_path / "store")
    registry = _project(
        tmp_path, {"fam/a": _record(store, regular_tar(GOOD), "archive", members=_members(GOOD))}
    )
    record = registry.get("fam/a")
    assert content.check(store, record) is None
    tight = content.check(store, record, tighten={"member_bytes": 100})
    assert tight is not None and "[member-bytes]" in tight.message
    with pytest.raises(UsageError, match="may only tighten"):
        content.check(store, record, tighten={"member_bytes": 1 << 40})
    with pytest.raises(UnsafeContentError, match="member-count"):
        content.extract(store, record, tighten={"member_count": 1})


def test_an_archive_record_is_fetched_as_one_object_not_a_tree(tmp_path: Path) -> None:
    from fixture_store.sources import FetchContext, fetch_record

    data = compress(regular_tar(GOOD), "tar.zst")
    (tmp_path / "w.tar.zst").write_bytes(data)
    d = digests.of_bytes(data)
    registry = _project(
        tmp_path,
        {
            "fam/w": {
                "kind": "archive",
                "digest": d.text,
                "size": d.size,
                "members": _members(GOOD),
                "source": {"type": "local", "path": "w.tar.zst"},
            }
        },
    )
    store = Store.at(tmp_path / "store")
    fetch_record(FetchContext(store, tmp_path), registry.get("fam/w"))
    assert [h for h, _ in store.iter_objects()] == [d.hex]
    [result] = verify_names(store, registry, ["fam/w"], full=True)
    assert result.status is Status.VERIFIED


def _hostile_tar() -> bytes:
    return tar_bytes(
        [(tar_info(n, len(d)), d) for n, d in GOOD.items()] + [(tar_info("../evil", 4), b"evil")]
    )


@pytest.mark.parametrize("kind", ["checkpoint", "video", "fixture"])
def test_an_archive_is_content_checked_whatever_the_kind_of_its_record(
    tmp_path: Path, kind: str
) -> None:
    store = Store.at(tmp_path / "store")
    good = compress(regular_tar(GOOD), "tar.zst")
    evil = compress(_hostile_tar(), "tar.zst")
    zst = "application/zstd"
    records = {
        "fam/good": _record(store, good, kind, media_type=zst, members=_members(GOOD)),
        "fam/evil": _record(store, evil, kind, media_type=zst, members=_members(GOOD)),
        # What provenance/checkpoints.json held: a media type, no manifest.
        "fam/evil-no-manifest": _record(store, evil, kind, media_type=zst),
        # Nothing declared: the leading bytes say archive all the same.
        "fam/evil-undeclared": _record(store, evil, kind),
        "fam/lz4-said-zstd": _record(
            store,
            compress(regular_tar(GOOD), "tar.lz4"),
            kind,
            media_type=zst,
            members=_members(GOOD),
        ),
    }
    registry = _project(tmp_path, records)
    assert not dict(registry.invalid())
    assert not registry.get("fam/good").is_tree  # its members describe the archive's content
    results = {r.name: r for r in verify_names(store, registry, registry.names(), workers=1)}
    assert {n: r.status for n, r in results.items()} == {
        "fam/good": Status.VERIFIED,
        "fam/evil": Status.UNSAFE,
        "fam/evil-no-manifest": Status.UNSAFE,
        "fam/evil-undeclared": Status.UNSAFE,
        "fam/lz4-said-zstd": Status.UNSAFE,
    }
    assert "[traversal]" in results["fam/evil"].message
    assert "member manifest" in results["fam/evil-no-manifest"].message
    assert "tar.zst archive by its leading bytes" in results["fam/evil-undeclared"].message
    assert "--replace" in (results["fam/evil-undeclared"].fix or "")
    assert "tar.lz4" in results["fam/lz4-said-zstd"].message
    # Warm: the verified-state cache vouches for every object, the content is still judged.
    warm = {r.name: r for r in verify_names(store, registry, registry.names(), workers=1)}
    assert warm["fam/good"].cached
    assert {n: r.status for n, r in warm.items()} == {n: r.status for n, r in results.items()}
    fixtures = Fixtures(store, registry)
    with pytest.raises(UnsafeContentError, match="traversal"):
        fixtures.path("fam/evil")
    assert fixtures.read_bytes("fam/good") == good
    folder = content.extract(store, registry.get("fam/good"))
    assert (folder / "b.txt").read_bytes() == GOOD["b.txt"]


@pytest.mark.parametrize("kind", ["fixture", "video", "checkpoint"])
def test_npy_and_npz_are_content_checked_whatever_the_kind_of_their_record(
    tmp_path: Path, kind: str
) -> None:
    store = Store.at(tmp_path / "store")
    npy = "application/x-npy"
    obj = np.empty(1, dtype=object)
    evil_npz = io.BytesIO()
    np.savez(evil_npz, x=obj)
    spec = {"a": {"dtype": "int64", "shape": [3]}}
    records = {
        "fam/good": _record(store, _npy(np.arange(3)), kind, media_type=npy, arrays=spec),
        "fam/wrong-shape": _record(store, _npy(np.arange(4)), kind, media_type=npy, arrays=spec),
        "fam/pickle": _record(store, _npy(obj, pickle=True), kind, media_type=npy),
        "fam/pickle-undeclared": _record(store, _npy(obj, pickle=True), kind),
        "fam/npz-pickle": _record(store, evil_npz.getvalue(), kind, media_type="application/x-npz"),
    }
    registry = _project(tmp_path, records)
    results = {r.name: r for r in verify_names(store, registry, registry.names(), workers=1)}
    assert {n: r.status for n, r in results.items()} == {
        "fam/good": Status.VERIFIED,
        "fam/wrong-shape": Status.UNSAFE,
        "fam/pickle": Status.UNSAFE,
        "fam/pickle-undeclared": Status.UNSAFE,
        "fam/npz-pickle": Status.UNSAFE,
    }
    assert "[manifest-shape]" in results["fam/wrong-shape"].message
    assert "[npy-object]" in results["fam/pickle"].message
    assert "NPY array by its leading bytes" in results["fam/pickle-undeclared"].message
    assert "[npy-object]" in results["fam/npz-pickle"].message


def test_plain_bytes_of_any_kind_verify_without_a_manifest_or_a_marker(tmp_path: Path) -> None:
    store = Store.at(tmp_path / "store")
    registry = _project(
        tmp_path,
        {"fam/w": _record(store, b"plain weights", "checkpoint", media_type="application/onnx")},
    )
    [result] = verify_names(store, registry, ["fam/w"], full=True)
    assert result.status is Status.VERIFIED
    assert not (store.state_dir / "content").exists()


def test_a_metadata_member_over_the_profiles_metadata_bytes_fails_verify(tmp_path: Path) -> None:
    from tests.support.archive_corpus import BIG_METADATA

    store = Store.at(tmp_path / "store")
    data = compress(regular_tar(BIG_METADATA), "tar.zst")
    registry = _project(
        tmp_path,
        {
            "fam/ckpt": _record(
                store,
                data,
                "checkpoint",
                media_type="application/zstd",
                profile="1GiB",
                members=_members(BIG_METADATA),
            )
        },
    )
    [result] = verify_names(store, registry, ["fam/ckpt"], full=True)
    assert result.status is Status.UNSAFE and "[metadata-size]" in result.message
    with pytest.raises(UnsafeContentError, match="metadata-size"):
        content.extract(store, registry.get("fam/ckpt"))


def test_extract_of_an_archive_whose_object_left_the_store_says_so(tmp_path: Path) -> None:
    store = Store.at(tmp_path / "store")
    raw = _record(store, regular_tar(GOOD), "archive", members=_members(GOOD))
    registry = _project(tmp_path, {"fam/gone": raw})
    record = registry.get("fam/gone")
    path = store.object_path(record.object)
    path.chmod(0o644)
    path.unlink()
    with pytest.raises(MissingObjectError) as caught:
        content.extract(store, record)
    assert caught.value.artifact == "fam/gone"
    assert caught.value.fix == "fixture-store fetch fam/gone"


@pytest.mark.parametrize("kind", ["checkpoint", "fixture", "array"])
def test_safetensors_is_content_checked_whatever_the_kind_of_its_record(
    tmp_path: Path, kind: str
) -> None:
    from safetensors.numpy import save

    from tests.support.safetensors_corpus import entry, st_bytes

    store = Store.at(tmp_path / "store")
    media = "application/x-safetensors"
    good = save({"w": np.ones((2, 3), np.float32), "b": np.zeros(3, np.int8)})
    spec = {"w": {"dtype": "float32", "shape": [2, 3]}, "b": {"dtype": "int8", "shape": [3]}}
    hole = st_bytes({"a": entry("U8", [1], 1, 2)}, b"\0\0")
    records = {
        "fam/good": _record(store, good, kind, media_type=media, arrays=spec),
        "fam/no-manifest": _record(store, good, kind, media_type=media),
        "fam/wrong-shape": _record(
            store,
            good,
            kind,
            media_type=media,
            arrays={**spec, "b": {"dtype": "int8", "shape": [4]}},
        ),
        "fam/hole": _record(store, hole, kind, media_type=media),
        "fam/npy-named": _record(store, good, kind, media_type="application/x-npy", arrays=spec),
    }
    if kind != "array":
        records["fam/undeclared"] = _record(store, good, kind)
    registry = _project(tmp_path, records)
    results = {r.name: r for r in verify_names(store, registry, registry.names(), workers=1)}
    statuses = {n: r.status for n, r in results.items()}
    assert statuses.pop("fam/good") is Status.VERIFIED
    assert statuses.pop("fam/no-manifest") is Status.VERIFIED
    assert set(statuses.values()) == {Status.UNSAFE}
    assert "[manifest-shape]" in results["fam/wrong-shape"].message
    assert "[safetensors-hole]" in results["fam/hole"].message
    assert "leading bytes are a safetensors file" in results["fam/npy-named"].message
    if kind != "array":
        assert "safetensors file by its leading bytes" in results["fam/undeclared"].message


def test_describe_gives_a_safetensors_files_tensor_manifest(tmp_path: Path) -> None:
    import ml_dtypes
    from safetensors.numpy import save

    path = tmp_path / "model.safetensors"
    path.write_bytes(save({"w": np.ones((2, 2), ml_dtypes.bfloat16), "s": np.ones((), bool)}))
    described = content.describe(path, kind=registry_mod.Kind.CHECKPOINT, array_name="model")
    assert described.media_type == "application/x-safetensors"
    assert described.content is registry_mod.Content.ARRAYS
    assert described.arrays == {
        "s": {"dtype": "bool", "shape": []},
        "w": {"dtype": "bfloat16", "shape": [2, 2]},
    }
    with pytest.raises(UnsafeContentError, match="not a tar"):
        content.describe(path, kind=registry_mod.Kind.ARCHIVE, array_name="model")


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("at", "kind"), planted.cases())
@pytest.mark.parametrize("declared", [False, True])
def test_a_planted_entry_at_a_verified_object_is_refused_never_read(
    tmp_path: Path, at: str, kind: str, declared: bool
) -> None:
    """The content check reads an object's leading bytes through the path primitive: a link
    (to the right bytes), FIFO or folder at the object's name or its shard's is the store's
    refusal naming it, never followed, never waited on."""
    store = Store.at(tmp_path / "store")
    data = _npy(np.arange(4, dtype="<f4"))
    kind_ = "array" if declared else "checkpoint"
    record = _project(tmp_path, {"fam/a": _record(store, data, kind_)}).get("fam/a")
    assert (record.content is not None) == declared
    path = planted.plant(store, record.object, kind, at, tmp_path / "outside")
    if declared:
        error = content.check(store, record, full=True)
        assert error is not None
        message, fix = error.message, error.fix
    else:
        with pytest.raises(StoreError) as info:
            content.check(store, record, full=True)
        message, fix = info.value.message, info.value.fix
    assert str(path) in message and planted.WHAT[kind] in message
    assert "fixture-store verify" in str(fix)


def _hostile_free_records(store: Store) -> dict[str, dict[str, Any]]:
    from safetensors.numpy import save

    arr = np.arange(4, dtype="<f4")
    npz = io.BytesIO()
    np.savez(npz, a=arr)
    return {
        "fam/tar": _record(store, regular_tar(GOOD), "archive", members=_members(GOOD)),
        "fam/zip": _record(store, zip_bytes(GOOD), "archive", members=_members(GOOD)),
        "fam/npy": _record(store, _npy(arr), "array"),
        "fam/npz": _record(store, npz.getvalue(), "array"),
        "fam/st": _record(store, save({"a": arr}), "array"),
    }


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("at", "kind"), planted.cases())
@pytest.mark.parametrize("name", ["fam/tar", "fam/zip", "fam/npy", "fam/npz", "fam/st"])
def test_the_content_readers_refuse_an_entry_planted_after_the_sniff(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, at: str, kind: str, name: str
) -> None:
    """The archive and array readers of the content check (tar, zip, NPY, NPZ, safetensors)
    read the object the store opened, never its path: an entry planted once the leading bytes
    were read is refused with the store's message, never followed, never waited on."""
    store = Store.at(tmp_path / "store")
    record = _project(tmp_path, _hostile_free_records(store)).get(name)
    assert content.check(store, record, full=True) is None  # the bytes pass as they are
    planted_at: list[Path] = []
    sniff = content.sniff

    def sniff_then_plant(source: Any) -> Any:
        fmt = sniff(source)
        planted_at.append(planted.plant(store, record.object, kind, at, tmp_path / "outside"))
        return fmt

    monkeypatch.setattr(content, "sniff", sniff_then_plant)
    error = content.check(store, record, full=True)
    assert error is not None and planted_at
    assert str(planted_at[0]) in error.message and planted.WHAT[kind] in error.message
    assert "fixture-store verify" in str(error.fix)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("at", "kind"), planted.cases())
@pytest.mark.parametrize("name", ["fam/tar", "fam/zip"])
def test_extraction_reads_the_archive_the_store_opened(
    tmp_path: Path, at: str, kind: str, name: str
) -> None:
    """Extraction hashes and reads a verified archive the store opened: a link (to the right
    bytes), FIFO or folder at the object's name or its shard's is the store's refusal."""
    store = Store.at(tmp_path / "store")
    record = _project(tmp_path, _hostile_free_records(store)).get(name)
    path = planted.plant(store, record.object, kind, at, tmp_path / "outside")
    with pytest.raises(StoreError) as info:
        content.extract(store, record)
    assert str(path) in info.value.message and planted.WHAT[kind] in info.value.message
    assert "fixture-store verify" in str(info.value.fix)
    assert not (store.root / "extracted").exists() or not any((store.root / "extracted").iterdir())
