"""The command-line forms of record fields: built into JSON, checked by the registry's rules."""

from __future__ import annotations

from typing import Any

import pytest

from fixture_store.errors import RegistryError
from fixture_store.registry import Where, shorthand

WHERE = Where("the command line", "f/x")


@pytest.mark.parametrize(
    ("text", "doc"),
    [
        ("exact", {"metric": "exact"}),
        ("mean_abs:5e-4", {"metric": "mean_abs", "max": 5e-4}),
        ("allclose:atol=1e-6,rtol=1e-4", {"metric": "allclose", "atol": 1e-6, "rtol": 1e-4}),
        ("ulp:max=2,dtype=same_kind", {"metric": "ulp", "max": 2, "dtype": "same_kind"}),
        ('{"metric": "allclose", "atol": 0}', {"metric": "allclose", "atol": 0}),
    ],
)
def test_a_tolerance_short_form_becomes_the_json_a_record_carries(text: str, doc: Any) -> None:
    assert shorthand.tolerance_json(text, WHERE) == doc


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("allclose:atol=1e-6,atol=1e-5", "given twice"),
        ("allclose:atol", "is not a bound"),
        ("allclose:atol=1,=2", "is not KEY=VALUE"),
        ("{not json", "not valid JSON"),
    ],
)
def test_a_malformed_tolerance_names_the_field(text: str, message: str) -> None:
    with pytest.raises(RegistryError, match=message) as e:
        shorthand.tolerance_json(text, WHERE)
    assert e.value.field is not None and e.value.field.startswith("tolerance")


def test_the_registry_judges_the_metric_and_its_bounds() -> None:
    assert shorthand.tolerance("allclose:atol=1e-6", WHERE).atol == 1e-6
    with pytest.raises(RegistryError, match="finite"):
        shorthand.tolerance("allclose:atol=1e400", WHERE)
    with pytest.raises(RegistryError, match="unknown metric"):
        shorthand.tolerance("closeish", WHERE)


def test_metadata_is_text_unless_given_as_json_over_a_file() -> None:
    base = shorthand.metadata_file_json('{"model": "x", "layers": 1}', WHERE)
    got = shorthand.metadata_json(["model=dinov2", "version=1.10", "layers:=12"], base, WHERE)
    assert got == {"model": "dinov2", "version": "1.10", "layers": 12}
    with pytest.raises(RegistryError, match="given twice"):
        shorthand.metadata_json(["a=1", "a=2"], {}, WHERE)
    with pytest.raises(RegistryError, match="JSON object"):
        shorthand.metadata_file_json("[1, 2]", WHERE)


def test_stated_fields_are_checked_as_a_records_json_is() -> None:
    stated = shorthand.stated(
        WHERE,
        license="MIT",
        input_shape="1,3,224,224",
        command="python gen.py --name 'a b'",
        seed=7,
    )
    assert stated.input_shape == (1, 3, 224, 224)
    assert stated.command == ("python", "gen.py", "--name", "a b") and stated.seed == 7
    with pytest.raises(RegistryError, match="needs an --upstream"):
        shorthand.stated(WHERE, upstream_license="MIT")
    with pytest.raises(RegistryError, match="not a shape"):
        shorthand.stated(WHERE, input_shape="1,x")


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"x": ' + "[" * 5000 + "]" * 5000 + "}", "nested more than 64 levels deep"),
        ('{"x": ' + "9" * 5000 + "}", "more than 20 digits"),
        ('{"x": ' + "9" * 30 + "}", "more than 20 digits"),
        ('{"x": Infinity}', "not finite"),
        ('{"x": "\\ud800"}', "lone surrogate"),
    ],
    ids=["deep-5000", "digits-5000", "digits-30", "infinity", "surrogate"],
)
def test_json_given_on_the_command_line_is_held_to_the_registry_bounds(
    text: str, said: str
) -> None:
    """``--metadata-file``, ``--metadata KEY:=JSON`` and ``--tolerance`` JSON: a RegistryError
    naming the option's field, never a RecursionError or ValueError."""
    with pytest.raises(RegistryError, match=said) as caught:
        shorthand.metadata_file_json(text, WHERE)
    assert caught.value.field is not None and caught.value.field.startswith("metadata")
    with pytest.raises(RegistryError, match=said):
        shorthand.metadata_json([f"k:={text}"], {}, WHERE)


def test_a_pypi_source_is_a_package_source_checked_by_the_pin_rules() -> None:
    source = shorthand.package_source(
        "pypi:tinydata==1.0.0/tinydata/data/a.bin",
        WHERE,
        file="tinydata-1.0.0-py3-none-any.whl",
        file_digest="sha256:" + "a" * 64,
    )
    assert source.to_json()["path"] == "tinydata/data/a.bin"
    assert source.requirement == "tinydata==1.0.0"
    for text, why in (
        ("pypi:tinydata>=1/a.bin", "not an exact pin"),
        ("pypi:tinydata==1.0.0", "names no file"),
        ("pypi:tinydata==1.0.0/../a.bin", "source.path"),
    ):
        with pytest.raises(RegistryError) as caught:
            shorthand.package_source(text, WHERE, file="t.whl", file_digest="sha256:" + "a" * 64)
        assert why in str(caught.value) and "the command line" in str(caught.value)
