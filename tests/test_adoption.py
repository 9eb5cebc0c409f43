"""The adoption scenario: a library's nine reference NPZ files, registered through the CLI alone
(arrays, a mean-abs tolerance, pinned upstreams, a gap), imported the same from a hand-rolled JSON
manifest, verified, and asserted at parity in the library's own pytest run."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fixture_store import registry as registry_mod
from tests.support.cli import run

REVISION = "f826b80d28226b62986cc218e5cec390b1096902"
UPSTREAM = f"hf://MIT/ast-finetuned-audioset-10-10-0.4593@{REVISION}/model.safetensors"
MODELS = [f"block{i}" for i in range(9)]


def _references(data: Path) -> dict[str, dict[str, np.ndarray[Any, Any]]]:
    data.mkdir(parents=True)
    refs = {}
    for i, model in enumerate(MODELS):
        rng = np.random.default_rng(i)
        arrays = {
            "cls_token": rng.standard_normal((1, 384)).astype(np.float32),
            "patch_tokens": rng.standard_normal((1, 16, 384)).astype(np.float32),
        }
        np.savez(
            data / f"{model}.npz",
            cls_token=arrays["cls_token"],
            patch_tokens=arrays["patch_tokens"],
        )
        refs[model] = arrays
    return refs


def _fields(project: Path, family: str) -> dict[str, dict[str, Any]]:
    """What a review compares: everything of each record but its source and import note."""
    doc = json.loads((project / "provenance" / f"{family}.json").read_text())
    out = {}
    for name, raw in doc["records"].items():
        raw.pop("source", None)
        meta = {k: v for k, v in raw.pop("metadata", {}).items() if k != "imported_from"}
        out[name.split("/", 1)[1]] = {**raw, "metadata": meta} if meta else raw
    return out


@pytest.mark.usefixtures("store")
def test_nine_references_registered_imported_verified_and_asserted(
    project: Path, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)  # the maintainer's repository (pytester moved to its own folder)
    refs = _references(project / "tests" / "data")
    paths = [f"tests/data/{m}.npz" for m in MODELS]
    code, _, err = run(
        "add", *paths, "--family", "equimo", "--kind", "fixture", "--tolerance", "mean_abs:5e-4",
        "--upstream", UPSTREAM, "--upstream-license", "BSD-3-Clause", "--seed", "0",
        "--input-shape", "1,3,224,224", "--command", "python scripts/make_references.py",
    )  # fmt: skip
    assert code == 0, err
    code, _, err = run(
        "add", "--name", "equimo/block9.npz", "--kind", "fixture", "--gap", "needs a GPU"
    )
    assert code == 0, err

    manifest = {
        "format_version": 1,
        "locked_environment": {"torch": "2.4.1"},
        "fixtures": {
            f"{m}.npz": {
                "sha256": hashlib.sha256(
                    (project / "tests" / "data" / f"{m}.npz").read_bytes()
                ).hexdigest(),
                "arrays": {
                    k: {"dtype": str(v.dtype), "shape": list(v.shape)} for k, v in refs[m].items()
                },
                "tolerance": 5e-4,
                "upstream": {
                    # a bare OWNER/NAME would be a question (Hub or GitHub?): hf:// says Hub
                    "repository": "hf://MIT/ast-finetuned-audioset-10-10-0.4593",
                    "revision": REVISION,
                    "checkpoint": "model.safetensors",
                },
                "seed": 0,
                "input_shape": [1, 3, 224, 224],
                "generator": "python scripts/make_references.py",
            }
            for m in MODELS
        },
    }
    (project / "tests" / "data" / "manifest.json").write_text(json.dumps(manifest))
    code, _, err = run(
        "import", "json", "tests/data/manifest.json", "--family", "imported", "--kind", "fixture"
    )
    assert code == 0, err
    registered, imported = _fields(project, "equimo"), _fields(project, "imported")
    registered.pop("block9.npz")  # the gap, which the manifest does not list
    for fields in registered.values():  # add states the upstream's license; the manifest cannot
        for up in fields["upstream"]:
            del up["license"]
    for fields in imported.values():  # what only the manifest says, kept as metadata
        assert fields.pop("metadata") == {"locked_environment": {"torch": "2.4.1"}}
    assert imported == registered

    code, out, _ = run("verify", "--full")
    assert code == 0 and "gap" in out

    pytester.makepyfile(
        test_port=f"""
        import numpy as np
        import pytest

        MODELS = {MODELS!r}

        @pytest.mark.parametrize("model", MODELS)
        def test_port(fixture_store, model):
            ref = fixture_store.arrays(f"equimo/{{model}}.npz")
            out = {{k: v + np.float32(1e-4) for k, v in ref.items()}}  # a port off by 1e-4
            fixture_store.assert_parity(f"equimo/{{model}}.npz", out)

        def test_a_port_that_drifts_fails_naming_the_worst_array(fixture_store):
            ref = fixture_store.arrays("equimo/block0.npz")
            out = {{**ref, "patch_tokens": ref["patch_tokens"] + np.float32(1e-3)}}
            with pytest.raises(AssertionError, match="worst array: patch_tokens"):
                fixture_store.assert_parity("equimo/block0.npz", out)

        @pytest.mark.fixture_store("equimo/block9.npz")
        def test_the_gap(fixture_store):
            pass
        """
    )
    monkeypatch.chdir(pytester.path)
    result = pytester.runpytest(
        "--fixture-store-registry",
        str(project),
        "--fixture-store-require",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=10, xfailed=1)
    assert registry_mod.load(project).get("equimo/block0.npz").tolerance is not None
