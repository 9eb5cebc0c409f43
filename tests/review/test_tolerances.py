"""Tolerance changes classed by what they do to verdicts (review/tolerances.py)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixture_store.registry.tolerance import Tolerance
from fixture_store.registry.where import Where
from fixture_store.review.tolerances import Direction, classify

_AT = Where("<test>", "fam/a")
BOUNDED = ("max_abs", "rms", "mean_abs", "ulp", "cosine")


def tol(raw: dict[str, Any]) -> Tolerance:
    return Tolerance.from_json(raw, _AT)


def classes(before: dict[str, Any] | None, after: dict[str, Any] | None) -> list[tuple[str, str]]:
    old = tol(before) if before is not None else None
    new = tol(after) if after is not None else None
    return [(c.direction.value, c.where) for c in classify(old, new)]


bounds = st.floats(min_value=1e-9, max_value=1.0, allow_nan=False)
factors = st.sampled_from([0.1, 0.5, 2.0, 10.0])


@settings(max_examples=40, deadline=None)
@given(
    metric=st.sampled_from(BOUNDED),
    bound=bounds,
    factor=factors,
    edit=st.sampled_from(["bound", "expectation", "per_array", "metric", "why", "check"]),
    why=st.text(min_size=1, max_size=20).filter(str.strip),
)
def test_a_random_edit_is_classed_by_what_it_does(
    metric: str, bound: float, factor: float, edit: str, why: str
) -> None:
    """Raising a bound loosens, lowering it tightens, wherever the rule is written (the record,
    an array's override, a new environment's expectation); another metric reshapes; a further
    check tightens; a reason alone rewords."""
    before = {"metric": metric, "max": bound}
    moved = bound * factor
    direction = Direction.LOOSENED if factor > 1 else Direction.TIGHTENED
    where = "record"
    if edit == "bound":
        after: dict[str, Any] = {"metric": metric, "max": moved, "why": why}
    elif edit == "expectation":
        after = {**before, "expectations": {"device:cuda": {"max": moved, "why": why}}}
        where = "record where device:cuda"
    elif edit == "per_array":
        after = {**before, "per_array": {"logits": {"max": moved, "why": why}}}
        where = "array logits"
    elif edit == "metric":
        other = next(m for m in BOUNDED if m != metric)
        after, direction = {"metric": other, "max": moved}, Direction.RESHAPED
    elif edit == "check":
        other = next(m for m in BOUNDED if m != metric)
        after = {"checks": [{"metric": metric, "max": bound}, {"metric": other, "max": moved}]}
        direction = Direction.TIGHTENED
    else:
        after, direction = {**before, "why": why}, Direction.REWORDED
    found = classify(tol(before), tol(after))
    assert [(c.direction, c.where) for c in found] == [(direction, where)]
    if edit in ("bound", "expectation", "per_array", "why"):
        assert found[0].why == why
    # and back again: the opposite class (reshaped and reworded are their own opposites)
    opposite = {Direction.LOOSENED: Direction.TIGHTENED, Direction.TIGHTENED: Direction.LOOSENED}
    back = classify(tol(after), tol(before))
    assert [c.direction for c in back] == [opposite.get(direction, direction)]


def test_a_loosened_max_abs_and_a_tightened_rms() -> None:
    assert classes({"metric": "max_abs", "max": 1e-5}, {"metric": "max_abs", "max": 1e-4}) == [
        ("loosened", "record")
    ]
    assert classes({"metric": "rms", "max": 1e-3}, {"metric": "rms", "max": 1e-4}) == [
        ("tightened", "record")
    ]


def test_a_new_expectation_relaxing_the_bound_is_loosened_with_its_why() -> None:
    before = {"metric": "rms", "max": 1e-6}
    after = {**before, "expectations": {"device:cuda": {"max": 1e-4, "why": "TF32 matmuls"}}}
    (change,) = classify(tol(before), tol(after))
    assert change.direction is Direction.LOOSENED
    assert (change.environment, change.scope, change.why) == (
        "device:cuda",
        "record",
        "TF32 matmuls",
    )
    assert (change.before, change.after) == ("rms <= 1e-06", "rms <= 0.0001")


def test_a_change_an_expectation_inherits_is_shown_once() -> None:
    before = {"metric": "rms", "max": 1e-6, "expectations": {"device:cuda": {"why": "TF32"}}}
    after = {"metric": "rms", "max": 1e-5, "expectations": {"device:cuda": {"why": "TF32"}}}
    assert classes(before, after) == [("loosened", "record")]


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        # exact is the strictest check: anything else accepts more
        ({"metric": "exact"}, {"metric": "rms", "max": 1e-6}, "loosened"),
        ({"metric": "max_abs", "max": 1.0}, {"metric": "exact"}, "tightened"),
        # bounds moved both ways
        (
            {"metric": "allclose", "atol": 1e-5, "rtol": 1e-3},
            {"metric": "allclose", "atol": 1e-4, "rtol": 1e-4},
            "reshaped",
        ),
        (
            {"metric": "max_rel", "max": 0.1, "floor": 0},
            {"metric": "max_rel", "max": 0.1, "floor": 1e-3},
            "loosened",
        ),
        (
            {"metric": "rms", "max": 1e-6},
            {"metric": "rms", "max": 1e-6, "dtype": "same_kind"},
            "loosened",
        ),
        (
            {"metric": "rms", "max": 1e-6},
            {"metric": "rms", "max": 1e-6, "equal_nan": False},
            "tightened",
        ),
        # a check dropped from several
        (
            {"checks": [{"metric": "rms", "max": 1e-6}, {"metric": "max_abs", "max": 1e-4}]},
            {"metric": "rms", "max": 1e-6},
            "loosened",
        ),
        # the built-in default (no tolerance) against a written one
        (None, {"metric": "allclose", "atol": 1e-3, "rtol": 1e-3}, "loosened"),
    ],
)
def test_rules_are_classed_by_their_bounds(
    before: dict[str, Any] | None, after: dict[str, Any], expected: str
) -> None:
    assert [c for c, _ in classes(before, after)] == [expected]


def test_an_oracle_added_tightens_and_its_factor_raised_loosens() -> None:
    base = {"metric": "max_abs", "max": 1e-3}
    oracle = {"record": "up/f64.npz", "metric": "max_abs", "factor": 2}
    with_oracle = {**base, "oracle": oracle}
    assert classes(base, with_oracle) == [("tightened", "oracle")]
    assert classes(with_oracle, {**base, "oracle": {**oracle, "factor": 4}}) == [
        ("loosened", "oracle")
    ]
    assert classes(with_oracle, {**base, "oracle": {**oracle, "metric": "rms"}}) == [
        ("reshaped", "oracle")
    ]


def test_another_reference_where_an_expectation_applies_is_reshaped() -> None:
    before = {"metric": "rms", "max": 1e-6, "expectations": {"device:cuda": {"max": 1e-4}}}
    after = {
        "metric": "rms",
        "max": 1e-6,
        "expectations": {"device:cuda": {"max": 1e-4, "reference": "fam/cuda.npz"}},
    }
    assert classes(before, after) == [("reshaped", "reference where device:cuda")]


def test_the_same_tolerance_is_no_change() -> None:
    raw = {"metric": "rms", "max": 1e-6, "per_array": {"x": {"max": 1e-3}}}
    assert classify(tol(raw), tol(raw)) == ()
    assert classify(None, None) == ()
