"""Pin rules: what makes a reference to upstream bytes immovable (DESIGN decision 2).

A revision is a full 40-hex commit: a branch, tag or short sha can move. The Hub's file URLs carry
a revision in their path (``/{repo_id}/resolve/{revision}/{path}``), so a ``url`` source pointing
at the Hub must name a commit there too: ``.../resolve/main/...`` is a branch hidden in a URL.

The rules are small pure functions returning the problem (or ``None``), so any source parser can
apply them; :func:`require_pinned_hub_url` raises the registry's error for one.
"""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

from fixture_store import display
from fixture_store.errors import RegistryError

REVISION = re.compile(r"[0-9a-f]{40}")
COMMIT_LEN = 40  # hex characters of a full commit sha
HUB_HOSTS = ("huggingface.co", "hf.co")
_HEXISH = re.compile(r"[0-9a-fA-F]+")
# [datasets/|spaces/] [org/] name / resolve|raw / revision [/ path]: the Hub's file routes.
_HUB_FILE = re.compile(
    r"/(?:(?:datasets|spaces)/)?(?:[^/]+/)?[^/]+/(?:resolve|raw)/([^/]+)(?:/.*)?"
)


def revision_problem(revision: str) -> str | None:
    """Why ``revision`` is not a full 40-hex commit, or ``None`` if it is one."""
    if REVISION.fullmatch(revision):
        return None
    if _HEXISH.fullmatch(revision) and len(revision) < COMMIT_LEN:
        return f"{revision!r} is a short commit sha"
    if _HEXISH.fullmatch(revision) and len(revision) == COMMIT_LEN:
        return f"{revision!r} is upper case"
    return f"{revision!r} is a branch, tag or other moving reference"


def is_hub_host(host: str | None) -> bool:
    host = (host or "").lower().rstrip(".")
    return any(host == h or host.endswith("." + h) for h in HUB_HOSTS)


def hub_url_revision(url: str) -> str | None:
    """The revision a Hub file URL resolves (percent-decoded), or ``None`` for any other URL."""
    parts = urlsplit(url)
    if not is_hub_host(parts.hostname):
        return None
    match = _HUB_FILE.fullmatch(parts.path)
    return unquote(match.group(1)) if match else None


def check_hub_resolve_url(url: str) -> str | None:
    """The problem with a Hub file URL whose revision is not a full 40-hex commit, or ``None``
    (also for every URL that is not a Hub file URL)."""
    revision = hub_url_revision(url)
    if revision is None:
        return None
    why = revision_problem(revision)
    if why is None:
        return None
    return (
        f"{display.url(url)!r} is a Hub file URL whose revision {why}; a Hub URL must name a "
        "full 40-hex commit (.../resolve/<commit>/...)"
    )


def require_pinned_hub_url(url: str, *, file: str | None, record: str | None) -> None:
    """Raise :class:`RegistryError` (naming file, record and ``source.url``) for a Hub file URL
    that does not name a commit."""
    problem = check_hub_resolve_url(url)
    if problem is None:
        return
    raise RegistryError(
        problem,
        file=file,
        record=record,
        field="source.url",
        fix="put the full commit sha in the URL instead of the branch (the file's History on "
        "the Hub gives it), or register a hub source with repo_id, revision and path",
    )


# What git's check-ref-format refuses anywhere in a ref name (rule 4, 5 and 10): control
# characters, space, ~ ^ : ? * [ and backslash.
_REF_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")


def ref_problem(name: str) -> str | None:
    """Why ``name`` is not a branch or tag name git would take (``git check-ref-format
    --allow-onelevel``, the rules of git-check-ref-format(1)), or ``None`` if it is one. A name
    a server or a user gives for a ref is checked by these rules before it is used: ``..``
    or ``@{`` would read as a range or a reflog, ``.lock`` as git's own lock file."""
    found = _REF_FORBIDDEN.search(name)
    parts = name.split("/")
    problems = (
        (not name, "is empty"),
        (name == "@", "is the single character '@'"),
        (found is not None, f"holds the character {found.group() if found else ''!r}"),
        (".." in name, "holds '..'"),
        ("@{" in name, "holds '@{'"),
        (
            name.startswith("/") or name.endswith("/") or "//" in name,
            "starts or ends with '/', or holds '//'",
        ),
        (name.endswith("."), "ends with '.'"),
        (any(p.startswith(".") for p in parts), "has a part that starts with '.'"),
        (any(p.endswith(".lock") for p in parts), "has a part that ends with '.lock'"),
    )
    return next((why for broken, why in problems if broken), None)
