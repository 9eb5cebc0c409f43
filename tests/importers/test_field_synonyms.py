"""Every name of every row of :mod:`fixture_store.importers.fields`, at the position the import
page documents it (the document, an entry, beside the upstream, inside the upstream, an
array), with any value: the import returns entries or refuses with its own one-line error,
never a traceback."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixture_store import importers
from fixture_store.errors import FixtureStoreError
from fixture_store.importers import fields
from tests.support.cli import run

REV = "3f49326e4d9e8a4b0b1c1a6c8e4f2a9d7c1b5e60"
SHA = hashlib.sha256(b"a").hexdigest()
UPSTREAM = {"repository": "google/vit-base", "revision": REV, "checkpoint": "model.bin"}

# (position, field name) for every name of every row, where the docs say it is read.
POSITIONS = [
    *(("document", name) for row in fields.DOCUMENT for name in row.names),
    *(("entry", name) for row in fields.ENTRY for name in row.names),
    *(("upstream", name) for row in fields.UPSTREAM for name in row.names),
    *(("array", name) for row in fields.ARRAY for name in row.names),
]

_SCALARS = (
    st.none() | st.booleans() | st.integers(-(10**25), 10**25) | st.floats() | st.text(max_size=12)
)
_VALUES = st.recursive(
    _SCALARS
    | st.sampled_from(
        [
            SHA,
            f"sha256:{SHA}",
            f"md5:{'0' * 32}",
            REV,
            "main",
            1e-5,
            "google/vit-base",
            f"google/vit-base@{REV}:model.bin",
            "https://github.com/o/r",
            UPSTREAM,
        ]
    ),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def _manifest(position: str, name: str, value: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "sha256": SHA,
        "upstream": dict(UPSTREAM),
        "arrays": {"x": {"dtype": "float32", "shape": [1]}},
    }
    doc: dict[str, Any] = {"format_version": 1, "files": {"a.bin": entry}}
    if position == "document":
        doc[name] = value
    elif position == "entry":
        entry[name] = value
    elif position == "upstream":
        entry["upstream"][name] = value
    else:
        entry["arrays"]["x"][name] = value
    return doc


@pytest.mark.parametrize(("position", "name"), POSITIONS)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=_VALUES, host=st.sampled_from([None, "hf", "github"]))
def test_every_synonym_at_its_position_parses_or_is_refused_by_the_importer(
    position: str, name: str, value: Any, host: str | None
) -> None:
    text = json.dumps(_manifest(position, name, value))
    refused: FixtureStoreError | None = None
    try:
        importers.parse("json", text, "m.json", importers.ReadOptions(upstream_host=host))
    except FixtureStoreError as e:  # anything else (a KeyError, a TypeError) fails the test
        refused = e
    if refused is not None:
        assert refused.message.startswith("m.json")  # names the manifest first


@pytest.mark.usefixtures("store")
@pytest.mark.parametrize(("position", "name"), POSITIONS[:: max(1, len(POSITIONS) // 12)])
def test_through_the_command_no_value_makes_a_traceback(
    project: Path, position: str, name: str
) -> None:
    (project / "refs").mkdir()
    (project / "refs" / "a.bin").write_bytes(b"a")
    for value in ({"x": [1, None]}, "", -1, 10**30 // 7, "a\x00b"):
        path = project / "refs" / "manifest.json"
        path.write_text(json.dumps(_manifest(position, name, value)))
        code, _, err = run(
            "import", "refs/manifest.json", "--family", "refs", "--dry-run", "--upstream-host", "hf"
        )
        assert code in (0, 1, 2) and "Traceback" not in err
        assert code == 0 or err.startswith("error: ")
