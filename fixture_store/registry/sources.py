"""Where a record's bytes come from, pinned: one frozen value per source type.

Each type parses itself from the record's ``source`` object (``from_json``, which checks the
pinning rules of DESIGN decision 2: a Hub revision is a full 40-hex commit, a package is an exact
``name==version`` with the distribution's digest, a URL is https), prints itself back to the same
JSON (``to_json``) and for people (``describe``). ``check`` runs the same rules on a value built
in code, such as a source given on the command line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Self

from fixture_store import display
from fixture_store.errors import DigestFormatError, UsageError
from fixture_store.objects import digests, trees
from fixture_store.registry.frozen import freeze, thaw
from fixture_store.registry.nesting import check_value
from fixture_store.registry.pins import ref_problem, require_pinned_hub_url, revision_problem
from fixture_store.registry.where import Where, check_no_credential

_PIN = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([0-9A-Za-z][0-9A-Za-z.+!-]*)")
_REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?")
REPO_TYPES = ("model", "dataset", "space")
HUB_SCHEME = "hf://"
# The same rules, for other pinned references (a record's upstreams).
PIN = _PIN
REPO_ID = _REPO_ID

_NON_EMPTY = "must be a non-empty string"
_OBJECT = "must be an object"
_SIZE = "must be a non-negative integer"


# hf://<prefix>ORG/NAME: the repo type a URL's first folder names (none: a model repo).
_TYPE_PREFIXES = {"datasets/": "dataset", "spaces/": "space", "models/": "model"}
_HUB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def split_repo_type(rest: str) -> tuple[str, str]:
    """The repo type named by the ``datasets/``, ``spaces/`` or ``models/`` that starts ``rest``
    (the text after ``hf://``), and the rest; a model repo when none does. The one reading of
    the Hub's URL prefixes, for sources and remotes alike."""
    for prefix, kind in _TYPE_PREFIXES.items():
        if rest.startswith(prefix):
            return kind, rest[len(prefix) :]
    return "model", rest


@dataclass(frozen=True, slots=True)
class HubRepo:
    """A Hub repo a remote names: ``hf://[datasets/|models/]ORG/NAME[@REVISION]``.

    ``revision`` is the branch a push commits to and a pull resolves, once, to the commit it
    reads at (default ``main``); a full 40-hex commit makes the remote read-only at that commit.
    """

    repo_type: str
    repo_id: str
    revision: str = "main"

    @classmethod
    def parse(cls, url: str) -> Self:
        """The repo of a remote URL; a :class:`UsageError` saying the form for any other text."""
        if not url.startswith(HUB_SCHEME):
            raise UsageError(f"{display.url(url)!r} is not a Hub URL", fix=HUB_REMOTE_FORM)
        repo_type, rest = split_repo_type(url[len(HUB_SCHEME) :])
        head, at, revision = rest.partition("@")
        parts = head.split("/")
        if repo_type == "space":
            raise UsageError(
                f"{display.url(url)!r} names a Space: a remote is a model or dataset repo",
                fix=HUB_REMOTE_FORM,
            )
        if len(parts) != 2 or not all(_HUB_NAME.fullmatch(p) for p in parts):  # noqa: PLR2004
            raise UsageError(
                f"{display.url(url)!r} does not name a Hub repo as ORG/NAME", fix=HUB_REMOTE_FORM
            )
        if at and (not revision or any(c.isspace() or c in "?#@" for c in revision)):
            raise UsageError(
                f"{display.url(url)!r} has an empty or malformed @REVISION", fix=HUB_REMOTE_FORM
            )
        problem = ref_problem(revision) if at and revision_problem(revision) else None
        if problem is not None:  # a branch name git would not take ("..", "x.lock", "a~1")
            raise UsageError(
                f"{display.url(url)!r}: @{display.escape(revision)} is no branch name: it "
                f"{problem} (git check-ref-format)",
                fix=HUB_REMOTE_FORM,
            )
        return cls(repo_type, head, revision or "main")

    @property
    def pinned(self) -> bool:
        """Whether the remote names a commit (read-only) rather than a branch."""
        return revision_problem(self.revision) is None

    def url(self) -> str:
        """The remote URL, in the form :meth:`parse` reads."""
        prefix = "" if self.repo_type == "model" else f"{self.repo_type}s/"
        at = "" if self.revision == "main" else f"@{self.revision}"
        return f"{HUB_SCHEME}{prefix}{self.repo_id}{at}"


HUB_REMOTE_FORM = "use hf://datasets/ORG/NAME or hf://ORG/NAME (a model repo), optionally @BRANCH"


@dataclass(frozen=True)
class HubSource:
    """One file of a Hugging Face Hub repo at a full 40-hex commit."""

    type: ClassVar[Literal["hub"]] = "hub"
    _required: ClassVar[tuple[str, ...]] = ("path", "repo_id", "revision")
    _optional: ClassVar[Mapping[str, str]] = {"repo_type": _NON_EMPTY}

    repo_id: str
    revision: str
    path: str
    # As written; None when the record leaves it out (then the repo is a model repo).
    repo_type: str | None = None

    @property
    def resolved_repo_type(self) -> str:
        return self.repo_type or "model"

    @classmethod
    def from_json(cls, raw: Mapping[str, Any], where: Where) -> Self:
        _check_keys(cls, raw, where)
        source = cls(raw["repo_id"], raw["revision"], raw["path"], raw.get("repo_type"))
        source.check(where)
        return source

    @classmethod
    def from_uri(cls, text: str) -> Self:
        """Parse ``hf://[datasets/|spaces/]REPO@REVISION/PATH`` (the pins are not checked here:
        :meth:`check` the value where it is registered)."""
        if not text.startswith(HUB_SCHEME):
            raise UsageError(f"{text!r} is not a hub source: hf://REPO@<40-hex>/PATH")
        found = display.credential_in(text)
        if found is not None:
            raise UsageError(
                f"hub source {display.url(text)!r} carries a credential ({found}); it is not shown",
                fix="remove it: the Hub client reads its token from HF_TOKEN or its login",
            )
        repo_type, rest = split_repo_type(text[len(HUB_SCHEME) :])
        if "@" not in rest:
            raise UsageError(f"hub source {text!r} needs @REVISION: hf://REPO@<40-hex>/PATH")
        head, _, tail = rest.partition("@")
        rev, _, path = tail.partition("/")
        return cls(head, rev, path, repo_type)

    def uri(self) -> str:
        """``hf://[datasets/|spaces/]REPO@REVISION/PATH``, the form :meth:`from_uri` reads."""
        kind = self.resolved_repo_type
        prefix = "" if kind == "model" else f"{kind}s/"
        return f"{HUB_SCHEME}{prefix}{self.repo_id}@{self.revision}/{self.path}"

    def check(self, where: Where) -> None:
        _check_strings(
            where,
            ("repo_type",),
            path=self.path,
            repo_id=self.repo_id,
            repo_type=self.repo_type,
            revision=self.revision,
        )
        problem = revision_problem(self.revision)
        if problem is not None:
            raise where.fail(
                "source.revision",
                f"{problem}; a revision must be a full 40-hex commit",
                fix="pin the commit: huggingface-cli / the Hub page 'History' gives the full sha",
            )
        if _REPO_ID.fullmatch(self.repo_id) is None:
            raise where.fail("source.repo_id", f"{self.repo_id!r} is not a Hub repo id")
        if self.resolved_repo_type not in REPO_TYPES:
            raise where.fail("source.repo_type", "must be one of model, dataset, space")
        # a file of the repo: "..", an absolute path or a backslash would reach another repo
        _check_relpath(self.path, where)

    def to_json(self) -> dict[str, Any]:
        out = {
            "type": self.type,
            "repo_id": self.repo_id,
            "revision": self.revision,
            "path": self.path,
        }
        if self.repo_type is not None:
            out["repo_type"] = self.repo_type
        return out

    def describe(self) -> str:
        return f"hub {self.resolved_repo_type} {self.repo_id}@{self.revision[:12]}:{self.path}"


@dataclass(frozen=True)
class PackageSource:
    """A file or folder inside a distribution pinned by exact version and the file's digest."""

    type: ClassVar[Literal["package"]] = "package"
    _required: ClassVar[tuple[str, ...]] = ("file", "file_digest", "path", "requirement")
    _optional: ClassVar[Mapping[str, str]] = {"file_size": _SIZE}

    requirement: str
    file: str
    file_digest: str  # ``sha256:<hex>`` of the distribution file, as written
    path: str
    file_size: int | None = None

    @property
    def file_hex(self) -> str:
        """The distribution file's SHA-256 hex: it is kept in the store under this digest."""
        return self.file_digest.removeprefix(digests.PREFIX)

    @property
    def name_and_version(self) -> tuple[str, str]:
        name, _, version = self.requirement.partition("==")
        return name, version

    @classmethod
    def from_json(cls, raw: Mapping[str, Any], where: Where) -> Self:
        _check_keys(cls, raw, where)
        source = cls(
            raw["requirement"],
            raw["file"],
            raw["file_digest"],
            raw["path"],
            raw.get("file_size"),
        )
        source.check(where)
        return source

    def check(self, where: Where) -> None:
        _check_strings(
            where,
            file=self.file,
            file_digest=self.file_digest,
            path=self.path,
            requirement=self.requirement,
        )
        if _PIN.fullmatch(self.requirement) is None:
            raise where.fail(
                "source.requirement",
                f"{self.requirement!r} is not an exact pin; write 'name==exact.version'",
            )
        try:
            digests.parse_hex(self.file_digest)
        except DigestFormatError as e:
            raise where.fail("source.file_digest", e.message) from e
        size = self.file_size
        if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 0):
            raise where.fail("source.file_size", _SIZE)
        _check_relpath(self.path, where)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.type,
            "requirement": self.requirement,
            "file": self.file,
            "file_digest": self.file_digest,
            "path": self.path,
        }
        if self.file_size is not None:
            out["file_size"] = self.file_size
        return out

    def describe(self) -> str:
        return f"package {self.requirement} ({self.file}):{self.path}"


