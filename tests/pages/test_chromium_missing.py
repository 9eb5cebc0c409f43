"""Without Debian's chromium the browser checks fail in CI, naming the apt-get command that
installs it, and skip elsewhere with the same words; they never pass unchecked."""

from __future__ import annotations

import shutil

import pytest

from tests.support import browser


def test_a_missing_chromium_fails_in_ci_with_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(shutil, "which", lambda _name: None)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="apt-get install -y chromium"):
        browser.chromium()


def test_a_missing_chromium_skips_elsewhere_saying_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda _name: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="chromium is not installed"):
        browser.chromium()
