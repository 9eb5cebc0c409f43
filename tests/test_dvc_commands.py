"""DVC's own commands, as a DVC user runs them on this project: a tiny copy of the repository (its
``.dvc/config``, ``.gitignore`` and plot templates, and a pipeline shaped like ``dvc.yaml``: a
first stage whose report later stages depend on, a last stage writing tracked metrics and plots,
a plot of untracked run numbers) across two commits and a fresh clone."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DVC = (sys.executable, "-m", "dvc")

# The stages' one script: the copy checks DVC's behaviour, not fixture-store's.
_STAGE = """\
import json, os, sys, yaml
if sys.argv[1] == "fetch":
    json.dump({"fetched": 2}, open("reports/fetch.json", "w"))
else:
    cases = yaml.safe_load(open("params.yaml"))["compare"]["cases"]
    os.makedirs("metrics/run", exist_ok=True)
    os.makedirs("plots", exist_ok=True)
    json.dump({"passed": cases - 1, "failed": 1}, open("metrics/ort.json", "w"))
    rows = "".join(f"op{i} (ort),op{i},ort,{i / cases}\\n" for i in range(cases))
    head = "key,operator,runtime,pass_rate\\n"
    open("plots/compare-operators.csv", "w").write(head + rows)
    known = "key,max_abs,max_abs_bound\\nop0,1e-7,1e-6\\n"
    open("metrics/run/known-mismatches.csv", "w").write(known)
