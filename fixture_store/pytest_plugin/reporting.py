"""How a refusal is reported: one line of the error and its fix, counted as an error wherever
it was raised."""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import pytest

from fixture_store.errors import FixtureStoreError

if TYPE_CHECKING:
    pass


# A report's user property naming the class of the refusal it ended with (kept by xdist, which
# sends a report's user properties from a worker to the controller).
REFUSED = "fixture_store_refused"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    call: pytest.CallInfo[Any],
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Keep refusals readable: one line of the error's message and fix, no library traceback,
    and marked so that :func:`pytest_report_teststatus` reports it as an error wherever it was
    raised (at setup, or in the test body by an accessor or ``assert_parity``)."""
    report = yield
    exc = call.excinfo.value if call.excinfo else None
    if isinstance(exc, FixtureStoreError) and report.failed:
        report.longrepr = f"fixture-store refused: {exc}"
        report.user_properties.append((REFUSED, type(exc).__name__))
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
