"""Real DVC: `dvc repro` runs the regeneration stages, a second run does nothing, and a changed
param makes exactly its stage stale; the last stage's summary is readable as DVC metrics."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.regen_project import make_project, set_scale

FS = str(Path(sys.executable).parent / "fixture-store")


def _stage(name: str) -> dict[str, object]:
    return {
        "cmd": f"{FS} regenerate {name} --fetch --python {sys.executable} "
        f"--scratch out/{name} --report reports/{name}.json",
        "deps": ["models/toy.py"],
        "params": [f"regenerate.{name}"],
        "outs": [{f"reports/{name}.json": {"cache": False}}],
    }


def run(cwd: Path, *args: str, env: dict[str, str]) -> str:
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr


@pytest.mark.slow
def test_repro_runs_once_and_tracks_params(tmp_path: Path) -> None:
    root = make_project(tmp_path / "proj", stages=("alpha", "beta"))
    env = {
        **os.environ,
        "FIXTURE_STORE_DIR": str(tmp_path / "store"),
        "FIXTURE_STORE_REGISTRY": str(root),
    }
    dvc = (sys.executable, "-m", "dvc")
    run(root, "git", "init", "-q", env=env)
    run(root, *dvc, "init", "-q", env=env)
    run(root, *dvc, "config", "core.analytics", "false", env=env)
    pipeline = {
        "stages": {
            "alpha": _stage("alpha"),
            "beta": _stage("beta"),
            "verify": {
                "cmd": f"{FS} regenerate-summary reports/alpha.json reports/beta.json "
                "--metrics metrics.json --plots plots",
                "deps": ["reports/alpha.json", "reports/beta.json"],
                "metrics": [{"metrics.json": {"cache": False}}],
            },
        }
    }
    (root / "dvc.yaml").write_text(yaml.safe_dump(pipeline, sort_keys=False))

    first = run(root, *dvc, "repro", env=env)
    for stage in ("alpha", "beta", "verify"):
        assert f"Running stage '{stage}'" in first
    assert "2 new" in first  # each toy stage produces two artifacts, none registered yet
    metrics = json.loads(run(root, *dvc, "metrics", "show", "--json", env=env))
    summary = next(iter(metrics.values()))["data"]["metrics.json"]["data"]
    assert summary == {"pass": 0, "drift": 0, "verified": 0, "new": 4}

    second = run(root, *dvc, "repro", env=env)
    assert "Running stage" not in second

    set_scale(root, 3.0, stage="beta")
    status = run(root, *dvc, "status", env=env)
    assert "beta" in status and "alpha" not in status
    third = run(root, *dvc, "repro", env=env)
    assert "Running stage 'beta'" in third and "Running stage 'alpha'" not in third


ROOT = Path(__file__).resolve().parents[1]


def _families(cmd: str) -> set[str]:
    words = cmd.split()
    return {words[i + 1] for i, w in enumerate(words) if w == "--family"}


def test_the_checkpoint_chain_starts_from_safetensors() -> None:
    params = yaml.safe_load((ROOT / "params.yaml").read_text())["regenerate"]
    weights, checkpoints = params["pytorch-weights"], params["checkpoints"]
    assert weights["family"] == "pytorch-weights"
    assert all(i.startswith("onnx-pytorch-converted/") for i in weights["inputs"])
    assert checkpoints["inputs"] == ["pytorch-weights/*"]
    # Both ends of the safetensors step run the one pinned package.
    pins = {r for r in weights["requirements"] if r.startswith("safetensors==")}
    assert len(pins) == 1 and pins <= set(checkpoints["requirements"])
    cases = {i.rsplit("/", 1)[1] for i in weights["inputs"]}
    assert cases == {i.rsplit("/", 1)[1] for i in params["jax-parity"]["inputs"][1:]}


def test_the_projects_pipeline_fetches_what_it_reads_and_verifies_last() -> None:
    pipeline = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    params = yaml.safe_load((ROOT / "params.yaml").read_text())["regenerate"]
    for name, stage in pipeline.items():
        for dep in stage.get("deps", []):
            assert (ROOT / dep).exists() or dep.startswith("reports/"), f"{name}: {dep}"
    assert next(iter(pipeline)) == "fetch"
    fetched = _families(pipeline["fetch"]["cmd"])
    assert {f"provenance/{f}.json" for f in fetched} == set(pipeline["fetch"]["deps"])
    producer = {spec.get("family", n): n for n, spec in params.items()}
    produced = set(producer)
    for name, spec in params.items():
        stage = pipeline[name]
        assert f"regenerate.{name}" in stage["params"]
        assert f"provenance/{spec.get('family', name)}.json" in stage["deps"], name
        read = {pattern.split("/", 1)[0] for pattern in spec.get("inputs", [])}
        if name == "onnx-node":
            read.add("onnx-node")  # compared with the fetched distribution's files
        for family in read:
            assert family in fetched | produced, f"{name} reads {family}, which nothing fetches"
            assert f"provenance/{family}.json" in stage["deps"], f"{name}: {family}"
        if read & fetched:
            assert {"reports/fetch.json", "reports/checkpoints.json"} & set(stage["deps"]), name
        for family in read & produced - {spec.get("family", name)}:
            # DVC runs the producer first only if this stage depends on the producer's report
            report = f"reports/{producer[family]}.json"
            assert report in stage["deps"], f"{name} reads {family}: needs {report}"
            assert list(pipeline).index(producer[family]) < list(pipeline).index(name), name
    compared = _families(pipeline["compare"]["cmd"])
    assert compared <= fetched
    assert "provenance/onnx-known-failures.json" in pipeline["compare"]["deps"]
    verify = pipeline["verify"]
    assert list(pipeline)[-1] == "verify"
    restore, summary, report = verify["cmd"]
    assert restore.split() == ["fixture-store", "fetch", "--all", "--regenerate"]
    assert "--all" in summary.split() and "--full" in summary.split()
    # the provenance report of every family, after the full verify (whose cache it reuses)
    assert report.split() == ["fixture-store", "report", "--html", "reports/provenance"]
    assert {"reports/provenance": {"cache": False}} in verify["outs"]
    # DVC cannot see the store: the stages that bring its bytes back always run
    assert pipeline["fetch"]["always_changed"] is True
    assert verify["always_changed"] is True
    outs = {next(iter(o)) for n, s in pipeline.items() if n != "verify" for o in s["outs"]}
    json_outs = {o for o in outs if o.endswith(".json")}
    assert json_outs <= set(verify["deps"]), "verify must run after every other stage"


def test_every_stage_that_judges_depends_on_the_code_that_judges() -> None:
    """A stage whose tracked report holds outcomes (regeneration's bit-identical / within /
    drift, compare's pass / known failure) reruns when the code deciding them changes: the
    tolerance value and its parts (registry/), the metrics (numerics/) and the comparison
    (parity/). A change to one of them that no dependency named kept a stale report."""
    pipeline = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    judging = [
        n for n, s in pipeline.items() if " regenerate " in f" {s['cmd']} " or n == "compare"
    ]
    assert len(judging) >= 6
    for name in judging:
        deps = set(pipeline[name]["deps"])
        missing = {
            "fixture_store/parity",
            "fixture_store/numerics",
            "fixture_store/registry",
        } - deps
        assert not missing, f"{name} does not depend on {sorted(missing)}"


def _network_urls(page: str) -> list[str]:
    """Every address the page would load: its elements' src and href attributes and CSS url()s
    that name a network scheme (a link's href in a library's menu is not loaded)."""
    from html.parser import HTMLParser

    found: list[str] = []

    class Collect(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            for name, value in attrs:
                loads = name == "src" or (name == "href" and tag == "link")
                if loads and value and "//" in value:
                    found.append(f"<{tag} {name}={value}>")

    Collect().feed(page)
    return found + [u for u in page.split("url(")[1:] if u.lstrip("'\"").startswith("http")]


@pytest.mark.slow
def test_dvc_plots_show_writes_a_page_that_renders_offline(tmp_path: Path) -> None:
    """The project's html template carries vega, vega-lite and vega-embed: the page `dvc plots
    show` writes loads nothing from a network (DVC's own page loads them from a CDN)."""
    import shutil

    root = tmp_path / "proj"
    root.mkdir()
    env = {**os.environ}
    dvc = (sys.executable, "-m", "dvc")
    run(root, "git", "init", "-q", env=env)
    run(root, *dvc, "init", "-q", env=env)
    shutil.copytree(ROOT / ".dvc" / "plots", root / ".dvc" / "plots")
    shutil.copy(ROOT / ".dvc" / "config", root / ".dvc" / "config")
    (root / "errors.csv").write_text("file,max_abs\na,1e-7\nb,3e-7\n")
    run(root, *dvc, "plots", "show", "errors.csv", "-x", "max_abs", "-y", "file", env=env)
    page = (root / "dvc_plots" / "index.html").read_text()
    assert _network_urls(page) == []
    assert "vegaEmbed(" in page and "/* vega-lite 5." in page and "{plot_divs}" not in page
    template = ROOT / ".dvc" / "plots" / "offline.html"
    assert template.stat().st_size < 1_500_000
    assert (ROOT / ".dvc" / "plots" / "vendor" / "LICENSE.vega-embed").is_file()
    # DVC's default page, for contrast, is what the check catches.
    (root / ".dvc" / "config").write_text("[core]\n    analytics = false\n")
    run(root, *dvc, "plots", "show", "errors.csv", "-o", "default", env=env)
    assert _network_urls((root / "default" / "index.html").read_text())


@pytest.mark.slow
def test_dvc_metrics_show_fits_in_100_columns(tmp_path: Path) -> None:
    """The metrics files the project's pipeline declares, written by the real writers with
    five-digit counts, print as a table at most 100 characters wide."""
    from fixture_store.parity.cases import Report
    from fixture_store.parity.report_metrics import write_metrics
    from fixture_store.parity.results import CaseResult, Outcome
    from fixture_store.regenerate.summary import Summary, write

    pipeline = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    declared = [next(iter(m)) for s in pipeline.values() for m in s.get("metrics", [])]
    compare_cmd = pipeline["compare"]["cmd"].split()
    template = compare_cmd[compare_cmd.index("--metrics") + 1]
    root = tmp_path / "proj"
    root.mkdir()
    env = {**os.environ}
    dvc = (sys.executable, "-m", "dvc")
    run(root, "git", "init", "-q", env=env)
    run(root, *dvc, "init", "-q", env=env)
    results = tuple(
        CaseResult(f"c/{i}", rt, Outcome.PASS if i % 9 else Outcome.KNOWN_FAILURE)
        for i in range(20_000)
        for rt in ("ort", "reference")
    )
    written = write_metrics(Report(("ort", "reference"), results), root / template)
    files = {"bit_identical": 99_999, "within_tolerance": 99_999, "drift": 0}
    summary = Summary(
        {"s": {"ok": True, "artifacts": 1, "files": files}}, {"verified": 99_999}, (), (), ()
    )
    write(summary, root / "metrics" / "regeneration.json", None)
    names = sorted([*(str(p.relative_to(root)) for p in written), "metrics/regeneration.json"])
    assert names == sorted(declared)
    stages = {
        "stages": {"m": {"cmd": "true", "metrics": [{m: {"cache": False}} for m in declared]}}
    }
    (root / "dvc.yaml").write_text(yaml.safe_dump(stages))
    shown = run(root, *dvc, "metrics", "show", env=env)
    lines = shown.splitlines()
    assert len(lines) == len(declared) + 1, shown
    assert max(len(line) for line in lines) <= 100, shown
    assert "17777" in shown and "2223" in shown and "99999" in shown


# DVC takes a lock on the repository it runs in: the tests that run it in this checkout share a
# group, so that xdist never runs two of them at once.
@pytest.mark.xdist_group("dvc-in-this-checkout")
def test_the_committed_lock_records_the_committed_dependencies() -> None:
    """``dvc.lock`` holds the hash of every committed file a stage depends on (its generator,
    the library code that judges): a change to one without a refreshed lock makes a fresh
    clone's ``dvc repro`` rerun the stage and rewrite ``dvc.lock``, so ``git status`` is not
    clean. Outputs of other stages (reports, ignored by git) are not committed: not checked."""
    status = subprocess.run(
        [sys.executable, "-m", "dvc", "status", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    tracked = set(
        subprocess.run(
            ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.splitlines()
    )

    def committed(path: str) -> bool:
        return path in tracked or any(t.startswith(path.rstrip("/") + "/") for t in tracked)

    stale = {
        f"{stage}: {path}"
        for stage, changes in json.loads(status.stdout).items()
        for change in changes
        if isinstance(change, dict)
        for path, how in change.get("changed deps", {}).items()
        if how == "modified" and committed(path)
    }
    assert not stale, (
        f"dvc.lock is stale for {sorted(stale)}: run `uv run dvc repro` in a fresh clone "
        "(an empty FIXTURE_STORE_DIR is the check CI makes) and commit its dvc.lock"
    )
