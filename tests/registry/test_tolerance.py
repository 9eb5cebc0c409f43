"""Tolerances: parsed once, printed back as written, resolved per array for every comparison."""

from __future__ import annotations

import json
import math
import pickle
import re
from pathlib import Path
from typing import Any

import pytest

from fixture_store.errors import RegistryError
from fixture_store.registry import ArrayTolerance, Metric, Tolerance, Where
from fixture_store.registry.patterns import specificity
from fixture_store.registry.tolerance import (
    DEFAULT_ATOL,
    DEFAULT_RTOL,
    Check,
    DtypeRule,
    ShapeRule,
)

PROJECT = Path(__file__).resolve().parents[2]
WHERE = Where("provenance/fam.json", "fam/x")


def parse(raw: Any) -> Tolerance:
    return Tolerance.from_json(raw, WHERE)


def test_every_committed_tolerance_round_trips() -> None:
    seen = 0
    for path in sorted((PROJECT / "provenance").glob("*.json")):
        for name, record in json.loads(path.read_text())["records"].items():
            if "tolerance" in record:
                raw = record["tolerance"]
                assert Tolerance.from_json(raw, Where(record=name)).to_json() == raw, name
                seen += 1
    assert seen > 0


@pytest.mark.parametrize(
    "raw",
    [
        {"metric": "exact"},
        {"metric": "allclose", "atol": 1},
        {"metric": "allclose", "atol": 0, "rtol": 0.5},
        {"metric": "allclose", "rtol": 1e-3, "per_array": {}},
        {"metric": "allclose", "per_array": {"y": {"rtol": 0.05}, "z": {"metric": "exact"}}},
        {"metric": "exact", "per_array": {"y": {}}},
        {"metric": "mean_abs", "max": 0.0005},
        {"metric": "max_abs", "max": 1e-3, "dtype": "same_kind", "shape": "squeeze"},
        {"metric": "ulp", "max": 4, "per_array": {"y": {"max": 8}, "z": {"metric": "exact"}}},
        {"metric": "allclose", "per_array": {"y": {"metric": "mean_abs", "max": 1e-4}}},
    ],
)
def test_the_json_comes_back_as_written(raw: dict[str, Any]) -> None:
    out = parse(raw).to_json()
    assert out == raw
    # Numbers keep their JSON form: an integer bound is not rewritten as a float.
    assert json.dumps(out, sort_keys=True) == json.dumps(raw, sort_keys=True)


def test_no_tolerance_means_the_onnx_runner_defaults() -> None:
    assert Tolerance().for_array("y") == ArrayTolerance(Metric.ALLCLOSE, 1e-7, 1e-3)
    assert ArrayTolerance() == ArrayTolerance(Metric.ALLCLOSE, DEFAULT_ATOL, DEFAULT_RTOL)


def test_an_override_applies_over_the_record_default() -> None:
    tol = parse(
        {
            "metric": "allclose",
            "atol": 1e-6,
            "rtol": 1e-4,
            "per_array": {"y": {"atol": 1e-5}, "z": {"metric": "exact"}, "w": {}},
        }
    )
    assert tol.for_array("x") == ArrayTolerance(Metric.ALLCLOSE, 1e-6, 1e-4)
    assert tol.for_array("y") == ArrayTolerance(Metric.ALLCLOSE, 1e-5, 1e-4)
    assert tol.for_array("z") == ArrayTolerance(Metric.EXACT, 1e-6, 1e-4)
    assert tol.for_array("w") == tol.for_array("x")
    assert tol.override("y") == Tolerance(atol=1e-5)
    assert tol.override("x") is None


def test_the_first_name_with_an_override_wins() -> None:
    tol = parse({"metric": "allclose", "per_array": {"out:a": {"rtol": 0.5}, "out": {"rtol": 0.1}}})
    assert tol.for_array("out:a", "out").rtol == 0.5
    assert tol.for_array("out:b", "out").rtol == 0.1
    assert tol.for_array("other", "more").rtol == DEFAULT_RTOL


