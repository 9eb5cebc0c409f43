"""No silent green: a downstream project whose store is empty (a fresh clone) or whose registry
names other bytes ends its run with one line counting what a missing fixture skipped, whatever
pytest's -r flags; under CI=true those tests fail unless the project opts out."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

# Imported here first: pytester restores sys.modules after each in-process run, and numpy's C
# extension, which the plugin's readers import in the inner run, cannot load twice in a process.
import numpy  # noqa: F401
import pytest

from fixture_store import ingest
from fixture_store import registry as registry_mod
from fixture_store.objects.store import Store

_TESTS = """
    import pytest

    @pytest.mark.fixture_store("ref/logits.npz")
    def test_marker(fixture_store):
        pass

    def test_body(fixture_store):
        fixture_store.path("ref/logits.npz")

    def test_plain():
        pass
"""
_LINE = (
    "fixture-store: 2 tests skipped: 1 fixture missing from the store or not the bytes the "
    "registry names (ref/logits.npz); fix: fixture-store fetch ref/logits.npz*"
)


def _add(store: Store, root: Path) -> None:
    data = root / "data" / "logits.npz"
    ingest.add(
        store, registry_mod.load(root), data, name="ref/logits.npz", kind="fixture", replace=True
    )


@pytest.fixture
def downstream(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A project with one registered reference, its store empty (as on a fresh clone)."""
    for var in ("FIXTURE_STORE_REGISTRY", "FIXTURE_STORE_REQUIRE", "CI"):
        monkeypatch.delenv(var, raising=False)
    root = pytester.path
    (root / "provenance").mkdir()
    (root / "data").mkdir()
    (root / "data" / "logits.npz").write_bytes(b"reference bytes")
    elsewhere = Store.at(root / "maintainer-store").ensure()
    _add(elsewhere, root)
    monkeypatch.setenv("FIXTURE_STORE_DIR", str(root / "empty-store"))
    pytester.makepyfile(test_ref=_TESTS)
    return pytester


@pytest.mark.parametrize("flags", [[], ["-rN"], ["-q"]], ids=["plain", "-rN", "-q"])
def test_an_empty_store_ends_the_run_with_one_line_naming_the_fix(
    downstream: pytest.Pytester, flags: list[str]
) -> None:
    result = downstream.runpytest(*flags)
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines([_LINE])
    assert sum("fixture-store:" in line for line in result.outlines) == 1


def test_a_wrong_digest_in_the_registry_is_counted_too(downstream: pytest.Pytester) -> None:
    """Content-addressed: a registry naming other bytes finds no object for them."""
    _add(Store.at(downstream.path / "empty-store").ensure(), downstream.path)
    path = downstream.path / "provenance" / "ref.json"
    doc = json.loads(path.read_text())
    digest = doc["records"]["ref/logits.npz"]["digest"]
    doc["records"]["ref/logits.npz"]["digest"] = digest[:-1] + ("0" if digest[-1] != "0" else "1")
    path.write_text(json.dumps(doc))
    result = downstream.runpytest()
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines([_LINE])


def test_under_ci_a_missing_fixture_fails(
    downstream: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    result = downstream.runpytest("-rN")
    result.assert_outcomes(passed=1, failed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*ref/logits.npz: missing object (CI=true: a skip would let the run pass having "
            "tested nothing; 'fixture_store_allow_ci_skips = true' in the pytest configuration "
            "lets it skip)*",
            "fixture-store: 2 tests failed: 1 fixture missing from the store*; fix: fixture-store "
            "fetch ref/logits.npz",
        ]
    )


def test_a_project_may_let_ci_skip(
    downstream: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    downstream.makepyprojecttoml("[tool.pytest.ini_options]\nfixture_store_allow_ci_skips = true\n")
    result = downstream.runpytest()
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines([_LINE])


def test_a_run_with_every_fixture_says_nothing(downstream: pytest.Pytester) -> None:
    _add(Store.at(downstream.path / "empty-store").ensure(), downstream.path)
    result = downstream.runpytest()
    result.assert_outcomes(passed=3)
    assert "fixture-store:" not in result.stdout.str()


def test_the_line_is_counted_from_xdist_workers_reports(downstream: pytest.Pytester) -> None:
    result = downstream.runpytest_subprocess("-n", "1", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines([_LINE])


def test_the_example_project_promises_the_line() -> None:
    readme = (
        Path(__file__).resolve().parents[1] / "examples" / "downstream" / "README.md"
    ).read_text()
    assert "fixture_store_allow_ci_skips" in readme and "CI=true" in readme


EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "downstream"


@pytest.mark.parametrize("ci", [False, True], ids=["local", "CI=true"])
def test_the_downstream_example_on_a_fresh_clone_is_not_green_in_silence(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: bool
) -> None:
    """examples/downstream as a fresh clone has it: its registry, tests and package, an empty
    store. Its four parity tests skip with one line naming both repairs (a fetch for the
    references it registered, its generator stage for the ones it regenerates), and fail
    under CI=true."""
    for var in ("FIXTURE_STORE_REGISTRY", "FIXTURE_STORE_REQUIRE", "CI"):
        monkeypatch.delenv(var, raising=False)
    for part in ("provenance", "tests", "src"):
        shutil.copytree(EXAMPLE / part, pytester.path / part)
    shutil.copy(EXAMPLE / "pyproject.toml", pytester.path)
    pytester.syspathinsert(pytester.path / "src")
    monkeypatch.setenv("FIXTURE_STORE_DIR", str(pytester.path / "empty-store"))
    if ci:
        monkeypatch.setenv("CI", "true")
    result = pytester.runpytest("-p", "no:cacheprovider")
    what = "failed" if ci else "skipped"
    result.assert_outcomes(passed=1, xfailed=1, **{what: 4})  # passed: the completeness check
    result.stdout.fnmatch_lines(
        [
            # each test's fixtures up to the first missing one (all of them when it fails)
            f"fixture-store: 4 tests {what}: * fixtures missing from the store or not the bytes "
            "the registry names (*); fix: fixture-store fetch *tinynet-upstream/mlp_seed7.npz "
            "tinynet-upstream/mlp_seed8.npz; fixture-store regenerate reference --fetch*"
        ]
    )