@dataclass(frozen=True)
class UrlSource:
    """An https URL; the record's digest pins the bytes it must serve."""

    type: ClassVar[Literal["url"]] = "url"
    _required: ClassVar[tuple[str, ...]] = ("url",)
    _optional: ClassVar[Mapping[str, str]] = {}

    url: str

    @classmethod
    def from_json(cls, raw: Mapping[str, Any], where: Where) -> Self:
        _check_keys(cls, raw, where)
        source = cls(raw["url"])
        source.check(where)
        return source

    def check(self, where: Where) -> None:
        _check_strings(where, url=self.url)
        check_no_credential(where, "source.url", self.url)
        if not self.url.startswith("https://") or len(self.url) <= len("https://"):
            raise where.fail(
                "source.url",
                f"{display.url(self.url)!r} is not https; only https sources are allowed",
            )
        if any(ch.isspace() or ch < " " for ch in self.url):
            raise where.fail("source.url", "contains whitespace or control characters")
        require_pinned_hub_url(self.url, file=where.file, record=where.record)

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "url": self.url}

    def describe(self) -> str:
        return self.url


@dataclass(frozen=True)
class GeneratorSource:
    """A regeneration stage: the bytes are rebuilt by its generator in its pinned environment."""

    type: ClassVar[Literal["generator"]] = "generator"
    _required: ClassVar[tuple[str, ...]] = ("stage",)
    _optional: ClassVar[Mapping[str, str]] = {
        "environment": _OBJECT,
        "generator": _NON_EMPTY,
        "params": _OBJECT,
    }

    stage: str
    generator: str | None = None
    # Free-form JSON recorded at regeneration, held frozen.
    environment: Mapping[str, Any] | None = None
    params: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "environment", freeze(self.environment))
        object.__setattr__(self, "params", freeze(self.params))

    @classmethod
    def from_json(cls, raw: Mapping[str, Any], where: Where) -> Self:
        _check_keys(cls, raw, where)
        for key in ("environment", "params"):
            check_value(raw.get(key), where, f"source.{key}")
        source = cls(raw["stage"], raw.get("generator"), raw.get("environment"), raw.get("params"))
        source.check(where)
        return source

    def check(self, where: Where) -> None:
        _check_strings(where, ("generator",), generator=self.generator, stage=self.stage)
        for key, value in (("environment", self.environment), ("params", self.params)):
            if value is not None and not isinstance(value, Mapping):
                raise where.fail(f"source.{key}", _OBJECT)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "stage": self.stage}
        if self.generator is not None:
            out["generator"] = self.generator
        if self.environment is not None:
            out["environment"] = thaw(self.environment)
        if self.params is not None:
            out["params"] = thaw(self.params)
        return out

    def describe(self) -> str:
        return f"generator stage {self.stage}"


