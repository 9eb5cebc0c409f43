"""The output samples of the docs are what the program prints: each documented command is run
as written (in-process) in a small project made for it, and every line the page shows after it
must be a line it printed. Counts and digests of the small project differ from the page's, so
a number matches any number and a full digest any full digest; everything else is to the letter
(``1,957`` where the program prints ``1957``, or a digest cut short, matches nothing)."""

from __future__ import annotations

import glob
import hashlib
import os
import re
import shlex
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tests.support.cli import run
from tests.test_docs import ROOT, _console_commands, assert_shown


def _documented(page: str, prefix: str) -> tuple[str, list[str]]:
    """The first command of ``page``'s console blocks starting with ``prefix``, and the lines
    the page shows after it."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    blocks = re.findall(r"^```console\n(.*?)^```$", text, re.M | re.S)
    for command, shown in (c for b in blocks for c in _console_commands(b)):
        if command.startswith(prefix):
            return command, shown
    raise AssertionError(f"docs/{page} has no command starting with {prefix!r}")


def _npz(path: Path, seed: int) -> None:
    """An NPZ (or, named ``.npy``, an NPY) of a few random numbers at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    x = np.random.default_rng(seed).random(4)
    with path.open("wb") as f:
        (np.save if path.suffix == ".npy" else np.savez)(f, x)


def _registering(project: Path) -> None:
    for i, name in enumerate(("dinov2_vits14_reg_reference.npz", "siglip_base_reference.npz")):
        _npz(project / "tests" / "data" / name, i)


def _importing(project: Path) -> None:
    data = project / "tests" / "data"
    for i, name in enumerate(("block1.npz", "block2.npz", "scratch.npy")):
        _npz(data / name, i)
    listed = ["block1.npz", "block2.npz"]
    lines = [f"{hashlib.sha256((data / n).read_bytes()).hexdigest()}  {n}\n" for n in listed]
    (data / "SHA256SUMS").write_text("".join(lines) + f"{'ab' * 32}  block3.npz\n")


def _refusing(project: Path) -> None:
    """A SHA256SUMS of two files and a path that is no name: the page's one-refusal import."""
    data = project / "data"
    for i, name in enumerate(("a.npz", "b.npz")):
        _npz(data / name, i)
    lines = [
        f"{hashlib.sha256((data / n).read_bytes()).hexdigest()}  {n}\n" for n in ("a.npz", "b.npz")
    ]
    (data / "SHA256SUMS").write_text("".join(lines) + f"{'ab' * 32}  ../x\n")


def _report(project: Path) -> None:
    for family in ("a", "b"):
        _npz(project / "data" / f"{family}.npz", 0)
        added = run("add", f"data/{family}.npz", "--name", f"{family}/x.npz", "--kind", "fixture")
        assert added[0] == 0, added


def _hf_cache(project: Path) -> None:  # noqa: ARG001 - the cache is in the home folder
    """The cache ``huggingface_hub`` writes in the home folder, three files of org/tiny at the
    page's commit: one LFS file (its blob named by its SHA-256), two git files (by blob id)."""
    from tests.support.hubserver import git_blob_id

    repo = Path.home() / ".cache" / "huggingface" / "hub" / "models--org--tiny"
    commit = "c0ffee" + "1" * 34
    snapshot = repo / "snapshots" / commit
    (snapshot / "tok").mkdir(parents=True)
    (repo / "blobs").mkdir()
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    files = {"model.bin": b"weights" * 100, "config.json": b"{}\n", "tok/vocab.txt": b"a\nb\n"}
    for path, data in files.items():
        blob = hashlib.sha256(data).hexdigest() if path == "model.bin" else git_blob_id(data)
        (repo / "blobs" / blob).write_bytes(data)
        depth = "../" * (path.count("/") + 2)
        (snapshot / path).symlink_to(f"{depth}blobs/{blob}")


def _attest(project: Path) -> None:
    """A verified reference of two arrays, the candidate's outputs at parity with it, the
    converted checkpoint, and a key pair: the private key in the home folder."""
    from fixture_store.objects.store import Store
    from tests.cli.test_attest import CLS, NAME, PATCH, register_reference, write_keys

    register_reference(project, Store.at(), NAME)
    np.savez(project / "outputs.npz", cls_token=CLS, patch_tokens=PATCH)
    (project / "converted.safetensors").write_bytes(b"converted weights")
    _, public = write_keys(Path.home() / ".keys", "parity")
    public.rename(project / "parity.pub")


