"""tinynet's parity with its upstream, against verified references only.

Every artifact a test names in its ``fixture_store`` marker is checked against its record before
the test runs; a tampered reference is an error (it is never compared), a missing one a skip
naming the fetch command, counted in one line that ends the run (a failure under
--fixture-store-require or CI=true), a declared gap an xfail with its reason.
``--fixture-store-complete`` (in pyproject.toml) fails the run if a family of the registry is
consumed by no test.
"""

from __future__ import annotations

from typing import Any

import pytest
from tinynet import mlp


def _case(family: str, inputs_family: str, case: str) -> Any:
    reference, inputs = f"{family}/{case}.npz", f"{inputs_family}/{case}.npz"
    return pytest.param(reference, inputs, marks=pytest.mark.fixture_store(reference, inputs))


GENERATED = [
    pytest.param(
        f"tinynet-reference/mlp_seed{seed}.npz",
        f"tinynet-reference/inputs_seed{seed}.npz",
        marks=pytest.mark.fixture_store(
            f"tinynet-reference/mlp_seed{seed}.npz", f"tinynet-reference/inputs_seed{seed}.npz"
        ),
    )
    for seed in (0, 1)
]
REGISTERED = [_case("tinynet-upstream", "tinynet-inputs", c) for c in ("mlp_seed7", "mlp_seed8")]


@pytest.mark.parametrize(("reference", "inputs"), GENERATED + REGISTERED)
def test_mlp_is_at_parity_with_its_upstream(
    fixture_store: Any, reference: str, inputs: str
) -> None:
    fixture_store.assert_parity(reference, mlp(**fixture_store.arrays(inputs)))


@pytest.mark.fixture_store("tinynet-upstream/mlp_wide_seed3.npz")
def test_the_wide_model_is_at_parity(fixture_store: Any) -> None:
    """A declared gap: the record exists, its bytes do not yet; this test is an xfail."""
    fixture_store.assert_parity("tinynet-upstream/mlp_wide_seed3.npz", {})
