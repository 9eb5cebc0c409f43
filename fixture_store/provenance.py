"""Provenance export and lineage: where an artifact came from, as data.

``in_toto_statement`` gives an in-toto Statement v1 whose predicate is SLSA provenance v1:
subjects are the artifact's digests, resolved dependencies are its pinned upstream source and its
lineage parents (each with its digest), and the build environment recorded at regeneration.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

from fixture_store.objects.digests import Digest
from fixture_store.registry import Record, Registry

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
BUILD_TYPE = "urn:fixture-store:build-type:registry-record:v1"


@dataclass(frozen=True)
class LineageStep:
    depth: int
    digest: str
    name: str | None
    record: Record | None


def by_digest(registry: Registry) -> dict[str, Record]:
    found: dict[str, Record] = {}
    for r in registry.records():
        if r.digest is not None:
            found.setdefault(r.digest.text, r)
    return found


def lineage(registry: Registry, name: str) -> Iterator[LineageStep]:
    """NAME, then its parents depth-first (a parent with no record is named by digest only)."""
    index = by_digest(registry)
    root = registry.get(name)
    seen: set[str] = set()

    def walk(record: Record, depth: int) -> Iterator[LineageStep]:
        assert record.digest is not None
        yield LineageStep(depth, record.digest.text, record.name, record)
        for parent in record.lineage:
            if parent in seen:
                continue
            seen.add(parent)
            rec = index.get(parent)
            if rec is None:
                yield LineageStep(depth + 1, parent, _named_parent(record, parent), None)
            else:
                yield from walk(rec, depth + 1)

    yield from walk(root, 0)


def _named_parent(child: Record, digest: str) -> str | None:
    """The name a child's metadata gives an unregistered parent (a converter records it)."""
    parent = (child.metadata or {}).get("parent")
    if isinstance(parent, Mapping) and parent.get("digest") == digest:
        name = parent.get("name")
        return str(name) if name else None
    return None


def _digest_set(d: Digest) -> dict[str, str]:
    return {"sha256": d.hex}


def _source_dependency(record: Record) -> dict[str, Any] | None:
    src = record.source
    f = src.fields
    if src.type == "package":
        name, _, ver = str(f["requirement"]).partition("==")
        hexd = str(f["file_digest"]).removeprefix("sha256:")
        return {
            "uri": f"pkg:pypi/{name.lower()}@{ver}#{f['file']}",
            "name": str(f["file"]),
            "digest": {"sha256": hexd},
            "annotations": {"path": f["path"], "requirement": f["requirement"]},
        }
    if src.type == "hub":
        kind = f.get("repo_type", "model")
        return {
            "uri": f"hf://{'' if kind == 'model' else kind + 's/'}{f['repo_id']}"
            f"@{f['revision']}/{f['path']}",
            "digest": {"gitCommit": f["revision"]},
        }
    if src.type == "url":
        assert record.digest is not None
        return {"uri": str(f["url"]), "digest": _digest_set(record.digest)}
    return None


def in_toto_statement(registry: Registry, name: str, *, members: bool = True) -> dict[str, Any]:
    record = registry.get(name)
    if record.digest is None:
        from fixture_store.errors import GapError

        raise GapError(name, record.gap or "no digest")
    subjects: list[dict[str, Any]] = [{"name": name, "digest": _digest_set(record.digest)}]
    if members and record.members is not None:
        subjects += [{"name": f"{name}/{m}", "digest": _digest_set(d)} for m, d in record.members]
    deps: list[dict[str, Any]] = []
    src_dep = _source_dependency(record)
    if src_dep is not None:
        deps.append(src_dep)
    index = by_digest(registry)
    for parent in record.lineage:
        rec = index.get(parent)
        dep: dict[str, Any] = {"digest": {"sha256": parent.removeprefix("sha256:")}}
        if rec is not None:
            dep["name"] = rec.name
            dep["uri"] = f"fixture-store:{rec.name}"
            up = _source_dependency(rec)
            if up is not None:
                dep["annotations"] = {"source": up["uri"]}
        deps.append(dep)
    fields = dict(record.source.fields)
    environment = fields.pop("environment", None)
    external: dict[str, Any] = {
        "source": record.source.type,
        **{k: v for k, v in fields.items() if k != "params"},
    }
    if "params" in fields:
        external["params"] = fields["params"]
    internal: dict[str, Any] = {"kind": record.kind}
    if record.tolerance:
        internal["tolerance"] = record.tolerance
    if environment is not None:
        internal["environment"] = environment
    predicate = {
        "buildDefinition": {
            "buildType": BUILD_TYPE,
            "externalParameters": external,
            "internalParameters": internal,
            "resolvedDependencies": deps,
        },
        "runDetails": {
            "builder": {
                "id": "urn:fixture-store:builder:"
                + (
                    f"regenerate:{fields['stage']}"
                    if record.source.type == "generator"
                    else f"{record.source.type}-source"
                ),
                "version": {"fixture-store": version("fixture-store")},
            },
            "metadata": {"invocationId": f"{name}@{record.digest.text}"},
        },
    }
    return {
        "_type": STATEMENT_TYPE,
        "subject": subjects,
        "predicateType": PREDICATE_TYPE,
        "predicate": _plain(predicate),
    }


def _plain(value: Any) -> Any:
    if isinstance(value, dict) or hasattr(value, "items"):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
