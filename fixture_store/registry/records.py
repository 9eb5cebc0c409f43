"""Records: the registry entry of one artifact, as small immutable values, and their validation.

Validation is done in code first, so that each rule gives a message naming the field and what is
wrong with it; the shipped JSON Schema then runs as a backstop for structure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from fixture_store import limits
from fixture_store.errors import DigestFormatError, RegistryError, UsageError
from fixture_store.objects import digests, trees
from fixture_store.objects.digests import Digest
from fixture_store.registry.pins import require_pinned_hub_url

KINDS = ("fixture", "checkpoint", "video", "onnx-model", "onnx-case", "tree", "archive", "array")
TREE_KINDS = frozenset({"tree", "onnx-case"})

# A name is a family and a path of segments; full match, so a trailing newline never slips by.
NAME_PATTERN = r"[a-z0-9][a-z0-9_-]*(/[A-Za-z0-9][A-Za-z0-9._+-]*)+"
_NAME = re.compile(NAME_PATTERN)
_FAMILY = re.compile(r"[a-z0-9][a-z0-9_-]*")
_REVISION = re.compile(r"[0-9a-f]{40}")
_HEXISH = re.compile(r"[0-9a-fA-F]+")
_PIN = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([0-9A-Za-z][0-9A-Za-z.+!-]*)")
_REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?")


def check_name(name: object) -> str:
    """Return the name if it fully matches the allowed pattern; raise UsageError otherwise."""
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        raise UsageError(
            f"invalid artifact name {name!r}: use 'family/segment[/segment...]' with lower-case "
            "family and segments of letters, digits, '.', '_', '+', '-' (no '..', spaces or "
            "control characters)"
        )
    return name


def check_family(family: object) -> str:
    if not isinstance(family, str) or _FAMILY.fullmatch(family) is None:
        raise UsageError(f"invalid family name {family!r}")
    return family


def family_of(name: str) -> str:
    return name.split("/", 1)[0]


@dataclass(frozen=True)
class Source:
    """Where the bytes come from, pinned. ``fields`` holds the type-specific, validated keys."""

    type: str
    fields: Mapping[str, Any]

    def describe(self) -> str:
        f = self.fields
        if self.type == "hub":
            kind = f.get("repo_type", "model")
            return f"hub {kind} {f['repo_id']}@{f['revision'][:12]}:{f['path']}"
        if self.type == "package":
            return f"package {f['requirement']} ({f['file']}):{f['path']}"
        if self.type == "url":
            return str(f["url"])
        if self.type == "generator":
            return f"generator stage {f['stage']}"
        return f"local {f['path']}"

    def to_json(self) -> dict[str, Any]:
        # Nested values (a generator's environment) are frozen mappings: plain them for JSON.
        return {"type": self.type, **_plain(self.fields)}


@dataclass(frozen=True)
class Record:
    """The registry entry for one artifact."""

    name: str
    kind: str
    source: Source
    digest: Digest | None = None
    media_type: str | None = None
    blake3: str | None = None
    lineage: tuple[str, ...] = ()
    members: trees.Tree | None = None
    # member path -> BLAKE3 hex, recorded beside the members' SHA-256 for fast re-verification.
    member_blake3: Mapping[str, str] = field(default_factory=dict)
    arrays: Mapping[str, Any] | None = None
    tolerance: Mapping[str, Any] | None = None
    license: str | None = None
    profile: str | None = None
    gap: str | None = None
    description: str | None = None
    metadata: Mapping[str, Any] | None = None
    # The raw mapping as read, so a rewrite keeps fields this version does not model.
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def family(self) -> str:
        return family_of(self.name)

    @property
    def is_gap(self) -> bool:
        return self.gap is not None

    @property
    def is_tree(self) -> bool:
        """A folder of objects; an archive's ``members`` describe its content, not objects."""
        return self.members is not None and self.kind != "archive"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = _plain(self.raw)
        out.update({"kind": self.kind, "source": self.source.to_json()})
        optional: dict[str, Any] = {
            "media_type": self.media_type,
            "blake3": self.blake3,
            "license": self.license,
            "profile": self.profile,
            "description": self.description,
            "lineage": list(self.lineage) if self.lineage else None,
            "members": self._members_json(),
            "arrays": _plain(self.arrays),
            "tolerance": _plain(self.tolerance),
            "metadata": _plain(self.metadata),
            "gap": {**dict(self.raw.get("gap") or {}), "reason": self.gap} if self.gap else None,
        }
        if self.digest is not None:
            optional["digest"] = self.digest.text
            optional["size"] = self.digest.size
        for key, value in optional.items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = value
        if self.digest is None:
            out.pop("digest", None)
            out.pop("size", None)
        return out

    def _members_json(self) -> dict[str, dict[str, object]] | None:
        if self.members is None:
            return None
        out = trees.to_json(self.members)
        for path, b3 in self.member_blake3.items():
            out[path]["blake3"] = b3
        return out

    def blake3_for(self, member: str | None) -> str | None:
        """The recorded BLAKE3 of the record's object (``None``) or of one member."""
        return self.blake3 if member is None else self.member_blake3.get(member)


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _freeze(value: Any) -> Any:
    if type(value) is dict or isinstance(value, Mapping):  # dict first: skips the ABC check
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


