"""Test shards (``--fixture-store-shard``, ``--fixture-store-shards``) and the fetch of what the
selected tests name (``--fixture-store-fetch``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from fixture_store.display import text as shown
from fixture_store.errors import FixtureStoreError

if TYPE_CHECKING:
    pass
from fixture_store.pytest_plugin.collection import CompletenessItem, declared
from fixture_store.pytest_plugin.options import Shard, shard_count, shard_of
from fixture_store.pytest_plugin.state import state_of


def consumed_names(items: list[pytest.Item]) -> list[str]:
    """The artifacts ``items`` name in their markers (parametrized families resolved), in order."""
    return list(dict.fromkeys(name for item in items for name in declared(item)))


class ShardHooks:
    """Hooks that must see the selection -k and -m leave: registered beside the module's own
    hooks (whose completeness check sees the whole collection first)."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        shard: Shard | None = config.getoption("fixture_store_shard")
        if shard is None:
            return
        keep: list[pytest.Item] = []
        drop: list[pytest.Item] = []
        for item in items:
            # the completeness check looks at the whole suite: it runs in every shard
            held = isinstance(item, CompletenessItem) or shard.holds(item)
            (keep if held else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        config = session.config
        count = config.getoption("fixture_store_shards")
        if count is not None:
            _report_shards(session, count)
        if config.getoption("fixture_store_fetch"):
            try:
                _fetch_selected(session)
            except FixtureStoreError as e:  # a store or registry it cannot use: no INTERNALERROR
                raise pytest.UsageError(f"--fixture-store-fetch: {e}") from e


def shard_table(items: list[pytest.Item], count: int) -> list[tuple[int, int, int]]:
    """(shard, tests, artifacts) for each of ``count`` shards; raises if a test is in none or
    in several (the check a CI matrix relies on). Each test is placed once, by its own shard,
    and that shard is asked whether it holds it (what ``--fixture-store-shard`` asks): the work
    is the collection's, whatever ``count``."""
    count = shard_count(str(count))
    tests = [i for i in items if not isinstance(i, CompletenessItem)]
    shards = {k: Shard(k, count) for k in range(1, count + 1)}
    mine: dict[int, list[pytest.Item]] = {k: [] for k in shards}
    wrong: dict[str, int] = {}
    for item in tests:
        index = shard_of(item.nodeid, count)
        if index in shards and shards[index].holds(item):
            mine[index].append(item)
        else:
            wrong[item.nodeid] = index
    if wrong:
        raise pytest.UsageError(f"tests not in exactly one of {count} shards: {wrong}")
    return [(k, len(held), len(consumed_names(held))) for k, held in mine.items()]


def _report_shards(session: pytest.Session, count: int) -> None:
    rows = shard_table(list(session.items), count)
    writer = session.config.get_terminal_writer()
    writer.line(f"fixture-store shards: {sum(r[1] for r in rows)} tests in {count} shards")
    for index, tests, artifacts in rows:
        writer.line(f"  shard {index}/{count}: {tests} tests, {artifacts} artifacts")


def _fetch_selected(session: pytest.Session) -> None:
    """Fetch what the selected tests consume; under xdist each worker fetches its own items
    (fetches are idempotent and safe to run at once)."""
    from fixture_store.fetch import fetch_names  # only when asked

    state = state_of(session.config)
    registry = state.registry()
    known = set(registry.names())
    names = [n for n in consumed_names(list(session.items)) if n in known]
    report = fetch_names(state.store(), registry, names)
    failed = [r for r in report.results if not r.ok]
    writer = session.config.get_terminal_writer()
    writer.line(
        f"fixture-store fetch: {len(names)} artifacts the selected tests use; "
        f"downloaded {report.downloaded_bytes:,} bytes in {report.downloads} downloads"
        + (f"; {len(failed)} failed" if failed else "")
    )
    for r in failed:
        text = f"  {r.name}: {r.message}" + (f"  (fix: {r.fix})" if r.fix else "")
        writer.line(shown(text, keep="\n"))
