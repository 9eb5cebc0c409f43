"""``attest`` and ``verify-attestation``: real keys, real DSSE envelopes, verified offline; each
change to what a certificate is about (the candidate, the reference record, its tolerance, the
key, the statement) fails verification naming it."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from fixture_store import attest as attest_mod
from fixture_store import ingest
from fixture_store import registry as registry_mod
from fixture_store.objects import digests
from fixture_store.objects.store import Store
from fixture_store.registry.files import write_family
from tests.support.cli import run

NAME = "equimo/dinov2_reference.npz"
RNG = np.random.default_rng(0)
CLS = RNG.standard_normal((1, 8)).astype(np.float32)
PATCH = RNG.standard_normal((1, 4, 8)).astype(np.float32)
TOLERANCE = {"metric": "mean_abs", "max": 5e-4}


def write_keys(folder: Path, name: str = "signer", *, curve: bool = False) -> tuple[Path, Path]:
    """A fresh key pair as PEM files: (private, public)."""
    folder.mkdir(parents=True, exist_ok=True)
    private = (
        ec.generate_private_key(ec.SECP256R1()) if curve else ed25519.Ed25519PrivateKey.generate()
    )
    priv = folder / f"{name}.pem"
    pub = folder / f"{name}.pub"
    priv.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    priv.chmod(0o600)  # a private key is its owner's alone, or it is refused
    pub.write_bytes(
        private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return priv, pub


def set_tolerance(project: Path, name: str, tolerance: dict[str, Any]) -> None:
    registry = registry_mod.load(project)
    family = name.split("/", maxsplit=1)[0]
    records = dict(registry.families[family].records)
    raw = {**records[name].to_json(), "tolerance": tolerance}
    records[name] = registry_mod.parse_record(name, raw, file="t")
    write_family(registry, family, records.values())


def register_reference(project: Path, store: Store, name: str = NAME) -> None:
    path = project / "dinov2_reference.npz"
    np.savez(path, cls_token=CLS, patch_tokens=PATCH)
    ingest.add(store, registry_mod.load(project), path, name=name, kind="array")
    set_tolerance(project, name, TOLERANCE)


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    return write_keys(tmp_path / "home" / "keys")


@pytest.fixture
def attested(project: Path, store: Store, keys: tuple[Path, Path]) -> tuple[Path, Path, Path]:
    """A reference registered, a candidate checkpoint and its outputs, and a certificate:
    (certificate, checkpoint, outputs)."""
    register_reference(project, store)
    ckpt = project / "converted.safetensors"
    ckpt.write_bytes(b"converted weights " * 64)
    outputs = project / "outputs.npz"
    np.savez(outputs, cls_token=CLS, patch_tokens=PATCH + np.float32(1e-4))
    cert = project / "certs" / "converted.intoto.json"
    cert.parent.mkdir()
    code, stdout, stderr = run(
        "attest", NAME, str(outputs), "--subject", str(ckpt), "--key", str(keys[0]),
        "-o", str(cert), "--env", "device=cpu:test",
    )  # fmt: skip
    assert code == 0, stderr
    assert f"certificate: {cert} (PASSED: 2 arrays of {NAME}; 2 subjects)" in stdout
    return cert, ckpt, outputs


def _statement(cert: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(base64.b64decode(json.loads(cert.read_text())["payload"]))
    return doc


def _verify(cert: Path, pub: Path, *candidates: Path) -> tuple[int, str, str]:
    args = ["verify-attestation", str(cert), "--key", str(pub)]
    for c in candidates:
        args += ["--candidate", str(c)]
    return run(*args)


def test_a_certificate_is_an_in_toto_statement_about_the_candidate(
    attested: tuple[Path, Path, Path], project: Path
) -> None:
    cert, ckpt, outputs = attested
    envelope = json.loads(cert.read_text())
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    assert len(envelope["signatures"]) == 1
    doc = _statement(cert)
    assert doc["_type"] == "https://in-toto.io/Statement/v1"
    assert doc["predicateType"] == attest_mod.PREDICATE_TYPE
    assert doc["subject"] == [
        {"name": p.name, "digest": {"sha256": digests.of_file(p).hex}} for p in (ckpt, outputs)
    ]
    predicate = doc["predicate"]
    record = registry_mod.load(project).get(NAME)
    assert predicate["result"] == "PASSED"
    assert predicate["references"] == [
        {
            "name": NAME,
            "uri": f"fixture-store:{NAME}",
            "digest": {"sha256": record.object.hex},
            "size": record.object.size,
            "tolerance": record.tolerance.to_json() if record.tolerance else None,
        }
    ]
    assert predicate["references"][0]["tolerance"]["max"] == 5e-4
    arrays = {a["name"]: a for a in predicate["arrays"]}
    assert arrays["cls_token"]["outcome"] == "bit-identical"
    assert arrays["patch_tokens"]["outcome"] == "within-tolerance"
    assert arrays["patch_tokens"]["mean_abs"] == pytest.approx(1e-4, rel=0.05)
    assert predicate["passedTests"] == ["cls_token", "patch_tokens"]
    assert predicate["failedTests"] == []
    env = predicate["environment"]
    assert env["python"] == ".".join(map(str, sys.version_info[:3]))
    assert env["numpy"] == np.__version__
    assert env["device"] == "cpu:test"  # --env adds what the comparison cannot know
    assert "platform" in env and "fixture-store" in env


def test_a_certificate_verifies_offline_with_the_public_key(
    attested: tuple[Path, Path, Path], keys: tuple[Path, Path]
) -> None:
    cert, ckpt, outputs = attested
    code, stdout, stderr = _verify(cert, keys[1], ckpt, outputs)
    assert code == 0, stderr
    assert f"verified: {cert}: PASSED" in stdout
    assert "2 of 2 subjects checked" in stdout


def test_a_changed_byte_in_the_candidate_fails_naming_it(
    attested: tuple[Path, Path, Path], keys: tuple[Path, Path]
) -> None:
    cert, ckpt, _ = attested
    data = bytearray(ckpt.read_bytes())
    data[100] ^= 1
    ckpt.write_bytes(bytes(data))
    code, _, stderr = _verify(cert, keys[1], ckpt)
    assert code == 1
    assert f"changed: candidate {ckpt} changed: the certificate was signed for sha256:" in stderr
    assert "Traceback" not in stderr


def test_a_candidate_the_certificate_is_not_about_fails_naming_it(
    attested: tuple[Path, Path, Path], keys: tuple[Path, Path], project: Path
) -> None:
    cert = attested[0]
    other = project / "other.bin"
    other.write_bytes(b"x")
    code, _, stderr = _verify(cert, keys[1], other)
    assert code == 1
    assert f"candidate {other}: the certificate has no subject named 'other.bin'" in stderr


def test_a_changed_reference_record_fails_naming_it(
    attested: tuple[Path, Path, Path], keys: tuple[Path, Path], project: Path
) -> None:
    cert = attested[0]
    # The reference is regenerated: the record now names other bytes.
    path = project / "dinov2_reference.npz"
    np.savez(path, cls_token=CLS + 1, patch_tokens=PATCH)
    registry = registry_mod.load(project)
    records = dict(registry.families["equimo"].records)
    new = digests.of_file(path)
    raw = {**records[NAME].to_json(), "digest": new.text, "size": new.size}
    records[NAME] = registry_mod.parse_record(NAME, raw, file="t")
    write_family(registry, "equimo", records.values())
    code, _, stderr = _verify(cert, keys[1])
    assert code == 1
    assert f"changed: reference {NAME} changed: the certificate was signed for sha256:" in stderr
    assert f"the registry now records sha256:{new.hex[:16]}" in stderr
    assert "tolerance" not in stderr


def test_a_removed_reference_record_fails_naming_it(
    attested: tuple[Path, Path, Path], keys: tuple[Path, Path], project: Path
) -> None:
    cert = attested[0]
    write_family(registry_mod.load(project), "equimo", [])
    code, _, stderr = _verify(cert, keys[1])
    assert code == 1
    assert f"reference {NAME}: no record of that name" in stderr


def test_an_unreadable_reference_record_fails_naming_it(
    attested: tuple[Path, Path, Path], keys: tuple[Path, Path], project: Path
) -> None:
    """A reference whose record no longer parses cannot vouch for the certificate: it fails,
    naming the record and why, instead of being passed over."""
    cert = attested[0]
    family = project / "provenance" / "equimo.json"
    text = family.read_text()
    assert text.count('"size": ') == 1
    family.write_text(text.replace('"size": ', '"size": -', 1))  # a size no record can have
    code, _, stderr = _verify(cert, keys[1])
    assert code == 1
    assert f"reference {NAME}: its record cannot be read" in stderr


def test_a_changed_tolerance_fails_naming_it(
    attested: tuple[Path, Path, Path], keys: tuple[Path, Path], project: Path
) -> None:
    cert = attested[0]
    set_tolerance(project, NAME, {"metric": "mean_abs", "max": 5e-3})  # loosened after the fact
    code, _, stderr = _verify(cert, keys[1])
    assert code == 1
    assert f"changed: reference {NAME}: its tolerance changed: the certificate applied" in stderr
    assert '"max": 0.0005' in stderr and '"max": 0.005' in stderr
    assert f"reference {NAME} changed" not in stderr  # the bytes did not


@pytest.mark.parametrize("curve", [False, True], ids=["ed25519", "ecdsa"])
def test_a_wrong_key_fails(attested: tuple[Path, Path, Path], tmp_path: Path, curve: bool) -> None:
    cert = attested[0]
    _, other = write_keys(tmp_path / "elsewhere", "other", curve=curve)
    code, _, stderr = _verify(cert, other)
    assert code == 1
    assert f"the signature of {cert} does not verify with the key {other}" in stderr
    assert "fix:" in stderr and "Traceback" not in stderr


def test_a_changed_statement_fails_the_signature(
    attested: tuple[Path, Path, Path], keys: tuple[Path, Path]
) -> None:
    cert = attested[0]
    envelope = json.loads(cert.read_text())
    doc = _statement(cert)
    doc["predicate"]["references"][0]["tolerance"]["max"] = 1.0
    envelope["payload"] = base64.b64encode(json.dumps(doc).encode()).decode()
    cert.write_text(json.dumps(envelope))
    code, _, stderr = _verify(cert, keys[1])
    assert code == 1
    assert "does not verify with the key" in stderr


def test_an_ecdsa_key_signs_too(project: Path, store: Store, tmp_path: Path) -> None:
    register_reference(project, store)
    priv, pub = write_keys(tmp_path / "home" / "ec", curve=True)
    outputs = project / "outputs.npz"
    np.savez(outputs, cls_token=CLS, patch_tokens=PATCH)
    cert = project / "c.json"
    assert run("attest", NAME, str(outputs), "--key", str(priv), "-o", str(cert))[0] == 0
    code, _, stderr = _verify(cert, pub, outputs)
    assert code == 0, stderr


def test_outputs_off_parity_give_a_failed_certificate_that_does_not_pass_verification(
    project: Path, store: Store, keys: tuple[Path, Path]
) -> None:
    register_reference(project, store)
    outputs = project / "outputs.npz"
    np.savez(outputs, cls_token=CLS + np.float32(0.5), patch_tokens=PATCH)
    cert = project / "c.json"
    code, stdout, stderr = run("attest", NAME, str(outputs), "--key", str(keys[0]), "-o", str(cert))
    assert code == 1
    assert "(FAILED: 2 arrays" in stdout and "not at parity: cls_token" in stderr
    doc = _statement(cert)
    assert doc["predicate"]["failedTests"] == ["cls_token"]
    code, stdout, stderr = _verify(cert, keys[1], outputs)
    assert code == 1
    assert f"verified: {cert}: FAILED" in stdout
    assert "authentic but records a failed parity result" in stderr


def test_the_key_comes_from_the_environment(
    project: Path, store: Store, keys: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    register_reference(project, store)
    outputs = project / "outputs.npz"
    np.savez(outputs, cls_token=CLS, patch_tokens=PATCH)
    cert = project / "c.json"
    monkeypatch.setenv(attest_mod.KEY_ENV, str(keys[0]))
    monkeypatch.setenv(attest_mod.PUBLIC_KEY_ENV, str(keys[1]))
    assert run("attest", NAME, str(outputs), "-o", str(cert))[0] == 0
    assert run("verify-attestation", str(cert))[0] == 0


@pytest.mark.parametrize("where", ["store", "registry"])
def test_a_key_inside_the_store_or_the_registry_is_refused(
    project: Path, store: Store, where: str
) -> None:
    register_reference(project, store)
    folder = store.root / "keys" if where == "store" else project / "provenance" / "keys"
    priv, _ = write_keys(folder)
    outputs = project / "outputs.npz"
    np.savez(outputs, cls_token=CLS, patch_tokens=PATCH)
    code, _, stderr = run("attest", NAME, str(outputs), "--key", str(priv), "-o", "c.json")
    assert code == 2
    assert f"the key {priv} is inside" in stderr and "fix:" in stderr
    assert not (project / "c.json").exists()


def test_no_key_is_a_usage_error_naming_the_option(
    project: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    register_reference(project, store)
    monkeypatch.delenv(attest_mod.KEY_ENV, raising=False)
    code, _, stderr = run("attest", NAME, "outputs.npz", "-o", "c.json")
    assert code == 2
    assert "no key" in stderr and "--key" in stderr


def test_a_public_key_cannot_sign_and_a_private_one_is_not_taken_for_verification(
    attested: tuple[Path, Path, Path], keys: tuple[Path, Path]
) -> None:
    cert, _, outputs = attested
    code, _, stderr = run("attest", NAME, str(outputs), "--key", str(keys[1]), "-o", "x.json")
    assert code == 2 and f"{keys[1]} is not a PEM private key" in stderr
    code, _, stderr = _verify(cert, keys[0])
    assert code == 2 and f"{keys[0]} is a private key" in stderr


@pytest.mark.parametrize(
    "text",
    ["not json", "[]", '{"payload": "!!", "payloadType": "x", "signatures": []}'],
    ids=["not-json", "not-an-object", "bad-payload"],
)
def test_a_file_that_is_no_certificate_fails_clearly(
    project: Path, keys: tuple[Path, Path], text: str
) -> None:
    bogus = project / "bogus.json"
    bogus.write_text(text)
    code, _, stderr = _verify(bogus, keys[1])
    assert code == 1
    assert f"{bogus} is not a parity certificate" in stderr and "Traceback" not in stderr


def test_without_the_attest_extra_the_commands_name_it(
    attested: tuple[Path, Path, Path], keys: tuple[Path, Path], project: Path
) -> None:
    cert = attested[0]
    code = (
        "import sys; sys.modules['securesystemslib'] = None; "
        "from fixture_store.cli import main; main()"
    )
    for args in (
        ["verify-attestation", str(cert), "--key", str(keys[1])],
        ["attest", NAME, "outputs.npz", "--key", str(keys[0]), "-o", "x.json"],
    ):
        proc = subprocess.run(
            [sys.executable, "-c", code, *args],
            capture_output=True,
            text=True,
            cwd=project,
            check=False,
        )
        assert proc.returncode == 2, proc.stderr
        assert "needs the 'attest' extra" in proc.stderr
        assert "uv add 'fixture-store[attest]'" in proc.stderr
        assert "Traceback" not in proc.stderr


def test_a_certificate_path_that_cannot_be_written_is_a_usage_error(
    project: Path, store: Store, keys: tuple[Path, Path]
) -> None:
    register_reference(project, store)
    outputs = project / "outputs.npz"
    np.savez(outputs, cls_token=CLS, patch_tokens=PATCH)
    (project / "a-file").write_text("x")
    cert = project / "a-file" / "c.json"
    code, _, stderr = run("attest", NAME, str(outputs), "--key", str(keys[0]), "-o", str(cert))
    assert code == 2
    assert "cannot write the certificate" in stderr and "fix:" in stderr
    # a folder that does not exist yet is made
    cert = project / "certs" / "new" / "c.json"
    assert run("attest", NAME, str(outputs), "--key", str(keys[0]), "-o", str(cert))[0] == 0
    assert cert.is_file()


def test_errors_are_json_without_nan_or_infinity() -> None:
    arrays = [{"name": "a", "outcome": "drift", "max_rel": float("inf"), "cos": np.float32("nan"),
               "worst_index": (np.int64(1), 2)}]  # fmt: skip
    doc = attest_mod.statement(
        [attest_mod.Subject("x", digests.of_bytes(b"x"))], [], arrays, ok=False, env={}
    )
    text = json.dumps(doc, allow_nan=False)
    assert json.loads(text)["predicate"]["arrays"][0] == {
        "name": "a", "outcome": "drift", "max_rel": "inf", "cos": "nan", "worst_index": [1, 2]
    }  # fmt: skip
