"""Certificates under attack (issue 34, class 3, and the key half of class 4): subjects are keyed
by the path given and never matched by base name; a verification says which subjects it did not
check (``--all-subjects`` requires them); every envelope field is type-checked and the keyid is
only a hint; a private key others can read, or one inside a git work tree, never signs."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fixture_store import attest as attest_mod
from fixture_store.objects.store import Store
from tests.cli.test_attest import CLS, NAME, PATCH, register_reference, write_keys
from tests.support.cli import run


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    return write_keys(tmp_path / "home" / "keys")


@pytest.fixture
def two_models(project: Path, store: Store, keys: tuple[Path, Path]) -> tuple[Path, Path, Path]:
    """A certificate about x/model.bin and y/model.bin (and the outputs), signed from the
    project folder with relative paths: (certificate, x, y)."""
    register_reference(project, store)
    for folder, data in (("x", b"x weights " * 50), ("y", b"y weights " * 50)):
        (project / folder).mkdir()
        (project / folder / "model.bin").write_bytes(data)
    np.savez(project / "outputs.npz", cls_token=CLS, patch_tokens=PATCH)
    code, _, err = run(
        "attest", NAME, "outputs.npz", "--subject", "x/model.bin", "--subject", "y/model.bin",
        "--key", str(keys[0]), "-o", "cert.json",
    )  # fmt: skip
    assert code == 0, err
    return project / "cert.json", project / "x" / "model.bin", project / "y" / "model.bin"


def _verify(cert: Path, pub: Path, *args: str) -> tuple[int, str, str]:
    return run("verify-attestation", str(cert), "--key", str(pub), *args)


def _subjects(cert: Path) -> list[str]:
    doc = json.loads(base64.b64decode(json.loads(cert.read_text())["payload"]))
    return [s["name"] for s in doc["subject"]]


def test_subjects_are_named_by_the_path_given(
    two_models: tuple[Path, Path, Path], keys: tuple[Path, Path]
) -> None:
    cert, _, _ = two_models
    assert _subjects(cert) == ["x/model.bin", "y/model.bin", "outputs.npz"]
    code, out, err = _verify(
        cert, keys[1], "--candidate", "x/model.bin", "--candidate", "./y/model.bin",
        "--candidate", "outputs.npz", "--all-subjects",
    )  # fmt: skip
    assert code == 0, err
    assert "3 of 3 subjects checked" in out and "not checked" not in err


def test_a_candidate_holding_its_namesakes_bytes_is_refused(
    two_models: tuple[Path, Path, Path], keys: tuple[Path, Path]
) -> None:
    """x/model.bin holding y's bytes matched y's subject by base name: it must not."""
    cert, x, y = two_models
    x.write_bytes(y.read_bytes())
    code, _, err = _verify(cert, keys[1], "--candidate", "x/model.bin")
    assert code == 1
    assert "candidate x/model.bin changed" in err and "Traceback" not in err


def test_a_subject_given_twice_is_refused(
    project: Path, store: Store, keys: tuple[Path, Path]
) -> None:
    register_reference(project, store)
    (project / "m.bin").write_bytes(b"m")
    np.savez(project / "outputs.npz", cls_token=CLS, patch_tokens=PATCH)
    code, _, err = run(
        "attest", NAME, "outputs.npz", "--subject", "m.bin", "--subject", "./m.bin",
        "--key", str(keys[0]), "-o", "cert.json",
    )  # fmt: skip
    assert code == 2
    assert "the subject m.bin is given twice" in err and "fix:" in err
    assert not (project / "cert.json").exists()


def test_unchecked_subjects_are_named_and_all_subjects_requires_them(
    two_models: tuple[Path, Path, Path], keys: tuple[Path, Path]
) -> None:
    cert, _, _ = two_models
    code, out, err = _verify(cert, keys[1])
    assert code == 0
    assert "0 of 3 subjects checked" in out
    assert "not checked: x/model.bin, y/model.bin, outputs.npz" in err
    code, _, err = _verify(cert, keys[1], "--candidate", "x/model.bin", "--all-subjects")
    assert code == 1
    assert "subject 'y/model.bin' was not checked" in err
    assert "subject 'x/model.bin' was not checked" not in err


def test_a_certificate_naming_a_subject_twice_checks_neither(
    two_models: tuple[Path, Path, Path], keys: tuple[Path, Path]
) -> None:
    """An older certificate (base names) about two model.bin files: ambiguous, never matched."""
    cert, _, _ = two_models
    doc = json.loads(base64.b64decode(json.loads(cert.read_text())["payload"]))
    doc["subject"][0]["name"] = doc["subject"][1]["name"] = "model.bin"
    cert.write_bytes(attest_mod.dumps(attest_mod.sign(doc, keys[0])))
    code, _, err = _verify(cert, keys[1], "--candidate", "x/model.bin")
    assert code == 1
    assert "names the subject 'model.bin' twice" in err


def test_a_certificate_naming_subjects_by_file_name_still_verifies(
    two_models: tuple[Path, Path, Path], keys: tuple[Path, Path]
) -> None:
    """The pytest plugin (and earlier certificates) name a subject by its file name: one such
    subject matches the candidate of that file name."""
    cert, _, _ = two_models
    doc = json.loads(base64.b64decode(json.loads(cert.read_text())["payload"]))
    doc["subject"] = [doc["subject"][0] | {"name": "model.bin"}]
    cert.write_bytes(attest_mod.dumps(attest_mod.sign(doc, keys[0])))
    code, _, err = _verify(cert, keys[1], "--candidate", "x/model.bin", "--all-subjects")
    assert code == 0, err


# -- the envelope -------------------------------------------------------------------------------
def _edit(cert: Path, change: Any) -> None:
    envelope = json.loads(cert.read_text())
    change(envelope)
    cert.write_text(json.dumps(envelope))


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda e: e["signatures"][0].update(sig=5), "signatures[0].sig is a number"),
        (lambda e: e["signatures"][0].update(keyid=[1]), "signatures[0].keyid is a list"),
        (lambda e: e.update(payload=7), "its payload is a number"),
        (lambda e: e.update(payloadType=None), "its payloadType is null"),
        (lambda e: e.update(signatures={}), "signatures are not a non-empty list"),
        (lambda e: e.update(signatures=[]), "signatures are not a non-empty list"),
        (lambda e: e.update(signatures=["x"]), "signatures[0] is not an object"),
        (lambda e: e.update(extra=1), "unknown 'extra'"),
        (lambda e: e.pop("payload"), "no payload"),
        (lambda e: e["signatures"][0].update(sig="***"), "signatures[0].sig is not base64"),
        (lambda e: e.update(payload="!!"), "its payload is not base64"),
    ],
)
def test_every_envelope_field_is_type_checked(
    two_models: tuple[Path, Path, Path], keys: tuple[Path, Path], change: Any, said: str
) -> None:
    cert = two_models[0]
    _edit(cert, change)
    code, out, err = _verify(cert, keys[1])
    assert code in (1, 2) and "Traceback" not in out + err
    assert "is not a parity certificate: " in err and said in err, err


def test_an_envelope_nested_deep_is_refused_without_a_traceback(
    tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    cert = tmp_path / "deep.json"
    cert.write_text('{"payload": ' + "[" * 5_000 + "]" * 5_000 + "}")
    code, out, err = _verify(cert, keys[1])
    assert code in (1, 2) and "Traceback" not in out + err
    assert "nests more than" in err


@pytest.mark.parametrize("hint", ["missing", "another", "empty"])
def test_the_keyid_is_a_hint(
    two_models: tuple[Path, Path, Path], keys: tuple[Path, Path], hint: str
) -> None:
    cert = two_models[0]

    def change(e: dict[str, Any]) -> None:
        if hint == "missing":
            e["signatures"][0].pop("keyid")
        else:
            e["signatures"][0]["keyid"] = "" if hint == "empty" else "f" * 64

    _edit(cert, change)
    code, _, err = _verify(cert, keys[1])
    assert code == 0, err


def test_a_signature_by_another_key_fails_whatever_its_keyid(
    two_models: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    cert = two_models[0]
    _, other_pub = write_keys(tmp_path / "other")
    code, _, err = _verify(cert, other_pub)
    assert code == 1 and "does not verify with the key" in err


# -- private keys -------------------------------------------------------------------------------
def _attest_with(project: Path, store: Store, key: Path) -> tuple[int, str, str]:
    register_reference(project, store)
    np.savez(project / "outputs.npz", cls_token=CLS, patch_tokens=PATCH)
    return run("attest", NAME, "outputs.npz", "--key", str(key), "-o", "cert.json")


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_a_private_key_others_can_read_never_signs(
    project: Path, store: Store, keys: tuple[Path, Path], mode: int
) -> None:
    keys[0].chmod(mode)
    code, _, err = _attest_with(project, store, keys[0])
    assert code == 2
    assert f"the private key {keys[0]} can be read by others (mode {mode:04o})" in err
    assert f"fix: chmod 600 {keys[0]}" in err and not (project / "cert.json").exists()


def test_a_private_key_inside_a_git_work_tree_never_signs(
    project: Path, store: Store, tmp_path: Path
) -> None:
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    private, _ = write_keys(tmp_path / "repo" / "keys")
    code, _, err = _attest_with(project, store, private)
    assert code == 2
    assert f"the private key {private} is inside the git work tree {tmp_path / 'repo'}" in err
    assert "fix: move the key out of the work tree" in err


def test_the_public_key_may_be_anywhere(
    two_models: tuple[Path, Path, Path], keys: tuple[Path, Path], tmp_path: Path
) -> None:
    """Only a private key is secret: a public one readable by all, in a repository, verifies."""
    cert = two_models[0]
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    pub = tmp_path / "repo" / "signer.pub"
    pub.write_bytes(keys[1].read_bytes())
    pub.chmod(0o644)
    assert _verify(cert, pub)[0] == 0
