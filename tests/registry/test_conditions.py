"""Machine conditions of known failures: parsed strictly, evaluated on this machine, now."""

from __future__ import annotations

import pytest

from fixture_store.errors import UsageError
from fixture_store.registry import conditions


def test_a_locale_that_exists_everywhere_is_not_missing() -> None:
    assert conditions.holds("locale-missing:C") is False


def test_a_locale_no_machine_has_is_missing() -> None:
    assert conditions.holds("locale-missing:xx_NOWHERE.UTF-8") is True


def test_evaluation_leaves_the_process_locale_alone() -> None:
    import locale

    before = locale.setlocale(locale.LC_CTYPE)
    conditions.holds("locale-missing:C")
    conditions.holds("locale-missing:xx_NOWHERE.UTF-8")
    assert locale.setlocale(locale.LC_CTYPE) == before


@pytest.mark.parametrize("text", ["locale-missing", "locale-missing:", "moon-phase:full", ""])
def test_unknown_or_incomplete_conditions_are_refused(text: str) -> None:
    with pytest.raises(UsageError, match="unknown condition") as e:
        conditions.parse(text)
    assert e.value.fix is not None and "locale-missing" in e.value.fix
