"""One parser for the ways people write an upstream: what ``add --upstream`` and an imported
manifest's ``upstream`` field read.

The notations, each read into one :class:`Spelled` value (what it names, nothing checked yet):

- ``REPO@REV:FILE``: a file of a Hugging Face Hub repository (``owner/name@<40-hex>:path``);
- ``hf://[datasets/|models/|spaces/]REPO[@REV][/PATH]``: the same, as a URI;
- ``git+https://HOST/OWNER/REPO[@REV][#PATH]``: a git repository, a file of it with ``#PATH``
  or the repository itself (code pinned at a commit) without;
- ``https://github.com/OWNER/REPO[/tree|blob/REV[/PATH]]`` and
  ``https://huggingface.co/[datasets/|spaces/]OWNER/NAME[/tree|blob/REV[/PATH]]``: the pages a
  browser shows, read as the git repository and the Hub repository they are;
- ``pypi:NAME==VERSION/PATH``: a file inside a package at an exact version;
- any other ``https://`` URL.

A bare ``owner/name`` (with or without ``@REV``) is both a Hub repository and a GitHub one: it is
never guessed, :func:`pin` asks which, its fix spelling both. :func:`pin` then makes the pinned
upstream of a spelling and the revision and path given beside it (a manifest's ``revision`` and
``checkpoint`` fields), checked by the pin rules of :mod:`fixture_store.registry.upstream`: a
branch where a commit is required is refused there, with the fix.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Literal

from fixture_store import bounded_json
from fixture_store.registry.pins import HUB_HOSTS
from fixture_store.registry.sources import HUB_SCHEME
from fixture_store.registry.upstream import (
    GIT_SCHEME,
    PYPI_SCHEME,
    GitUpstream,
    HubUpstream,
    PackageUpstream,
    Upstream,
    UrlUpstream,
    parse_one,
)
from fixture_store.registry.where import Where

Kind = Literal["hub", "git", "package", "url", "bare"]
FORMS = (
    "OWNER/NAME@<40-hex>:FILE (Hub), hf://OWNER/NAME@<40-hex>/FILE, "
    "git+https://HOST/OWNER/REPO@<40-hex>[#PATH], https://github.com/OWNER/REPO/tree/<40-hex>, "
    "pypi:NAME==VERSION/FILE, https://URL, or the JSON object"
)
_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"
_REPO = rf"{_NAME}(?:/{_NAME})?"
# REPO@REV:FILE, the Hub's own short spelling of a file at a revision.
_HUB_SHORT = re.compile(rf"(?P<repo>{_REPO})@(?P<rev>[^:/@\s]+):(?P<path>.+)")
# owner/name[@REV]: a Hub repository or a GitHub one; which is the question.
_BARE = re.compile(rf"(?P<repo>{_NAME}/{_NAME})(?:@(?P<rev>[^:/@\s]+))?")
# The pages of a repository: [/tree|blob/REV[/PATH]] after OWNER/REPO.
_PAGE = re.compile(
    rf"/(?P<repo>{_NAME}/{_NAME})(?:/(?:tree|blob)/(?P<rev>[^/]+)(?:/(?P<path>.+))?)?/?"
)
_HUB_TYPES = {"datasets/": "dataset", "models/": None, "spaces/": "space"}


@dataclass(frozen=True)
class Spelled:
    """What a notation names: the kind, the repository (a Hub repo id, a git URL, a package
    requirement or a URL), and the revision and path when it names them."""

    kind: Kind
    repository: str
    revision: str | None = None
    path: str | None = None
    repo_type: str | None = None  # a Hub repository's type when not a model


def parse_uri(text: str, where: Where, field: str = "upstream") -> Upstream:
    """An upstream from its command-line form (a notation of this module, or the JSON
    object), checked by the pin rules."""
    if text.lstrip().startswith("{"):
        try:
            raw = bounded_json.loads(text)
        except json.JSONDecodeError as e:
            raise where.fail(field, f"{text!r} is not valid JSON: {e.msg}") from e
        except ValueError as e:
            raise where.fail(field, f"{text[:80]!r}…: {e}") from e
        return parse_one(raw, where, field)
    return pin(read(text, where, field), where, field)


def read(text: str, where: Where, field: str) -> Spelled:
    """The upstream ``text`` spells, by the notations of this module; nothing is checked yet."""
    text = text.strip()
    for scheme, reader in (
        (HUB_SCHEME, _hf),
        (GIT_SCHEME, _git),
        (PYPI_SCHEME, _pypi),
        ("https://", _page),
        ("http://", _page),
    ):
        if text.startswith(scheme):
            return reader(text)
    short = _HUB_SHORT.fullmatch(text)
    if short is not None:
        return Spelled("hub", short["repo"], short["rev"], short["path"])
    bare = _BARE.fullmatch(text)
    if bare is not None:
        return Spelled("bare", bare["repo"], bare["rev"])
    raise where.fail(field, f"{text!r} is not a pinned upstream; write one of {FORMS}")


def pin(
    spelled: Spelled,
    where: Where,
    field: str,
    *,
    revision: str | None = None,
    path: str | None = None,
    repo_type: str | None = None,
) -> Upstream:
    """The pinned upstream ``spelled`` names, with the ``revision`` and ``path`` stated beside
    it (each must agree with the notation's own), checked by the pin rules."""
    spelled = _merge(spelled, where, field, revision=revision, path=path, repo_type=repo_type)
    kind = spelled.kind
    if kind == "bare" and spelled.repo_type is not None:
        kind = "hub"  # a repository type is the Hub's notion: the question is answered
    up = _build(replace(spelled, kind=kind), where, field)
    up.check(where, field)
    return up


def is_pinnable(spelled: Spelled) -> bool:
    """Whether ``spelled`` names a revision (or is a package or a URL, pinned by themselves)."""
    return spelled.revision is not None or spelled.kind in ("package", "url")


def _merge(
    spelled: Spelled,
    where: Where,
    field: str,
    *,
    revision: str | None,
    path: str | None,
    repo_type: str | None,
) -> Spelled:
    for name, stated, beside in (
        ("revision", spelled.revision, revision),
        ("path", spelled.path, path),
    ):
        if stated is not None and beside is not None and stated != beside:
            raise where.fail(
                field,
                f"{spelled.repository!r} names the {name} {stated!r} and the {name} beside it "
                f"is {beside!r}",
                fix=f"state the {name} once, or make both the same",
            )
    return replace(
        spelled,
        revision=spelled.revision or revision,
        path=spelled.path or path,
        repo_type=spelled.repo_type or repo_type,
    )


def _build(spelled: Spelled, where: Where, field: str) -> Upstream:
    repo, rev, path = spelled.repository, spelled.revision, spelled.path
    if spelled.kind == "bare":
        raise _question(spelled, where, field)
    if spelled.kind == "package":
        return PackageUpstream(repo, path or "")
    if spelled.kind == "url" and rev is None:
        return UrlUpstream(repo)
    if rev is None:
        raise where.fail(
            field,
            f"{repo!r} names no revision; an upstream is pinned at a full 40-hex commit",
            fix="add @<40-hex> (the repository's history gives the full sha)",
        )
    if spelled.kind == "hub":
        if path is None:
            raise where.fail(
                field,
                f"the Hub repository {repo!r} names no file; a Hub upstream is a file",
                fix=f"name it: {repo}@{rev}:FILE, or hf://{repo}@{rev}/FILE",
            )
        repo_type = None if spelled.repo_type in (None, "model") else spelled.repo_type
        return HubUpstream(repo, rev, path, repo_type)
    return GitUpstream(repo, rev, path)  # a git URL, or any https URL at a commit


def _question(spelled: Spelled, where: Where, field: str) -> Exception:
    repo, rev, path = spelled.repository, spelled.revision or "<40-hex>", spelled.path
    hub = f"hf://{repo}@{rev}/{path or 'FILE'}"
    git = f"git+https://github.com/{repo}@{rev}" + (f"#{path}" if path else "")
    return where.fail(
        field,
        f"{repo!r}: a Hugging Face Hub repository or a GitHub repository? A bare OWNER/NAME "
        "is both, and nothing is guessed",
        fix=f"write {hub} for the Hub, or {git} for GitHub (a code repository at a commit; "
        "#PATH names a file in it)",
    )


def _hf(text: str) -> Spelled:
    rest = text[len(HUB_SCHEME) :]
    repo_type = None
    for prefix, kind in _HUB_TYPES.items():
        if rest.startswith(prefix):
            repo_type, rest = kind, rest[len(prefix) :]
    if "@" not in rest:
        return Spelled("hub", rest.rstrip("/"), repo_type=repo_type)
    repo, _, tail = rest.partition("@")
    rev, _, path = tail.partition("/")
    return Spelled("hub", repo, rev, path or None, repo_type)


def _git(text: str) -> Spelled:
    located, hashed, path = text[len(GIT_SCHEME) :].partition("#")
    url, at, rev = located.rpartition("@")
    if not at or "/" in rev:  # no @REV (an @ in the host part is user information)
        url, rev = located, ""
    return Spelled("git", url, rev or None, path if hashed and path else None)


def _pypi(text: str) -> Spelled:
    requirement, _, path = text[len(PYPI_SCHEME) :].partition("/")
    return Spelled("package", requirement, path=path)


def _page(text: str) -> Spelled:
    """A repository page on GitHub or the Hub, or any other URL."""
    scheme, _, rest = text.partition("://")
    host, _, route = rest.partition("/")
    host = host.lower()
    if scheme == "https" and host in ("github.com", "www.github.com"):
        page = _PAGE.fullmatch(f"/{route.removesuffix('.git')}")
        if page is not None:
            url = f"https://github.com/{page['repo']}"
            return Spelled("git", url, page["rev"], page["path"])
    if scheme == "https" and host in HUB_HOSTS:
        repo_type = None
        for prefix, kind in _HUB_TYPES.items():
            if route.startswith(prefix) and prefix != "models/":
                repo_type, route = kind, route[len(prefix) :]
        page = _PAGE.fullmatch(f"/{route}")
        if page is not None:
            return Spelled("hub", page["repo"], page["rev"], page["path"], repo_type)
    return Spelled("url", text)
