"""The converted-checkpoint chain: safetensors weights, deterministic archives, a safe reader,
JAX parity."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import lz4.frame
import numpy as np
import onnx
import pytest
import zstandard
from onnx import numpy_helper

from fixture_store.objects import digests, trees
from fixture_store.regenerate import protocol

MODELS = Path(__file__).resolve().parents[2] / "models"
CASES = Path(onnx.__file__).parent / "backend" / "test" / "data" / "pytorch-converted"
sys.path.insert(0, str(MODELS))

import _checkpoint_format as ckpt  # noqa: E402


def _run(script: str, out: Path, inputs: Path) -> None:
    subprocess.run(
        [sys.executable, str(MODELS / script), "--out", str(out), "--inputs", str(inputs)],
        check=True,
        capture_output=True,
        # As the runner starts a generator: the kit on its path, nothing else of the package.
        env={**os.environ, "PYTHONPATH": str(protocol.kit_folder())},
    )


def write_weights(tmp_path: Path, out: str, cases: tuple[str, ...]) -> Path:
    """The pytorch-weights stage's generator on upstream cases: one model.safetensors each."""
    items = []
    for case in cases:
        tree, _ = trees.hash_folder(CASES / case)
        items.append(
            {
                "name": f"onnx-pytorch-converted/{case}",
                "path": str(CASES / case),
                "digest": tree.digest.text,
                "size": tree.digest.size,
            }
        )
    inputs = tmp_path / f"{out}-weights-inputs.json"
    inputs.write_text(json.dumps(items))
    _run("pytorch_weights.py", tmp_path / f"{out}-weights", inputs)
    return tmp_path / f"{out}-weights"


def convert(tmp_path: Path, out: str, cases: tuple[str, ...]) -> Path:
    """The chain's first two generators: weights as safetensors, then the archives from them."""
    weights = write_weights(tmp_path, out, cases)
    items = []
    for case in cases:
        path = weights / case / "model.safetensors"
        d = digests.of_file(path)
        items.append(
            {
                "name": f"pytorch-weights/{case}/model.safetensors",
                "path": str(path),
                "digest": d.text,
                "size": d.size,
            }
        )
    inputs = tmp_path / f"{out}-inputs.json"
    inputs.write_text(json.dumps(items))
    _run("convert_checkpoint.py", tmp_path / out, inputs)
    return tmp_path / out


def test_weights_are_the_initializers_under_pytorch_names_in_deterministic_bytes(
    tmp_path: Path,
) -> None:
    from safetensors.numpy import load_file

    cases = ("test_Linear", "test_Linear_no_bias", "test_Conv2d", "test_BatchNorm2d_eval")
    first, second = write_weights(tmp_path, "a", cases), write_weights(tmp_path, "b", cases)
    for case in cases:
        a, b = first / case / "model.safetensors", second / case / "model.safetensors"
        assert a.read_bytes() == b.read_bytes(), case  # the package's bytes, twice the same
    model = onnx.load(str(CASES / "test_Conv2d" / "model.onnx"))
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    node = model.graph.node[-1]
    state = load_file(first / "test_Conv2d" / "model.safetensors")
    assert sorted(state) == ["bias", "weight"]
    np.testing.assert_array_equal(state["weight"], inits[node.input[1]])
    np.testing.assert_array_equal(state["bias"], inits[node.input[2]])
    bn = load_file(first / "test_BatchNorm2d_eval" / "model.safetensors")
    assert sorted(bn) == ["bias", "running_mean", "running_var", "weight"]
    outputs = json.loads((first / "outputs.json").read_text())["outputs"]
    linear = next(o for o in outputs if o["path"] == "test_Linear/model.safetensors")
    assert linear["parents"] == ["onnx-pytorch-converted/test_Linear"]
    assert linear["metadata"]["module"] == {
        "type": "Linear",
        "config": {"in_features": 10, "out_features": 8},
    }