class _Checker:
    """Raises RegistryError naming file, record and field."""

    def __init__(self, file: str, record: str) -> None:
        self.file = file
        self.record = record

    def fail(self, fieldname: str, message: str, fix: str | None = None) -> RegistryError:
        return RegistryError(message, file=self.file, record=self.record, field=fieldname, fix=fix)


def _check_source(raw: Any, c: _Checker) -> Source:
    if not isinstance(raw, Mapping):
        raise c.fail("source", "must be an object with a 'type'")
    stype = raw.get("type")
    allowed: dict[str, tuple[set[str], set[str]]] = {
        "hub": ({"repo_id", "revision", "path"}, {"repo_type"}),
        "package": ({"requirement", "file", "file_digest", "path"}, {"file_size"}),
        "url": ({"url"}, set()),
        "generator": ({"stage"}, {"generator", "environment", "params"}),
        "local": ({"path"}, set()),
    }
    if not isinstance(stype, str) or stype not in allowed:
        raise c.fail("source.type", f"unknown source type {stype!r}; one of {sorted(allowed)}")
    required, optional = allowed[stype]
    for key in sorted(required):
        if key not in raw:
            raise c.fail(f"source.{key}", f"missing required field for a {stype} source")
    extra = set(raw) - required - optional - {"type"}
    if extra:
        raise c.fail(f"source.{sorted(extra)[0]}", f"unknown field for a {stype} source")
    for key in sorted(required | optional):
        if (
            key in raw
            and key not in ("environment", "params", "file_size")
            and (not isinstance(raw[key], str) or not raw[key])
        ):
            raise c.fail(f"source.{key}", "must be a non-empty string")
    if stype == "hub":
        rev = raw["revision"]
        if _REVISION.fullmatch(rev) is None:
            if _HEXISH.fullmatch(rev) and len(rev) < 40:
                why = f"{rev!r} is a short commit sha"
            elif _HEXISH.fullmatch(rev) and rev.lower() != rev and len(rev) == 40:
                why = f"{rev!r} is upper case"
            else:
                why = f"{rev!r} is a branch, tag or other moving reference"
            raise c.fail(
                "source.revision",
                f"{why}; a revision must be a full 40-hex commit",
                fix="pin the commit: huggingface-cli / the Hub page 'History' gives the full sha",
            )
        if _REPO_ID.fullmatch(raw["repo_id"]) is None:
            raise c.fail("source.repo_id", f"{raw['repo_id']!r} is not a Hub repo id")
        if raw.get("repo_type", "model") not in ("model", "dataset", "space"):
            raise c.fail("source.repo_type", "must be one of model, dataset, space")
    elif stype == "package":
        if _PIN.fullmatch(raw["requirement"]) is None:
            raise c.fail(
                "source.requirement",
                f"{raw['requirement']!r} is not an exact pin; write 'name==exact.version'",
            )
        try:
            digests.parse_hex(raw["file_digest"])
        except DigestFormatError as e:
            raise c.fail("source.file_digest", e.message) from e
        if "file_size" in raw and (
            not isinstance(raw["file_size"], int)
            or isinstance(raw["file_size"], bool)
            or raw["file_size"] < 0
        ):
            raise c.fail("source.file_size", "must be a non-negative integer")
        _check_relpath(raw["path"], c, "source.path")
    elif stype == "url":
        url = raw["url"]
        if not url.startswith("https://") or len(url) <= len("https://"):
            raise c.fail("source.url", f"{url!r} is not https; only https sources are allowed")
        if any(ch.isspace() or ord(ch) < 32 for ch in url):
            raise c.fail("source.url", "contains whitespace or control characters")
        require_pinned_hub_url(url, file=c.file, record=c.record)
    elif stype == "local":
        _check_relpath(raw["path"], c, "source.path", allow_dot=True)
    elif stype == "generator":
        for key in ("environment", "params"):
            if key in raw and not isinstance(raw[key], Mapping):
                raise c.fail(f"source.{key}", "must be an object")
    fields = {k: v for k, v in raw.items() if k != "type"}
    return Source(stype, _freeze(fields))


