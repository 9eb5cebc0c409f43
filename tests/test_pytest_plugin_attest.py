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


def _downstream(root: Path, store: Path) -> None:
    """A downstream project: pyproject.toml, provenance/ with one reference, one test that
    asserts parity with it after changing into another folder."""
    root.mkdir(exist_ok=True)
    (root / "pyproject.toml").write_text('[project]\nname = "downstream"\nversion = "0"\n')
    (root / "provenance").mkdir()
    np.savez(root / "ref.npz", a=np.ones(3))
    ingest.add(
        Store.at(store).ensure(),
        registry_mod.load(root),
        root / "ref.npz",
        name="misc/ref",
        kind="array",
    )
    (root / "test_inner.py").write_text(
        "import os\n\nimport numpy as np\n\n\n"
        "def test_at_parity(fixture_store, tmp_path):\n"
        "    os.chdir(tmp_path)  # relative path options stay the invocation folder's\n"
        '    fixture_store.assert_parity("misc/ref", {"a": np.ones(3)})\n'
    )


def _assert_certificates(folder: Path) -> None:
    """The one test's certificate and outputs are in ``folder`` (named by the test's node id,
    which pytest makes relative to the rootdir it guessed)."""
    names = sorted(p.name for p in folder.iterdir())
    ends = ("test_inner.py_test_at_parity--ref.intoto.json", "test_at_parity--ref.outputs.npz")
    assert len(names) == 2 and all(n.endswith(e) for n, e in zip(names, ends, strict=True))


def test_the_documented_command_works_on_its_first_run_whatever_rootdir_pytest_guesses(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``pytest --fixture-store-attest certs/ --fixture-store-attest-key ~/.keys/parity.pem``
    as docs/attestations.md writes it: ``certs/`` does not exist yet and the key is outside the
    project, so pytest takes the key's folder for its rootdir. The project is still the folder
    pytest was started in, as the CLI finds it."""
    monkeypatch.delenv("FIXTURE_STORE_REGISTRY", raising=False)
    monkeypatch.delenv("FIXTURE_STORE_ATTEST_KEY", raising=False)
    monkeypatch.setenv("FIXTURE_STORE_DIR", str(tmp_path / "store"))
    _downstream(pytester.path, tmp_path / "store")
    priv, _ = write_keys(tmp_path / "home" / ".keys", "parity")
    result = pytester.runpytest(
        "--fixture-store-attest", "certs/", "--fixture-store-attest-key", str(priv)
    )
    assert result.ret == 0, result.stderr.str() + result.stdout.str()
    _assert_certificates(pytester.path / "certs")


def test_every_path_option_is_the_invocation_folders_even_after_a_test_changed_folder(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Relative values of the plugin's path options (store, registry, certificates, key) are
    read against the folder pytest was started in, not the one a test changed into."""
    for name in ("FIXTURE_STORE_REGISTRY", "FIXTURE_STORE_ATTEST_KEY", "FIXTURE_STORE_DIR"):
        monkeypatch.delenv(name, raising=False)
    _downstream(pytester.path / "project", pytester.path / "store")
    write_keys(pytester.path / "keys", "parity")
    result = pytester.runpytest(
        "project/test_inner.py",
        "--fixture-store-dir", "store", "--fixture-store-registry", "project",
        "--fixture-store-attest", "certs", "--fixture-store-attest-key", "keys/parity.pem",
    )  # fmt: skip
    assert result.ret == 0, result.stderr.str() + result.stdout.str()
    _assert_certificates(pytester.path / "certs")


def test_outside_any_project_the_plugin_names_the_folder_it_started_in(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No provenance/ in the invocation folder or its parents: the refusal names that folder
    and the plugin's own option, not a folder pytest guessed nor the CLI's --registry."""
    monkeypatch.delenv("FIXTURE_STORE_REGISTRY", raising=False)
    priv, _ = write_keys(tmp_path / "keys", "parity")
    (tmp_path / "provenance").mkdir()  # beside the key: pytest's guessed rootdir has one
    pytester.makepyfile(test_inner="def test_x():\n    pass\n")
    result = pytester.runpytest(
        "--fixture-store-attest", "certs/", "--fixture-store-attest-key", str(priv)
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stderr.str()
    assert f"no provenance/ folder in {pytester.path} or any parent" in text, text
    assert "--fixture-store-registry" in text and "--registry " not in text
