"""The documentation site: the getting-started page is the README's tour (the same commands and
code, block for block), and the navigation groups every page under guide, reference or
explanations."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```$", re.M | re.S)
# The parts of README.md the getting-started page carries: from each heading to the next one.
TOUR = ("## Install", "## A five-minute tour for a downstream project")


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _blocks(text: str) -> list[str]:
    return FENCE.findall(text)


def test_the_getting_started_page_has_the_readme_tour_block_for_block() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    page = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    expected = [block for heading in TOUR for block in _blocks(_section(readme, heading))]
    assert len(expected) >= 5
    assert _blocks(page) == expected, (
        "docs/getting-started.md and the README's tour differ: a command or code block changed "
        "in one of them; make the other the same"
    )
    for heading in TOUR:
        assert f"\n{heading}\n" in page


def test_the_navigation_groups_every_page_once() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    nav = config["nav"]
    assert [next(iter(entry)) for entry in nav] == ["Home", "Guide", "Reference", "Explanations"]
    pages = [
        page
        for entry in nav
        for value in entry.values()
        for page in ([value] if isinstance(value, str) else [next(iter(p.values())) for p in value])
    ]
    on_disk = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    assert sorted(pages) == on_disk and len(set(pages)) == len(pages)
    guide = [next(iter(p.values())) for p in nav[1]["Guide"]]
    assert guide[0] == "getting-started.md"
    reference = [next(iter(p.values())) for p in nav[2]["Reference"]]
    assert {"cli.md", "api.md"} <= set(reference)
