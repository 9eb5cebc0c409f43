"""Provenance export and lineage: where an artifact came from, as data.

``in_toto_statement`` gives an in-toto Statement v1 whose predicate is SLSA provenance v1:
subjects are the artifact's digests, resolved dependencies are its pinned upstream source, its
lineage parents (each with its digest) and its pinned upstreams (with the digests known of them),
and the build environment recorded at regeneration.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any
from urllib.parse import quote

from fixture_store.objects.digests import Digest
from fixture_store.registry import (
    GeneratorSource,
    GitUpstream,
    HubSource,
    HubUpstream,
    PackageSource,
    PackageUpstream,
    Record,
    Registry,
    Upstream,
    UrlSource,
)

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
        yield LineageStep(depth, record.object.text, record.name, record)
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


def pypi_purl(
    name: str, version_: str, *, file_name: str | None = None, subpath: str | None = None
) -> str:
    """The package URL of a PyPI distribution, the one place the export writes one
    (https://github.com/package-url/purl-spec, type ``pypi``): the name lowercased with ``_`` as
    ``-``, the distribution file in the ``file_name`` qualifier (a ``#subpath`` is a path
    *inside* the package, which a wheel's file name is not), every part percent-encoded."""

    def part(text: str) -> str:
        return quote(text, safe="")

    purl = f"pkg:pypi/{part(name.lower().replace('_', '-'))}@{part(version_)}"
    if file_name is not None:
        purl += f"?file_name={part(file_name)}"
    if subpath is not None:
        purl += "#" + "/".join(part(s) for s in subpath.split("/") if s not in ("", ".", ".."))
    return purl


def _digest_set(d: Digest) -> dict[str, str]:
    return {"sha256": d.hex}


def _source_dependency(record: Record) -> dict[str, Any] | None:
    match record.source:
        case PackageSource() as src:
            name, version_ = src.name_and_version
            return {
                "uri": pypi_purl(name, version_, file_name=src.file),
                "name": src.file,
                "digest": {"sha256": src.file_hex},
                "annotations": {"path": src.path, "requirement": src.requirement},
            }
        case HubSource() as src:
            return {"uri": src.uri(), "digest": {"gitCommit": src.revision}}
        case UrlSource() as src:
            return {"uri": src.url, "digest": _digest_set(record.object)}
    return None


def _upstream_dependency(up: Upstream) -> dict[str, Any]:
    """A pinned upstream as a resolved dependency: its URI, and the digests known of it (the
    commit a Hub or git pin names; the file's sha256 when the record gives it)."""
    digest: dict[str, str] = {}
    if isinstance(up, HubUpstream | GitUpstream):
        digest["gitCommit"] = up.revision if isinstance(up, HubUpstream) else up.commit
    if up.digest is not None:
        digest["sha256"] = up.digest.removeprefix("sha256:")
    uri = up.uri()
    if isinstance(up, PackageUpstream):  # a file inside the package: a purl's subpath
        name, _, version_ = up.requirement.partition("==")
        uri = pypi_purl(name, version_, subpath=up.path)
    dep: dict[str, Any] = {"uri": uri, "annotations": {"role": "upstream"}}
    if digest:
        dep["digest"] = digest
    if up.license is not None:
        dep["annotations"]["license"] = up.license
    return dep


def in_toto_statement(registry: Registry, name: str, *, members: bool = True) -> dict[str, Any]:
    record = registry.get(name)
    digest = record.object  # a gap without a digest has no subject: GapError
    subjects: list[dict[str, Any]] = [{"name": name, "digest": _digest_set(digest)}]
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
    deps += [_upstream_dependency(up) for up in record.upstream]
    fields = record.source.to_json()
    source_type = fields.pop("type")
    environment = fields.pop("environment", None)
    params = fields.pop("params", None)
    external: dict[str, Any] = {"source": source_type, **fields}
    if params is not None:
        external["params"] = params
    internal: dict[str, Any] = {"kind": record.kind.value}
    if record.tolerance is not None:
        internal["tolerance"] = record.tolerance.to_json()
    if environment is not None:
        internal["environment"] = environment
    builder = (
        f"regenerate:{record.source.stage}"
        if isinstance(record.source, GeneratorSource)
        else f"{source_type}-source"
    )
    predicate = {
        "buildDefinition": {
            "buildType": BUILD_TYPE,
            "externalParameters": external,
            "internalParameters": internal,
            "resolvedDependencies": deps,
        },
        "runDetails": {
            "builder": {
                "id": f"urn:fixture-store:builder:{builder}",
                "version": {"fixture-store": version("fixture-store")},
            },
            "metadata": {"invocationId": f"{name}@{digest.text}"},
        },
    }
    return {
        "_type": STATEMENT_TYPE,
        "subject": subjects,
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    }
