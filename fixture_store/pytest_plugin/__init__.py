"""The pytest plugin (entry point ``pytest11``): verified fixtures for tests.

- ``fixture_store`` (session fixture): a verified view with accessors ``path``, ``tree``,
  ``arrays``, ``tensors``/``tensor`` (safetensors, memory-mapped), ``onnx_case``, ``record`` and
  ``check``; bytes come out only after verification.
  ``fixture_store.assert_parity(name, {"cls_token": out, ...})`` compares outputs with a verified
  NPY/NPZ reference under its record's tolerance (a failure names the worst array and element);
  ``--fixture-store-parity-dump DIR`` writes a failing candidate beside a copy of its reference;
  ``--fixture-store-attest DIR`` (with ``--fixture-store-attest-key``) signs a parity certificate
  for every assertion (:mod:`fixture_store.attest`).
- ``@pytest.mark.fixture_store("name", ..., family="F", kind="K", argname="artifact")``: the
  artifacts a test needs, verified before it runs. With ``family=`` the test is parametrized over
  every record of the family (``argname`` receives the name). ``fixture_store_cases("F")`` gives
  the same parameters for ``pytest.mark.parametrize``. Collection reads registry records only,
  never object bytes.
- Refusals: a digest mismatch, an invalid record, unsafe content, a name without a record or a
  registry that does not parse is an **error** (one line and its fix), in a marker or in the test
  body (an accessor, ``assert_parity``); outputs not at parity are a **failure**; a missing
  object is a **skip** naming the fetch command, or a **failure** under
  ``--fixture-store-require`` or ``FIXTURE_STORE_REQUIRE=1`` (exactly ``1``; ``0`` or empty mean
  off, any other value is a usage error) and under ``CI=true`` unless the ini option
  ``fixture_store_allow_ci_skips`` is true; the run ends with one line counting the tests a
  missing fixture skipped or failed, and the fix, whatever ``-r`` says; a declared gap is an
  **xfail** with its reason.
- ``--fixture-store-complete``: adds a check that every registry family is consumed by a
  collected test or declared a gap (every record a ``gap``, or the family listed in the ini option
  ``fixture_store_gaps``), and that no gap is stale: a gap record whose object is in the store, or
  an ini gap for a family a collected test now consumes; and that every file in a folder of the
  project's local sources is named by a record (no orphans).
"""

from __future__ import annotations

import pytest

from fixture_store.errors import UsageError
from fixture_store.pytest_plugin import state as state_mod
from fixture_store.pytest_plugin.collection import (
    CompletenessError,
    CompletenessItem,
    completeness_problems,
    consumed_families,
    parse_gaps,
    pytest_collection_modifyitems,
    pytest_generate_tests,
)
from fixture_store.pytest_plugin.fixtures import (
    VerifiedFixtures,
    fixture_store,
    fixture_store_cases,
    pytest_runtest_call,
    pytest_runtest_setup,
)
from fixture_store.pytest_plugin.options import (
    MAX_SHARDS,
    REQUIRE_ENV,
    REQUIRE_VALUES,
    Shard,
    allow_ci_skips,
    pytest_addoption,
    require_from_env,
    shard_count,
    shard_of,
)
from fixture_store.pytest_plugin.reporting import (
    MISSING,
    REFUSED,
    MissingSummary,
    pytest_report_teststatus,
    pytest_runtest_makereport,
)
from fixture_store.pytest_plugin.sharding import ShardHooks, consumed_names, shard_table
from fixture_store.pytest_plugin.state import MARKER, STATE_KEY, PluginState, state_of


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(*names, family=None, kind=None, argname='artifact'): artifacts the test "
        "needs, verified before it runs; family= parametrizes over a registry family.",
    )
    state = PluginState(config)
    config.stash[STATE_KEY] = state
    config.pluginmanager.register(ShardHooks(), "fixture-store-shards")
    config.pluginmanager.register(MissingSummary(), "fixture-store-missing-summary")
    state_mod.set_current(state)


def pytest_sessionstart(session: pytest.Session) -> None:
    # Here rather than at configure time, so that ``pytest --help`` still works.
    require_from_env()
    allow_ci_skips(session.config)
    from fixture_store.parity import environment

    try:
        environment.check(session.config.getoption("fixture_store_env"))
    except UsageError as e:
        raise pytest.UsageError(f"{e.message}: {e.fix}") from None
    if session.config.getoption("fixture_store_attest") is not None:
        state_of(session.config).attest_key()


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(STATE_KEY, None)
    if state is not None and state._fixtures is not None:
        state._fixtures.close()
    if state_mod.current() is config.stash.get(STATE_KEY, None):
        state_mod.set_current(None)


__all__ = [
    "MARKER",
    "MAX_SHARDS",
    "MISSING",
    "REFUSED",
    "REQUIRE_ENV",
    "REQUIRE_VALUES",
    "CompletenessError",
    "CompletenessItem",
    "MissingSummary",
    "PluginState",
    "Shard",
    "ShardHooks",
    "VerifiedFixtures",
    "completeness_problems",
    "consumed_families",
    "consumed_names",
    "fixture_store",
    "fixture_store_cases",
    "parse_gaps",
    "pytest_addoption",
    "pytest_collection_modifyitems",
    "pytest_configure",
    "pytest_generate_tests",
    "pytest_report_teststatus",
    "pytest_runtest_call",
    "pytest_runtest_makereport",
    "pytest_runtest_setup",
    "pytest_sessionstart",
    "pytest_unconfigure",
    "require_from_env",
    "shard_count",
    "shard_of",
    "shard_table",
]
