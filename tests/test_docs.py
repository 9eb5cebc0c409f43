"""The documentation site: the getting-started page is the README's tour (the same commands and
code, block for block), and the navigation groups every page under guide, reference or
explanations."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
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


LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")


def _prose(text: str) -> str:
    """Markdown text with every link replaced by its text: the README links into docs/ and the
    repository, the site's pages link to each other."""
    return LINK.sub(r"\1", text)


def test_the_getting_started_page_is_the_readme_install_and_tour_word_for_word() -> None:
    """Not only the commands and code: the words too (the extras list once lacked ``attest`` on
    one side), links aside."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    page = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    assert len(_blocks(_section(readme, TOUR[1]))) >= 5
    for heading in TOUR:
        assert _prose(_section(page, heading)) == _prose(_section(readme, heading)), (
            f"docs/getting-started.md and the README differ under {heading!r}: a word, command "
            "or code block changed in one of them; make the other the same"
        )


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


def test_the_home_page_has_a_row_for_every_page_in_the_navigations_order() -> None:
    """docs/index.md lists every page of each group of the navigation, in its order, under the
    group's name; the parity row names every metric the registry reads."""
    from fixture_store.registry.metrics import METRICS

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    for group in config["nav"][1:]:
        ((name, pages),) = group.items()
        table = index[index.index(f"**{name}**") :].split("\n\n")[1]
        rows = re.findall(r"^\| \[[^\]]+\]\(([\w.-]+\.md)\)", table, re.M)
        assert rows == [next(iter(p.values())) for p in pages], f"the {name} table of index.md"
    (parity,) = re.findall(r"^\| \[[^\]]+\]\(parity\.md\) \|(.*)$", index, re.M)
    assert set(re.findall(r"\w+", parity)) >= set(METRICS), parity


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


# What differs from one run of a sample to the next: an NPZ's digest (it holds the time it was
# written) and a duration; with ``numbers``, any count (a sample made on another project).
# Anything else in a sample is what the program prints, to the letter: a digest cut short
# (``sha256:66d9d97b…``) or a number grouped with commas where the program prints none matches
# nothing.
_DIGEST = r"sha256:[0-9a-f]{64}"
_DURATION = r"in [0-9]+\.[0-9]+s"


def sample_pattern(line: str, *, numbers: bool = False) -> re.Pattern[str]:
    """A line of a documented sample as the pattern of the line the program prints."""
    varies = re.compile(f"{_DIGEST}|{_DURATION}" + ("|[0-9]+" if numbers else ""))
    pattern, at = "", 0
    for m in varies.finditer(line):
        text = m.group()
        same = (
            _DIGEST
            if text.startswith("sha256:")
            else _DURATION
            if text.startswith("in ")
            else "[0-9]+"
        )
        pattern += re.escape(line[at : m.start()]) + same
        at = m.end()
    return re.compile(pattern + re.escape(line[at:]))


def assert_shown(command: str, shown: list[str], output: str, *, numbers: bool = False) -> None:
    """Every line a sample shows after ``command`` is a line it printed."""
    printed = [line.rstrip() for line in output.splitlines()]
    for line in shown:
        pattern = sample_pattern(line.rstrip(), numbers=numbers)
        assert any(pattern.fullmatch(p) for p in printed), (
            f"{command!r}: the docs show {line!r}; it printed:\n{output}"
        )


# A file a code block is written to: the prose just before it says "in `PATH`:".
_WRITTEN_TO = re.compile(r"\bin\s+`([\w./-]+)`:\s*$")
_STEP = re.compile(r"^```(\w+)\n(.*?)^```$", re.M | re.S)


def _steps(text: str) -> list[tuple[str, str, str]]:
    """The fenced blocks of ``text`` in order: (language, block, the prose before it)."""
    steps, at = [], 0
    for m in _STEP.finditer(text):
        steps.append((m.group(1), m.group(2), text[at : m.start()]))
        at = m.end()
    return steps


def _tour_script(readme: str, project: Path) -> tuple[str, list[tuple[int, str, int, list[str]]]]:
    """The install and the tour as one bash script run in ``project``, in the README's order,
    each command's output and exit status kept: console commands as written, a Python block the
    prose puts in a file written there, any other Python block run with ``uv run python``."""
    script: list[str] = ["set -u"]
    expected: list[tuple[int, str, int, list[str]]] = []

    def run(command: str, line: str, shown: list[str]) -> None:
        i = len(expected)
        said = re.search(r"#.*\bexit (\d)", command)
        script.append(f"{{ {line}\n}} > {project}/.out{i} 2>&1; echo $? > {project}/.rc{i}")
        expected.append((i, command, int(said.group(1)) if said else 0, shown))

    for heading in TOUR:
        for language, block, before in _steps(_section(readme, heading)):
            if language == "console":
                for command, shown in _console_commands(block):
                    run(command, re.sub(r"\s+#\s.*$", "", command), shown)
            elif language == "python" and (into := _WRITTEN_TO.search(before)):
                script.append(
                    f"cat > {shlex.quote(into.group(1))} <<'PYTHON_EOF'\n{block}PYTHON_EOF"
                )
            elif language == "python":
                run(block, f"uv run python - <<'PYTHON_EOF'\n{block}PYTHON_EOF", [])
            else:
                assert language == "json", f"a {language} block the tour test cannot run"
                _check_tolerance(block)
    return "\n".join(script), expected


