"""The provenance report: a status per artifact, lineage drawn as a graph, known failures and
tolerances per family, one page per family, the same bytes on every machine."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from fixture_store import provenance_report
from fixture_store import registry as registry_mod
from fixture_store.cli import main
from fixture_store.objects.store import Store
from fixture_store.registry.files import write_family
from tests.support.htmlpage import Page
from tests.support.reports import REV, chain_project


@pytest.fixture
def pages(project: Path, store: Store, tmp_path: Path) -> dict[str, str]:
    chain_project(project, store)
    built = provenance_report.build(store, registry_mod.load(project))
    written = provenance_report.write_html(built, tmp_path / "site")
    return {p.name: p.read_text() for p in written}


def test_each_artifact_has_its_status_on_its_familys_page(pages: dict[str, str]) -> None:
    assert list(pages) == [
        "index.html",
        "family-archives.html",
        "family-parity.html",
        "family-upstream.html",
    ]
    status = {
        e.attrs["id"]: e.attrs["data-status"]
        for name, text in pages.items()
        if name.startswith("family-")
        for e in Page.parse(text).with_attr("data-row", "tr")
    }
    assert status == {
        "archives/w.tar": "verified",
        "parity/broken.npy": "invalid",
        "parity/large.npy": "gap",
        "parity/out.npy": "verified",
        "upstream/unfetched.bin": "missing",
        "upstream/weights.bin": "verified",
    }


def test_the_index_counts_families_and_lists_what_does_not_verify(pages: dict[str, str]) -> None:
    index = Page.parse(pages["index.html"])
    text = pages["index.html"]
    assert "3 families · 6 artifacts: 1 invalid, 1 missing, 1 gap, 3 verified" in text
    failing = re.search(r"Artifacts that do not verify \((\d+)\)", text)
    assert failing is not None and failing.group(1) == "2"
    links = {e.attrs["href"] for e in index.elements if e.tag == "a"}
    assert {"family-archives.html", "family-parity.html", "family-upstream.html"} <= links


def test_lineage_is_a_graph_from_upstream_through_the_converter_to_the_parity_fixture(
    pages: dict[str, str],
) -> None:
    index = Page.parse(pages["index.html"])
    edges = {e.text for e in index.elements if e.tag == "title" and "→" in e.text}
    assert edges == {
        "family:archives → family:parity: jax-parity (1)",
        "family:upstream → family:archives: convert (1)",
        "family:upstream → family:parity: jax-parity (1)",
        "origin:local files → family:upstream: 2",
        f"upstream:hf://org/model@{REV}/model.safetensors → family:upstream: upstream (1)",
    }
    parity = Page.parse(pages["family-parity.html"])
    chain = {e.text for e in parity.elements if e.tag == "title" and "→" in e.text}
    assert {
        "origin:local files → upstream/weights.bin",
        "upstream/weights.bin → archives/w.tar",
        "archives/w.tar → parity/out.npy",
        "upstream/weights.bin → parity/out.npy",
    } <= chain
    # the boxes link to the artifacts' rows on their families' pages
    targets = {
        e.attrs["href"] for e in parity.elements if e.tag == "a" and e.within[-1:] == ("svg",)
    }
    assert "family-archives.html#archives/w.tar" in targets
    # nothing is fetched: the SVG is inline, its namespace is only a name
    assert parity.remote_urls() == []


def test_a_familys_page_has_its_known_failures_and_tolerances(pages: dict[str, str]) -> None:
    parity = pages["family-parity.html"]
    assert "ort rounds differently" in parity and "provenance/parity.json" in parity
    assert "{&quot;atol&quot;: 1e-05, &quot;metric&quot;: &quot;allclose&quot;" in parity
    assert "Known failures (0)" in pages["family-upstream.html"]


def test_the_pages_hold_nothing_of_this_machine_and_equal_runs_give_equal_bytes(
    project: Path, store: Store, tmp_path: Path
) -> None:
    chain_project(project, store)
    runs = []
    for i in range(2):
        built = provenance_report.build(store, registry_mod.load(project), full=i == 1)
        written = provenance_report.write_html(built, tmp_path / f"run{i}")
        runs.append({p.name: p.read_bytes() for p in written})
    assert runs[0] == runs[1]
    for data in runs[0].values():
        text = data.decode()
        assert str(store.root) not in text and str(project) not in text
        assert str(tmp_path) not in text
    assert "$FIXTURE_STORE_DIR" in runs[0]["family-upstream.html"].decode()


def test_cli_report_writes_the_pages_and_exits_like_verify(
    project: Path, store: Store, tmp_path: Path
) -> None:
    chain_project(project, store)
    site = tmp_path / "site"
    (site).mkdir()
    (site / "family-gone.html").write_text("a family no longer in the registry")
    result = CliRunner().invoke(main, ["report", "--html", str(site)])
    assert result.exit_code == 2, result.output  # an invalid record, as verify says
    assert "provenance report:" in result.stdout and "3 family pages" in result.stdout
    assert "missing: upstream/unfetched.bin" in result.stderr
    assert sorted(p.name for p in site.iterdir()) == [
        "family-archives.html",
        "family-parity.html",
        "family-upstream.html",
        "index.html",
    ]
    result = CliRunner().invoke(
        main, ["report", "--html", str(tmp_path / "one"), "--family", "archives"]
    )
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "one").iterdir()) == [
        "family-archives.html",
        "index.html",
    ]


def test_a_folder_that_cannot_be_written_is_a_clear_error(
    project: Path, store: Store, tmp_path: Path
) -> None:
    chain_project(project, store)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    result = CliRunner().invoke(main, ["report", "--html", str(blocker / "site")])
    assert result.exit_code == 2, result.output
    assert "cannot write the report folder" in result.stderr, result.stderr
    assert "fix: remove" in result.stderr and "Traceback" not in result.output


def test_text_from_the_registry_is_escaped(project: Path, store: Store, tmp_path: Path) -> None:
    chain_project(project, store)
    registry = registry_mod.load(project)
    family = registry.families["archives"]
    write_family(
        registry,
        "archives",
        family.records.values(),
        description="<script>alert('x')</script> & <b>bold</b>",
    )
    built = provenance_report.build(store, registry_mod.load(project))
    pages = provenance_report.write_html(built, tmp_path / "site")
    for page in pages:
        text = page.read_text()
        assert "<script>alert" not in text and "<b>bold" not in text
    assert (
        "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; &lt;b&gt;" in pages[0].read_text()
    )


@pytest.mark.usefixtures("store")
def test_a_regenerated_familys_page_names_the_stage_tolerance_it_is_judged_by(
    project: Path, tmp_path: Path
) -> None:
    """A family whose records state no tolerance but whose stage in params.yaml does is judged
    by the stage's when regenerated: its page says so, never "parity is exact"."""
    import numpy as np
    import yaml

    (project / "data").mkdir()
    np.save(project / "data" / "v.npy", np.arange(3.0))
    added = CliRunner().invoke(
        main, ["add", "data/v.npy", "--name", "toy/v.npy", "--kind", "fixture"]
    )
    assert added.exit_code == 0, added.output
    stage = {"generator": "models/toy.py", "family": "toy", "requirements": ["numpy==2.0.0"],
             "tolerance": {"metric": "allclose", "rtol": 1e-3, "atol": 1e-7}}  # fmt: skip
    (project / "params.yaml").write_text(yaml.safe_dump({"regenerate": {"toy": stage}}))
    result = CliRunner().invoke(main, ["report", "--html", str(tmp_path / "site")])
    assert result.exit_code == 0, result.output
    page = (tmp_path / "site" / "family-toy.html").read_text()
    assert "parity is exact" not in page
    assert "none recorded: regeneration uses its stage&#x27;s, in params.yaml" in page, page
    assert "&quot;rtol&quot;: 0.001" in page


def test_a_page_that_cannot_be_written_is_a_clear_error(
    project: Path, store: Store, tmp_path: Path
) -> None:
    """The folder is there, but a page of it cannot be written (a folder at its name): an error
    naming the page and the fix, exit 2, never a traceback, and the folder left as it was."""
    chain_project(project, store)
    site = tmp_path / "site"
    (site / "index.html").mkdir(parents=True)
    result = CliRunner().invoke(main, ["report", "--html", str(site)])
    assert result.exit_code == 2, result.output
    assert f"cannot write the report folder {site}" in result.stderr, result.stderr
    assert f"{site / 'index.html'} is a folder" in result.stderr
    assert "fix: remove" in result.stderr and "Traceback" not in result.output
    assert (site / "index.html").is_dir()