def test_a_bound_written_as_an_integer_compares_as_a_float() -> None:
    bound = parse({"metric": "allclose", "atol": 1}).for_array("x")
    assert bound.atol == 1.0 and isinstance(bound.atol, float)
    assert bound.to_json() == {"metric": "allclose", "atol": 1.0, "rtol": DEFAULT_RTOL}


def test_a_tolerance_crosses_process_boundaries() -> None:
    tol = parse({"metric": "allclose", "per_array": {"y": {"rtol": 0.05}}})
    assert pickle.loads(pickle.dumps(tol)) == tol
    assert hash(tol) == hash(pickle.loads(pickle.dumps(tol)))


@pytest.mark.parametrize(
    ("raw", "field", "needle"),
    [
        ([], "tolerance", "must be an object"),
        ({"atol": 1}, "tolerance.metric", "missing required field"),
        ({"metric": "close-enough"}, "tolerance.metric", "unknown metric 'close-enough'"),
        ({"metric": "max_ab"}, "tolerance.metric", "'max_ab' (did you mean 'max_abs'?)"),
        ({"metric": "ALLCLOSE"}, "tolerance.metric", "(did you mean 'allclose'?)"),
        ({"metric": ["exact"]}, "tolerance.metric", "unknown metric"),
        ({"metric": "allclose", "rtol": -1}, "tolerance.rtol", "non-negative number"),
        ({"metric": "allclose", "atol": math.nan}, "tolerance.atol", "non-negative number"),
        ({"metric": "allclose", "atol": True}, "tolerance.atol", "non-negative number"),
        ({"metric": "allclose", "atol": "0.1"}, "tolerance.atol", "non-negative number"),
        ({"metric": "allclose", "ulps": 4}, "tolerance.ulps", "unknown field"),
        ({"metric": "mean_abs"}, "tolerance.max", "needs its bound"),
        ({"metric": "ulp", "atol": 1, "max": 1}, "tolerance.atol", "takes max"),
        ({"metric": "allclose", "max": 1}, "tolerance.max", "takes atol and rtol"),
        ({"metric": "exact", "atol": 0.1}, "tolerance.atol", "takes no bound"),
        ({"metric": "max_abs", "max": -1e-3}, "tolerance.max", "non-negative number"),
        ({"metric": "ulp", "max": math.inf}, "tolerance.max", "non-negative number"),
        ({"metric": "exact", "dtype": "cast"}, "tolerance.dtype", "one of ('exact', 'same_kind')"),
        ({"metric": "exact", "shape": True}, "tolerance.shape", "one of ('exact', 'squeeze')"),
        (
            {"metric": "allclose", "per_array": {"y": {"metric": "ulp"}}},
            "tolerance.per_array.y.max",
            "needs its bound",
        ),
        (
            {"metric": "mean_abs", "max": 1e-3, "per_array": {"y": {"rtol": 0.1}}},
            "tolerance.per_array.y.rtol",
            "metric 'mean_abs' takes max",
        ),
        ({"metric": "allclose", "per_array": []}, "tolerance.per_array", "must be an object"),
        ({"metric": "allclose", "per_array": {"y": 1}}, "tolerance.per_array.y", "an object"),
        (
            {"metric": "allclose", "per_array": {"y": {"rtol": -0.1}}},
            "tolerance.per_array.y.rtol",
            "non-negative number",
        ),
        (
            {"metric": "allclose", "per_array": {"y": {"metric": "fuzzy"}}},
            "tolerance.per_array.y.metric",
            "unknown metric",
        ),
        (
            {"metric": "allclose", "per_array": {"y": {"per_array": {}}}},
            "tolerance.per_array.y.per_array",
            "unknown field",
        ),
    ],
)
def test_refusals_name_the_field(raw: Any, field: str, needle: str) -> None:
    with pytest.raises(RegistryError) as info:
        parse(raw)
    assert info.value.field == field and info.value.record == "fam/x"
    assert needle in str(info.value)


def test_an_override_needs_no_metric() -> None:
    tol = parse({"metric": "allclose", "per_array": {"y": {"atol": 0.1}}})
    assert tol.override("y") == Tolerance(atol=0.1)


