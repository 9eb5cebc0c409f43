"""A manifest's ``upstream`` field, read while the manifest is read: a notation string, an
object (its fields by the :data:`~fixture_store.importers.fields.UPSTREAM` table, its
``repository`` any notation), or a list of them.

Each upstream that names a revision (or is a package or a URL, pinned by themselves) is pinned
by :mod:`fixture_store.registry.upstream_notation` and checked by the registry's pin rules
here, so ``import --dry-run`` refuses what the real import would. One that names no revision is
no pin: it is kept as written (``metadata.upstream``) and the report says so. A refusal names
the manifest and the entry, and its fix is about the manifest.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from fixture_store.errors import RegistryError
from fixture_store.importers import fields as fields_mod
from fixture_store.importers.entry import ManifestError
from fixture_store.registry import upstream_notation as notation
from fixture_store.registry.upstream import Upstream
from fixture_store.registry.where import Where

_HEX64 = re.compile(r"[0-9a-fA-F]{64}")
NOT_A_PIN = "metadata.upstream (no revision: not a pin)"


@dataclass(frozen=True)
class Read:
    """The pinned upstreams, and what was stated but is no pin (one value or a list)."""

    pinned: tuple[Upstream, ...]
    stated: Any


def read(
    raw: Any, at: str, where: str, found: fields_mod.Fields, beside: tuple[str, Any] | None
) -> Read:
    """The upstream(s) ``raw`` (at pointer ``at``, in entry ``where``) states. ``beside`` is a
    digest written beside it (its pointer and value): the digest of the one pinned upstream,
    kept as an unknown field when there is not exactly one."""
    try:
        return _read(raw, at, where, found, beside)
    except RegistryError as e:
        field = f"{e.field}: " if e.field else ""
        raise ManifestError(where, f"{field}{e.reason}", fix=e.fix) from e


def _read(
    raw: Any, at: str, where: str, found: fields_mod.Fields, beside: tuple[str, Any] | None
) -> Read:
    items = raw if isinstance(raw, list) else [raw]
    if not items:
        raise ManifestError(where, "upstream is an empty list")
    pinned: list[Upstream] = []
    stated: list[Any] = []
    listed = raw is items
    for i, item in enumerate(items):
        here = fields_mod.pointer(at, str(i)) if listed else at
        up = _one(item, here, f"upstream[{i}]" if listed else "upstream", where, found)
        if up is None:
            stated.append(item)
            found.mapped.append(fields_mod.Mapped(here, NOT_A_PIN))
        else:
            pinned.append(up)
    if beside is not None:
        pinned = _with_beside(pinned, beside, where, found)
    kept = None if not stated else stated if listed else stated[0]
    return Read(tuple(pinned), kept)


def _with_beside(
    pinned: list[Upstream], beside: tuple[str, Any], where: str, found: fields_mod.Fields
) -> list[Upstream]:
    at, value = beside
    if len(pinned) != 1:  # whose digest it is cannot be told: kept as written
        found.mapped = [m for m in found.mapped if m.pointer != at]
        found.unknown[at] = value
        return pinned
    up = _with_digest(pinned[0], value, where, "upstream")
    return [up]


def _one(item: Any, at: str, field: str, where: str, found: fields_mod.Fields) -> Upstream | None:
    probe = Where()
    if isinstance(item, str):
        spelled = notation.read(item, probe, field)
        return notation.pin(spelled, probe, field) if notation.is_pinnable(spelled) else None
    if not isinstance(item, Mapping):
        raise ManifestError(where, "upstream must be an object with a 'repository' or a string")
    local = fields_mod.Fields()
    known, _ = local.read(item, fields_mod.UPSTREAM, at)
    repository = known.get("repository")
    if not isinstance(repository, str) or not _text(repository):
        raise ManifestError(where, f"{field} must be an object with a 'repository'")
    for key in ("revision", "checkpoint", "repo_type", "license"):
        if key in known and not _text(known[key]):
            raise ManifestError(where, f"{field}.{key} must be a non-empty string")
    spelled = notation.read(repository, probe, f"{field}.repository")
    revision = known.get("revision")
    if spelled.revision is None and revision is None and spelled.kind != "package":
        return None  # no pin: kept as written, fields and all
    up = notation.pin(
        spelled,
        probe,
        field,
        revision=revision,
        path=known.get("checkpoint"),
        repo_type=known.get("repo_type"),
    )
    if known.get("license") is not None:
        up = replace(up, license=known["license"])
    if known.get("digest") is not None:
        up = _with_digest(up, known["digest"], where, field)
    found.unknown.update(local.unknown)
    found.mapped.extend(local.mapped)
    return up


def _with_digest(up: Upstream, value: Any, where: str, field: str) -> Upstream:
    """``up`` with the digest a manifest states for it (``sha256:<hex>`` or bare hex, in any
    case: the spelling is not the digest), checked by the pin rules."""
    if not isinstance(value, str):
        raise ManifestError(where, f"{field}.digest must be a string: sha256:<64 hex>")
    text = value.strip()
    if _HEX64.fullmatch(text):
        text = f"sha256:{text}"
    algorithm, colon, hexpart = text.partition(":")
    if colon and algorithm.lower() == "sha256":
        text = f"sha256:{hexpart.lower()}"
    if up.digest is not None and up.digest != text:
        raise ManifestError(
            where,
            f"{field} states two digests: {up.digest} and {text}",
            fix="keep the one the upstream file has",
        )
    done = replace(up, digest=text)
    done.check(Where(), field)
    return done


def _text(value: object) -> bool:
    return isinstance(value, str) and bool(value.strip())
