"""pooch registries, as pooch.make_registry writes them and as a module holds them."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pooch
import pytest

from fixture_store import registry as registry_mod
from fixture_store.importers import pooch as pooch_format
from fixture_store.importers.entry import ManifestError
from fixture_store.objects.store import Store
from fixture_store.verify import Status, verify_names
from tests.support.importing import family_doc, refusal, run_import, write

FILES = {"a.bin": b"alpha" * 10, "sub/b.txt": b"beta\n"}
SHA_A = hashlib.sha256(FILES["a.bin"]).hexdigest()


def test_a_registry_pooch_writes_imports_and_verifies(store: Store, project: Path) -> None:
    data = project / "data"
    write(data, FILES)
    registry_file = project / "registry.txt"
    pooch.make_registry(str(data), str(registry_file))
    planned, done = run_import(store, project, registry_file, root=data)
    assert planned.format == "pooch"
    assert sorted(r.name for r in done.written) == ["imp/a.bin", "imp/sub/b.txt"]
    record = registry_mod.load(project).get("imp/a.bin")
    assert record.object.hex == SHA_A
    assert record.source.to_json() == {"type": "local", "path": "data/a.bin"}
    results = verify_names(store, registry_mod.load(project), ["imp/a.bin", "imp/sub/b.txt"])
    assert [r.status for r in results] == [Status.VERIFIED, Status.VERIFIED]


def test_pooch_rules_comments_prefix_case_quotes_and_url() -> None:
    text = (
        "# a comment\n"
        "\n"
        f"a.bin SHA256:{SHA_A.upper()}\n"
        f"'sub/b.txt' {SHA_A} https://example.org/b.txt\n"
    )
    entries = pooch_format.parse(text, "registry.txt")
    assert [e.path for e in entries] == ["a.bin", "sub/b.txt"]
    assert entries[0].sha256 == SHA_A  # compared in lower case, as pooch does
    assert entries[1].url == "https://example.org/b.txt"
    assert entries[1].where == "registry.txt line 4"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (f"a.bin {SHA_A[:-1]}z", "non-hex"),
        (f"a.bin {SHA_A[:-2]}", "has 62 hex characters"),
        (f"../a.bin {SHA_A}", "'..' segment"),
        (f"/etc/passwd {SHA_A}", "is absolute"),
        (f"a.bin md6:{'0' * 32}", "unsupported digest algorithm 'md6'"),
        (f"a.bin xxh128:{'0' * 32}", "unsupported digest algorithm"),
        (f"a.bin {SHA_A} url extra", "expected 2 or 3 elements"),
        (f"'a.bin {SHA_A}", "cannot split"),
    ],
)
def test_hostile_registry_lines_are_refused_naming_the_line(line: str, message: str) -> None:
    where, said = refusal(lambda: pooch_format.parse(f"ok.bin {SHA_A}\n{line}\n", "registry.txt"))
    assert re.search(message, said)
    assert where == "registry.txt line 2"


def test_a_name_listed_twice_is_refused_naming_both_lines() -> None:
    where, said = refusal(
        lambda: pooch_format.parse(f"a.bin {SHA_A}\na.bin {SHA_A}\n", "registry.txt")
    )
    assert "listed twice (first at registry.txt line 1)" in said
    assert where == "registry.txt line 2"  # the first stands on its own


def test_the_module_form_is_read_without_running_it(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    text = (
        "import pathlib\n"
        f"pathlib.Path({str(marker)!r}).touch()\n"
        "registry = {\n"
        f"    'data/a.bin': '{SHA_A}',\n"
        "}\n"
        "registry_urls = {'data/a.bin': 'https://example.org/a.bin'}\n"
    )
    (entry,) = pooch_format.parse(text, "_registry.py")
    assert entry.path == "data/a.bin"
    assert entry.url == "https://example.org/a.bin"
    assert entry.where == "_registry.py line 4"
    assert not marker.exists()


def test_a_module_listing_a_key_twice_is_refused() -> None:
    text = f"registry = {{\n  'a.bin': '{SHA_A}',\n  'a.bin': '{SHA_A}',\n}}\n"
    with pytest.raises(ManifestError, match="listed twice") as caught:
        pooch_format.parse(text, "_registry.py")
    assert caught.value.where == "_registry.py line 3"


def test_a_module_without_a_registry_literal_is_refused() -> None:
    with pytest.raises(ManifestError, match="no 'registry' dict"):
        pooch_format.parse("registry_urls = {}\n", "_registry.py")
    with pytest.raises(ManifestError, match="not a dict literal"):
        pooch_format.parse("registry = dict(a='b')\n", "_registry.py")


def test_a_mismatching_file_registers_nothing(store: Store, project: Path) -> None:
    data = project / "data"
    write(data, FILES)
    registry_file = data / "registry.txt"
    pooch.make_registry(str(data), str(registry_file))
    (data / "sub" / "b.txt").write_bytes(b"changed\n")
    from fixture_store.importers.register import ImportRefusedError

    with pytest.raises(ImportRefusedError, match=r"sub/b\.txt: sha256 of the bytes is"):
        run_import(store, project, registry_file)
    assert family_doc(project) == {}
    assert list(store.iter_objects()) == []


# scikit-image 0.26.0 ships 32 of the data files its own pooch registry lists (with SHA-256) in
# its wheel: the registry and the files are read inside the pinned distribution.
SKIMAGE_WHEEL = "scikit_image-0.26.0-cp311-cp311-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl"
SKIMAGE_DIGEST = "sha256:74aa5518ccea28121f57a95374581d3b979839adc25bb03f289b1bc9b99c58af"


@pytest.mark.network
def test_scikit_image_registry_imports_through_its_package_source(
    store: Store, project: Path
) -> None:
    from tests.support.cli import run

    code, out, err = run(
        "import",
        "pooch",
        "skimage/data/_registry.py",
        "--family",
        "skimage",
        "--root",
        "skimage",
        "--package",
        "scikit-image==0.26.0",
        "--dist",
        SKIMAGE_WHEEL,
        "--dist-digest",
        SKIMAGE_DIGEST,
        "--json",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert len(doc["accepted"]) == 32
    assert len(doc["imported"]["written"]) == 32
    assert "data/astronaut.png" in [a["path"] for a in doc["accepted"]]
    assert len(doc["absent"]) == 86  # listed, fetched by pooch at run time, not in the wheel
    assert sorted(o for o in doc["orphans"] if o.startswith("data/")) == [
        "data/README.txt",
        "data/__init__.py",
        "data/__init__.pyi",
        "data/_binary_blobs.py",
        "data/_fetchers.py",
    ]
    registry = registry_mod.load(project)
    record = registry.get("skimage/data/astronaut.png")
    assert record.source.to_json()["path"] == "skimage/data/astronaut.png"
    assert record.source.to_json()["file_digest"] == SKIMAGE_DIGEST
    names = registry.select(families=["skimage"])
    assert {r.status for r in verify_names(store, registry, names)} == {Status.VERIFIED}


# The module form is read token by token: nothing is parsed but the two literals.
@pytest.mark.parametrize(
    "elsewhere",
    [
        "x = " + "+".join(["1"] * 60_000),
        "y = " + "(" * 5_000 + ")" * 5_000,
        "def f():\n    registry = {'z.bin': 1}\n    return " + "-".join(["2"] * 60_000),
    ],
    ids=["60000-terms", "5000-parentheses", "in-a-function"],
)
def test_a_huge_expression_elsewhere_in_the_module_costs_one_token_pass(elsewhere: str) -> None:
    text = f"registry = {{'a.bin': '{SHA_A}'}}\n{elsewhere}\n"
    (entry,) = pooch_format.parse(text, "_registry.py")
    assert entry.path == "a.bin"


def test_a_huge_expression_in_the_registry_is_refused_without_parsing_it() -> None:
    terms = " + ".join(["'a'"] * 60_000)
    with pytest.raises(ManifestError, match="not a dict literal of strings") as caught:
        pooch_format.parse(f"registry = {{\n'a.bin': {terms}}}\n", "_registry.py")
    assert caught.value.where == "_registry.py line 2"


def test_a_url_utf8_cannot_hold_is_refused_naming_the_line() -> None:
    text = f"registry = {{'a.bin': '{SHA_A}'}}\nregistry_urls = {{'a.bin': 'https://x/\\ud800'}}\n"
    with pytest.raises(ManifestError, match="lone surrogate") as caught:
        pooch_format.parse(text, "_registry.py")
    assert caught.value.where == "_registry.py line 1" and "\\ud800" in str(caught.value)
