"""``regenerate``'s options, refused before any stage runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixture_store.cli import regenerate as regenerate_cli
from fixture_store.objects.store import Store
from tests.support.cli import run


def test_remote_and_no_remote_together_is_a_usage_error_before_the_stage_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pull only from NAME and pull from no remote contradict: refused (exit 2), naming both,
    never settled by one of them silently winning."""
    project = tmp_path / "project"
    (project / "provenance").mkdir(parents=True)
    store = Store.at(tmp_path / "store").ensure()

    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("the stage ran")

    monkeypatch.setattr(regenerate_cli, "regenerate", refuse)
    code, out, err = run(
        "--store", str(store.root), "--registry", str(project),
        "regenerate", "toy", "--fetch", "--remote", "team", "--no-remote",
    )  # fmt: skip
    assert code == 2, out + err
    assert "--remote cannot be combined with --no-remote" in err
