"""How a refusal is reported: one line of the error and its fix, counted as an error wherever
it was raised; and how tests that found their fixture missing are counted, so that a run never
goes green having tested nothing without saying so (:class:`MissingSummary`)."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import pytest

from fixture_store.display import text as shown
from fixture_store.errors import FixtureStoreError
from fixture_store.pytest_plugin.options import ALLOW_CI_SKIPS, CI_ENV
from fixture_store.pytest_plugin.state import STATE_KEY

# A report's user property naming the class of the refusal it ended with (kept by xdist, which
# sends a report's user properties from a worker to the controller).
REFUSED = "fixture_store_refused"
# A report's user property for each fixture the test found missing: "NAME\tFIX".
MISSING = "fixture_store_missing"
# How many fetch targets the summary's fix names before it says --all.
_NAMED = 5
_FETCH = "fixture-store fetch "


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[Any]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Keep refusals readable: one line of the error's message and fix, no library traceback,
    and marked so that :func:`pytest_report_teststatus` reports it as an error wherever it was
    raised (at setup, or in the test body by an accessor or ``assert_parity``). A test that
    skipped or failed for a missing fixture carries its names, for :class:`MissingSummary`."""
    report = yield
    exc = call.excinfo.value if call.excinfo else None
    if isinstance(exc, FixtureStoreError) and report.failed:
        report.longrepr = f"fixture-store refused: {exc}"
        report.user_properties.append((REFUSED, type(exc).__name__))
    state = item.config.stash.get(STATE_KEY, None)
    if state is not None and (report.skipped or report.failed):
        for name, fix in state.missing.pop(item.nodeid, ()):
            report.user_properties.append((MISSING, f"{name}\t{fix}"))
    return report


def pytest_report_teststatus(report: pytest.TestReport) -> tuple[str, str, str] | None:
    """A refusal in the test body is an **error** like one at setup (the data could not be
    used), never a **failure**: failures are the test's own assertions, a parity failure among
    them (:class:`~fixture_store.parity.assertion.ParityError`)."""
    if (
        report.when == "call"
        and report.failed
        and any(k == REFUSED for k, _ in report.user_properties)
    ):
        return "error", "E", "ERROR"
    return None


@dataclass(eq=False)  # a plugin: pluggy keeps plugins in sets
class MissingSummary:
    """Counts the tests that skipped (or, in require mode or under ``CI=true``, failed) because
    a fixture was missing, from their reports (so under xdist too: the controller receives the
    workers'), and ends the run with one line naming how many and the fix, whatever ``-r``
    says: a plain project's ``1 skipped`` is no longer green in silence."""

    skipped: set[str] = field(default_factory=set)
    failed: set[str] = field(default_factory=set)
    fixes: dict[str, str] = field(default_factory=dict)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        found = [v for k, v in report.user_properties if k == MISSING]
        if not found:
            return
        (self.failed if report.failed else self.skipped).add(report.nodeid)
        for entry in found:
            name, _, fix = str(entry).partition("\t")
            self.fixes[name] = fix

    def line(self) -> str | None:
        """The summary line (``None``: no test met a missing fixture)."""
        if not self.fixes:
            return None
        parts = []
        for count, what in ((len(self.skipped), "skipped"), (len(self.failed), "failed")):
            if count:
                parts.append(f"{count} test{'s' if count != 1 else ''} {what}")
        n = len(self.fixes)
        names = sorted(self.fixes)
        about = f"{n} fixture{'s' if n != 1 else ''} missing from the store or not the bytes "
        about += f"the registry names ({', '.join(names[:_NAMED])}{', ...' if n > _NAMED else ''})"
        line = f"fixture-store: {' and '.join(parts)}: {about}; fix: {self.fix()}"
        if self.skipped:
            line += f" (under {CI_ENV}=true these fail unless {ALLOW_CI_SKIPS} = true)"
        return shown(line)

    def fix(self) -> str:
        """One command per kind of repair: a fetch of the names fetched, each other repair as
        it is (a generator stage's)."""
        fetched = sorted(n for n, fix in self.fixes.items() if fix == f"{_FETCH}{n}")
        others = sorted({fix for n, fix in self.fixes.items() if n not in fetched and fix})
        commands = []
        if fetched:
            many = len(fetched) > _NAMED
            commands.append(_FETCH + ("--all" if many else " ".join(fetched)))
        return "; ".join([*commands, *others]) or "fixture-store fetch --all"

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        line = self.line()
        if line is not None:
            terminalreporter.write_line(line, yellow=not self.failed, red=bool(self.failed))