def _check_relpath(path: str, c: _Checker, fieldname: str, *, allow_dot: bool = False) -> None:
    if allow_dot:
        parts = [p for p in path.split("/") if p != "."]
        path = "/".join(parts) or "."
        if path == ".":
            return
    try:
        trees.check_member_path(path)
    except UsageError as e:
        raise c.fail(fieldname, e.message) from e


def parse_record(name: str, raw: Any, *, file: str) -> Record:
    """Validate one record's mapping and return the Record; raise RegistryError otherwise."""
    c = _Checker(file, name)
    try:
        check_name(name)
    except UsageError as e:
        raise c.fail("name", e.message) from e
    if not isinstance(raw, Mapping):
        raise c.fail("record", "must be an object")
    for key in ("kind", "source"):
        if key not in raw:
            raise c.fail(key, "missing required field")
    kind = raw["kind"]
    if kind not in KINDS:
        raise c.fail("kind", f"unknown kind {kind!r}; one of {', '.join(KINDS)}")
    source = _check_source(raw["source"], c)

    gap = None
    if "gap" in raw:
        g = raw["gap"]
        reason = g.get("reason") if isinstance(g, Mapping) else None
        if not isinstance(reason, str) or not reason.strip():
            raise c.fail("gap.reason", "a declared gap needs a non-empty reason")
        gap = reason

    digest = None
    if gap is None or "digest" in raw or "size" in raw:
        for key in ("digest", "size"):
            if key not in raw:
                raise c.fail(key, "missing required field (only a declared gap may omit it)")
        try:
            digests.parse_hex(raw["digest"])
        except DigestFormatError as e:
            raise c.fail("digest", e.message) from e
        try:
            digest = digests.parse(raw["digest"], raw["size"])
        except DigestFormatError as e:
            raise c.fail("size", e.message) from e

    blake3 = raw.get("blake3")
    if blake3 is not None and (
        not isinstance(blake3, str) or re.fullmatch(r"[0-9a-f]{64}", blake3) is None
    ):
        raise c.fail("blake3", "must be 64 lower-case hex characters")

    lineage = raw.get("lineage", [])
    if not isinstance(lineage, list):
        raise c.fail("lineage", "must be a list of parent digests")
    for i, parent in enumerate(lineage):
        try:
            digests.parse_hex(parent)
        except DigestFormatError as e:
            raise c.fail(f"lineage[{i}]", e.message) from e
    if len(set(lineage)) != len(lineage):
        raise c.fail("lineage", "lists a parent twice")

    members = None
    member_blake3: dict[str, str] = {}
    if "members" in raw:
        if not isinstance(raw["members"], Mapping):
            raise c.fail("members", "must be an object of path -> {digest, size}")
        try:
            members = trees.from_json(raw["members"])
        except (UsageError, DigestFormatError) as e:
            raise c.fail("members", e.message) from e
        for mpath, entry in raw["members"].items():
            b3 = entry.get("blake3") if isinstance(entry, Mapping) else None
            if b3 is not None:
                try:
                    member_blake3[mpath] = digests.check_blake3(b3)
                except DigestFormatError as e:
                    raise c.fail(f"members.{mpath}.blake3", e.message) from e
        # An archive record's digest is the archive's; its members are the content manifest.
        if digest is not None and kind != "archive" and members.digest != digest:
            raise c.fail(
                "digest",
                f"does not match the member manifest: the manifest hashes to {members.digest}",
                fix="regenerate the record with 'fixture-store add' or the family's generator",
            )
    elif kind in TREE_KINDS and gap is None:
        raise c.fail("members", f"a {kind} record needs its member manifest")

    arrays = raw.get("arrays")
    if arrays is not None:
        if not isinstance(arrays, Mapping):
            raise c.fail("arrays", "must be an object of name -> {dtype, shape}")
        for aname, spec in arrays.items():
            if not isinstance(spec, Mapping) or set(spec) != {"dtype", "shape"}:
                raise c.fail(f"arrays.{aname}", "must be exactly {dtype, shape}")
            if not isinstance(spec["dtype"], str) or not spec["dtype"]:
                raise c.fail(f"arrays.{aname}.dtype", "must be a dtype name such as 'float32'")
            shape = spec["shape"]
            if not isinstance(shape, list) or not all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
            ):
                raise c.fail(f"arrays.{aname}.shape", "must be a list of non-negative integers")

    tolerance = raw.get("tolerance")
    if tolerance is not None:
        _check_tolerance(tolerance, c, "tolerance")
        for aname, sub in (tolerance.get("per_array") or {}).items():
            _check_tolerance(sub, c, f"tolerance.per_array.{aname}", need_metric=False)

    for key in ("media_type", "license", "profile", "description"):
        if key in raw and (not isinstance(raw[key], str) or not raw[key]):
            raise c.fail(key, "must be a non-empty string")
    if "profile" in raw:
        try:
            limits.profile(raw["profile"])
        except UsageError as e:
            raise c.fail("profile", e.message, fix=e.fix) from e
    metadata = raw.get("metadata")
    if metadata is not None and not isinstance(metadata, Mapping):
        raise c.fail("metadata", "must be an object")

    return Record(
        name=name,
        kind=kind,
        source=source,
        digest=digest,
        media_type=raw.get("media_type"),
        blake3=blake3,
        lineage=tuple(lineage),
        members=members,
        member_blake3=MappingProxyType(member_blake3),
        arrays=_freeze(arrays) if arrays is not None else None,
        tolerance=_freeze(tolerance) if tolerance is not None else None,
        license=raw.get("license"),
        profile=raw.get("profile"),
        gap=gap,
        description=raw.get("description"),
        metadata=_freeze(metadata) if metadata is not None else None,
        # Members live in ``members``/``member_blake3`` (their keys are checked, nothing is lost);
        # leaving them out of ``raw`` halves the cost of loading a large registry.
        raw=_freeze({k: v for k, v in raw.items() if k != "members"}),
    )


def _check_tolerance(tol: Any, c: _Checker, where: str, *, need_metric: bool = True) -> None:
    if not isinstance(tol, Mapping):
        raise c.fail(where, "must be an object")
    if need_metric and "metric" not in tol:
        raise c.fail(f"{where}.metric", "missing required field ('exact' or 'allclose')")
    if "metric" in tol and tol["metric"] not in ("exact", "allclose"):
        raise c.fail(f"{where}.metric", f"unknown metric {tol['metric']!r}")
    for key in ("atol", "rtol"):
        if key in tol:
            v = tol[key]
            if isinstance(v, bool) or not isinstance(v, int | float) or v < 0 or v != v:
                raise c.fail(f"{where}.{key}", "must be a non-negative number")
