"""Optional dependencies: the core loads without them; a missing extra is a usage error naming it.

A missing package is simulated with ``sys.modules[name] = None``, which makes both ``import name``
and ``importlib.util.find_spec(name)`` behave as if it were not installed.
"""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
import tomllib
from collections.abc import Callable
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

from fixture_store import attest
from fixture_store._extras import EXTRAS, MissingExtraError, require
from fixture_store.errors import EXIT_USAGE
from fixture_store.fetch import Outcome, fetch_names
from fixture_store.objects.store import Store
from fixture_store.parity import runtimes
from fixture_store.readers import onnxcase
from fixture_store.regenerate import drift, stages
from fixture_store.sources import package
from tests.support.cli import add_file_and_case
from tests.support.fetchutil import file_record, make_registry

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "fixture_store"
OPTIONAL = {module for modules in EXTRAS.values() for module in modules}
# Imported by the pytest plugin, which only ever runs inside pytest.
HOST_ONLY = {"pytest"}
# Every optional module, and what they drag in, blocked at once.
BLOCKED = sorted(OPTIONAL | {"jax", "jaxlib", "dvc", "PIL"})


def _block(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    found = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    assert found is not None, requirement
    return _norm(found.group(0))


def _pyproject() -> dict[str, object]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


@functools.cache
def _distributions() -> dict[str, list[str]]:
    return dict(packages_distributions())  # scans every installed distribution: once


def _distribution(module: str) -> str:
    dists = _distributions().get(module)
    assert dists, f"{module} is not installed in the test environment"
    return _norm(dists[0])


# -- the mechanism -------------------------------------------------------------------------------


def test_a_missing_module_is_a_usage_error_naming_the_extra_and_the_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _block(monkeypatch, "onnxruntime")
    with pytest.raises(MissingExtraError) as caught:
        require("onnx", for_what="fixture-store compare")
    e = caught.value
    assert (e.extra, e.missing, e.exit_code) == ("onnx", "onnxruntime", EXIT_USAGE)
    assert (
        e.message == "fixture-store compare needs the 'onnx' extra (onnxruntime is not installed)"
    )
    assert e.fix is not None and "uv add 'fixture-store[onnx]'" in e.fix


def test_installed_modules_pass_and_only_the_named_ones_are_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    require("onnx", for_what="x")
    _block(monkeypatch, "onnxruntime")
    require("onnx", for_what="x", modules=("onnx",))  # onnxruntime is not asked for
    with pytest.raises(ValueError, match="not a module of the 'hub' extra"):
        require("hub", for_what="x", modules=("onnx",))


def test_availability_is_checked_without_importing() -> None:
    code = (
        "import sys; from fixture_store._extras import available; "
        "assert available('onnxruntime') and 'onnxruntime' not in sys.modules; "
        "assert not available('no_such_module_here')"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


# -- every import site, one per extra ------------------------------------------------------------


def _read_case(tmp_path: Path) -> None:
    (tmp_path / "model.onnx").write_bytes(b"")
    onnxcase.load_case(tmp_path, name="fam/case")


def _compare_tensors(tmp_path: Path) -> None:
    (tmp_path / "a.pb").write_bytes(b"\x08\x01")
    (tmp_path / "b.pb").write_bytes(b"\x08\x02")
    drift.compare_file("input_0.pb", tmp_path / "a.pb", tmp_path / "b.pb", None)


def _read_stages(tmp_path: Path) -> None:
    (tmp_path / stages.PARAMS_FILE).write_text("regenerate: {}\n", encoding="utf-8")
    stages.load(tmp_path)


def _package_tool(_tmp_path: Path) -> None:
    package.pip_command()


def _attest_signer(tmp_path: Path) -> None:
    attest.signer(tmp_path / "key.pem")


SITES: dict[str, tuple[str, str, Callable[[Path], object]]] = {
    "onnx case reader": ("onnx", "onnx", _read_case),
    "ort runtime": ("onnx", "onnxruntime", lambda _p: runtimes.check_runtime("ort")),
    "reference runtime": ("onnx", "onnx", lambda _p: runtimes.check_runtime("reference")),
    "regenerated tensors": ("onnx", "onnx", _compare_tensors),
    "stages": ("regenerate", "yaml", _read_stages),
    "package source": ("package", "pip", _package_tool),
    "attestation signer": ("attest", "securesystemslib", _attest_signer),
}


@pytest.mark.parametrize("site", sorted(SITES))
def test_each_import_site_names_its_extra(
    site: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    extra, module, call = SITES[site]
    monkeypatch.delenv(package.PIP_ENV_VAR, raising=False)
    _block(monkeypatch, module)
    with pytest.raises(MissingExtraError) as caught:
        call(tmp_path)
    assert (caught.value.extra, caught.value.missing) == (extra, module)


def test_a_hub_fetch_without_the_hub_extra_fails_that_artifact_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = {
        "type": "hub",
        "repo_id": "org/tiny",
        "repo_type": "model",
        "revision": "0123456789abcdef0123456789abcdef01234567",
        "path": "model.bin",
    }
    registry = make_registry(tmp_path, {"ckpt/w": file_record(source, b"weights")})
    _block(monkeypatch, "huggingface_hub")
    report = fetch_names(Store.at(tmp_path / "store"), registry, ["ckpt/w"], offline=False)
    [result] = report.results
    assert result.outcome == Outcome.NEEDS_EXTRA
    assert (
        result.message
        == "fetching a hub source needs the 'hub' extra (huggingface_hub is not installed)"
    )
    assert result.fix is not None and "fixture-store[hub]" in result.fix


@pytest.mark.usefixtures("store")
def test_fetch_without_the_hub_extra_exits_2_as_every_command_does(project: Path) -> None:
    """A missing extra is one condition with one exit code: fetch (which goes on to the other
    artifacts) exits 2 as compare does, naming the extra."""
    source = {
        "type": "hub",
        "repo_id": "org/tiny",
        "repo_type": "model",
        "revision": "0123456789abcdef0123456789abcdef01234567",
        "path": "model.bin",
    }
    make_registry(project, {"ckpt/w": file_record(source, b"weights")})
    code = (
        "import sys; sys.modules['huggingface_hub'] = None; "
        "from fixture_store.cli import main; main()"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "fetch", "ckpt/w", "--no-remote"],
        capture_output=True,
        text=True,
        cwd=project,
        check=False,
    )
    assert proc.returncode == EXIT_USAGE, proc.stdout + proc.stderr
    assert "needs the 'hub' extra" in proc.stderr and "fixture-store[hub]" in proc.stderr
    assert "needs-extra" in proc.stdout and "Traceback" not in proc.stderr


@pytest.mark.usefixtures("store")
def test_compare_without_the_onnx_extra_exits_2_with_the_fix_and_no_traceback(
    project: Path,
) -> None:
    add_file_and_case(project)
    code = (
        "import sys; sys.modules['onnxruntime'] = None; from fixture_store.cli import main; main()"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "compare", "--family", "fam", "--jobs", "0"],
        capture_output=True,
        text=True,
        cwd=project,
        check=False,
    )
    assert proc.returncode == EXIT_USAGE, proc.stderr
    assert "fixture-store compare --runtime ort needs the 'onnx' extra" in proc.stderr
    assert "uv add 'fixture-store[onnx]'" in proc.stderr
    assert "Traceback" not in proc.stderr


# -- the core loads without any extra ------------------------------------------------------------


def test_every_module_imports_with_every_optional_package_missing() -> None:
    code = f"""
import importlib, pkgutil, sys
for name in {BLOCKED!r}:
    sys.modules[name] = None
import fixture_store
for info in pkgutil.walk_packages(fixture_store.__path__, "fixture_store."):
    if not info.name.endswith("__main__"):  # runs the CLI
        importlib.import_module(info.name)
"""
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert proc.returncode == 0, proc.stderr


@functools.cache
def _modules() -> tuple[tuple[Path, ast.Module], ...]:
    return tuple(
        (path, ast.parse(path.read_text(encoding="utf-8"), str(path)))
        for path in sorted(PACKAGE.rglob("*.py"))
    )


def _imported(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name.split(".")[0] for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return [node.module.split(".")[0]]
    return []


def _under_type_checking(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            return True
    return False


def _guarded(node: ast.stmt, parents: dict[ast.AST, ast.AST]) -> bool:
    """A ``require(...)`` call comes before ``node`` in the function that holds it."""
    func = parents.get(node)
    while func is not None and not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
        func = parents.get(func)
    if func is None:
        return False
    return any(
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Name)
        and call.func.id == "require"
        and call.lineno < node.lineno
        for call in ast.walk(func)
    )


def test_every_import_of_an_optional_module_is_guarded_by_require() -> None:
    unguarded = []
    for path, tree in _modules():
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for module in set(_imported(node)) & OPTIONAL:
                if not _under_type_checking(node, parents) and not _guarded(node, parents):
                    unguarded.append(f"{path.relative_to(ROOT)}:{node.lineno} {module}")
    assert unguarded == []


def test_core_dependencies_are_exactly_what_the_package_imports_outside_the_extras() -> None:
    stdlib = set(sys.stdlib_module_names) | {"__future__", "fixture_store"}
    imported = {
        module
        for _, tree in _modules()
        for node in ast.walk(tree)
        for module in _imported(node)
        if module not in stdlib
    }
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    core = {_requirement_name(r) for r in project["dependencies"]}
    needed = {_distribution(m) for m in imported - OPTIONAL - HOST_ONLY}
    assert needed == core


def test_extras_table_matches_pyproject() -> None:
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    declared: dict[str, list[str]] = project["optional-dependencies"]
    for extra, modules in EXTRAS.items():
        names = {_requirement_name(r) for r in declared[extra]}
        for module in modules:
            assert _distribution(module) in names, (extra, module)
    everything = declared["all"]
    assert len(everything) == 1
    listed = re.fullmatch(r"fixture-store\[(.*)\]", everything[0])
    assert listed is not None
    assert set(listed.group(1).split(",")) == set(declared) - {"all"}
    assert set(EXTRAS) <= set(declared)


@pytest.mark.parametrize(
    ("pyproject", "uv_lock", "expected"),
    [
        (
            '[project]\nname = "lib"\n[dependency-groups]\ndev = ["fixture-store>=0.3"]\n',
            True,
            "uv add --dev 'fixture-store[s3]'",
        ),
        (
            '[project]\nname = "lib"\n[dependency-groups]\ntest = ["fixture_store[onnx]==1.0"]\n',
            True,
            "uv add --group test 'fixture-store[onnx,s3]'",
        ),
        (
            '[project]\nname = "lib"\ndependencies = ["fixture-store"]\n',
            True,
            "uv add 'fixture-store[s3]'",
        ),
        (
            '[project]\nname = "lib"\ndependencies = ["fixture-store-extra", "numpy"]\n',
            True,
            "uv add 'fixture-store[s3]'  (or: pip install 'fixture-store[s3]')",
        ),
        (
            '[project]\nname = "lib"\n[project.optional-dependencies]\ntest = ["fixture-store"]\n',
            False,
            "pip install 'fixture-store[s3]'",
        ),
    ],
)
def test_the_missing_extra_fix_adds_it_where_fixture_store_was_added(
    tmp_path: Path, pyproject: str, uv_lock: bool, expected: str
) -> None:
    from fixture_store._extras import install_command

    (tmp_path / "pyproject.toml").write_text(pyproject)
    if uv_lock:
        (tmp_path / "uv.lock").write_text("")
    (tmp_path / "tests").mkdir()
    assert install_command("s3", tmp_path / "tests") == expected
