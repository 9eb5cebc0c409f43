"""The compare report: a contents bar whose links land, rows the filters can narrow, a pass
matrix that leads to the failures, nothing fetched, equal runs giving equal bytes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from fixture_store.objects.store import Store
from fixture_store.parity.cases import Report
from fixture_store.parity.report_html import render, result_anchor, write_report
from fixture_store.parity.results import Outcome
from tests.support.htmlpage import Page
from tests.support.reports import EDITED, TAMPERED, compare_report


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Report]:
    root = tmp_path_factory.mktemp("compare")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_STATE_HOME", str(root / "state"))
        mp.setenv("FIXTURE_STORE_CONFIG", str(root / "config.toml"))
        (root / "project" / "provenance").mkdir(parents=True)
        mp.chdir(root / "project")
        yield compare_report(root / "project", Store.at(root / "store").ensure())


@pytest.fixture(scope="module")
def page(report: Report) -> Page:
    return Page.parse(render(report))


def test_the_contents_bar_links_every_section_and_each_link_lands(page: Page) -> None:
    targets = page.fragments(within="nav")
    assert targets[:5] == ["outcomes", "known-failures", "matrix", "histograms", "results"]
    assert set(targets) <= page.ids
    headings = {e.attrs["id"] for e in page.elements if e.tag == "h2"}
    assert headings == set(targets)
    # every link on the page lands on something of the page
    assert set(page.fragments()) <= page.ids


def test_every_result_other_than_pass_has_a_row_the_filters_narrow(
    report: Report, page: Page
) -> None:
    rows = {e.attrs["id"]: e for e in page.with_attr("data-row", "tr")}
    expected = {
        result_anchor(r): r
        for r in report.results
        if r.outcome is not Outcome.PASS or r.now_passing
    }
    assert set(rows) == set(expected)
    assert rows[f"ort:{EDITED}"].attrs["data-outcome"] == "known-failure"
    assert rows[f"reference:{EDITED}"].attrs["data-outcome"] == "mismatch"
    assert rows["reference:onnx-node/test_relu"].attrs["data-outcome"] == "now-passing"
    assert rows[f"ort:{TAMPERED}"].attrs["data-outcome"] == "refused"
    assert {r.attrs["data-operator"] for r in rows.values()} == {"Abs", "Relu", "(not loaded)"}
    boxes = {(e.attrs["name"], e.attrs["value"]) for e in page.with_attr("name", "input")}
    assert boxes == {
        ("outcome", "known-failure"),
        ("outcome", "mismatch"),
        ("outcome", "now-passing"),
        ("outcome", "refused"),
        ("runtime", "ort"),
        ("runtime", "reference"),
    }
    options = [e.attrs["value"] for e in page.elements if e.tag == "option"]
    assert options == ["", "(not loaded)", "Abs", "Add", "Relu"]


def test_the_pass_matrix_lists_operators_with_failures_and_links_to_them(page: Page) -> None:
    rows = {e.attrs["id"] for e in page.with_attr("data-only", "tr")}
    assert rows == {"op:Abs", "op:Relu", "op:(not loaded)"}
    sets = [json.loads(a.attrs["data-set"]) for a in page.with_attr("data-set", "a")]
    links = {(s["operator"], s["runtime"]) for s in sets}
    assert links == {
        ("Abs", "ort"),
        ("Abs", "reference"),
        ("(not loaded)", "ort"),
        ("(not loaded)", "reference"),
        ("Relu", "ort"),
        ("Relu", "reference"),
    }
    assert all(a.attrs["href"] == "#results" for a in page.with_attr("data-set", "a"))
    chips = {e.attrs["data-value"]: e.text for e in page.with_attr("data-only", "span")}
    assert chips == {"Add": "Add 2"}


def test_the_page_fetches_nothing_and_equal_reports_give_equal_bytes(
    report: Report, tmp_path: Path
) -> None:
    text = render(report)
    assert Page.parse(text).remote_urls() == []
    assert "<link" not in text and "src=" not in text
    first = write_report(report, tmp_path / "a.html").read_bytes()
    assert write_report(report, tmp_path / "b.html").read_bytes() == first
