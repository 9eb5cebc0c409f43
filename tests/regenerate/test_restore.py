"""Generator-made records a store lacks come back by running their stages, producers first."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from fixture_store import registry as registry_mod
from fixture_store.cli import main
from fixture_store.errors import UsageError
from fixture_store.objects.store import Store
from fixture_store.regenerate import regenerate, restore
from fixture_store.regenerate import stages as stages_mod
from fixture_store.regenerate.restore import plan
from fixture_store.verify import Verifier
from tests.support.regen_project import PYTHON, make_project, set_scale


def _chained(root: Path) -> Path:
    """Stage ``later`` reads ``toy/values.npy``, which stage ``toy`` makes."""
    make_project(root, stages=("toy", "later"))
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["regenerate"]["later"]["inputs"] = ["toy/values.npy"]
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=True))
    return root


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = _chained(tmp_path / "proj")
    full = Store.at(tmp_path / "full").ensure()
    for stage in ("toy", "later"):
        regenerate(root, full, stage, scratch=tmp_path / stage, accept=True, python=PYTHON)
    return root


def _missing(store: Store, root: Path) -> list[str]:
    registry = registry_mod.load(root)
    verifier = Verifier(store)
    return [n for n in registry.names() if not verifier.verify(registry.get(n)).ok]


def test_plan_runs_the_producer_of_a_missing_input_first(project: Path, tmp_path: Path) -> None:
    empty = Store.at(tmp_path / "empty").ensure()
    registry = registry_mod.load(project)
    later = registry.select(families=["later"])
    todo = plan(registry, stages_mod.load(project), Verifier(empty), later)
    assert todo.stages == ("toy", "later")
    assert todo.names == tuple(sorted(later))


def test_restore_brings_back_every_record_of_an_empty_store(project: Path, tmp_path: Path) -> None:
    empty = Store.at(tmp_path / "empty").ensure()
    names = registry_mod.load(project).names()
    assert sorted(_missing(empty, project)) == sorted(names)
    done = restore(project, empty, names, python=PYTHON)
    assert done.stages == ("toy", "later")
    assert sorted(done.restored) == sorted(names) and done.still_missing == ()
    assert _missing(empty, project) == []


def test_a_stage_that_makes_other_bytes_restores_nothing(project: Path, tmp_path: Path) -> None:
    empty = Store.at(tmp_path / "empty").ensure()
    set_scale(project, 1.5)  # the case output drifts; values.npy is unchanged
    done = restore(project, empty, ["toy/case"], python=PYTHON)
    assert done.restored == () and done.still_missing == ("toy/case",)
    assert "toy/case" in _missing(empty, project)


def test_regenerate_with_fetch_restores_its_missing_inputs(project: Path, tmp_path: Path) -> None:
    empty = Store.at(tmp_path / "empty").ensure()
    report = regenerate(project, empty, "later", scratch=tmp_path / "s", fetch=True, python=PYTHON)
    assert report.ok
    assert "toy/values.npy" not in _missing(empty, project)


def test_a_stage_params_yaml_does_not_declare_is_named(project: Path, tmp_path: Path) -> None:
    empty = Store.at(tmp_path / "empty").ensure()
    params = yaml.safe_load((project / "params.yaml").read_text())
    del params["regenerate"]["toy"]
    params["regenerate"]["later"]["inputs"] = []
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=True))
    registry = registry_mod.load(project)
    with pytest.raises(UsageError, match=r"'toy', which params\.yaml does not declare"):
        plan(registry, stages_mod.load(project), Verifier(empty), registry.names())


def test_fetch_of_a_generator_made_record_names_regenerate(project: Path, tmp_path: Path) -> None:
    empty = Store.at(tmp_path / "empty").ensure()
    args = ["--store", str(empty.root), "--registry", str(project), "fetch", "--family", "toy"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    assert "is produced by the generator stage 'toy'" in result.output
    assert "--regenerate" in result.output


@pytest.mark.slow
def test_fetch_regenerate_restores_an_empty_store_in_pinned_environments(
    project: Path, tmp_path: Path
) -> None:
    empty = Store.at(tmp_path / "empty").ensure()
    args = ["--store", str(empty.root), "--registry", str(project), "fetch", "--all"]
    result = CliRunner().invoke(main, [*args, "--regenerate"])
    assert result.exit_code == 0, result.output
    assert _missing(empty, project) == []
