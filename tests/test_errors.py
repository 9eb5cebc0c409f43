"""The error hierarchy: an artifact's error names it once, wherever it is printed."""

from __future__ import annotations

from fixture_store.errors import ArtifactError, GapError, RegistryError, UsageError


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


TOY = "provenance/toy.json"


def test_about_its_own_record_a_registry_error_keeps_the_file_and_field_only() -> None:
    e = RegistryError("must be an integer", file=TOY, record="toy/a", field="size")
    assert e.message == "provenance/toy.json: record 'toy/a': field 'size': must be an integer"
    assert e.about("toy/a") == "provenance/toy.json: field 'size': must be an integer"


def test_about_another_record_a_registry_error_keeps_its_whole_location() -> None:
    e = RegistryError("must be an integer", file=TOY, record="toy/a", field="size")
    assert e.about("toy/b") == e.message
    assert RegistryError("bad", record="toy/a").about("toy/a") == "bad"
