"""The package source with the real pip, from a local wheelhouse configured through pip's own
environment variables (no index, no network)."""

from __future__ import annotations

import hashlib
import json
import shlex
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

from fixture_store.fetch import Outcome, fetch_names
from fixture_store.objects import trees
from fixture_store.objects.digests import of_bytes
from fixture_store.objects.store import Store
from fixture_store.registry import Registry
from fixture_store.sources.package import selection_flags
from fixture_store.sources.transfer import DEADLINE_ENV
from fixture_store.verify import Verifier
from tests.support.fetchutil import file_record, make_registry, online_env, sha  # noqa: F401 - autouse

WHEEL = "tinypkg-1.0.0-py3-none-any.whl"
MEMBERS = {
    "model.onnx": b"\x08\x07onnx-model",
    "test_data_set_0/input_0.pb": b"in" * 50,
    "test_data_set_0/output_0.pb": b"out" * 40,
}


def build_wheel(path: Path, extra: dict[str, bytes] | None = None) -> bytes:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("tinypkg/__init__.py", "")
        for member, data in {**MEMBERS, **(extra or {})}.items():
            z.writestr(f"tinypkg/data/case/{member}", data)
        z.writestr("tinypkg/data/notes.txt", b"notes\n")
        z.writestr(
            "tinypkg-1.0.0.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0.0\n",
        )
        z.writestr(
            "tinypkg-1.0.0.dist-info/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        z.writestr("tinypkg-1.0.0.dist-info/RECORD", "")
    return path.read_bytes()


@pytest.fixture
def wheelhouse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    house = tmp_path / "wheelhouse"
    house.mkdir()
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(house))
    monkeypatch.delenv("FIXTURE_STORE_PIP", raising=False)
    return house


def src(path: str, wheel: bytes, **over: Any) -> dict[str, Any]:
    return {
        "type": "package",
        "requirement": "tinypkg==1.0.0",
        "file": WHEEL,
        "file_digest": sha(wheel),
        "file_size": len(wheel),
        "path": path,
        **over,
    }


def tree_record(wheel: bytes, **over: Any) -> dict[str, Any]:
    tree = trees.Tree({m: of_bytes(d) for m, d in MEMBERS.items()})
    return {
        "kind": "onnx-case",
        "source": src("tinypkg/data/case", wheel, **over),
        "digest": tree.digest.text,
        "size": tree.digest.size,
        "members": trees.to_json(tree),
    }


def project(tmp_path: Path, wheel: bytes, **over: Any) -> Registry:
    return make_registry(
        tmp_path / "project",
        {
            "cases/case": tree_record(wheel, **over),
            "cases/notes": file_record(src("tinypkg/data/notes.txt", wheel, **over), b"notes\n"),
        },
    )


def test_one_download_serves_every_record_and_a_second_fetch_downloads_nothing(
    wheelhouse: Path, tmp_path: Path
) -> None:
    wheel = build_wheel(wheelhouse / WHEEL)
    registry = project(tmp_path, wheel)
    store = Store.at(tmp_path / "store")
    report = fetch_names(store, registry, registry.names(), jobs=4)
    assert [r.outcome for r in report.results] == [Outcome.FETCHED, Outcome.FETCHED]
    assert report.downloads == 1 and report.downloaded_bytes == len(wheel)
    assert all(Verifier(store, full=True).verify(r).ok for r in registry.records())
    # The verified distribution is kept in the store, addressed by its own digest.
    assert store.object_path(hashlib.sha256(wheel).hexdigest()).read_bytes() == wheel

    again = fetch_names(store, registry, registry.names())
    assert [r.outcome for r in again.results] == [Outcome.PRESENT, Outcome.PRESENT]
    assert again.downloads == 0


def test_offline_repair_extracts_from_the_stored_distribution(
    wheelhouse: Path, tmp_path: Path
) -> None:
    wheel = build_wheel(wheelhouse / WHEEL)
    registry = project(tmp_path, wheel)
    store = Store.at(tmp_path / "store")
    fetch_names(store, registry, registry.names())
    (wheelhouse / WHEEL).unlink()  # nothing left to download from
    damaged = store.object_path(of_bytes(MEMBERS["model.onnx"]))
    damaged.chmod(0o644)
    damaged.write_bytes(b"\x00" + MEMBERS["model.onnx"][1:])
    assert not Verifier(store, full=True).verify(registry.get("cases/case")).ok

    report = fetch_names(store, registry, ["cases/case"], offline=True)
    assert report.results[0].outcome is Outcome.FETCHED and report.downloads == 0
    assert damaged.read_bytes() == MEMBERS["model.onnx"]


def test_offline_without_the_distribution_fails_clearly(wheelhouse: Path, tmp_path: Path) -> None:
    wheel = build_wheel(wheelhouse / WHEEL)
    registry = project(tmp_path, wheel)
    result = fetch_names(Store.at(tmp_path / "s"), registry, ["cases/case"], offline=True)
    failure = result.results[0]
    assert failure.outcome is Outcome.FAILED
    assert f"the distribution {WHEEL} of tinypkg==1.0.0" in failure.message
    assert "offline mode is on" in failure.message


def test_distribution_with_another_digest_is_refused_before_it_is_opened(
    wheelhouse: Path, tmp_path: Path
) -> None:
    pinned = build_wheel(tmp_path / "pinned.whl")
    build_wheel(wheelhouse / WHEEL, extra={"extra.bin": b"tampered"})  # what the index serves
    registry = project(tmp_path, pinned)
    store = Store.at(tmp_path / "store")
    result = fetch_names(store, registry, ["cases/case"]).results[0]
    assert result.outcome is Outcome.FAILED
    assert "does not match the pinned file_digest" in result.message
    assert "nothing was stored" in result.message
    assert list(store.iter_objects()) == []


