"""Limits profiles: validated values, the named profiles, and tightening only."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fixture_store import limits
from fixture_store.errors import UsageError
from fixture_store.limits import DEFAULT, GIB_1, LIMIT_FIELDS, GiB, MiB


def test_1gib_profile_is_exactly_as_specified() -> None:
    p = limits.profile("1GiB")
    assert p is GIB_1
    for name in (
        "archive_bytes",
        "member_bytes",
        "expanded_bytes",
        "tensor_bytes",
        "total_array_bytes",
    ):
        assert getattr(p, name) == GiB
    assert p.metadata_bytes == MiB
    assert p.tensor_count == 10_000
    assert p.tensor_rank == 8
    assert p.tensor_dimension == 65_536


def test_no_profile_name_means_default_and_unknown_names_are_refused() -> None:
    assert limits.profile(None) is DEFAULT
    with pytest.raises(UsageError, match="unknown limits profile '2GiB'"):
        limits.profile("2GiB")


@pytest.mark.parametrize("field", LIMIT_FIELDS)
@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "10"])
def test_every_field_must_be_a_positive_integer(field: str, bad: Any) -> None:
    with pytest.raises(UsageError, match=field):
        dataclasses.replace(DEFAULT, **{field: bad})


def test_profiles_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULT.archive_bytes = 1  # type: ignore[misc]


@given(field=st.sampled_from(LIMIT_FIELDS), data=st.data())
def test_tighten_lowers_and_never_loosens(field: str, data: st.DataObject) -> None:
    current = getattr(GIB_1, field)
    lower = data.draw(st.integers(1, current))
    tightened = limits.tighten(GIB_1, **{field: lower})
    assert getattr(tightened, field) == lower
    assert all(getattr(tightened, f) == getattr(GIB_1, f) for f in LIMIT_FIELDS if f != field)
    higher = data.draw(st.integers(current + 1, current * 4))
    with pytest.raises(UsageError, match="may only tighten"):
        limits.tighten(GIB_1, **{field: higher})


def test_tighten_refuses_unknown_fields_and_bad_values() -> None:
    with pytest.raises(UsageError, match="unknown limit"):
        limits.tighten(DEFAULT, widgets=3)
    with pytest.raises(UsageError, match="positive integer"):
        limits.tighten(DEFAULT, member_count=0)
    assert limits.tighten(DEFAULT) is DEFAULT
