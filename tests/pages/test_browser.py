"""Every page the project writes, opened in a real browser from disk with the network blocked:
the compare report (the run page and the tracked page), the provenance report (index and a
family page), the plots page when the project configures an offline DVC template, the docs
home and the CLI reference.

Each page is opened headless in Debian's Chromium at 1280 px (see ``tests/support/browser.py``),
screenshot to ``out/screenshots/`` (kept by CI as artifacts), and must make no request that
leaves the machine, have no element wider than the window, and show its key figures.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fixture_store import provenance_report
from fixture_store import registry as registry_mod
from fixture_store.objects.store import Store
from fixture_store.parity.parts import Part
from fixture_store.parity.report_html import write_report
from tests.support.browser import Browser, Opened, browser
from tests.support.reports import EDITED, LONG, TAMPERED, chain_project, compare_report

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "out" / "screenshots"


@pytest.fixture(scope="module")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    with browser(tmp_path_factory.mktemp("chromium") / "profile") as b:
        yield b


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pages of small real inputs, written as the commands write them."""
    root = tmp_path_factory.mktemp("pages")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_STATE_HOME", str(root / "state"))
        mp.setenv("FIXTURE_STORE_CONFIG", str(root / "config.toml"))
        for name in ("compare", "chain"):
            (root / name / "provenance").mkdir(parents=True)
        mp.chdir(root / "compare")
        report = compare_report(root / "compare", Store.at(root / "compare-store").ensure())
        write_report(report, root / "compare.html", Part.TRACKED)
        write_report(report, root / "run-compare.html")
        store = Store.at(root / "chain-store").ensure()
        chain_project(root / "chain", store)
        built = provenance_report.build(store, registry_mod.load(root / "chain"))
        provenance_report.write_html(built, root / "provenance")
    return root


def _clean(opened: Opened) -> None:
    assert opened.outside == (), f"requests that would leave the machine: {opened.outside}"
    assert opened.too_wide == (), f"wider than the 1280 px window: {opened.too_wide[:10]}"
    assert opened.screenshot.stat().st_size > 0


def test_the_compare_run_page(chromium: Browser, built: Path) -> None:
    opened = chromium.open(built / "run-compare.html", SHOTS / "compare-run.png")
    _clean(opened)
    for figure in (
        "Results other than pass (7)",
        "Operators with a result other than pass (3)",
        "Error histograms",
        TAMPERED,
        EDITED,
        LONG,
        "expected output edited",
    ):
        assert figure in opened.text, figure


def test_the_tracked_compare_page_and_its_filters(chromium: Browser, built: Path) -> None:
    opened = chromium.open(built / "compare.html", SHOTS / "compare.png")
    _clean(opened)
    assert "Results other than pass (7)" in opened.text
    assert "Error histograms" not in opened.text  # machine-dependent: the run page has them
    # a cell of the pass matrix sets the filters to its operator and runtime
    page = chromium.page()
    try:
        page.goto((built / "compare.html").as_uri())
        visible = "#results ~ table tr[data-row]:not([hidden])"
        assert page.locator(visible).count() == 7
        page.locator("td a[data-set*='\"Abs\"'][data-set*='\"reference\"']").click()
        rows = page.locator(visible)
        assert rows.count() == 1 and rows.first.get_attribute("id") == f"reference:{EDITED}"
        assert page.locator(".shown").first.inner_text() == "1"
        page.locator("#filters button[type=reset]").click()
        page.wait_for_function("document.querySelector('.shown').textContent === '7'")
    finally:
        page.close()


def test_the_provenance_report(chromium: Browser, built: Path) -> None:
    index = chromium.open(built / "provenance" / "index.html", SHOTS / "provenance-index.png")
    _clean(index)
    assert "3 families · 6 artifacts: 1 invalid, 1 missing, 1 gap, 3 verified" in index.text
    assert "Artifacts that do not verify (2)" in index.text
    family = chromium.open(
        built / "provenance" / "family-parity.html", SHOTS / "provenance-family.png"
    )
    _clean(family)
    for figure in ("Lineage", "out.npy", "w.tar", "weights.bin", "ort rounds differently"):
        assert figure in family.text, figure


@pytest.fixture(scope="module")
def docs_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(site)],
        cwd=ROOT,
        check=True,
    )
    return site


def test_the_docs_home_and_the_cli_reference(chromium: Browser, docs_site: Path) -> None:
    home = chromium.open(docs_site / "index.html", SHOTS / "docs-home.png")
    _clean(home)
    for figure in ("Getting started", "Guide", "Reference", "Explanations", "API reference"):
        assert figure in home.text, figure
    cli = chromium.open(docs_site / "cli.html", SHOTS / "docs-cli.png")
    _clean(cli)
    for figure in ("fixture-store report --html reports/provenance", "Examples", "Usage:"):
        assert figure in cli.text, figure


def _plots_template() -> Path | None:
    """The offline HTML template the project gives ``dvc plots show``, if it configures one."""
    found = subprocess.run(
        [sys.executable, "-m", "dvc", "config", "plots.html_template"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    value = found.stdout.strip()
    return (ROOT / ".dvc" / value).resolve() if found.returncode == 0 and value else None


# It runs DVC in this checkout, which takes the repository's lock (tests/test_dvc_pipeline.py).
@pytest.mark.xdist_group("dvc-in-this-checkout")
def test_the_plots_page(chromium: Browser, tmp_path: Path) -> None:
    template = _plots_template()
    if template is None:
        pytest.skip(
            "the project configures no offline template for dvc plots (plots.html_template)"
        )
    project = tmp_path / "plots"
    project.mkdir()
    (project / "plots").mkdir()
    (project / "plots" / "ops.csv").write_text("key,pass_rate\nAbs (ort),1.0\nAdd (ort),0.5\n")
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    subprocess.run([sys.executable, "-m", "dvc", "init", "-q"], cwd=project, check=True, env=env)
    shutil.copy(template, project / ".dvc" / template.name)
    subprocess.run(
        [sys.executable, "-m", "dvc", "config", "plots.html_template", template.name],
        cwd=project,
        check=True,
        env=env,
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "dvc",
            "plots",
            "show",
            "plots/ops.csv",
            "-x",
            "pass_rate",
            "-y",
            "key",
            "--template",
            "bar_horizontal",
            "-o",
            "out",
        ],
        cwd=project,
        check=True,
        env=env,
        capture_output=True,
    )
    opened = chromium.open(
        project / "out" / "index.html", SHOTS / "plots.png", wait_for="svg, canvas"
    )
    _clean(opened)
