"""The documentation site: the getting-started page is the README's tour (the same commands and
code, block for block), and the navigation groups every page under guide, reference or
explanations."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
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


def _console_commands(block: str) -> list[tuple[str, list[str]]]:
    """A console block's commands (continuation lines joined), each with the output lines the
    block shows after it."""
    commands: list[tuple[str, list[str]]] = []
    pending = ""
    for line in block.splitlines():
        if pending or line.startswith("$ "):
            text = (pending + " " + line.strip()) if pending else line[2:]
            pending = text[:-1].rstrip() if text.endswith("\\") else ""
            if not pending:
                commands.append((text, []))
        elif commands and line.strip():
            commands[-1][1].append(line)
    return commands


def test_the_readme_tour_runs_as_written(tmp_path: Path) -> None:
    """Every fixture-store command of the README's tour, run in a fresh project in the order
    written, exits as its comment says (0 when it says nothing) and prints what the tour shows.
    Installing (uv add) and git are a downstream project's own; they are left out."""
    import numpy as np

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    tour = _section(readme, TOUR[1])
    console = [m.group(1) for m in re.finditer(r"^```console\n(.*?)^```$", tour, re.M | re.S)]
    assert len(console) >= 2
    project = tmp_path / "project"
    (project / "tests" / "data").mkdir(parents=True)
    np.savez(project / "tests" / "data" / "logits.npz", logits=np.linspace(0, 1, 12))
    exe = Path(sys.executable).parent / "fixture-store"
    script: list[str] = []
    expected: list[tuple[int, str, int, list[str]]] = []
    for i, (command, shown) in enumerate(c for block in console for c in _console_commands(block)):
        if command.startswith(("uv add", "git ")):
            continue
        said = re.search(r"#.*\bexit (\d)", command)
        line = re.sub(r"\s+#\s.*$", "", command)  # the comment says what it does
        line = line.replace("uv run fixture-store", shlex.quote(str(exe)))
        script.append(f"{{ {line}; }} > out{i} 2>&1; echo $? > rc{i}")
        expected.append((i, command, int(said.group(1)) if said else 0, shown))
    env = {**os.environ, "FIXTURE_STORE_DIR": str(tmp_path / "store")}
    env.pop("FIXTURE_STORE_REGISTRY", None)
    subprocess.run(["bash", "-c", "\n".join(script)], cwd=project, env=env, check=True)
    for i, command, code, shown in expected:
        output = (project / f"out{i}").read_text()
        rc = int((project / f"rc{i}").read_text())
        assert rc == code, f"{command!r} exited {rc}, the tour says {code}:\n{output}"
        for line in shown:
            assert line.split("sha256:")[0].rstrip() in output, f"{command!r}: {line!r}"
    assert len(expected) >= 6


def test_the_install_commands_work_before_the_package_is_published() -> None:
    """fixture-store is on no package registry: every install command of the README and of
    getting started names a git URL at a commit (a wheel built with ``uv build`` is the other way
    the text gives), the tour's install brings pytest, and the tests' command names the tools
    the differential tests need, with the command that installs them."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for text in (readme, (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")):
        install = _section(text, TOUR[0])
        adds = [c for block in _blocks(install) for c, _ in _console_commands(block)]
        assert adds and all(re.match(r"uv add .*@ git\+https://\S+@<40-hex>", c) for c in adds)
        assert "uv build" in install and "file:///" in install
        tour = [
            c for block in _blocks(_section(text, TOUR[1])) for c, _ in _console_commands(block)
        ]
        assert any(c.startswith("uv add") and " pytest" in c for c in tour)
    commands = _section(readme, "## The two commands")
    assert "apt-get install -y zstd lz4 libarchive-tools unzip" in commands


def test_the_site_opened_from_disk_says_how_to_serve_it_for_search() -> None:
    """Search cannot read its index from ``file://``: the site loads a script that says so in
    the search box, and the docs' home page says how to serve the built site."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert "js/search-from-disk.js" in config["extra_javascript"]
    script = (ROOT / "docs" / "js" / "search-from-disk.js").read_text()
    assert 'window.location.protocol !== "file:"' in script and "http.server -d site" in script
    assert "python -m http.server -d site" in (ROOT / "docs" / "index.md").read_text()