@pytest.mark.parametrize("bound", [float("inf"), 1e400, float("nan"), -1.0])
def test_a_bound_that_would_pass_any_drift_is_refused(bound: float) -> None:
    raw = {"metric": "allclose", "rtol": bound, "atol": 0}
    with pytest.raises(RegistryError, match="must be a finite, non-negative number"):
        Tolerance.from_json(raw, Where("provenance/f.json", "f/r"))


def test_each_metric_resolves_with_its_bound() -> None:
    tol = parse(
        {
            "metric": "mean_abs",
            "max": 5e-4,
            "per_array": {
                "a": {"max": 1e-3},
                "b": {"metric": "ulp", "max": 2},
                "c": {"metric": "allclose", "rtol": 0.1},
                "d": {"metric": "mean_abs", "dtype": "same_kind"},
            },
        }
    )
    assert tol.for_array("x") == ArrayTolerance(Metric.MEAN_ABS, bound=5e-4)
    assert tol.for_array("a") == ArrayTolerance(Metric.MEAN_ABS, bound=1e-3)
    assert tol.for_array("b") == ArrayTolerance(Metric.ULP, bound=2.0)
    assert tol.for_array("c") == ArrayTolerance(Metric.ALLCLOSE, DEFAULT_ATOL, 0.1, bound=5e-4)
    # The same metric again inherits the bound; only a switch to another one must give its own.
    assert tol.for_array("d") == ArrayTolerance(
        Metric.MEAN_ABS, bound=5e-4, dtype=DtypeRule.SAME_KIND
    )


@pytest.mark.parametrize(
    ("tolerance", "text", "printed"),
    [
        (ArrayTolerance(), "allclose atol=1e-07 rtol=0.001", {"atol": 1e-7, "rtol": 1e-3}),
        (ArrayTolerance(Metric.EXACT), "exact", {}),
        (ArrayTolerance(Metric.MEAN_ABS, bound=5e-4), "mean_abs <= 0.0005", {"max": 5e-4}),
        (ArrayTolerance(Metric.ULP, bound=4, shape=ShapeRule.SQUEEZE), "ulp <= 4", {"max": 4}),
    ],
)
def test_an_array_tolerance_prints_only_what_applies(
    tolerance: ArrayTolerance, text: str, printed: dict[str, Any]
) -> None:
    assert tolerance.describe() == text
    out = tolerance.to_json()
    assert out.pop("metric") == tolerance.metric.value
    assert out.pop("shape", None) == (None if tolerance.shape is ShapeRule.EXACT else "squeeze")
    assert out == printed


# -- rms, max_rel, cosine, default, equal_nan, why, checks, patterns, per_dtype --------------------


@pytest.mark.parametrize(
    "raw",
    [
        {"metric": "rms", "max": 1e-5},
        {"metric": "max_rel", "max": 1e-3, "floor": 1e-6},
        {"metric": "max_rel", "max": 0},
        {"metric": "cosine", "max": 1e-4, "why": "the LLM port's report"},
        {"metric": "default", "equal_nan": False},
        {"metric": "allclose", "atol": 0, "equal_nan": True},
        {"checks": [{"metric": "rms", "max": 1e-5}, {"metric": "max_abs", "max": 1e-3}]},
        {
            "metric": "mean_abs",
            "max": 1e-3,
            "per_array": {"coeffs/*": {"metric": "rms", "max": 1e-5}, "*_f32": {"max": 1e-2}},
            "per_dtype": {"float32": {"metric": "default"}, "int64": {"metric": "exact"}},
        },
        {
            "checks": [{"metric": "allclose", "atol": 1, "rtol": 0}],
            "per_array": {"y": {"checks": [{"metric": "ulp", "max": 4}]}, "z": {"why": "noisy"}},
        },
    ],
)
def test_new_rules_come_back_as_written(raw: dict[str, Any]) -> None:
    out = parse(raw).to_json()
    assert json.dumps(out, sort_keys=True) == json.dumps(raw, sort_keys=True)