def test_member_with_other_bytes_is_refused(wheelhouse: Path, tmp_path: Path) -> None:
    wheel = build_wheel(wheelhouse / WHEEL)
    raw = tree_record(wheel)
    raw["members"]["model.onnx"] = {"digest": sha(b"X" * 12), "size": 12}
    tree = trees.from_json(raw["members"])
    raw["digest"], raw["size"] = tree.digest.text, tree.digest.size
    registry = make_registry(tmp_path / "p", {"cases/case": raw})
    result = fetch_names(Store.at(tmp_path / "s"), registry, ["cases/case"]).results[0]
    assert result.outcome is Outcome.FAILED
    assert "member 'model.onnx'" in result.message and "does not match" in result.message


def test_missing_member_names_the_distribution(wheelhouse: Path, tmp_path: Path) -> None:
    wheel = build_wheel(wheelhouse / WHEEL)
    registry = make_registry(
        tmp_path / "p", {"cases/gone": file_record(src("tinypkg/data/gone.bin", wheel), b"x")}
    )
    result = fetch_names(Store.at(tmp_path / "s"), registry, ["cases/gone"]).results[0]
    assert result.outcome is Outcome.FAILED
    assert f"{WHEEL} has no member 'tinypkg/data/gone.bin'" in result.message


def test_selection_flags_pin_the_wheel_whatever_the_local_platform() -> None:
    flags = selection_flags(
        "onnx-1.22.0-cp312-abi3-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"
    )
    assert flags == [
        "--only-binary",
        ":all:",
        "--implementation",
        "cp",
        "--abi",
        "abi3",
        "--python-version",
        "3.12",
        "--platform",
        "manylinux_2_27_x86_64",
        "--platform",
        "manylinux_2_28_x86_64",
    ]
    assert selection_flags(WHEEL)[-6:] == [
        "--abi",
        "none",
        "--python-version",
        "3",
        "--platform",
        "any",
    ]
    assert selection_flags("onnx-1.22.0.tar.gz") == ["--no-binary", ":all:"]


def test_gc_keeps_the_shared_distribution(wheelhouse: Path, tmp_path: Path) -> None:
    from fixture_store import gc

    wheel = build_wheel(wheelhouse / WHEEL)
    registry = project(tmp_path, wheel)
    store = Store.at(tmp_path / "store")
    fetch_names(store, registry, registry.names())
    assert gc.find_garbage(store, [registry]) == []


def test_concurrent_fetch_processes_share_one_store_safely(
    wheelhouse: Path, tmp_path: Path
) -> None:
    import subprocess
    import sys

    wheel = build_wheel(wheelhouse / WHEEL)
    registry = project(tmp_path, wheel)
    store = tmp_path / "store"
    cmd = [
        sys.executable,
        "-m",
        "fixture_store.cli",
        "--store",
        str(store),
        "--registry",
        str(registry.root),
        "fetch",
        "--all",
        "--json",
    ]
    procs = [
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(3)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [o[1] for o in outputs]
    assert all(Verifier(Store.at(store), full=True).verify(r).ok for r in registry.records())
    assert list((store / "tmp").iterdir()) == []
    assert sum(json.loads(out)["downloads"] for out, _ in outputs) == 1


def test_an_explicit_deadline_stops_a_hanging_package_tool(
    wheelhouse: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = build_wheel(wheelhouse / WHEEL)
    registry = project(tmp_path, wheel)
    store = Store.at(tmp_path / "store")
    hanging = f"{shlex.quote(sys.executable)} -c 'import time; time.sleep(20)'"
    monkeypatch.setenv("FIXTURE_STORE_PIP", hanging)
    monkeypatch.setenv(DEADLINE_ENV, "1")
    started = time.monotonic()
    result = fetch_names(store, registry, ["cases/notes"]).results[0]
    assert time.monotonic() - started < 10
    assert result.outcome is Outcome.FAILED
    assert "downloading tinypkg==1.0.0 (tinypkg-1.0.0-py3-none-any.whl) took longer than 1s" in (
        result.message
    )
    assert result.fix is not None and DEADLINE_ENV in result.fix
    assert list(store.iter_objects()) == []
    assert not store.tmp_dir.is_dir() or list(store.tmp_dir.iterdir()) == []


def test_a_damaged_member_of_the_pinned_wheel_fails_that_record_clearly(
    wheelhouse: Path, tmp_path: Path
) -> None:
    """A wheel whose digest is pinned (so it passes) but one of whose compressed members is
    damaged: zipfile's BadZipFile (a CRC error) becomes the record's failure, naming the
    distribution and the member, and nothing of it is stored."""
    notes = b"notes worth compressing " * 400
    path = wheelhouse / WHEEL
    build_wheel(path)
    with zipfile.ZipFile(path, "a", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("tinypkg/data/big-notes.txt", notes)
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as z:
        info = z.getinfo("tinypkg/data/big-notes.txt")
    body = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    data[body + info.compress_size // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    registry = make_registry(
        tmp_path / "p",
        {"cases/notes": file_record(src("tinypkg/data/big-notes.txt", bytes(data)), notes)},
    )
    store = Store.at(tmp_path / "s")
    result = fetch_names(store, registry, ["cases/notes"]).results[0]
    assert result.outcome is Outcome.FAILED
    assert f"{WHEEL}: member 'tinypkg/data/big-notes.txt' cannot be read" in result.message
    assert "the archive is damaged" in result.message
    assert not store.has(of_bytes(notes))