@dataclass(frozen=True)
class LocalSource:
    """A file or folder inside the project, by its path relative to the project root."""

    type: ClassVar[Literal["local"]] = "local"
    _required: ClassVar[tuple[str, ...]] = ("path",)
    _optional: ClassVar[Mapping[str, str]] = {}

    path: str

    @classmethod
    def from_json(cls, raw: Mapping[str, Any], where: Where) -> Self:
        _check_keys(cls, raw, where)
        source = cls(raw["path"])
        source.check(where)
        return source

    def check(self, where: Where) -> None:
        _check_strings(where, path=self.path)
        _check_relpath(self.path, where, allow_dot=True)

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "path": self.path}

    def describe(self) -> str:
        return f"local {self.path}"


@dataclass(frozen=True)
class NoSource:
    """The source of a declared gap that has none yet: there are no bytes anywhere to point at,
    so none is made up (a null object; the record's JSON leaves ``source`` out). Only a gap may
    have it: the record rules refuse it otherwise."""

    type: ClassVar[Literal["none"]] = "none"

    def check(self, where: Where) -> None:
        """Nothing to check: whether the record may go without a source is a record rule."""

    def to_json(self) -> dict[str, Any]:
        return {}

    def describe(self) -> str:
        return "none yet (a declared gap)"


