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


HOST_FIX = (
    "say where bare OWNER/NAME upstreams live, once for the import: --upstream-host hf (the "
    'Hugging Face Hub) or --upstream-host github; or for the project: upstream-host = "hf" '
    "in [tool.fixture-store] of pyproject.toml"
)


class AmbiguousHostError(ManifestError):
    """An upstream is a bare ``OWNER/NAME`` and no host was given: the import lists every
    such entry in one refusal (:func:`refuse_ambiguous`), with the one-flag fix."""

    def __init__(self, where: str, repository: str) -> None:
        super().__init__(
            where,
            f"{repository!r} is a bare OWNER/NAME: a Hugging Face Hub repository or a GitHub "
            "one? nothing is guessed",
            fix=HOST_FIX,
        )
        self.repository = repository


def refuse_ambiguous(questions: list[AmbiguousHostError], shown: str) -> None:
    """Refuse once for every entry whose upstream needs a host, all of them named."""
    if not questions:
        return
    repos = sorted({q.repository for q in questions})
    lines = "\n  ".join(q.message for q in questions[:20])
    more = f"\n  ... and {len(questions) - 20} more" if len(questions) > 20 else ""  # noqa: PLR2004
    raise ManifestError(
        shown,
        f"{len(questions)} entr{'y' if len(questions) == 1 else 'ies'} name upstreams as bare "
        f"OWNER/NAME ({', '.join(repos[:5])}{', ...' if len(repos) > 5 else ''}), which is a "  # noqa: PLR2004
        f"Hub repository and a GitHub one:\n  {lines}{more}",
        fix=HOST_FIX,
    )


def read(
    raw: Any,
    at: str,
    where: str,
    found: fields_mod.Fields,
    beside: tuple[str, Any] | None,
    *,
    host: str | None = None,
) -> Read:
    """The upstream(s) ``raw`` (at pointer ``at``, in entry ``where``) states. ``beside`` is a
    digest written beside it (its pointer and value): the digest of the one pinned upstream,
    kept as an unknown field when there is not exactly one. ``host`` (``hf`` or ``github``)
    says where a bare ``OWNER/NAME`` lives; without it such an upstream is an
    :class:`AmbiguousHostError`."""
    try:
        return _read(raw, at, where, found, beside, host=host)
    except RegistryError as e:
        field = f"{e.field}: " if e.field else ""
        raise ManifestError(where, f"{field}{e.reason}", fix=e.fix) from e


def _read(
    raw: Any,
    at: str,
    where: str,
    found: fields_mod.Fields,
    beside: tuple[str, Any] | None,
    *,
    host: str | None,
) -> Read:
    items = raw if isinstance(raw, list) else [raw]
    if not items:
        raise ManifestError(where, "upstream is an empty list")
    pinned: list[Upstream] = []
    stated: list[Any] = []
    listed = raw is items
    for i, item in enumerate(items):
        here = fields_mod.pointer(at, str(i)) if listed else at
        ups = _one(item, here, f"upstream[{i}]" if listed else "upstream", where, found, host=host)
        if not ups:
            stated.append(item)
            found.mapped.append(fields_mod.Mapped(here, NOT_A_PIN))
        else:
            pinned.extend(ups)
    if beside is not None:
        pinned = _with_beside(pinned, beside, where, found)
    kept = None if not stated else stated if listed else stated[0]
    return Read(tuple(pinned), kept)


def _with_beside(
    pinned: list[Upstream], beside: tuple[str, Any], where: str, found: fields_mod.Fields
) -> list[Upstream]:
    at, value = beside
    # The digest of the one upstream that is a file (a repository's code has none).
    files = [i for i, up in enumerate(pinned) if getattr(up, "path", None)]
    mine = [0] if len(pinned) == 1 else files
    if len(mine) != 1:  # whose digest it is cannot be told: kept as written
        found.mapped = [m for m in found.mapped if m.pointer != at]
        found.unknown[at] = value
        return pinned
    done = list(pinned)
    done[mine[0]] = _with_digest(pinned[mine[0]], value, where, "upstream")
    return done


def _hosted(spelled: notation.Spelled, host: str | None, where: str) -> notation.Spelled:
    """A bare ``OWNER/NAME`` as the repository on ``host``; an :class:`AmbiguousHostError`
    without one."""
    if spelled.kind != "bare" or spelled.repo_type is not None:
        return spelled
    if host == "hf":
        return replace(spelled, kind="hub")
    if host == "github":
        return replace(spelled, kind="git", repository=f"https://github.com/{spelled.repository}")
    raise AmbiguousHostError(where, spelled.repository)


def _one(
    item: Any, at: str, field: str, where: str, found: fields_mod.Fields, *, host: str | None
) -> list[Upstream]:
    """The pinned upstreams one item states (none: no pin). A ``checkpoint`` written as a Hub
    file of another repository (``OWNER/NAME@REV:FILE``, ``hf://...``) is an upstream of its
    own, beside the repository (its code at the revision)."""
    probe = Where()
    if isinstance(item, str):
        spelled = notation.read(item, probe, field)
        if not notation.is_pinnable(spelled):
            return []
        return [notation.pin(_hosted(spelled, host, where), probe, field)]
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
        return []  # no pin: kept as written, fields and all
    checkpoint = known.get("checkpoint")
    elsewhere = _file_upstream(checkpoint, f"{field}.checkpoint", host, where)
    if elsewhere is not None:
        checkpoint = None
    up = notation.pin(
        _hosted(spelled, host, where),
        probe,
        field,
        revision=revision,
        path=checkpoint,
        repo_type=known.get("repo_type"),
    )
    if known.get("license") is not None:
        up = replace(up, license=known["license"])
    if known.get("digest") is not None:
        if elsewhere is not None:
            elsewhere = _with_digest(elsewhere, known["digest"], where, f"{field}.checkpoint")
        else:
            up = _with_digest(up, known["digest"], where, field)
    found.unknown.update(local.unknown)
    found.mapped.extend(local.mapped)
    return [up] if elsewhere is None else [up, elsewhere]


def _file_upstream(value: Any, field: str, host: str | None, where: str) -> Upstream | None:
    """A checkpoint that names a file in a repository of its own (``OWNER/NAME@REV:FILE``,
    ``hf://OWNER/NAME@REV/FILE``, ``git+https://...@REV#FILE``), pinned; ``None`` for a plain
    path inside the upstream's repository."""
    if not isinstance(value, str) or ("@" not in value and "://" not in value):
        return None
    probe = Where()
    try:
        spelled = notation.read(value, probe, field)
    except RegistryError:
        return None  # not a notation: a path, judged as one by the pin rules
    if spelled.path is None or spelled.revision is None:
        return None
    return notation.pin(_hosted(spelled, host, where), probe, field)


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
