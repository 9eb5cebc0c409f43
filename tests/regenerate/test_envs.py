"""Pinned environments: exact pins only, a stable key, and a real uv-made environment."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from fixture_store.errors import StoreError, UsageError
from fixture_store.objects.store import Store
from fixture_store.regenerate import envs
from tests.support.regen_project import numpy_pin


def test_only_exact_pins_are_accepted() -> None:
    for bad in ("numpy>=1", "numpy", "numpy==", "numpy==1.*; python_version>'3'"):
        with pytest.raises(UsageError):
            envs.PinnedEnv((bad,), "3.11")


def test_key_is_independent_of_pin_order_and_changes_with_a_pin() -> None:
    a = envs.PinnedEnv(("onnx==1.22.0", "numpy==2.4.6"), "3.11")
    b = envs.PinnedEnv(("numpy==2.4.6", "onnx==1.22.0"), "3.11")
    c = envs.PinnedEnv(("numpy==2.4.5", "onnx==1.22.0"), "3.11")
    assert a.key == b.key != c.key
    assert a.key != envs.PinnedEnv(a.requirements, "3.12").key


@pytest.mark.slow
@pytest.mark.network
def test_environment_is_made_once_with_exactly_the_pins(tmp_path: Path) -> None:
    store = Store.at(tmp_path / "store")
    env = envs.PinnedEnv((numpy_pin(),), "3.11")
    said: list[str] = []
    python = envs.ensure(env, store, log=said.append)
    assert said[0].startswith(f"making the pinned environment {numpy_pin()} from the package")
    assert any(line.startswith("  uv: ") for line in said)  # uv's progress, as it works
    version = subprocess.run(
        [str(python), "-c", "import numpy; print(numpy.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert numpy_pin() == f"numpy=={version}"
    # Nothing else of this project leaks in: the environment is isolated. Asked from a folder
    # that is not the checkout, with no PYTHONPATH, so that only the environment can answer
    # (from the checkout, '-c' finds the source folder itself, which imports lightly).
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    probe = subprocess.run(
        [str(python), "-c", "import fixture_store"],
        capture_output=True,
        check=False,
        cwd=tmp_path,
        env=clean,
    )
    assert probe.returncode != 0 and b"No module named 'fixture_store'" in probe.stderr
    marker = env.folder(store) / ".complete"
    stamp = marker.stat().st_mtime_ns
    assert envs.ensure(env, store) == python and marker.stat().st_mtime_ns == stamp


@pytest.mark.slow
def test_offline_says_the_cache_lacks_a_pin_and_leaves_nothing(tmp_path: Path) -> None:
    store = Store.at(tmp_path / "store")
    env = envs.PinnedEnv(("fixture-store-no-such-distribution==0.0.1",), "3.11")
    said: list[str] = []
    with pytest.raises(envs.GeneratorError, match="offline: uv's cache does not hold") as e:
        envs.ensure(env, store, offline=True, log=said.append)
    assert e.value.fix == "make it once with the network (the same command without --offline)"
    assert "from uv's cache only (--offline)" in said[0]
    # no environment and no staging folder is left; the lock file stays, as every lock file does
    assert [p.name for p in (store.root / "envs").iterdir()] == [f"{env.key}.lock"]


@pytest.mark.parametrize("where", ["envs", "env"])
def test_an_environment_reached_through_a_link_is_refused(tmp_path: Path, where: str) -> None:
    store = Store.at(tmp_path / "store").ensure()
    env = envs.PinnedEnv(("numpy==2.0.0",), "3.11")
    user = tmp_path / "user"
    made = user / env.key if where == "envs" else user
    (made / "bin").mkdir(parents=True)
    (made / "bin" / "python").write_text("#!/bin/sh\n")  # an interpreter outside the store
    (made / ".complete").write_text("")
    link = store.root / "envs" if where == "envs" else env.folder(store)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(user, target_is_directory=True)
    with pytest.raises(StoreError, match="plain folders") as info:
        envs.ensure(env, store)
    assert str(link) in info.value.message
    assert (made / "bin" / "python").is_file() and (made / ".complete").is_file()
