"""Real manifests as their projects write them, imported as they are: manifests in the styles
of a JAX port's provenance file, an ONNX test-data listing and a transformers conversion log,
each with fields the importer has never seen (kept verbatim and reported), fields it knows
under other names (mapped and reported) and upstreams in the notations people use."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.support.cli import run
from tests.support.importing import family_doc, write

REV = "3f49326e4d9e8a4b0b1c1a6c8e4f2a9d7c1b5e60"
CODE_REV = "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567"
CKPT = "7b" * 32


def _npz(**arrays: Any) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


BLOCK = _npz(x=np.zeros((1, 4), np.float32), y=np.ones((1, 4), np.float32))
PATCH = _npz(patches=np.ones((1, 2), np.float32))
PB_IN, PB_OUT = b"\x08\x01\x08\x03\x10\x01input", b"\x08\x01\x08\x03\x10\x01output"
ENCODER = _npy(np.full((1, 3), 0.5, np.float32))


def jax_port() -> tuple[dict[str, bytes], dict[str, Any]]:
    """A JAX port's provenance file: the checkpoint's digest inside the upstream (under the
    project's own name), a tolerance for intermediate activations, the upstream written as
    OWNER/NAME@REV:FILE, the code it ports pinned at a commit without a file."""
    doc = {
        "format_version": 2,
        "generated_by": "scripts/make_references.py --all",
        "created": "2025-11-03T10:12:00Z",
        "locked_environment": {"jax": "0.4.35", "torch": "2.5.1", "flax": "0.10.2"},
        "references": {
            "vit/block0.npz": {
                "sha256": _sha(BLOCK),
                "arrays": {
                    "x": {"dtype": "float32", "shape": [1, 4]},
                    "y": {"dtype": "float32", "shape": [1, 4], "layout": "NHWC"},
                },
                "tolerance": 1e-5,
                "intermediate_tolerance": 1e-4,
                "upstream": {
                    "repository": f"google/vit-base-patch16-224@{REV}:model.safetensors",
                    "checkpoint_sha256": CKPT,
                    "converted_with": "transformers 4.46.0",
                },
                "seed": 0,
                "jax_dtype": "bfloat16",
                "notes": ["block 0 only", {"reviewed": True}],
            },
            "vit/patch_embed.npz": {
                "sha256": _sha(PATCH),
                "tolerance": 1e-6,
                "upstream": {
                    "repository": "https://github.com/google-research/vision_transformer",
                    "commit": CODE_REV,
                },
                "jax_dtype": "float32",
            },
        },
    }
    return {"vit/block0.npz": BLOCK, "vit/patch_embed.npz": PATCH}, doc


def onnx_test_data() -> tuple[dict[str, bytes], dict[str, Any]]:
    """An ONNX-style test-data listing: a ``checksum`` with its algorithm, the byte count under
    another name, tensor descriptions, and the upstream as ``git+https://…@REV#PATH``."""
    upstream = f"git+https://github.com/onnx/onnx@{CODE_REV}#onnx/backend/test/case/node/relu.py"
    doc = {
        "format_version": 1,
        "opset_import": [{"domain": "", "version": 21}],
        "producer_name": "backend-test-tools",
        "files": {
            name: {
                "checksum": f"sha256:{_sha(data)}",
                "size_bytes": len(data),
                "role": role,
                "tensor": {"name": role[0], "elem_type": 1, "dims": [1, 3]},
                "upstream": upstream,
            }
            for name, data, role in (
                ("test_relu/test_data_set_0/input_0.pb", PB_IN, "input"),
                ("test_relu/test_data_set_0/output_0.pb", PB_OUT, "output"),
            )
        },
    }
    return {
        "test_relu/test_data_set_0/input_0.pb": PB_IN,
        "test_relu/test_data_set_0/output_0.pb": PB_OUT,
    }, doc


def transformers_log() -> tuple[dict[str, bytes], dict[str, Any]]:
    """A transformers-style conversion log: upstreams listed (an ``hf://`` file and the
    conversion script's GitHub page at a commit), the digest as ``hash``, ``tol``, and what the
    conversion measured."""
    doc = {
        "format_version": "1.0",
        "transformers_version": "4.46.0",
        "conversion": {"script": "convert_openai_to_hf.py", "torch_dtype": "float32"},
        "outputs": {
            "whisper/encoder_out.npy": {
                "hash": _sha(ENCODER),
                "upstreams": [
                    f"hf://openai/whisper-tiny@{REV}/model.safetensors",
                    f"https://github.com/huggingface/transformers/blob/{CODE_REV}/src/"
                    "transformers/models/whisper/convert_openai_to_hf.py",
                ],
                "tol": 1e-5,
                "max_abs_diff": 3.1e-06,
                "shape": [1, 3],
                "generated_by": "python convert.py --check",
            }
        },
    }
    return {"whisper/encoder_out.npy": ENCODER}, doc


def _project(project: Path, files: dict[str, bytes], doc: dict[str, Any]) -> str:
    write(project / "refs", files)
    (project / "refs" / "manifest.json").write_text(json.dumps(doc, indent=2))
    return "refs/manifest.json"


def _import(*args: str) -> dict[str, Any]:
    code, out, err = run("import", *args, "--family", "refs", "--json")
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    return doc


STYLES = {"jax-port": jax_port, "onnx-test-data": onnx_test_data, "transformers": transformers_log}


@pytest.mark.usefixtures("store")
@pytest.mark.parametrize("style", sorted(STYLES))
def test_a_real_style_manifest_imports_as_it_is(project: Path, style: str) -> None:
    files, doc = STYLES[style]()
    manifest = _project(project, files, doc)
    dry = _import(manifest, "--dry-run")
    real = _import(manifest)
    assert {k: v for k, v in dry.items() if k != "imported"} == {
        k: v for k, v in real.items() if k != "imported"
    }
    assert sorted(real["imported"]["written"]) == sorted(f"refs/{name}" for name in files)
    records = family_doc(project, "refs")["records"]
    for name in files:
        kept = records[f"refs/{name}"]["metadata"]["unknown_fields"]
        for pointer in kept:
            assert pointer in real["unknown_fields"]
            assert kept[pointer] == _at(doc, pointer)  # verbatim


def _at(doc: Any, pointer: str) -> Any:
    for part in pointer.split("/")[1:]:
        doc = doc[int(part)] if isinstance(doc, list) else doc[part.replace("~1", "/")]
    return doc


@pytest.mark.usefixtures("store")
def test_the_jax_port_keeps_its_checkpoint_digest_and_its_intermediate_tolerance(
    project: Path,
) -> None:
    files, doc = jax_port()
    report = _import(_project(project, files, doc))
    record = family_doc(project, "refs")["records"]["refs/vit/block0.npz"]
    assert record["upstream"] == [
        {
            "type": "hub",
            "repo_id": "google/vit-base-patch16-224",
            "revision": REV,
            "path": "model.safetensors",
            "digest": f"sha256:{CKPT}",
        }
    ]
    assert record["metadata"]["intermediate_tolerance"] == 1e-4
    assert record["metadata"]["locked_environment"]["jax"] == "0.4.35"
    assert record["metadata"]["unknown_fields"] == {
        "/generated_by": "scripts/make_references.py --all",
        "/created": "2025-11-03T10:12:00Z",
        "/references/vit~1block0.npz/arrays/y/layout": "NHWC",
        "/references/vit~1block0.npz/upstream/converted_with": "transformers 4.46.0",
        "/references/vit~1block0.npz/jax_dtype": "bfloat16",
        "/references/vit~1block0.npz/notes": ["block 0 only", {"reviewed": True}],
    }
    code = family_doc(project, "refs")["records"]["refs/vit/patch_embed.npz"]
    assert code["upstream"] == [
        {
            "type": "git",
            "url": "https://github.com/google-research/vision_transformer",
            "commit": CODE_REV,
        }
    ]
    mapped = {m["field"]: m["as"] for m in report["mapped_fields"]}
    assert mapped["/references/vit~1block0.npz/upstream/checkpoint_sha256"] == "upstream digest"
    assert mapped["/references/vit~1block0.npz/intermediate_tolerance"] == (
        "metadata.intermediate_tolerance"
    )
    assert mapped["/references/vit~1patch_embed.npz/upstream/commit"] == "upstream revision"


@pytest.mark.usefixtures("store")
def test_the_human_report_lists_each_field_once_with_its_count(project: Path) -> None:
    files, doc = onnx_test_data()
    code, out, err = run("import", _project(project, files, doc), "--family", "refs")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("imported 2 new record(s)")
    assert "fields read under another name (field, entries, read as):" in lines
    assert any(ln.split() == ["checksum", "2", "the", "record's", "digest"] for ln in lines)
    assert any(ln.split()[:2] == ["size_bytes", "2"] for ln in lines)
    known = "fields the importer does not know, kept verbatim in metadata.unknown_fields"
    assert any(ln.startswith(known) for ln in lines)
    rows = {ln.split()[0]: ln.split()[1] for ln in lines if ln.startswith("  ")}
    assert rows["role"] == "2" and rows["tensor"] == "2"
    assert rows["/opset_import"] == "2" and rows["/producer_name"] == "2"
    record = family_doc(project, "refs")["records"]["refs/test_relu/test_data_set_0/input_0.pb"]
    assert record["upstream"] == [
        {
            "type": "git",
            "url": "https://github.com/onnx/onnx",
            "commit": CODE_REV,
            "path": "onnx/backend/test/case/node/relu.py",
        }
    ]


@pytest.mark.usefixtures("store")
def test_a_conversion_log_lists_its_upstreams_in_their_notations(project: Path) -> None:
    files, doc = transformers_log()
    _import(_project(project, files, doc))
    record = family_doc(project, "refs")["records"]["refs/whisper/encoder_out.npy"]
    assert [u["type"] for u in record["upstream"]] == ["hub", "git"]
    assert record["upstream"][1]["path"].endswith("convert_openai_to_hf.py")
    assert record["tolerance"] == {"metric": "mean_abs", "max": 1e-5}
    assert record["command"] == ["python", "convert.py", "--check"]
    assert record["metadata"]["unknown_fields"]["/outputs/whisper~1encoder_out.npy/shape"] == [
        1,
        3,
    ]


def _refused(project: Path, upstream: Any) -> tuple[str, str]:
    """The refusal of a manifest whose one entry has ``upstream``: --dry-run and the real
    import give the same one, exit 2, and nothing is written."""
    doc = {"format_version": 1, "files": {"a.npz": {"sha256": _sha(PATCH), "upstream": upstream}}}
    manifest = _project(project, {"a.npz": PATCH}, doc)
    seen = set()
    for extra in (("--dry-run",), ()):
        code, out, err = run("import", manifest, "--family", "refs", *extra)
        assert code == 2, out
        seen.add(err)
    assert len(seen) == 1  # the dry run refuses exactly as the import does
    assert family_doc(project, "refs") == {}
    (err,) = seen
    assert "refs/manifest.json: 'a.npz'" in err  # the manifest and the entry
    assert "provenance/" not in err and "Traceback" not in err
    message, _, fix = err.partition("fix:")
    return message, fix


@pytest.mark.usefixtures("store")
def test_a_bare_owner_name_is_asked_about_never_guessed(project: Path) -> None:
    upstream = {"repository": "google/vit-base", "revision": REV, "checkpoint": "model.bin"}
    message, fix = _refused(project, upstream)
    assert "'google/vit-base' is a bare OWNER/NAME: a Hugging Face Hub repository or a GitHub" in (
        message
    )
    assert "nothing is guessed" in message
    assert "--upstream-host hf" in fix and "--upstream-host github" in fix
    assert "upstream-host" in fix and "[tool.fixture-store]" in fix


@pytest.mark.usefixtures("store")
@pytest.mark.parametrize(
    "upstream",
    [
        {"repository": "https://github.com/o/r", "revision": "main"},
        "google/vit-base@main:model.bin",
        "https://github.com/o/r/tree/main",
    ],
)
def test_a_branch_as_revision_is_refused_by_the_dry_run_too(project: Path, upstream: Any) -> None:
    message, fix = _refused(project, upstream)
    assert "'main' is a branch" in message
    assert "full sha" in fix


@pytest.mark.usefixtures("store")
def test_an_intermediate_tolerance_with_its_order_is_the_parity_models_intermediates(
    project: Path,
) -> None:
    files, doc = jax_port()
    entry = doc["references"]["vit/block0.npz"]
    entry["activations"] = ["x"]  # the intermediates, in the order the model computes them
    report = _import(_project(project, files, doc))
    record = family_doc(project, "refs")["records"]["refs/vit/block0.npz"]
    assert record["tolerance"] == {
        "metric": "mean_abs",
        "max": 1e-5,
        "intermediates": {"order": ["x"], "metric": "mean_abs", "max": 1e-4},
    }
    assert "intermediate_tolerance" not in record["metadata"]
    mapped = {m["field"]: m["as"] for m in report["mapped_fields"]}
    at = "/references/vit~1block0.npz"
    assert mapped[f"{at}/intermediate_tolerance"] == "tolerance.intermediates"
    assert mapped[f"{at}/activations"] == "tolerance.intermediates.order"


@pytest.mark.usefixtures("store")
def test_an_intermediate_tolerance_without_its_order_is_kept_and_the_report_says_why(
    project: Path,
) -> None:
    files, doc = jax_port()
    report = _import(_project(project, files, doc))
    (row,) = [m for m in report["mapped_fields"] if m["field"].endswith("intermediate_tolerance")]
    assert row["as"] == "metadata.intermediate_tolerance"
    assert "needs the intermediates' order" in row["note"]
