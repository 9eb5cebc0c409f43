"""Upstreams: the pinned things a record's bytes were derived from, whose digest may be unknown.

A reference tensor is made by running ``MIT/ast-finetuned-audioset...`` at a commit on its
checkpoint ``model.safetensors``; the maintainer knows the pin, rarely the checkpoint's sha256.
``lineage`` names parents by digest only, so a record's ``upstream`` list names them by pin: a
Hub repo at a 40-hex revision and a path, a git repository at a 40-hex commit and a path, a
package at an exact ``name==version`` and a file in it, or an https URL. A git pin may name no
path: the repository itself, code pinned at a commit. The pins follow the
rules sources follow (:mod:`fixture_store.registry.pins`); a ``digest`` (``sha256:<hex>``) and
the upstream's ``license`` are optional.

Each kind is a frozen value that parses itself from JSON (``from_json``), prints itself back
(``to_json``), for people (``describe``) and as the URI the command line reads (``uri``);
:func:`fixture_store.registry.upstream_notation.parse_uri` reads that short form (or the JSON
form) from a command line, with the other notations people write.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass
from typing import Any, ClassVar, Literal, Self

from fixture_store import display
from fixture_store.errors import DigestFormatError, UsageError
from fixture_store.objects import digests, trees
from fixture_store.registry.pins import check_hub_resolve_url, revision_problem
from fixture_store.registry.sources import PIN, REPO_ID, REPO_TYPES, HubSource
from fixture_store.registry.where import Where, check_no_credential

GIT_SCHEME = "git+"
PYPI_SCHEME = "pypi:"
_COMMON = ("digest", "license")
_NON_EMPTY = "must be a non-empty string"


@dataclass(frozen=True)
class _Pinned:
    """What every upstream may say besides its pin, and how each kind parses itself: its JSON
    keys are its fields' names, the ``_required`` ones and the ``_optional`` ones."""

    type: ClassVar[str]
    _required: ClassVar[tuple[str, ...]]
    _optional: ClassVar[tuple[str, ...]]

    _: KW_ONLY
    digest: str | None = None  # ``sha256:<hex>`` of the upstream file, when known
    license: str | None = None  # the upstream's license (the record's own is for its bytes)

    @classmethod
    def from_json(cls, raw: Mapping[str, Any], where: Where, field: str) -> Self:
        """The upstream ``raw`` states, its keys and then its pin checked (:meth:`check`)."""
        cls._check_keys(raw, where, field)
        up = cls(**{key: raw[key] for key in (*cls._required, *cls._optional) if key in raw})
        up.check(where, field)
        return up

    @classmethod
    def _check_keys(cls, raw: Mapping[str, Any], where: Where, field: str) -> None:
        for key in cls._required:
            if key not in raw:
                raise where.fail(
                    f"{field}.{key}", f"missing required field for a {cls.type} upstream"
                )
        extra = set(raw) - set(cls._required) - set(cls._optional) - {"type"}
        if extra:
            raise where.fail(
                f"{field}.{sorted(extra)[0]}", f"unknown field for a {cls.type} upstream"
            )
        for key in cls._optional:
            if key in raw and raw[key] is None:
                raise where.fail(f"{field}.{key}", _NON_EMPTY)

    def check(self, where: Where, field: str) -> None:
        """Raise the error naming the first field that breaks the pin rules."""
        raise NotImplementedError

    def _check_common(self, where: Where, field: str) -> None:
        if self.digest is not None:
            try:
                digests.parse_hex(self.digest)
            except DigestFormatError as e:
                raise where.fail(f"{field}.digest", e.message) from e
        _check_text(where, f"{field}.license", self.license, optional=True)

    def _common_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.digest is not None:
            out["digest"] = self.digest
        if self.license is not None:
            out["license"] = self.license
        return out

    def _common_text(self) -> str:
        parts = [f"license {self.license}"] if self.license else []
        parts += [self.digest[:19] + "…"] if self.digest else ["digest unknown"]
        return f" ({', '.join(parts)})"


@dataclass(frozen=True)
class HubUpstream(_Pinned):
    """A file of a Hugging Face Hub repo at a full 40-hex commit."""

    type: ClassVar[Literal["hub"]] = "hub"
    _required: ClassVar[tuple[str, ...]] = ("path", "repo_id", "revision")
    _optional: ClassVar[tuple[str, ...]] = ("repo_type", *_COMMON)

    repo_id: str
    revision: str
    path: str
    repo_type: str | None = None

    def check(self, where: Where, field: str) -> None:
        _check_text(where, f"{field}.repo_id", self.repo_id)
        _check_revision(where, f"{field}.revision", self.revision)
        if REPO_ID.fullmatch(self.repo_id) is None:
            raise where.fail(f"{field}.repo_id", f"{self.repo_id!r} is not a Hub repo id")
        if self.repo_type is not None and self.repo_type not in REPO_TYPES:
            raise where.fail(f"{field}.repo_type", f"must be one of {', '.join(REPO_TYPES)}")
        _check_path(where, f"{field}.path", self.path)
        self._check_common(where, field)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "repo_id": self.repo_id}
        out |= {"revision": self.revision, "path": self.path}
        if self.repo_type is not None:
            out["repo_type"] = self.repo_type
        return out | self._common_json()

    def uri(self) -> str:
        return HubSource(self.repo_id, self.revision, self.path, self.repo_type).uri()

    def describe(self) -> str:
        return f"hub {self.repo_id}@{self.revision[:12]}:{self.path}{self._common_text()}"