def _check_tolerance(block: str) -> None:
    """The tour's tolerance sample is one the registry reads."""
    from fixture_store.registry import Tolerance, Where

    tolerance = json.loads("{" + block + "}")["tolerance"]
    assert Tolerance.from_json(tolerance, Where("README.md", "reference/logits.npz")).to_json()


def _names_in_prose(text: str) -> set[str]:
    """Every `family/name` the prose names in backticks (no pattern, no placeholder)."""
    return set(re.findall(r"`([a-z0-9][\w-]*/[\w./-]*[\w])`", _prose(text)))


@pytest.mark.slow
def test_the_readme_install_and_tour_run_as_written_in_a_fresh_project(tmp_path: Path) -> None:
    """The README's install line and every command and code block of its tour, run literally
    in a fresh ``uv init`` project beside a checkout named ``fixture-store`` (this one, at its
    HEAD commit: the install pins a commit), in the order written: each exits as its comment
    says (0 when it says nothing; the damage step 1), prints what the README shows (digests of
    an NPZ and durations aside), and every file or artifact name the prose gives exists in the
    tour's project or in this repository."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (tmp_path / "fixture-store").symlink_to(ROOT)
    project = tmp_path / "project"
    # uv's settings of this machine (its index, its cache) hold, but not those that would make
    # the fresh project use another environment or lock (this repository's run sets some).
    own = {"VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT", "UV_PROJECT", "UV_FROZEN", "UV_LOCKED",
           "UV_NO_SYNC", "UV_NO_PROJECT", "UV_WORKING_DIRECTORY"}  # fmt: skip
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("FIXTURE_STORE_")},
        "FIXTURE_STORE_DIR": str(tmp_path / "store"),
        "UV_OFFLINE": "1",  # everything it installs is in uv's cache: this repository's own
    }
    for name in own:
        env.pop(name, None)
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    subprocess.run(
        ["uv", "init", "-q", "--no-package", "--vcs", "git", "--no-readme", "--python", python,
         str(project)],
        env=env, check=True, capture_output=True,
    )  # fmt: skip
    script, expected = _tour_script(readme, project)
    subprocess.run(["bash", "-c", script], cwd=project, env=env, check=True)
    for i, command, code, shown in expected:
        output = (project / f".out{i}").read_text()
        rc = int((project / f".rc{i}").read_text())
        assert rc == code, f"{command!r} exited {rc}, the README says {code}:\n{output}"
        assert_shown(command, shown, output)
    assert len(expected) >= 8
    from fixture_store.registry import files

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    built = f"dist/fixture_store-{version}-py3-none-any.whl"  # what `uv build` writes
    for heading in TOUR:
        for name in _names_in_prose(_section(readme, heading)):
            known = name == built or any(
                (root / name).exists() or _registered(files.load_family(root, family), name)
                for root in (project, ROOT)
                for family in [name.split("/", 1)[0]]
            )
            assert known, f"the README names {name!r}, which exists nowhere"


def _registered(family: Any, name: str) -> bool:
    """Whether ``name`` is a record of ``family`` (a family file read alone, or None)."""
    return family is not None and name in family.kinds()


def test_no_install_command_is_a_placeholder() -> None:
    """Every install command of the README and of getting started is one a user can run as
    it is (the tour test runs the README's): no host, owner, commit or path to fill in. The
    tests' command names the tools the differential tests need, with the command that installs
    them."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for text in (readme, (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")):
        install = _section(text, TOUR[0])
        adds = [c for block in _blocks(install) for c, _ in _console_commands(block)]
        assert adds and all(c.startswith("uv add --dev ") and " pytest" in c for c in adds)
        for command in adds:
            assert not re.search(r"HOST|OWNER|<[\w-]+>|/path/to/", command), command
        assert "uv build" in install and "file://$PWD/" in install
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


def test_every_documented_install_of_fixture_store_names_where_it_comes_from() -> None:
    """Until fixture-store is on a package registry, an install command anywhere in the docs
    (a console line or an indented one) names a checkout or a wheel, as the README's does: a
    bare ``uv add 'fixture-store[attest]'`` finds nothing."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    command = re.compile(r"^(?:\$ |    )(uv add .*fixture-store.*)$", re.M)
    found = {p.name: command.findall(p.read_text(encoding="utf-8")) for p in pages}
    assert found["attestations.md"] and found["video.md"]
    for page, adds in found.items():
        for add in adds:
            assert re.search(r"fixture-store(\[[\w,]+\])? @ (git\+)?file://\$PWD/", add), (
                f"{page}: {add!r} installs fixture-store from nowhere"
            )
