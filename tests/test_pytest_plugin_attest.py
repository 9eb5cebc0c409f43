"""``--fixture-store-attest DIR``: the plugin signs a parity certificate per parity assertion,
passing or failing, that verifies offline with ``fixture-store verify-attestation``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fixture_store import ingest
from fixture_store import registry as registry_mod
from fixture_store.objects.store import Store
from tests.cli.test_attest import set_tolerance, write_keys


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fixture_store.cli", *args],
        capture_output=True,
        text=True,
        cwd=root,
        check=False,
    )


def test_the_plugin_writes_a_certificate_per_parity_assertion_that_verifies(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("FIXTURE_STORE_REGISTRY", raising=False)
    root = pytester.path
    (root / "provenance").mkdir()
    store = Store.at(root / "store").ensure()
    monkeypatch.setenv("FIXTURE_STORE_DIR", str(store.root))
    np.savez(root / "ref.npz", a=np.ones((2, 3), np.float32), b=np.arange(4))
    ingest.add(store, registry_mod.load(root), root / "ref.npz", name="misc/ref", kind="array")
    set_tolerance(root, "misc/ref", {"metric": "max_abs", "max": 1e-6})
    priv, pub = write_keys(tmp_path / "home")
    pytester.makepyfile(
        test_inner="""
        import numpy as np

        def test_at_parity(fixture_store):
            outputs = {"a": np.ones((2, 3), np.float32) + np.float32(1e-7), "b": np.arange(4)}
            assert fixture_store.assert_parity("misc/ref", outputs).ok

        def test_off(fixture_store):
            fixture_store.assert_parity("misc/ref", {"a": np.zeros((2, 3), np.float32)})
    """
    )
    certs = root / "certs"
    result = pytester.runpytest(
        f"--fixture-store-attest={certs}", f"--fixture-store-attest-key={priv}"
    )
    result.assert_outcomes(passed=1, failed=1)
    names = sorted(p.name for p in certs.iterdir())
    assert names == [
        "test_inner.py_test_at_parity--ref.intoto.json",
        "test_inner.py_test_at_parity--ref.outputs.npz",
        "test_inner.py_test_off--ref.intoto.json",
        "test_inner.py_test_off--ref.outputs.npz",
    ]
    passing = certs / names[0]
    proc = _cli(root, "verify-attestation", str(passing), "--key", str(pub),
                "--candidate", str(certs / names[1]))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "PASSED" in proc.stdout
    proc = _cli(root, "verify-attestation", str(certs / names[2]), "--key", str(pub),
                "--candidate", str(certs / names[3]))  # fmt: skip
    assert proc.returncode == 1
    assert "records a failed parity result" in proc.stderr
    # the outputs the certificate is about: a changed one fails naming it
    with np.load(certs / names[1]) as npz:
        assert sorted(npz.files) == ["a", "b"]
    np.savez(certs / names[1], a=np.zeros((2, 3), np.float32), b=np.arange(4))
    proc = _cli(root, "verify-attestation", str(passing), "--key", str(pub),
                "--candidate", str(certs / names[1]))  # fmt: skip
    assert proc.returncode == 1
    assert f"candidate {certs / names[1]} changed" in proc.stderr


@pytest.mark.smoke
def test_without_a_key_the_session_stops_naming_the_option(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FIXTURE_STORE_REGISTRY", raising=False)
    monkeypatch.delenv("FIXTURE_STORE_ATTEST_KEY", raising=False)
    root = pytester.path
    (root / "provenance").mkdir()
    store = Store.at(root / "store").ensure()
    monkeypatch.setenv("FIXTURE_STORE_DIR", str(store.root))
    np.savez(root / "ref.npz", a=np.ones(3))
    ingest.add(store, registry_mod.load(root), root / "ref.npz", name="misc/ref", kind="array")
    pytester.makepyfile(
        test_inner="""
        import numpy as np

        def test_at_parity(fixture_store):
            fixture_store.assert_parity("misc/ref", {"a": np.ones(3)})
    """
    )
    result = pytester.runpytest(f"--fixture-store-attest={root / 'certs'}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*--fixture-store-attest: no key*",
            "*fix: pass --fixture-store-attest-key FILE.pem (or set FIXTURE_STORE_ATTEST_KEY=*",
        ]
    )
    assert "test_at_parity" not in result.stdout.str()  # before any test ran