"""


def _pipeline() -> dict[str, object]:
    return {
        "stages": {
            "fetch": {
                "always_changed": True,
                "cmd": "python stage.py fetch",
                "outs": [{"reports/fetch.json": {"cache": False}}],
            },
            "compare": {
                "cmd": "python stage.py compare",
                "deps": ["reports/fetch.json"],
                "params": ["compare"],
                "metrics": [{"metrics/ort.json": {"cache": False}}],
                "plots": [
                    {
                        "plots/compare-operators.csv": {
                            "cache": False,
                            "x": "pass_rate",
                            "y": "key",
                            "template": "pass_rates",
                        }
                    }
                ],
            },
        },
        "plots": [
            {
                "metrics/run/known-mismatches.csv": {
                    "x": "key",
                    "y": ["max_abs", "max_abs_bound"],
                    "template": "errors_beside_bounds",
                }
            }
        ],
    }


def _run(cwd: Path, *args: str) -> str:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org")
    env.update(GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.org")
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"{' '.join(args[-3:])}: {proc.stdout}{proc.stderr}"
    return proc.stdout + proc.stderr


def _commit(root: Path, message: str) -> None:
    _run(root, "git", "add", "-A")
    _run(root, "git", "commit", "-q", "-m", message)


@pytest.mark.slow
def test_dvc_exp_metrics_params_plots_and_a_dry_repro_work_across_commits(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    _run(root, "git", "init", "-q", "-b", "main")
    _run(root, *DVC, "init", "-q")
    for kept in ("config", "plots"):
        target = root / ".dvc" / kept
        if (ROOT / ".dvc" / kept).is_dir():
            shutil.copytree(ROOT / ".dvc" / kept, target, dirs_exist_ok=True)
        else:
            shutil.copy(ROOT / ".dvc" / kept, target)
    shutil.copy(ROOT / ".gitignore", root / ".gitignore")
    (root / "reports").mkdir()
    (root / "dvc.yaml").write_text(yaml.safe_dump(_pipeline(), sort_keys=False))
    (root / "params.yaml").write_text("compare:\n  cases: 3\n")
    (root / "stage.py").write_text(_STAGE)

    # The advice every `dvc repro` ends with works: nothing is cached, so there is nothing to
    # push, and the configured remote says so instead of failing.
    assert "dvc push" in _run(root, *DVC, "repro")
    assert "up to date" in _run(root, *DVC, "push")
    _commit(root, "first")
    (root / "params.yaml").write_text("compare:\n  cases: 4\n")
    _run(root, *DVC, "repro")
    _commit(root, "second")
    assert _run(root, "git", "status", "--porcelain") == ""  # every tracked output is in git

    metrics = json.loads(_run(root, *DVC, "metrics", "diff", "HEAD~1", "--json"))
    assert metrics["metrics/ort.json"]["passed"] == {"old": 2, "new": 3, "diff": 1}
    params = json.loads(_run(root, *DVC, "params", "diff", "HEAD~1", "--json"))
    assert params["params.yaml"]["compare.cases"] == {"old": 3, "new": 4, "diff": 1}
    _run(root, *DVC, "plots", "diff", "HEAD~1", "-o", str(tmp_path / "plots-page"))
    page = (tmp_path / "plots-page" / "index.html").read_text()
    assert "op2" in page and "op1" in page  # the operators below 100%

    _run(root, *DVC, "exp", "run", "-S", "compare.cases=5")
    shown = json.loads(_run(root, *DVC, "exp", "show", "--json", "-n", "2"))
    passed = [
        exp["data"]["metrics"]["metrics/ort.json"]["data"]["passed"]
        for rev in shown
        for exp in [rev, *[e["revs"][0] for e in rev.get("experiments") or []]]
        if exp.get("data") and exp["data"].get("metrics")
    ]
    assert sorted(passed) == [2, 3, 4, 4], shown  # HEAD~1, HEAD, the experiment and the workspace

    clone = tmp_path / "clone"
    _run(tmp_path, "git", "clone", "-q", str(root), str(clone))
    dry = _run(clone, *DVC, "repro", "--dry", "--force")
    assert "Running stage 'compare'" in dry
    assert not (clone / "metrics" / "run").exists()  # --dry ran nothing


def test_the_repositorys_tracked_outputs_are_in_git_and_push_has_a_remote() -> None:
    """Every file a stage of ``dvc.yaml`` tracks with ``cache: false`` as a metric, a plot or a
    report another stage depends on is committed, not ignored by git (DVC reads them from git
    for ``exp show``, ``metrics diff``, ``plots diff``; a fresh clone's ``repro --dry`` needs the
    reports later stages depend on); DVC's default remote exists, so the ``dvc push`` every
    ``dvc repro`` advises succeeds."""
    pipeline = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    deps = {d for s in pipeline.values() for d in s.get("deps", [])}
    tracked = [
        next(iter(o))
        for s in pipeline.values()
        for kind in ("metrics", "plots", "outs")
        for o in s.get(kind, [])
        if kind != "outs" or next(iter(o)) in deps
    ]
    assert len(tracked) >= 12
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", *tracked],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    assert ignored == []
    config = (ROOT / ".dvc" / "config").read_text()
    assert "remote = nothing-cached" in config and "url = tmp/nothing-cached" in config


def test_every_error_chart_has_a_log_axis_and_every_mismatch_its_bound_beside_it() -> None:
    """The plots ``dvc plots show`` draws: errors (1e-9 to 1e-2) on a log axis, with a bar for
    the smallest too (a baseline below it); the known mismatches' errors beside their bounds;
    the pass rates one chart per runtime, of the operators below 100% only."""
    doc = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    plots = [next(iter(p.items())) for p in doc["plots"]]
    plots += [next(iter(p.items())) for s in doc["stages"].values() for p in s.get("plots", [])]
    templates = {}
    for name, props in plots:
        template = json.loads((ROOT / ".dvc" / "plots" / f"{props['template']}.json").read_text())
        templates[name] = template
        fields = {props["x"], *([props["y"]] if isinstance(props["y"], str) else props["y"])}
        if fields & {"max_abs", "mean_abs", "max_rel"}:
            x = template["encoding"]["x"]
            assert x["scale"]["type"] == "log" and x["field"] == "error", name
            assert template["encoding"]["x2"] == {"field": "baseline"}, name
    known = templates["metrics/run/known-mismatches.csv"]
    assert known["encoding"]["color"]["field"] == "series"  # each error and its bound
    pass_rates = templates["plots/compare-operators.csv"]
    assert pass_rates["facet"]["column"]["field"] == "runtime"
    assert "< 1" in pass_rates["transform"][0]["filter"]