def test_the_converter_refuses_a_safetensors_file_without_its_module(tmp_path: Path) -> None:
    from safetensors.numpy import save_file

    path = tmp_path / "model.safetensors"
    save_file({"weight": np.ones((2, 2), np.float32)}, str(path), metadata={"format": "pt"})
    d = digests.of_file(path)
    inputs = tmp_path / "inputs.json"
    inputs.write_text(
        json.dumps(
            [
                {
                    "name": "pytorch-weights/x/model.safetensors",
                    "path": str(path),
                    "digest": d.text,
                    "size": d.size,
                }
            ]
        )
    )
    with pytest.raises(subprocess.CalledProcessError) as e:
        _run("convert_checkpoint.py", tmp_path / "out", inputs)
    assert b"no PyTorch state dict of the pytorch-weights stage" in e.value.stderr


def test_two_conversions_give_byte_identical_archives(tmp_path: Path) -> None:
    cases = ("test_Linear", "test_Conv2d_groups", "test_BatchNorm2d_eval")
    first, second = convert(tmp_path, "a", cases), convert(tmp_path, "b", cases)
    names = sorted(p.name for p in first.glob("*.tar.*"))
    assert len(names) == 6
    for name in names:
        assert digests.of_file(first / name) == digests.of_file(second / name), name


def test_archive_members_are_normalised(tmp_path: Path) -> None:
    out = convert(tmp_path, "a", ("test_Conv2d",))
    raw = zstandard.ZstdDecompressor().decompress((out / "test_Conv2d.tar.zst").read_bytes())
    assert lz4.frame.decompress((out / "test_Conv2d.tar.lz4").read_bytes()) == raw
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == ["metadata.json", "tensors/bias.npy", "tensors/weight.npy"]
    for m in members:
        assert (m.mtime, m.uid, m.gid, m.uname, m.gname, m.mode) == (0, 0, 0, "", "", 0o644)
    meta, tensors = ckpt.read((out / "test_Conv2d.tar.zst").read_bytes(), "zst")
    tree, _ = trees.hash_folder(CASES / "test_Conv2d")
    assert meta["parent"]["digest"] == tree.digest.text
    assert meta["converter"]["version"] == "1"
    assert meta["module"] == {
        "type": "Conv2d",
        "config": {"strides": [1, 1], "pads": [0, 0, 0, 0], "dilations": [1, 1], "groups": 1},
    }
    assert set(meta["tensors"]) == {"weight", "bias"} and tensors["weight"].shape == (4, 3, 3, 2)


def test_reader_refuses_a_tampered_tensor() -> None:
    raw = ckpt.tar_bytes({"weight": np.ones(4, np.float32)}, {"module": {"type": "Linear"}})
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        info = tar.getmember("tensors/weight.npy")
    data = bytearray(raw)
    data[info.offset_data + info.size - 1] ^= 0xFF
    with pytest.raises(ckpt.CheckpointError, match="does not match its manifest"):
        ckpt.read(ckpt.compress(bytes(data), "zst"), "zst")


def test_reader_refuses_an_extra_member() -> None:
    raw = ckpt.tar_bytes({"weight": np.ones(4, np.float32)}, {})
    buf = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(raw)) as src, tarfile.open(fileobj=buf, mode="w") as dst:
        for m in src.getmembers():
            dst.addfile(m, src.extractfile(m))
        extra = tarfile.TarInfo("../evil")
        extra.size = 1
        dst.addfile(extra, io.BytesIO(b"x"))
    with pytest.raises(ckpt.CheckpointError, match="not a plain, unique file"):
        ckpt.read(ckpt.compress(buf.getvalue(), "lz4"), "lz4")


