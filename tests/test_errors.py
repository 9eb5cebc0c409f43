"""The error hierarchy: an artifact's error names it once, wherever it is printed."""

from __future__ import annotations

from fixture_store.errors import ArtifactError, GapError, UsageError


def test_an_artifact_error_names_its_artifact_in_its_message() -> None:
    e = ArtifactError("toy/case", "object is not in the store", fix="fixture-store fetch toy/case")
    assert e.message == "toy/case: object is not in the store"


def test_about_its_own_artifact_an_error_leaves_the_name_to_the_line() -> None:
    e = GapError("toy/case", "not exported yet")
    assert e.about("toy/case") == "declared gap: not exported yet"


def test_about_another_artifact_an_error_keeps_its_name() -> None:
    e = ArtifactError("toy/other", "object is not in the store")
    assert e.about("toy/case") == "toy/other: object is not in the store"


def test_an_error_of_no_artifact_is_said_whole() -> None:
    assert UsageError("bad flag").about("toy/case") == "bad flag"