@pytest.mark.parametrize(
    ("raw", "field", "needle"),
    [
        ({"metric": "rms"}, "tolerance.max", "needs its bound"),
        ({"metric": "cosine", "max": 1, "floor": 1}, "tolerance.floor", "takes max"),
        ({"metric": "max_rel", "max": 1, "floor": -1}, "tolerance.floor", "non-negative"),
        ({"metric": "default", "rtol": 1}, "tolerance.rtol", "takes no bound"),
        ({"metric": "allclose", "equal_nan": "yes"}, "tolerance.equal_nan", "true or false"),
        ({"metric": "allclose", "why": ""}, "tolerance.why", "non-empty string"),
        ({"metric": "allclose", "why": 3}, "tolerance.why", "non-empty string"),
        ({"checks": []}, "tolerance.checks", "non-empty list"),
        ({"checks": {"metric": "rms"}}, "tolerance.checks", "non-empty list"),
        (
            {"metric": "rms", "max": 1, "checks": [{"metric": "exact"}]},
            "tolerance.max",
            "beside 'checks'",
        ),
        ({"checks": [{"max": 1}]}, "tolerance.checks[0].metric", "missing required field"),
        ({"checks": [{"metric": "rms"}]}, "tolerance.checks[0].max", "needs its bound"),
        ({"checks": [3]}, "tolerance.checks[0]", "must be an object"),
        (
            {"checks": [{"metric": "exact", "why": "x"}]},
            "tolerance.checks[0].why",
            "unknown field",
        ),
        (
            {"checks": [{"metric": "exact"}], "per_array": {"y": {"max": 1}}},
            "tolerance.per_array.y.max",
            "several checks",
        ),
        ({"metric": "exact", "per_dtype": {"f32": {}}}, "tolerance.per_dtype.f32", "no dtype"),
        ({"metric": "exact", "per_dtype": []}, "tolerance.per_dtype", "must be an object"),
        (
            {"metric": "exact", "per_array": {"y": {"per_dtype": {}}}},
            "tolerance.per_array.y.per_dtype",
            "unknown field",
        ),
    ],
)
def test_new_refusals_name_the_field(raw: Any, field: str, needle: str) -> None:
    with pytest.raises(RegistryError) as info:
        parse(raw)
    assert info.value.field == field, info.value
    assert needle in str(info.value)


def test_the_precedence_is_name_then_pattern_then_dtype_then_record() -> None:
    tol = parse(
        {
            "metric": "mean_abs",
            "max": 1e-3,
            "per_array": {
                "coeffs/a": {"max": 1.0},
                "coeffs/*": {"max": 2.0},
                "coeffs/a*": {"max": 3.0},  # one wildcard, more literal: more specific
                "*": {"max": 4.0},
            },
            "per_dtype": {"float32": {"max": 5.0}, "bfloat16": {"metric": "default"}},
        }
    )
    assert tol.for_array("coeffs/a", dtype="float32").bound == 1.0
    assert tol.for_array("coeffs/ab", dtype="float32").bound == 3.0
    assert tol.for_array("coeffs/b", dtype="float32").bound == 2.0
    assert tol.for_array("other", dtype="float32").bound == 4.0
    no_star = parse({"metric": "mean_abs", "max": 1e-3, "per_dtype": {"float32": {"max": 5.0}}})
    assert no_star.for_array("other", dtype="float32").bound == 5.0
    assert no_star.for_array("other", dtype="float64").bound == 1e-3
    assert tol.for_array("x", dtype="bfloat16").metric is Metric.MEAN_ABS  # "*" wins
    by_dtype = parse({"metric": "exact", "per_dtype": {"bfloat16": {"metric": "default"}}})
    assert by_dtype.for_array("x", dtype="bfloat16").metric is Metric.DEFAULT


def test_the_arrays_one_override_matches_share_one_resolved_rule() -> None:
    # Resolved once per record, not once per array: a batch of them is then one group.
    tol = parse(
        {
            "metric": "mean_abs",
            "max": 1e-3,
            "per_array": {"coeffs_*": {"metric": "allclose"}, "exact_one": {"max": 1.0}},
            "per_dtype": {"float16": {"max": 5.0}},
        }
    )
    assert tol.for_array("coeffs_0001") is tol.for_array("coeffs_0002", dtype="float16")
    assert tol.for_array("h1", dtype="float16") is tol.for_array("h2", dtype="float16")
    assert tol.for_array("exact_one").bound == 1.0
    assert tol.for_array("coeffs_0001").metric is Metric.ALLCLOSE


