"""Candidate vs reference comparison: bytes first, then arrays under the tolerance."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from fixture_store.errors import UsageError
from fixture_store.objects import digests, trees
from fixture_store.regenerate.drift import Reference, Verdict, compare, compare_file, with_oracle
from fixture_store.registry import Tolerance, Where

TOL = Tolerance.from_json({"metric": "allclose", "rtol": 1e-3, "atol": 1e-7}, Where())


def _pb(path: Path, array: np.ndarray) -> Path:
    path.write_bytes(numpy_helper.from_array(array, "y").SerializeToString())
    return path


def test_pb_tensors_compare_as_arrays(tmp_path: Path) -> None:
    a = np.linspace(1, 2, 10, dtype=np.float32)
    reg = _pb(tmp_path / "r.pb", a)
    near = _pb(tmp_path / "near.pb", a * np.float32(1 + 1e-6))
    far = _pb(tmp_path / "far.pb", a * np.float32(1 + 1e-2))
    within = compare_file("output_0.pb", near, reg, TOL)
    assert within.verdict is Verdict.WITHIN and 0 < within.max_rel < 1e-5
    drift = compare_file("output_0.pb", far, reg, TOL)
    assert drift.verdict is Verdict.DRIFT and "outside" in drift.reason


def test_bfloat16_tensor_round_trips_through_ml_dtypes(tmp_path: Path) -> None:
    import ml_dtypes

    a = np.array([1.0, 2.5, -3.0], dtype=ml_dtypes.bfloat16)
    t = numpy_helper.from_array(a, "x")
    assert t.data_type == onnx.TensorProto.BFLOAT16
    reg = tmp_path / "r.pb"
    reg.write_bytes(t.SerializeToString())
    b = a.copy()
    b[2] = ml_dtypes.bfloat16(-3.5)
    cand = tmp_path / "c.pb"
    cand.write_bytes(numpy_helper.from_array(b, "x").SerializeToString())
    assert compare_file("input_0.pb", cand, reg, TOL).verdict is Verdict.DRIFT


def test_models_compare_as_bytes(tmp_path: Path) -> None:
    (tmp_path / "a.onnx").write_bytes(b"one")
    (tmp_path / "b.onnx").write_bytes(b"two")
    r = compare_file("model.onnx", tmp_path / "a.onnx", tmp_path / "b.onnx", TOL)
    assert r.verdict is Verdict.DRIFT and "compares as bytes" in r.reason


def test_tree_names_missing_and_extra_members(tmp_path: Path) -> None:
    ref = tmp_path / "ref"
    ref.mkdir()
    np.save(ref / "output_0.npy", np.ones(3, np.float32))
    (ref / "gone.txt").write_text("x")
    cand = tmp_path / "cand"
    cand.mkdir()
    np.save(cand / "output_0.npy", np.ones(3, np.float32))
    (cand / "extra.txt").write_text("y")
    tree, paths = trees.hash_folder(ref)
    by_digest = {d: paths[m] for m, d in tree}
    result = compare(
        "t/case",
        "tree",
        cand,
        Reference("test", tree.digest, tree, by_digest.get),
        TOL,
        inspect_dir=tmp_path / "inspect",
    )
    assert result.verdict is Verdict.DRIFT
    reasons = {m.path: m.reason for m in result.differing}
    assert reasons == {
        "extra.txt": "not in the reference",
        "gone.txt": "in the reference, not regenerated",
    }


def test_identical_file_needs_no_registered_bytes(tmp_path: Path) -> None:
    f = tmp_path / "x.npy"
    np.save(f, np.arange(4))
    d = digests.of_file(f)
    result = compare(
        "t/x.npy",
        "fixture",
        f,
        Reference("test", d, None, lambda _d: None),
        TOL,
        inspect_dir=tmp_path / "inspect",
    )
    assert result.verdict is Verdict.IDENTICAL


def test_a_per_array_override_applies_by_the_arrays_name(tmp_path: Path) -> None:
    a = np.linspace(1, 2, 10, dtype=np.float32)
    off = a * np.float32(1 + 1e-2)
    np.savez(tmp_path / "r.npz", x=a, z=a)
    np.savez(tmp_path / "c.npz", x=off, z=a)
    np.save(tmp_path / "r.npy", a)
    np.save(tmp_path / "c.npy", off)
    reg_pb, cand_pb = _pb(tmp_path / "r.pb", a), _pb(tmp_path / "c.pb", off)
    loose = {"metric": "mean_abs", "max": 0.05}
    for member, key, cand, reg in [
        ("ref.npz", "x", "c.npz", "r.npz"),  # the name in the NPZ (and its arrays manifest)
        ("output_0.npy", "output_0", "c.npy", "r.npy"),  # an NPY's manifest name
        ("test_data_set_0/output_0.pb", "y", cand_pb.name, reg_pb.name),  # the ONNX output
    ]:
        tol = Tolerance.from_json({"metric": "allclose", "per_array": {key: loose}}, Where())
        result = compare_file(member, tmp_path / cand, tmp_path / reg, tol)
        assert result.verdict is Verdict.WITHIN, (member, result.reason)
        assert result.arrays[0].tolerance is not None
        assert result.arrays[0].tolerance.metric == "mean_abs"
        assert result.arrays[0].max_ulp > 0
        assert compare_file(member, tmp_path / cand, tmp_path / reg, TOL).verdict is Verdict.DRIFT


def _safetensors(path: Path, tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> Path:
    from safetensors.numpy import save_file

    save_file(tensors, str(path), metadata=metadata)
    return path


def test_safetensors_tensors_compare_as_arrays_and_metadata_exactly(tmp_path: Path) -> None:
    w = np.linspace(1, 2, 12, dtype=np.float32).reshape(3, 4)
    b = np.arange(3, dtype=np.int64)
    meta = {"fixture_store": '{"format": "pt"}'}
    reg = _safetensors(tmp_path / "r.safetensors", {"weight": w, "bias": b}, meta)
    near = _safetensors(
        tmp_path / "n.safetensors", {"weight": w * np.float32(1 + 1e-6), "bias": b}, meta
    )
    within = compare_file("model.safetensors", near, reg, TOL)
    assert within.verdict is Verdict.WITHIN and 0 < within.max_rel < 1e-5
    assert {a.name for a in within.arrays} == {
        "model.safetensors:weight",
        "model.safetensors:bias",
        "model.safetensors:__metadata__",
    }
    far = _safetensors(
        tmp_path / "f.safetensors", {"weight": w * np.float32(1.01), "bias": b}, meta
    )
    drift = compare_file("model.safetensors", far, reg, TOL)
    assert drift.verdict is Verdict.DRIFT and drift.reason.startswith("weight:")
    # The same tensors under other metadata (another parent, say) is drift, not a detail.
    other = {"fixture_store": '{"format": "np"}'}
    moved = _safetensors(tmp_path / "m.safetensors", {"weight": w, "bias": b}, other)
    changed = compare_file("model.safetensors", moved, reg, TOL)
    assert changed.verdict is Verdict.DRIFT and changed.reason.startswith("__metadata__:")


def test_a_hostile_safetensors_candidate_is_drift_not_read(tmp_path: Path) -> None:
    reg = _safetensors(tmp_path / "r.safetensors", {"w": np.ones(4, np.float32)}, {})
    hostile = tmp_path / "h.safetensors"
    data = bytearray(reg.read_bytes())
    hostile.write_bytes(bytes(data) + b"\0" * 4)  # trailing bytes belong to no tensor
    r = compare_file("model.safetensors", hostile, reg, TOL)
    assert r.verdict is Verdict.DRIFT and "do not parse as .safetensors arrays" in r.reason


def test_a_regenerated_ordered_record_names_its_first_divergent_intermediate(
    tmp_path: Path,
) -> None:
    acts = {f"blocks.{i}": np.linspace(i, i + 1, 8) for i in range(11)}
    np.savez(tmp_path / "r.npz", logits=np.ones(3), **acts)  # type: ignore[arg-type]
    off = {n: a + (0.1 if n in ("blocks.2", "blocks.10") else 0.0) for n, a in acts.items()}
    np.savez(tmp_path / "c.npz", logits=np.ones(3) + 1, **off)  # type: ignore[arg-type]
    raw = {
        "metric": "exact",
        "intermediates": {"order": ["blocks.*"], "metric": "rms", "max": 1e-3},
    }
    tol = Tolerance.from_json(raw, Where())
    result = compare_file("acts.npz", tmp_path / "c.npz", tmp_path / "r.npz", tol)
    assert result.verdict is Verdict.DRIFT
    assert result.reason.startswith(
        "first divergence: blocks.2 (intermediate 3 of 11 in order); the 2 before it held "
        "(blocks.0, blocks.1); blocks.10: rms of a-b 0.1"
    )
    plain = compare_file("acts.npz", tmp_path / "c.npz", tmp_path / "r.npz", TOL)
    assert "first divergence" not in plain.reason


def test_a_regenerated_file_is_judged_by_an_aggregate_as_assert_parity_judges_it(
    tmp_path: Path,
) -> None:
    frames = np.linspace(0, 1, 80, dtype=np.float32).reshape(5, 4, 4)
    one_bad = frames.copy()
    one_bad[3, 1, 2] += np.float32(0.5)
    three_bad = one_bad.copy()
    three_bad[0, 0, 0] += np.float32(0.5)
    three_bad[1, 0, 0] += np.float32(0.5)
    np.save(tmp_path / "r.npy", frames)
    np.save(tmp_path / "one.npy", one_bad)
    np.save(tmp_path / "three.npy", three_bad)
    raw = {"metric": "max_abs", "reduce": "median", "axis": 0, "max": 1e-3}
    tol = Tolerance.from_json(raw, Where())
    within = compare_file("video.npy", tmp_path / "one.npy", tmp_path / "r.npy", tol)
    assert within.verdict is Verdict.WITHIN, within.reason
    drift = compare_file("video.npy", tmp_path / "three.npy", tmp_path / "r.npy", tol)
    assert drift.verdict is Verdict.DRIFT
    assert "median over axis 0 of max_abs 0.5 above max=0.001" in drift.reason


def test_the_oracle_judges_a_regenerated_candidate_by_the_references_own_error(
    tmp_path: Path,
) -> None:
    truth = np.linspace(-1, 1, 64)
    ref = (truth + 1e-4).astype(np.float32)  # the registered run: 1e-4 from the oracle
    np.savez(tmp_path / "r.npz", y=ref)
    rule = {
        "metric": "max_abs",
        "max": 0.1,
        "oracle": {"record": "up/f64.npz", "metric": "max_abs", "factor": 2},
    }
    tol = Tolerance.from_json(rule, Where())
    oracle = {"y": truth}
    reads: list[str] = []
    reference = with_oracle(
        Reference("test", digests.of_file(tmp_path / "r.npz"), None, lambda _d: tmp_path / "r.npz"),
        tol,
        lambda name: reads.append(name) or oracle,  # type: ignore[func-returns-value]
    )
    assert reads == ["up/f64.npz"] and reference.oracle is oracle
    np.savez(tmp_path / "near.npz", y=(truth - 1.5e-4).astype(np.float32))
    np.savez(tmp_path / "far.npz", y=(truth + 3e-4).astype(np.float32))  # within max 0.1
    near = compare_file("out.npz", tmp_path / "near.npz", tmp_path / "r.npz", tol, oracle)
    assert near.verdict is Verdict.WITHIN, near.reason
    far = compare(
        "up/out.npz", "array", tmp_path / "far.npz", reference, tol, inspect_dir=tmp_path / "i"
    )
    assert far.verdict is Verdict.DRIFT
    assert (
        "oracle: y: max_abs(candidate, oracle) 0.0003 above 2 x max_abs(reference, oracle) 0.0001"
        in far.reason
    )
    with pytest.raises(UsageError, match=r"oracle up/f64\.npz, whose arrays were not read"):
        compare_file("out.npz", tmp_path / "far.npz", tmp_path / "r.npz", tol)
