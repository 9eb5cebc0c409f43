"""A machine without the reference tools of the differential tests is told once what to install:
each such test skips (fails under ``CI=true``) with one message naming every missing tool and the
apt-get command, pytest's summary counts them on one line, and the report header says it first."""

from __future__ import annotations

import shutil
import textwrap

import pytest

from tests.support import reference


def _no_bsdtar(monkeypatch: pytest.MonkeyPatch) -> None:
    which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name: None if name == "bsdtar" else which(name))


def test_a_missing_tool_skips_elsewhere_naming_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _no_bsdtar(monkeypatch)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(
        pytest.skip.Exception, match=r"bsdtar.*apt-get install -y .*libarchive-tools"
    ):
        reference.require("bsdtar")


def test_a_missing_tool_fails_in_ci_naming_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _no_bsdtar(monkeypatch)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"apt-get install -y .*libarchive-tools"):
        reference.require("bsdtar")


def test_many_tests_needing_a_missing_tool_give_one_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        textwrap.dedent(
            """
            import shutil
            import pytest
            from tests.support import reference

            @pytest.fixture(autouse=True)
            def no_bsdtar(monkeypatch):
                which = shutil.which
                monkeypatch.setattr(
                    shutil, "which", lambda n: None if n == "bsdtar" else which(n)
                )
                monkeypatch.delenv("CI", raising=False)

            @pytest.mark.parametrize("n", range(30))
            def test_needs_bsdtar(n):
                reference.require("bsdtar")
            """
        )
    )
    result = pytester.runpytest_inprocess("-ra", "-p", "no:cacheprovider", "-n0")
    result.assert_outcomes(skipped=30)
    lines = [line for line in result.outlines if "apt-get install" in line]
    assert len(lines) == 1, lines
    assert lines[0].startswith("SKIPPED [30]")