@dataclass(frozen=True)
class GitUpstream(_Pinned):
    """A git repository (an https URL) at a full 40-hex commit: a file of it (``path``), or
    the repository itself (code pinned at a commit) when ``path`` is ``None``."""

    type: ClassVar[Literal["git"]] = "git"
    _required: ClassVar[tuple[str, ...]] = ("commit", "url")
    _optional: ClassVar[tuple[str, ...]] = ("path", *_COMMON)

    url: str
    commit: str
    path: str | None = None

    def check(self, where: Where, field: str) -> None:
        _check_https(where, f"{field}.url", self.url)
        _check_revision(where, f"{field}.commit", self.commit)
        if self.path is not None:
            _check_path(where, f"{field}.path", self.path)
        self._check_common(where, field)

    def to_json(self) -> dict[str, Any]:
        out = {"type": self.type, "url": self.url, "commit": self.commit}
        if self.path is not None:
            out["path"] = self.path
        return out | self._common_json()

    def uri(self) -> str:
        return f"{GIT_SCHEME}{self.url}@{self.commit}" + (f"#{self.path}" if self.path else "")

    def describe(self) -> str:
        at = f"{display.url(self.url)}@{self.commit[:12]}"
        return f"git {at}{':' + self.path if self.path else ''}{self._common_text()}"


@dataclass(frozen=True)
class PackageUpstream(_Pinned):
    """A file inside a package at an exact version (``name==version``)."""

    type: ClassVar[Literal["package"]] = "package"
    _required: ClassVar[tuple[str, ...]] = ("path", "requirement")
    _optional: ClassVar[tuple[str, ...]] = _COMMON

    requirement: str
    path: str

    def check(self, where: Where, field: str) -> None:
        _check_text(where, f"{field}.requirement", self.requirement)
        if PIN.fullmatch(self.requirement) is None:
            raise where.fail(
                f"{field}.requirement",
                f"{self.requirement!r} is not an exact pin; write 'name==exact.version'",
            )
        _check_path(where, f"{field}.path", self.path)
        self._check_common(where, field)

    def to_json(self) -> dict[str, Any]:
        out = {"type": self.type, "requirement": self.requirement, "path": self.path}
        return out | self._common_json()

    def uri(self) -> str:
        return f"{PYPI_SCHEME}{self.requirement}/{self.path}"

    def describe(self) -> str:
        return f"package {self.requirement}:{self.path}{self._common_text()}"


@dataclass(frozen=True)
class UrlUpstream(_Pinned):
    """An https URL (a Hub file URL must name a 40-hex commit)."""

    type: ClassVar[Literal["url"]] = "url"
    _required: ClassVar[tuple[str, ...]] = ("url",)
    _optional: ClassVar[tuple[str, ...]] = _COMMON

    url: str

    def check(self, where: Where, field: str) -> None:
        _check_https(where, f"{field}.url", self.url)
        self._check_common(where, field)

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "url": self.url} | self._common_json()

    def uri(self) -> str:
        return self.url

    def describe(self) -> str:
        return f"{display.url(self.url)}{self._common_text()}"


Upstream = HubUpstream | GitUpstream | PackageUpstream | UrlUpstream

UPSTREAM_TYPES: Mapping[str, type[Upstream]] = {
    cls.type: cls for cls in (HubUpstream, GitUpstream, PackageUpstream, UrlUpstream)
}


def parse_one(raw: Any, where: Where, field: str) -> Upstream:
    """The typed upstream of one entry of a record's ``upstream`` list, by its ``type``."""
    if not isinstance(raw, Mapping):
        raise where.fail(field, "must be an object with a 'type'")
    utype = raw.get("type")
    cls = UPSTREAM_TYPES.get(utype) if isinstance(utype, str) else None
    if cls is None:
        raise where.fail(
            f"{field}.type", f"unknown upstream type {utype!r}; one of {sorted(UPSTREAM_TYPES)}"
        )
    return cls.from_json(raw, where, field)


def parse_list(raw: Any, where: Where) -> tuple[Upstream, ...]:
    """A record's ``upstream`` list; an entry listed twice is refused."""
    if not isinstance(raw, list | tuple) or not raw:
        raise where.fail("upstream", "must be a non-empty list of pinned references")
    parsed = tuple(parse_one(entry, where, f"upstream[{i}]") for i, entry in enumerate(raw))
    if len(set(parsed)) != len(parsed):
        raise where.fail("upstream", "lists an upstream twice")
    return parsed


def _check_text(where: Where, field: str, value: object, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str) or not value.strip():
        raise where.fail(field, _NON_EMPTY)


def _check_revision(where: Where, field: str, revision: object) -> None:
    _check_text(where, field, revision)
    assert isinstance(revision, str)
    problem = revision_problem(revision)
    if problem is not None:
        raise where.fail(
            field,
            f"{problem}; an upstream is pinned by a full 40-hex commit",
            fix="pin the commit: the repository's history gives the full sha",
        )


def _check_path(where: Where, field: str, path: object) -> None:
    try:
        trees.check_member_path(path)
    except UsageError as e:
        raise where.fail(field, e.message) from e


def _check_https(where: Where, field: str, url: object) -> None:
    _check_text(where, field, url)
    assert isinstance(url, str)
    check_no_credential(where, field, url)
    if not url.startswith("https://") or len(url) <= len("https://"):
        raise where.fail(field, f"{display.url(url)!r} is not https; an upstream URL must be https")
    if any(ch.isspace() or ch < " " for ch in url):
        raise where.fail(field, "contains whitespace or control characters")
    problem = check_hub_resolve_url(url)
    if problem is not None:
        raise where.fail(field, problem)
