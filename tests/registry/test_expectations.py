"""Expectations per environment: conditions on where a comparison runs select a layered rule."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fixture_store.errors import RegistryError, UsageError
from fixture_store.registry import Metric, Tolerance, Where, conditions
from fixture_store.registry.environment import DEVICES, Environment
from fixture_store.registry.tolerance import Check

WHERE = Where("provenance/fam.json", "fam/x")
RAW: dict[str, Any] = {
    "metric": "rms",
    "max": 1e-6,
    "per_array": {"logits": {"max": 1e-5}},
    "expectations": {
        "device:cuda": {"max": 1e-4, "why": "TF32 matmuls"},
        "device:cuda,dtype:bfloat16": {
            "metric": "max_abs",
            "max": 0.05,
            "reference": "fam/x_bf16.npz",
        },
        "runtime:onnxruntime,provider:CUDAExecutionProvider": {
            "per_array": {"logits": {"max": 1e-3}}
        },
    },
}


def parse(raw: Any) -> Tolerance:
    return Tolerance.from_json(raw, WHERE)


def test_an_environment_prints_itself_back_in_a_fixed_order() -> None:
    env = Environment.parse(" platform:linux, device:cuda,runtime:torch ")
    assert env == Environment(device="cuda", runtime="torch", platform="linux")
    assert str(env) == "device:cuda,runtime:torch,platform:linux"
    assert Environment.parse(str(env)) == env
    assert Environment.parse("") == Environment()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("device:gpu", "none of cpu"),
        ("device:cuda,device:cpu", "given twice"),
        ("colour:red", "no KIND:VALUE"),
        ("device", "no KIND:VALUE"),
        ("dtype:float33", "no dtype name"),
        ("runtime:to rch", "not a name"),
    ],
)
def test_a_malformed_environment_is_refused_with_the_fix(text: str, says: str) -> None:
    with pytest.raises(UsageError, match=says) as e:
        Environment.parse(text)
    assert e.value.fix is not None and "device:cuda,runtime:torch" in e.value.fix


def test_environment_conditions_hold_on_the_facts_of_the_environment() -> None:
    env = Environment(device="cuda", provider="CUDAExecutionProvider")
    assert conditions.holds("device:cuda", env)
    assert not conditions.holds("device:cpu", env)
    assert not conditions.holds("dtype:float32", env)  # unknown: does not hold
    assert not conditions.holds("device:cuda")  # no environment: nothing known
    with pytest.raises(UsageError, match="none of"):
        conditions.parse("device:gpu")


def test_the_most_specific_entry_applies_layered_over_the_record() -> None:
    tol = parse(RAW)
    assert tol.to_json() == RAW
    assert tol.in_environment(None) is tol
    assert tol.in_environment(Environment(device="cpu")) is tol
    cuda = tol.in_environment(Environment(device="cuda", dtype="float32"))
    x = cuda.for_array("x")
    assert x.checks == (Check(Metric.RMS, bound=1e-4),) and x.why == "TF32 matmuls"
    assert cuda.for_array("logits").checks == (Check(Metric.RMS, bound=1e-5),)
    bf16 = Environment(device="cuda", dtype="bfloat16")
    entry = tol.expectation(bf16)
    assert entry is not None and entry.reference == "fam/x_bf16.npz"
    # A metric of its own replaces the record's; the record's per_array keeps its bound on it.
    assert tol.in_environment(bf16).for_array("x").checks == (Check(Metric.MAX_ABS, bound=0.05),)
    ort = Environment(runtime="onnxruntime", provider="CUDAExecutionProvider")
    assert tol.in_environment(ort).for_array("logits").checks == (Check(Metric.RMS, bound=1e-3),)
    assert tol.in_environment(ort).for_array("x").checks == (Check(Metric.RMS, bound=1e-6),)


def test_two_entries_that_hold_and_are_equally_specific_are_an_error_naming_both() -> None:
    tol = parse(
        {"metric": "rms", "max": 1e-6, "expectations": {"device:cuda": {}, "dtype:bfloat16": {}}}
    )
    with pytest.raises(RegistryError, match="'device:cuda' and 'dtype:bfloat16'") as e:
        tol.in_environment(Environment(device="cuda", dtype="bfloat16"))
    assert e.value.fix is not None and "device:cuda,dtype:bfloat16" in e.value.fix
    assert tol.in_environment(Environment(device="cuda")).expectations is None


@pytest.mark.parametrize(
    ("expectations", "field", "says"),
    [
        ({"device:gpu": {}}, "expectations.device:gpu", "none of"),
        ({"moon:full": {}}, "expectations.moon:full", "unknown condition"),
        ({"device:cuda,device:cpu": {}}, "expectations.device:cuda,device:cpu", "given twice"),
        ({"device:cuda": {"colour": 1}}, "expectations.device:cuda.colour", "unknown field"),
        ({"device:cuda": {"atol": 1}}, "expectations.device:cuda.atol", "does not apply"),
        ({"device:cuda": {"metric": "ulp"}}, "expectations.device:cuda.max", "needs its bound"),
        ({"device:cuda": {"reference": ""}}, "expectations.device:cuda.reference", "record"),
        ({"device:cuda": []}, "expectations.device:cuda", "must be an object"),
        ({}, "expectations", "must be an object"),
        ({"device:cuda": {"expectations": {}}}, "expectations.device:cuda.expectations", "unknown"),
    ],
)
def test_a_bad_expectation_is_refused_naming_its_field(
    expectations: Any, field: str, says: str
) -> None:
    with pytest.raises(RegistryError, match=says) as e:
        parse({"metric": "rms", "max": 1e-6, "expectations": expectations})
    assert e.value.field == f"tolerance.{field}"


def test_an_entrys_per_array_key_must_name_an_array_of_the_manifest() -> None:
    tol = parse(
        {"metric": "rms", "max": 1, "expectations": {"device:cuda": {"per_array": {"y": {}}}}}
    )
    with pytest.raises(RegistryError, match="names no array"):
        tol.check_names(["x"], WHERE)


def test_the_shipped_schema_accepts_an_expectation_and_refuses_an_unknown_field() -> None:
    import jsonschema

    from fixture_store.registry import files

    schema = files.schema()
    record = {"$ref": "#/$defs/tolerance", "$defs": schema["$defs"]}
    jsonschema.validate(json.loads(json.dumps(RAW)), record)
    bad = {**RAW, "expectations": {"device:cuda": {"colour": 1}}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, record)


FACTS = st.fixed_dictionaries(
    {},
    optional={
        "device": st.sampled_from(DEVICES),
        "runtime": st.sampled_from(["torch", "jax", "onnxruntime"]),
        "dtype": st.sampled_from(["float32", "bfloat16"]),
    },
)
KEYS = st.lists(
    FACTS.filter(bool).map(lambda f: ",".join(f"{k}:{v}" for k, v in f.items())),
    unique=True,
    max_size=6,
)


@given(keys=KEYS, facts=FACTS)
def test_the_entry_chosen_holds_and_none_that_holds_is_more_specific(
    keys: list[str], facts: dict[str, str]
) -> None:
    """The rule, against a reference written from its definition: of the entries whose every
    condition is a fact of the environment, the one with the most conditions; a tie an error."""
    bound = {key: float(i + 1) for i, key in enumerate(keys)}
    tol = parse(
        {"metric": "rms", "max": 0.0, "expectations": {k: {"max": bound[k]} for k in keys}}
        if keys
        else {"metric": "rms", "max": 0.0}
    )
    env = Environment(**facts)
    holding = [k for k in keys if all(f"{c}" in str(env).split(",") for c in k.split(","))]
    most = max((k.count(",") for k in holding), default=-1)
    best = [k for k in holding if k.count(",") == most]
    if len(best) > 1:
        with pytest.raises(RegistryError, match="equally specific"):
            tol.in_environment(env)
        return
    expected = bound[best[0]] if best else 0.0
    assert tol.in_environment(env).for_array("a").bound == expected