@pytest.mark.parametrize(
    ("pattern", "spec"),
    [("*", (-1, 0)), ("coeffs/*", (-1, 7)), ("a?[bc]*", (-3, 1)), ("plain", (0, 5))],
)
def test_specificity_counts_wildcards_then_literal_characters(
    pattern: str, spec: tuple[int, int]
) -> None:
    assert specificity(pattern) == spec


def test_a_pattern_matches_whole_names_across_slashes() -> None:
    tol = parse({"metric": "exact", "per_array": {"a/*": {}, "x[12]": {}, "?_f32": {}}})
    assert tol.pattern_for("a/b/c") is not None
    assert tol.pattern_for("x1") is not None and tol.pattern_for("x3") is None
    assert tol.pattern_for("q_f32") is not None and tol.pattern_for("qq_f32") is None
    assert tol.pattern_for("b/a/c") is None


def test_two_equally_specific_patterns_on_one_array_are_a_registry_error() -> None:
    raw = {"metric": "exact", "per_array": {"*_f32": {}, "w_f3*": {}}}
    with pytest.raises(RegistryError) as info:
        parse(raw).check_names(["w_f32", "b_f32"], WHERE)
    assert "'*_f32' and 'w_f3*' both match array 'w_f32'" in str(info.value)
    assert info.value.field == "tolerance.per_array"
    with pytest.raises(RegistryError, match="equally specific"):
        parse(raw).for_array("w_f32")
    parse(raw).check_names(["a_f32", "w_f3x"], WHERE)  # no array takes both


def test_a_pattern_that_matches_nothing_names_the_known_arrays() -> None:
    with pytest.raises(RegistryError) as info:
        parse({"metric": "exact", "per_array": {"coefs/*": {}}}).check_names(
            ["coeffs/a", "bias"], WHERE
        )
    assert info.value.field == "tolerance.per_array.coefs/*"
    assert "matches no array" in str(info.value) and "['bias', 'coeffs/a']" in str(info.value)


def test_an_exact_key_wins_even_when_it_looks_like_a_pattern() -> None:
    tol = parse({"metric": "exact", "per_array": {"x[1]": {"metric": "rms", "max": 1}}})
    tol.check_names(["x[1]"], WHERE)
    assert tol.for_array("x[1]").metric is Metric.RMS


def test_checks_resolve_with_the_rules_and_overrides_replace_them() -> None:
    tol = parse(
        {
            "checks": [{"metric": "rms", "max": 1e-5}, {"metric": "max_abs", "max": 1e-3}],
            "why": "the upstream's own test",
            "equal_nan": False,
            "per_array": {"y": {"metric": "ulp", "max": 2}, "z": {"shape": "squeeze"}},
        }
    )
    x = tol.for_array("x")
    assert x.checks == (Check(Metric.RMS, bound=1e-5), Check(Metric.MAX_ABS, bound=1e-3))
    assert x.why == "the upstream's own test" and not x.equal_nan
    assert x.describe() == "rms <= 1e-05 and max_abs <= 0.001"
    assert tol.for_array("y").checks == (Check(Metric.ULP, bound=2.0),)
    assert tol.for_array("z").checks == x.checks and tol.for_array("z").shape is ShapeRule.SQUEEZE
    assert x.to_json()["checks"] == [
        {"metric": "rms", "max": 1e-5},
        {"metric": "max_abs", "max": 1e-3},
    ]


@pytest.mark.parametrize(("page", "least"), [("docs/parity.md", 4), ("README.md", 1)])
def test_every_tolerance_on_the_page_parses_and_prints_back(page: str, least: int) -> None:
    text = (PROJECT / page).read_text()
    blocks = re.findall(r"```json\n(\"tolerance\": .*?)\n```", text, re.DOTALL)
    assert len(blocks) >= least
    for block in blocks:
        raw = json.loads("{" + block + "}")["tolerance"]
        assert parse(raw).to_json() == raw