PinnedSource = HubSource | PackageSource | UrlSource | GeneratorSource | LocalSource
Source = PinnedSource | NoSource

SOURCE_TYPES: Mapping[str, type[PinnedSource]] = {
    cls.type: cls for cls in (HubSource, PackageSource, UrlSource, GeneratorSource, LocalSource)
}


def parse_source(raw: Any, where: Where) -> Source:
    """The typed source of a record's ``source`` object, by its ``type``."""
    if not isinstance(raw, Mapping):
        raise where.fail("source", "must be an object with a 'type'")
    stype = raw.get("type")
    cls = SOURCE_TYPES.get(stype) if isinstance(stype, str) else None
    if cls is None:
        raise where.fail(
            "source.type", f"unknown source type {stype!r}; one of {sorted(SOURCE_TYPES)}"
        )
    return cls.from_json(raw, where)


def _check_keys(cls: type[PinnedSource], raw: Mapping[str, Any], where: Where) -> None:
    """Every required field is there, no unknown one is, and no optional one is null."""
    for key in cls._required:
        if key not in raw:
            raise where.fail(f"source.{key}", f"missing required field for a {cls.type} source")
    extra = set(raw) - set(cls._required) - set(cls._optional) - {"type"}
    if extra:
        raise where.fail(f"source.{sorted(extra)[0]}", f"unknown field for a {cls.type} source")
    for key, message in sorted(cls._optional.items()):
        if key in raw and raw[key] is None:
            raise where.fail(f"source.{key}", message)


def _check_strings(where: Where, optional: tuple[str, ...] = (), **values: object) -> None:
    """Each value given is a non-empty string, or ``None`` for an ``optional`` field left out."""
    for key in sorted(values):
        value = values[key]
        if value is None and key in optional:
            continue
        if not isinstance(value, str) or not value:
            raise where.fail(f"source.{key}", _NON_EMPTY)


def _check_relpath(path: str, where: Where, *, allow_dot: bool = False) -> None:
    if allow_dot:
        path = "/".join(p for p in path.split("/") if p != ".") or "."
        if path == ".":
            return
    try:
        trees.check_member_path(path)
    except UsageError as e:
        raise where.fail("source.path", e.message) from e
