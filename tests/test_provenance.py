"""Provenance export (in-toto Statement v1 + SLSA provenance v1) and lineage chains."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from fixture_store import provenance
from fixture_store.cli import main
from fixture_store.objects.store import Store
from fixture_store.regenerate import regenerate
from fixture_store.registry import load
from tests.support.regen_project import PYTHON, make_project


def _project(tmp_path: Path) -> tuple[Path, Store]:
    root = make_project(tmp_path / "p")
    store = Store.at(tmp_path / "store").ensure()
    regenerate(root, store, "toy", scratch=tmp_path / "s", accept=True, python=PYTHON)
    return root, store


def test_statement_has_subjects_dependencies_and_environment(tmp_path: Path) -> None:
    root, store = _project(tmp_path)
    registry = load(root)
    case, values = registry.get("toy/case"), registry.get("toy/values.npy")
    st = provenance.in_toto_statement(registry, "toy/case")
    assert st["_type"] == "https://in-toto.io/Statement/v1"
    assert st["predicateType"] == "https://slsa.dev/provenance/v1"
    subjects = {s["name"]: s["digest"]["sha256"] for s in st["subject"]}
    assert subjects["toy/case"] == case.digest.hex  # type: ignore[union-attr]
    assert subjects["toy/case/output_0.npy"] == (case.members.members["output_0.npy"].hex)  # type: ignore[union-attr]
    bd = st["predicate"]["buildDefinition"]
    (dep,) = bd["resolvedDependencies"]
    assert dep == {
        "digest": {"sha256": values.digest.hex},  # type: ignore[union-attr]
        "name": "toy/values.npy",
        "uri": "fixture-store:toy/values.npy",
    }
    assert bd["internalParameters"]["environment"]["packages"]["numpy"]
    assert bd["externalParameters"]["params"]["scale"] == 1.0
    json.dumps(st)  # plain JSON all the way down

    result = CliRunner().invoke(
        main,
        [
            "--store",
            str(store.root),
            "--registry",
            str(root),
            "provenance",
            "toy/case",
            "--format",
            "in-toto",
        ],
    )
    assert result.exit_code == 0 and json.loads(result.output) == st


def test_lineage_walks_parents(tmp_path: Path) -> None:
    root, store = _project(tmp_path)
    steps = list(provenance.lineage(load(root), "toy/case"))
    assert [(s.depth, s.name) for s in steps] == [(0, "toy/case"), (1, "toy/values.npy")]
    result = CliRunner().invoke(
        main, ["--store", str(store.root), "--registry", str(root), "show", "toy/case", "--lineage"]
    )
    assert result.exit_code == 0
    assert result.output.splitlines()[1].lstrip().startswith("<- toy/values.npy")


def test_package_source_becomes_a_purl_dependency(tmp_path: Path) -> None:
    root = tmp_path / "p"
    (root / "provenance").mkdir(parents=True)
    digest = "sha256:" + "ab" * 32
    (root / "provenance" / "up.json").write_text(
        json.dumps(
            {
                "format_version": 1,
                "records": {
                    "up/x.pb": {
                        "kind": "fixture",
                        "digest": "sha256:" + "cd" * 32,
                        "size": 3,
                        "source": {
                            "type": "package",
                            "requirement": "onnx==1.22.0",
                            "file": "onnx-1.22.0-cp311-abi3-manylinux.whl",
                            "file_digest": digest,
                            "path": "onnx/x.pb",
                        },
                    }
                },
            }
        )
    )
    st = provenance.in_toto_statement(load(root), "up/x.pb")
    (dep,) = st["predicate"]["buildDefinition"]["resolvedDependencies"]
    assert dep["uri"] == "pkg:pypi/onnx@1.22.0?file_name=onnx-1.22.0-cp311-abi3-manylinux.whl"
    assert dep["digest"] == {"sha256": "ab" * 32}


def _purls(value: Any) -> list[str]:
    """Every package URL in a JSON value."""
    if isinstance(value, str):
        return [value] if value.startswith("pkg:") else []
    if isinstance(value, dict):
        return [p for v in value.values() for p in _purls(v)]
    if isinstance(value, list):
        return [p for v in value for p in _purls(v)]
    return []


def _read_purl(text: str) -> Any:
    """``text`` read by a purl library; it must print back as written (the canonical form)."""
    from packageurl import PackageURL

    purl = PackageURL.from_string(text)
    assert purl.to_string() == text, f"{text} is not a canonical purl: {purl.to_string()}"
    return purl


def test_every_purl_the_export_writes_reads_back_with_a_purl_library(tmp_path: Path) -> None:
    """A distribution file is the ``file_name`` qualifier (a ``#subpath`` is a path inside the
    package); a file inside a package upstream is the subpath; names, versions and file names
    that need it (``_``, ``+``, uppercase) are normalized and percent-encoded as the purl spec
    says, so a purl parser reads the same values back."""
    root = tmp_path / "p"
    (root / "provenance").mkdir(parents=True)
    wheel = "Zope_Interface-1.0+cpu-cp311-abi3-manylinux.whl"
    record = {
        "kind": "fixture",
        "digest": "sha256:" + "cd" * 32,
        "size": 3,
        "source": {
            "type": "package",
            "requirement": "Zope_Interface==1.0+cpu",
            "file": wheel,
            "file_digest": "sha256:" + "ab" * 32,
            "path": "zope/x.pb",
        },
        "upstream": [{"type": "package", "requirement": "onnx==1.22.0", "path": "onnx/a+b.py"}],
    }
    (root / "provenance" / "up.json").write_text(
        json.dumps({"format_version": 1, "records": {"up/x.pb": record}})
    )
    statement = provenance.in_toto_statement(load(root), "up/x.pb")
    source, upstream = (_read_purl(p) for p in _purls(statement))
    assert (source.type, source.name, source.version) == ("pypi", "zope-interface", "1.0+cpu")
    assert source.qualifiers == {"file_name": wheel} and source.subpath is None
    assert (upstream.name, upstream.version, upstream.subpath) == ("onnx", "1.22.0", "onnx/a+b.py")
    assert not upstream.qualifiers


def test_every_purl_of_the_repositorys_own_registry_reads_back() -> None:
    """The export of one record of each family of this repository's registry: every purl in
    it reads back with a purl library (the corpus's onnx wheel among them)."""
    registry = load(Path(__file__).resolve().parents[1])
    purls = [
        p
        for family in registry.families.values()
        for name in list(family.kinds())[:1]
        for p in _purls(provenance.in_toto_statement(registry, name, members=False))
    ]
    assert purls, "the corpus's package sources write purls"
    for text in purls:
        assert "file_name" in _read_purl(text).qualifiers


def test_pinned_upstreams_are_resolved_dependencies(tmp_path: Path, monkeypatch: Any) -> None:
    from fixture_store import ingest
    from fixture_store.registry import Annotations, GitUpstream, HubUpstream, Where

    monkeypatch.setenv("FIXTURE_STORE_DIR", str(tmp_path / "store"))
    (tmp_path / "provenance").mkdir()
    (tmp_path / "ref.bin").write_bytes(b"reference")
    rev = "f826b80d28226b62986cc218e5cec390b1096902"
    ups = (
        HubUpstream("MIT/ast", rev, "model.safetensors", license="bsd-3-clause"),
        GitUpstream("https://github.com/o/r", rev, "gen.py", digest="sha256:" + "ab" * 32),
    )
    for up in ups:
        up.check(Where(), "upstream")
    store = Store.at(tmp_path / "store").ensure()
    ingest.add(
        store,
        load(tmp_path),
        tmp_path / "ref.bin",
        name="ref/out",
        kind="fixture",
        annotations=Annotations(upstream=ups),
    )
    statement = provenance.in_toto_statement(load(tmp_path), "ref/out")
    deps = statement["predicate"]["buildDefinition"]["resolvedDependencies"]
    assert {
        "uri": f"hf://MIT/ast@{rev}/model.safetensors",
        "digest": {"gitCommit": rev},
        "annotations": {"role": "upstream", "license": "bsd-3-clause"},
    } in deps
    assert {
        "uri": f"git+https://github.com/o/r@{rev}#gen.py",
        "digest": {"gitCommit": rev, "sha256": "ab" * 32},
        "annotations": {"role": "upstream"},
    } in deps