def _attested(project: Path) -> None:
    """:func:`_attest`, and the page's attest command run."""
    _attest(project)
    command, _ = _documented("attestations.md", "fixture-store attest ")
    assert _run(command)[0] == 0


SAMPLES: dict[str, tuple[str, str, Callable[[Path], None]]] = {
    "registering: add many files": (
        "registering.md",
        "fixture-store add tests/data/",
        _registering,
    ),
    "import: a SHA256SUMS": (
        "import.md",
        "fixture-store import tests/data/SHA256SUMS --family refs",
        _importing,
    ),
    "import: one bad entry refuses one entry": (
        "import.md",
        "fixture-store import data/SHA256SUMS --family refs",
        _refusing,
    ),
    "import: --strict": (
        "import.md",
        "fixture-store import tests/data/SHA256SUMS --family refs --strict",
        _importing,
    ),
    "import: a Hugging Face cache": (
        "import.md",
        "fixture-store import ~/.cache/huggingface",
        _hf_cache,
    ),
    "reports: the provenance report": ("reports.md", "fixture-store report --html", _report),
    "attestations: attest": ("attestations.md", "fixture-store attest ", _attest),
    "attestations: verify": ("attestations.md", "fixture-store verify-attestation ", _attested),
}

# Samples no test makes again, and why; a new sample goes in SAMPLES, or here with its reason.
UNCHECKED = {
    ("import.md", "fixture-store import refs/manifest.json"): "a manifest the page gives in parts",
    ("import.md", "fixture-store import pooch skimage/"): "downloads the scikit-image wheel",
    ("import.md", "fixture-store import --package certifi=="): "the installed certifi's version",
    ("import.md", "fixture-store import tensorflow_datasets/"): (
        "the tensorflow-datasets wheel's file (scripts/check_manifests.sh imports it as shipped)"
    ),
    ("hostile-input.md", "fixture-store verify fam/weights"): "a hostile archive made by hand",
    ("parity.md", "fixture-store tolerance suggest"): "runs logged by a project's tests",
    ("regeneration.md", "uv run fixture-store regenerate onnx-node"): "the stage's environment",
    ("regeneration.md", "uv run fixture-store show jax-parity/"): "the corpus's chain in a store",
    ("sources.md", "uv run fixture-store fetch --family onnx-node"): "downloads the onnx wheel",
    ("sources.md", "uv run fixture-store verify --full --family onnx-node"): "the same family",
}


def _run(command: str) -> tuple[int, str, str]:
    """``fixture-store ...`` as the shell would run it: ``~`` is the home folder and a pattern
    the files it matches, in order."""
    words = [os.path.expanduser(w) for w in shlex.split(command)[1:]]
    return run(*[m for w in words for m in (sorted(glob.glob(w)) or [w])])


@pytest.mark.usefixtures("store")
@pytest.mark.parametrize("sample", list(SAMPLES))
def test_a_documented_sample_is_what_the_command_prints(
    project: Path, sample: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    page, prefix, make = SAMPLES[sample]
    make(project)
    command, shown = _documented(page, prefix)
    assert shown, f"docs/{page}: {command!r} shows no output to check"
    code, out, err = _run(command)
    assert code in (0, 1, 2), err
    assert_shown(command, shown, out + err, numbers=True)


def test_every_output_sample_of_the_docs_is_checked_or_says_why_not() -> None:
    """Every command a page of the docs shows output for is made again above, or listed in
    UNCHECKED with the reason; the getting-started page is the README's tour, which its own
    test runs, and the CLI reference's lines are comments of generated examples."""
    listed = {(page, prefix) for page, prefix, _ in SAMPLES.values()} | set(UNCHECKED)
    for page, prefix in UNCHECKED:  # an entry for a sample that is gone is stale
        _documented(page, prefix)
    for path in sorted((ROOT / "docs").glob("*.md")):
        if path.name in ("getting-started.md", "cli.md"):
            continue
        text = path.read_text(encoding="utf-8")
        for block in re.findall(r"^```console\n(.*?)^```$", text, re.M | re.S):
            for command, shown in _console_commands(block):
                if not shown or command.startswith("echo "):
                    continue
                assert any(path.name == p and command.startswith(c) for p, c in listed), (
                    f"docs/{path.name}: the output of {command!r} is checked by no test: add it "
                    "to SAMPLES in tests/test_doc_samples.py (or to UNCHECKED, with the reason)"
                )
