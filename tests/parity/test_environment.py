"""Parity by environment: the expectation that holds where the comparison runs judges it, the
frameworks already imported say where that is, and each run is kept in the run log."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from fixture_store import ingest
from fixture_store import registry as registry_mod
from fixture_store.access import Fixtures
from fixture_store.errors import StoreError
from fixture_store.objects.store import Store
from fixture_store.parity import environment, runlog
from fixture_store.parity.assertion import ParityError, assert_parity
from fixture_store.registry.environment import Environment
from fixture_store.registry.files import write_family

NAME = "equimo/out.npz"
CUDA_REF = "equimo/out_cuda.npz"
OUT = np.linspace(-1, 1, 64, dtype=np.float32)
TOLERANCE = {
    "metric": "max_abs",
    "max": 1e-6,
    "expectations": {
        "device:cuda": {"max": 1e-3, "why": "TF32 matmuls"},
        "device:cuda,dtype:bfloat16": {"max": 1e-6, "reference": CUDA_REF},
    },
}


def _register(project: Path, store: Store) -> Fixtures:
    for name, values in ((NAME, OUT), (CUDA_REF, OUT + np.float32(0.25))):
        path = project / name.split("/")[1]
        np.savez(path, y=values)
        ingest.add(store, registry_mod.load(project), path, name=name, kind="array")
    registry = registry_mod.load(project)
    records = dict(registry.families["equimo"].records)
    raw = {**records[NAME].to_json(), "tolerance": TOLERANCE}
    records[NAME] = registry_mod.parse_record(NAME, raw, file="t")
    write_family(registry, "equimo", records.values())
    return Fixtures(store, registry_mod.load(project))


@pytest.fixture
def fixtures(project: Path, store: Store) -> Fixtures:
    return _register(project, store)


def test_the_rule_of_the_environment_judges_and_the_record_rule_elsewhere(
    fixtures: Fixtures,
) -> None:
    near = OUT + np.float32(1e-4)
    with pytest.raises(ParityError) as info:
        assert_parity(NAME, {"y": near}, fixtures=fixtures, environment="device:cpu")
    assert "environment: device:cpu (judged by the record's own rule)" in str(info.value)
    report = assert_parity(NAME, {"y": near}, fixtures=fixtures, environment="device:cuda")
    assert report.ok and report.rule == "device:cuda" and report.environment == "device:cuda"
    with pytest.raises(ParityError, match="why this rule: TF32 matmuls"):
        assert_parity(
            NAME, {"y": OUT + np.float32(0.01)}, fixtures=fixtures, environment="device:cuda"
        )


def test_an_expectation_naming_a_reference_is_judged_against_that_record(
    fixtures: Fixtures,
) -> None:
    bf16 = Environment(device="cuda", dtype="bfloat16")
    moved = OUT + np.float32(0.25)
    assert assert_parity(NAME, {"y": moved}, fixtures=fixtures, environment=bf16).ok
    with pytest.raises(ParityError, match="judged by expectation 'device:cuda,dtype:bfloat16'"):
        assert_parity(NAME, {"y": OUT}, fixtures=fixtures, environment=bf16)


def test_every_run_given_an_environment_is_logged_in_the_store_state(
    fixtures: Fixtures, store: Store
) -> None:
    assert_parity(NAME, {"y": OUT}, fixtures=fixtures)  # no environment: nothing logged
    assert runlog.read(store) == ([], 0)
    assert_parity(NAME, {"y": OUT}, fixtures=fixtures, environment="device:cuda,platform:linux")
    with pytest.raises(ParityError):
        assert_parity(NAME, {"y": OUT + 1}, fixtures=fixtures, environment="device:cpu")
    with (store.state_dir / runlog.LOG).open("a") as log:
        log.write("not json\n")
        log.write(
            json.dumps(
                {
                    **json.loads(runlog.Run(NAME, "d", "device:gpu", "", True, 1, "t").to_line()),
                    "environment": "device:gpu",
                }
            )
            + "\n"
        )
    runs, bad = runlog.read(store)
    assert bad == 2
    assert [(r.record, r.environment, r.rule, r.ok) for r in runs] == [
        (NAME, "device:cuda,platform:linux", "device:cuda", True),
        (NAME, "device:cpu", "", False),
    ]
    assert runs[0].digest == str(fixtures.registry.get(NAME).digest) and runs[0].at
    assert json.loads((store.state_dir / runlog.LOG).read_text().splitlines()[0])["ok"] is True


def test_a_link_planted_at_the_run_log_is_refused(
    fixtures: Fixtures, store: Store, tmp_path: Path
) -> None:
    store.state_dir.mkdir(parents=True, exist_ok=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("")
    (store.state_dir / runlog.LOG).symlink_to(elsewhere)
    with pytest.raises(StoreError, match="symbolic link"):
        assert_parity(NAME, {"y": OUT}, fixtures=fixtures, environment="device:cpu")
    assert elsewhere.read_text() == ""


def _torch(cuda: bool, hip: str | None = None) -> Any:
    return SimpleNamespace(
        cuda=SimpleNamespace(is_available=lambda: cuda), version=SimpleNamespace(hip=hip)
    )


def test_detection_asks_only_the_frameworks_already_imported() -> None:
    assert environment.detect({}) == Environment(platform=sys.platform)
    assert environment.detect({"torch": _torch(True)}).device == "cuda"
    assert environment.detect({"torch": _torch(True, hip="6.0")}).device == "rocm"
    # No xpu and no mps on this build: the attributes are missing, the device is the cpu.
    assert environment.detect({"torch": _torch(False)}) == Environment(
        device="cpu", runtime="torch", platform=sys.platform
    )
    jax = SimpleNamespace(default_backend=lambda: "tpu")
    assert environment.detect({"jax": jax}) == Environment(
        device="tpu", runtime="jax", provider="tpu", platform=sys.platform
    )
    ort = SimpleNamespace(get_available_providers=lambda: ["CUDAExecutionProvider", "CPU"])
    assert str(environment.detect({"onnxruntime": ort})) == (
        f"device:cuda,runtime:onnxruntime,provider:CUDAExecutionProvider,platform:{sys.platform}"
    )
    # Two runtimes loaded: which one computes is not known; the accelerator is.
    both = environment.detect({"torch": _torch(False), "onnxruntime": ort})
    assert both == Environment(device="cuda", platform=sys.platform)


def test_detection_never_imports_a_framework() -> None:
    code = (
        "import sys\nfrom fixture_store.parity import environment\n"
        "environment.resolve('device:cpu')\n"
        "print([m for m in ('torch', 'jax', 'onnxruntime', 'tensorflow') if m in sys.modules])"
    )
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_facts_given_win_over_those_detected(monkeypatch: pytest.MonkeyPatch) -> None:
    # Only torch is loaded, whatever earlier tests of this process imported (jax, onnxruntime).
    for name in environment._ASKED:
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setitem(sys.modules, "torch", _torch(True))
    monkeypatch.setenv(environment.ENV_VAR, "device:cpu,dtype:bfloat16")
    assert environment.resolve() == Environment(
        device="cpu", runtime="torch", dtype="bfloat16", platform=sys.platform
    )
    assert environment.resolve("dtype:float32").device == "cuda"


def test_compare_runtimes_say_where_they_compute() -> None:
    from fixture_store.parity.runtimes import environment as runtime_environment

    assert str(runtime_environment("ort")) == (
        f"device:cpu,runtime:onnxruntime,provider:CPUExecutionProvider,platform:{sys.platform}"
    )
    assert runtime_environment("my_pkg.runner:prepare").runtime == "my_pkg.runner"