@pytest.mark.parametrize("case", ["test_Linear", "test_Conv2d_dilated", "test_BatchNorm2d_eval"])
def test_jax_matches_pytorch_outputs(tmp_path: Path, case: str) -> None:
    import jax_modules

    out = convert(tmp_path, "a", (case,))
    meta, state = ckpt.read((out / f"{case}.tar.zst").read_bytes(), "zst")

    def pb(name: str) -> np.ndarray:
        t = onnx.TensorProto()
        t.ParseFromString((CASES / case / "test_data_set_0" / name).read_bytes())
        return numpy_helper.to_array(t)

    y = np.asarray(
        jax_modules.apply(meta["module"]["type"], state, meta["module"]["config"], pb("input_0.pb"))
    )
    expected = pb("output_0.pb")
    assert y.shape == expected.shape and y.dtype == expected.dtype
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)
    # And it is a real computation: a perturbed weight no longer matches.
    state["weight"] = state["weight"] * np.float32(1.01)
    y2 = np.asarray(
        jax_modules.apply(meta["module"]["type"], state, meta["module"]["config"], pb("input_0.pb"))
    )
    assert not np.allclose(y2, expected, rtol=1e-5, atol=1e-5)


def test_the_chain_signs_a_parity_certificate_for_a_converted_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chain's parity step as a certificate: a checkpoint converted by the chain's own
    generators, run by its JAX module, compared with PyTorch's upstream output under the
    tolerance the corpus's jax-parity records apply; signed with a key this test creates, and
    verified offline against the archive's bytes (a changed byte in it fails)."""
    import jax_modules

    from fixture_store import ingest
    from fixture_store import registry as registry_mod
    from fixture_store.objects.store import Store
    from fixture_store.registry.files import write_family
    from tests.cli.test_attest import write_keys
    from tests.support.cli import run

    case = "test_Linear"
    out = convert(tmp_path, "a", (case,))
    archive = out / f"{case}.tar.zst"
    meta, state = ckpt.read(archive.read_bytes(), "zst")

    def pb(name: str) -> np.ndarray:
        t = onnx.TensorProto()
        t.ParseFromString((CASES / case / "test_data_set_0" / name).read_bytes())
        return numpy_helper.to_array(t)

    y = np.asarray(
        jax_modules.apply(meta["module"]["type"], state, meta["module"]["config"], pb("input_0.pb"))
    )
    # The reference: PyTorch's upstream output, registered; its tolerance the corpus's own.
    corpus = registry_mod.load(MODELS.parent)
    tolerance = corpus.get(f"jax-parity/{case}/output_0.npy").tolerance
    assert tolerance is not None
    project = tmp_path / "project"
    (project / "provenance").mkdir(parents=True)
    monkeypatch.chdir(project)
    monkeypatch.delenv("FIXTURE_STORE_REGISTRY", raising=False)
    store = Store.at(tmp_path / "store").ensure()
    monkeypatch.setenv("FIXTURE_STORE_DIR", str(store.root))
    np.save(project / "output_0.npy", pb("output_0.pb"))
    name = f"onnx-pytorch-converted/{case}/output_0.npy"
    ingest.add(store, registry_mod.load(project), project / "output_0.npy", name=name, kind="array")
    registry = registry_mod.load(project)
    records = dict(registry.families["onnx-pytorch-converted"].records)
    raw = {**records[name].to_json(), "tolerance": tolerance.to_json()}
    records[name] = registry_mod.parse_record(name, raw, file="t")
    write_family(registry, "onnx-pytorch-converted", records.values())

    outputs = tmp_path / "jax-outputs.npz"
    np.savez(outputs, output_0=y)
    priv, pub = write_keys(tmp_path / "keys")
    cert = tmp_path / f"{case}.intoto.json"
    code, _, stderr = run(
        "attest", name, str(outputs), "--subject", str(archive), "--key", str(priv),
        "-o", str(cert), "--env", "framework=jax",
    )  # fmt: skip
    assert code == 0, stderr
    args = ("verify-attestation", str(cert), "--key", str(pub), "--candidate", str(archive))
    code, stdout, stderr = run(*args)
    assert code == 0, stderr
    # subjects are named by the paths given (absolute here: outside the folder attest ran in)
    assert f"verified: {cert}: PASSED ({archive}, {outputs} against {name}" in stdout
    data = bytearray(archive.read_bytes())
    data[-1] ^= 1
    archive.write_bytes(bytes(data))
    code, _, stderr = run(*args)
    assert code == 1
    assert f"candidate {archive} changed" in stderr
