"""The project's known failures against a real compare of the embedded corpus.

What dvc.yaml's compare stage runs, in the test suite, so CI catches a stale known failure (one
that now passes, matches other cases, or excuses a larger error than it bounds) without a
``dvc repro``. It fetches the pinned onnx wheel into the test's store (about 19 MB), then runs
both runtimes on every case: 40-45 s on two busy cores (10 s of it fetching), hence also
``slow``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fixture_store import registry as registry_mod
from fixture_store.access import Fixtures
from fixture_store.fetch import Outcome as FetchOutcome
from fixture_store.fetch import fetch_names
from fixture_store.objects.store import Store
from fixture_store.parity.cases import compare, select_cases
from fixture_store.parity.results import Outcome
from tests.support.fetchutil import online_env  # noqa: F401 - autouse

PROJECT = Path(__file__).resolve().parents[2]
# The families of dvc.yaml's compare stage (onnx-light holds bare models without inputs).
FAMILIES = ("onnx-node", "onnx-pytorch-converted", "onnx-pytorch-operator", "onnx-simple")


@pytest.mark.network
@pytest.mark.slow
def test_the_corpus_compare_passes_with_exactly_the_registered_known_failures(
    store: Store,
) -> None:
    registry = registry_mod.load(PROJECT)
    names = registry.select(families=FAMILIES)
    fetched = fetch_names(store, registry, names)
    assert [r for r in fetched.results if r.outcome is not FetchOutcome.FETCHED] == []

    fixtures = Fixtures(store, registry)
    report = compare(fixtures, select_cases(fixtures, families=FAMILIES), ["ort", "reference"])
    failing = [
        f"{r.runtime} {r.name}: {r.outcome}: {r.detail} (fix: {r.fix})"
        for r in report.results
        if r.failing
    ]
    assert failing == []
    assert report.exit_code == 0
    # Every known mismatch was measured against its entry's bounds.
    excused = [r for r in report.results if r.underlying is Outcome.MISMATCH]
    assert excused and all(r.known_error is not None for r in excused)
