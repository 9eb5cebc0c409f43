"""The one name grammar end to end (DESIGN 17): names generated from the accepted grammar go
through import, add, verify, fetch, a tree's checkout, the HTML report and the terminal and come
back byte for byte; near misses are refused by each with the same reason, and refuse only
themselves (DESIGN 20)."""

from __future__ import annotations

import hashlib
import html
import json
import os
import shlex
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixture_store.objects import names
from tests.support.cli import run
from tests.support.importing import registered
from tests.support.names import ACCEPTED, MISSES, distinct, reason

# Two to four names a project ships, and one or two near misses listed beside them.
FIXTURE = ("--kind", "fixture")
BATCHES = st.lists(ACCEPTED, min_size=2, max_size=4).filter(distinct)


@contextmanager
def _project() -> Iterator[tuple[Path, list[str]]]:
    """A project folder and the global options that point the CLI at it and its own store."""
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp, "project")
        (project / "provenance").mkdir(parents=True)
        yield project, ["--store", str(Path(tmp, "store")), "--registry", str(project)]


def _write(folder: Path, batch: list[str]) -> None:
    for name in batch:
        path = folder.joinpath(*name.split("/"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(name.encode() + b"!")


def _sums(batch: list[str], misses: list[str]) -> str:
    """``sha256sum`` output listing every name (as the tool writes names without a newline)."""
    return "".join(f"{_hex(n)}  {n}\n" for n in (*batch, *misses))


def _pooch(batch: list[str], misses: list[str]) -> str:
    """A pooch registry listing every name, quoted as pooch's own reader splits a line."""
    return "".join(f"{shlex.quote(n)} {_hex(n)}\n" for n in (*batch, *misses))


def _hex(name: str) -> str:
    return hashlib.sha256(name.encode() + b"!").hexdigest()


def _checked_out(folder: Path) -> set[bytes]:
    return {
        os.fsencode(os.path.relpath(os.path.join(top, f), folder))
        for top, _, files in os.walk(folder)
        for f in files
    }


@settings(
    max_examples=3,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(batch=BATCHES, misses=st.lists(MISSES, min_size=1, max_size=2))
def test_accepted_names_round_trip_and_near_misses_are_refused_everywhere(
    batch: list[str], misses: list[tuple[str, str]]
) -> None:
    bad = [m for m, _ in misses]
    with _project() as (project, cli):
        data = project / "data"
        _write(data, batch)
        (data / "SHA256SUMS").write_text(_sums(batch, bad), encoding="utf-8")
        (project / "registry.txt").write_text(_pooch(batch, bad), encoding="utf-8")

        # import: every accepted name is a record, spelt as listed; each near miss is refused
        # by itself, with the grammar's reason, and the rest imports (exit 1 says so).
        for family, fmt, manifest in (
            ("imp", "sha256sum", data / "SHA256SUMS"),
            ("poo", "pooch", project / "registry.txt"),
        ):
            code, _, err = run(
                *cli, "import", fmt, str(manifest), "--family", family, "--root", str(data)
            )
            assert code == 1, err
            assert set(registered(project, family)) == {f"{family}/{n}" for n in batch}
            for miss in bad:
                assert f"{reason(miss)}; not registered" in err

        # add: the same names are registered one by one; near misses are refused as names.
        first = batch[0]
        code, _, err = run(*cli, "add", str(data / first), "--name", f"one/{first}", *FIXTURE)
        assert code == 0, err
        for miss in bad:
            code, _, err = run(*cli, "add", str(data / first), "--name", f"one/{miss}", *FIXTURE)
            assert code == 2 and reason(miss) in err, err

        # a tree: its members are the names; its checkout holds them byte for byte.
        code, _, err = run(*cli, "add", str(data), "--name", "tree/all", "--kind", "tree")
        assert code == 0, err
        code, out, err = run(*cli, "path", "tree/all")
        assert code == 0, err
        expected = {os.fsencode(n) for n in (*batch, "SHA256SUMS")}
        assert _checked_out(Path(out.strip())) == expected

        # verify, in a store that lacks the bytes: each result names its record as it is spelt,
        # and its fix is a command line the shell splits back into that name.
        cli[1] += "-empty"
        Path(cli[1]).mkdir()  # an empty store (a missing one is refused)
        code, out, _ = run(*cli, "verify", "--json", "--family", "imp")
        assert code == 1
        results = {r["name"]: r for r in json.loads(out)["results"]}
        assert set(results) == {f"imp/{n}" for n in batch}
        for name, result in results.items():
            assert shlex.split(result["fix"]) == ["fixture-store", "fetch", name]

        # fetch (from the local source), then the terminal: the path of each verified object.
        code, _, err = run(*cli, "fetch", *results)
        assert code == 0, err
        for name in batch:
            code, out, err = run(*cli, "path", f"imp/{name}")
            assert code == 0 and Path(out.strip()).read_bytes() == name.encode() + b"!", err

        # the HTML report: each name escaped for the page, and read back as it is.
        code, _, err = run(*cli, "report", "--html", str(project / "site"), "--family", "imp")
        assert code == 0, err
        page = (project / "site" / "family-imp.html").read_text(encoding="utf-8")
        for name in batch:
            assert names.html(f"imp/{name}") in page
            assert f"imp/{name}" in html.unescape(page)


def test_a_fix_line_quotes_the_name_for_the_shell() -> None:
    with _project() as (project, cli):
        _write(project / "data", ["a b (1).bin"])
        code, _, err = run(
            *cli, "add", str(project / "data" / "a b (1).bin"), "--name", "f/a b (1).bin", *FIXTURE
        )
        assert code == 0, err
        cli[1] += "-empty"
        Path(cli[1]).mkdir()  # an empty store (a missing one is refused)
        code, out, _ = run(*cli, "verify", "--json", "f/a b (1).bin")
        (result,) = json.loads(out)["results"]
        assert result["fix"] == "fixture-store fetch 'f/a b (1).bin'"
