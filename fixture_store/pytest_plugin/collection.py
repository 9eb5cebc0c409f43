"""Collection: a marker's ``family=`` parametrizes a test over the family's records (only
that family's files are read), and ``--fixture-store-complete`` adds its check of the suite
against the registry."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from fixture_store.display import text as shown
from fixture_store.errors import UsageError
from fixture_store.objects.store import Store
from fixture_store.registry import (
    Registry,
    family_of,
)
from fixture_store.registry import project as project_mod
from fixture_store.sources.local import orphans
from fixture_store.verify import present

if TYPE_CHECKING:
    pass
from fixture_store.pytest_plugin.state import MARKER, state_of


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    for mark in metafunc.definition.iter_markers(MARKER):
        family = mark.kwargs.get("family")
        if family is None:
            continue
        argname = mark.kwargs.get("argname", "artifact")
        if argname not in metafunc.fixturenames:
            raise UsageError(
                f"{metafunc.definition.nodeid}: @pytest.mark.fixture_store(family={family!r}) "
                f"parametrizes the argument {argname!r}, which the test does not take",
                fix=f"add a parameter named {argname!r} or pass argname=...",
            )
        names = state_of(metafunc.config).names_of(family, mark.kwargs.get("kind"))
        metafunc.parametrize(argname, names, ids=[n.split("/", 1)[1] for n in names])


def declared(item: pytest.Item) -> Iterator[str]:
    callspec = getattr(item, "callspec", None)
    for mark in item.iter_markers(MARKER):
        yield from mark.args
        if mark.kwargs.get("family") is not None and callspec is not None:
            value = callspec.params.get(mark.kwargs.get("argname", "artifact"))
            if isinstance(value, str):
                yield value


# -- completeness -------------------------------------------------------------------------------
def consumed_families(items: list[pytest.Item]) -> set[str]:
    families: set[str] = set()
    for item in items:
        for mark in item.iter_markers(MARKER):
            families.update(family_of(n) for n in mark.args if isinstance(n, str))
            if mark.kwargs.get("family"):
                families.add(mark.kwargs["family"])
    return families


def parse_gaps(lines: list[str]) -> dict[str, str]:
    """The ini option ``fixture_store_gaps``: one ``family: reason`` per line.

    A malformed line is a pytest usage error (exit code 4) naming the line, not an INTERNALERROR.
    """
    gaps = {}
    for line in lines:
        family, sep, reason = line.partition(":")
        if not sep or not family.strip() or not reason.strip():
            raise pytest.UsageError(
                f"ini option fixture_store_gaps: the line {line!r} is not 'family: reason'; "
                "every declared gap needs its reason, e.g. 'video: no clips licensed yet'"
            )
        gaps[family.strip()] = reason.strip()
    return gaps


def completeness_problems(
    registry: Registry, store: Store, consumed: set[str], declared_gaps: Mapping[str, str]
) -> list[str]:
    """Families nobody consumes, stale gaps, and orphans (files in a folder of local sources
    that no record names, see :func:`fixture_store.sources.local.orphans`). Looks at presence
    only, never reads bytes."""
    problems = []
    for family, fam in sorted(registry.families.items()):
        records = list(fam.records.values())
        for r in records:
            if r.is_gap and r.digest is not None and present(store, r):
                problems.append(
                    f"{r.name}: declared gap ({r.gap}) but its object is in the store; "
                    "remove the gap from the record in "
                    f"{fam.file_of(r.name).relative_to(registry.root)}"
                )
        if not records and not fam.invalid:
            continue  # nothing to consume (e.g. a file holding only known failures)
        all_gaps = all(r.is_gap for r in records) and not fam.invalid
        if family in declared_gaps and family in consumed:
            problems.append(
                f"family {family!r}: declared a gap in fixture_store_gaps "
                f"({declared_gaps[family]}) but a collected test now consumes it; remove "
                "the gap"
            )
        elif family not in consumed and family not in declared_gaps and not all_gaps:
            problems.append(
                f"family {family!r}: no collected test consumes it; mark a test with "
                f"@pytest.mark.fixture_store(family={family!r}) or declare it in the ini "
                "option fixture_store_gaps"
            )
    ignore = project_mod.orphans_ignored(registry.root)
    problems.extend(
        f"{o.path}: in {o.folder}/, a folder of local sources, but no record names it; {o.fix}"
        for o in orphans(registry.root, registry.records(), ignore)
    )
    return problems


class CompletenessItem(pytest.Item):
    """A synthetic test that fails when the registry and the test suite disagree."""

    def __init__(self, *, problems: list[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.problems = problems

    def runtest(self) -> None:
        if self.problems:
            raise CompletenessError(self.problems)

    # pytest's signature; the completeness report has one style.
    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:  # noqa: ARG002
        if isinstance(excinfo.value, CompletenessError):
            return "fixture-store completeness:\n" + "\n".join(
                f"  - {shown(p)}" for p in excinfo.value.problems
            )
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, "fixture-store completeness"


class CompletenessError(Exception):
    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    if not config.getoption("fixture_store_complete"):
        return
    state = state_of(config)
    problems = completeness_problems(
        state.registry(),
        state.store(),
        consumed_families(items),
        parse_gaps(config.getini("fixture_store_gaps")),
    )
    items.append(
        CompletenessItem.from_parent(session, name="fixture-store-completeness", problems=problems)
    )
