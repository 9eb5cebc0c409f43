"""A project's registry as git holds it at a revision: the ``provenance/`` files of that commit
(family files and their shards, ``provenance/<family>/<ab>.json``), read with git and parsed by
the registry's own parser (:mod:`fixture_store.registry.documents`), nothing written and no
store needed.

What :func:`load` gives is a :class:`~fixture_store.registry.family.Registry` like the one
:func:`fixture_store.registry.files.load` reads from the working tree: a file that does not parse
raises, an invalid record is kept apart with its error. Files are named ``REV:provenance/...`` in
errors. A link in the commit's ``provenance/`` is refused, as the working tree's is.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fixture_store.errors import RegistryError, UsageError
from fixture_store.registry import shards
from fixture_store.registry.documents import SchemaPasses, parse_document, parse_records
from fixture_store.registry.family import FamilyFile, Registry
from fixture_store.registry.raw_files import DIRNAME, project_root
from fixture_store.registry.records import Record, check_family

_GIT_TIMEOUT = 120
_LINK_MODE = "120000"
# A registry file at a revision larger than this is refused before it is read: a family is
# sharded past 8 MiB, so only a commit made to exhaust the reviewer's memory comes near it.
MAX_FILE_BYTES = 32 * shards.SHARD_ABOVE


@dataclass(frozen=True)
class Revision:
    """One side of a comparison: a revision as the user named it and the commit it resolved
    to, or the working tree (``name`` ``None``)."""

    name: str | None = None
    commit: str | None = None

    @property
    def is_worktree(self) -> bool:
        return self.name is None

    def __str__(self) -> str:
        if self.name is None:
            return "working tree"
        return f"{self.name} ({self.commit[:12]})" if self.commit else self.name

    def to_json(self) -> dict[str, Any]:
        return {"revision": self.name, "commit": self.commit}


def _git(project: Path, *args: str, stdin: bytes | None = None) -> bytes:
    try:
        done = subprocess.run(
            ["git", "-C", str(project), *args],
            input=stdin,
            capture_output=True,
            timeout=_GIT_TIMEOUT,
            check=False,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"},
        )
    except FileNotFoundError as e:
        raise UsageError("git is not installed", fix="install git") from e
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise UsageError(
            f"git {args[0]} failed in {project}: {said[-1] if said else done.returncode}",
            fix="run it in a git checkout of the project, naming a revision it has",
        )
    return done.stdout


def resolve(root: str | os.PathLike[str] | None, name: str) -> Revision:
    """The commit ``name`` (a branch, tag, sha, ``HEAD~1``) names in the project's repository."""
    if not name or name.startswith("-") or "\0" in name:
        raise UsageError(f"{name!r} is not a revision", fix="name a commit, e.g. HEAD~1 or main")
    project = project_root(root)
    _git(project, "rev-parse", "--git-dir")  # not a repository: git's own words say so
    try:
        out = _git(project, "rev-parse", "--verify", "--quiet", f"{name}^{{commit}}")
    except UsageError:
        raise UsageError(
            f"{name!r} names no commit of the project's git repository",
            fix="name a branch, a tag or a commit it has (git log --oneline), e.g. HEAD~1; "
            "a CI checkout may need the base branch fetched (git fetch origin main)",
        ) from None
    return Revision(name, out.decode("ascii").strip())


def load(root: str | os.PathLike[str] | None, revision: Revision) -> Registry:
    """The registry of the project at ``root`` as it was at ``revision`` (a commit)."""
    if revision.commit is None:
        raise UsageError("a revision to read the registry at is needed")
    project = project_root(root)
    prefix = _git(project, "rev-parse", "--show-prefix").decode("utf-8", "surrogateescape").strip()
    listed = _git(
        project, "ls-tree", "-r", "-z", "-l", "--full-name", revision.commit, "--", DIRNAME
    )
    blobs: dict[str, str] = {}  # path within the project -> blob id
    for entry in filter(None, listed.split(b"\0")):
        meta, _, raw_path = entry.partition(b"\t")
        mode, kind, oid, size = meta.decode("ascii").split()
        path = raw_path.decode("utf-8", "surrogateescape")[len(prefix) :]
        if not path.endswith(".json"):
            continue
        if mode == _LINK_MODE or kind != "blob":
            raise shards.refusal(_shown(revision, path), "a link or not a file")
        if int(size) > MAX_FILE_BYTES:
            raise RegistryError(
                f"is {int(size):,} bytes, more than a registry file holds "
                f"({MAX_FILE_BYTES:,}: a family is sharded past {shards.SHARD_ABOVE:,})",
                file=_shown(revision, path),
            )
        blobs[path] = oid
    texts = _read_blobs(project, blobs, revision)
    return Registry(project, _families(texts, revision))


def _shown(revision: Revision, path: str) -> str:
    return f"{revision.name}:{path}"


def _read_blobs(project: Path, blobs: Mapping[str, str], revision: Revision) -> dict[str, str]:
    """Each blob's text, read by one ``git cat-file --batch``."""
    if not blobs:
        return {}
    order = sorted(blobs)
    out = _git(
        project, "cat-file", "--batch", stdin="".join(f"{blobs[p]}\n" for p in order).encode()
    )
    texts: dict[str, str] = {}
    at = 0
    for path in order:
        end = out.index(b"\n", at)
        size = int(out[at:end].split()[2])
        data = out[end + 1 : end + 1 + size]
        at = end + 1 + size + 1
        try:
            texts[path] = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise RegistryError(f"cannot read: {e}", file=_shown(revision, path)) from e
    return texts


def _families(texts: Mapping[str, str], revision: Revision) -> dict[str, FamilyFile]:
    """Each family of ``provenance/`` from its file's text and its shards' (a folder of shards
    without its family's file is refused, as loading the working tree refuses it)."""
    heads = {p: t for p, t in texts.items() if p.count("/") == 1}
    by_family: dict[str, dict[str, str]] = {}
    for path, text in texts.items():
        parts = path.split("/")
        if len(parts) == 3:  # noqa: PLR2004 - provenance/<family>/<ab>.json
            by_family.setdefault(parts[1], {})[path] = text
    families: dict[str, FamilyFile] = {}
    for path, text in sorted(heads.items()):
        family = Path(path).stem
        families[family] = _family(path, text, by_family.pop(family, {}), revision)
    for family in sorted(by_family):
        raise RegistryError(
            f"holds registry shards, but there is no {family}.json beside it",
            file=_shown(revision, f"{DIRNAME}/{family}/"),
        )
    return families


def _family(head: str, text: str, shard_texts: Mapping[str, str], rev: Revision) -> FamilyFile:
    shown = _shown(rev, head)
    try:
        family = check_family(Path(head).stem)
    except UsageError as e:
        raise RegistryError(e.message, file=shown, field="file name") from e
    doc = parse_document(text, shown)
    records: dict[str, Record] = {}
    invalid: dict[str, RegistryError] = {}
    if "shards" in doc:
        for path, shard_text in sorted(shard_texts.items()):
            stem = Path(path).stem
            if not shards.is_shard_name(stem):
                raise RegistryError(f"is not a shard of family {family!r}", file=_shown(rev, path))
            sub = parse_document(shard_text, _shown(rev, path), shard=family)
            found, bad = _parsed(sub, _shown(rev, path), family, shard=stem)
            records.update(found)
            invalid.update(bad)
    else:
        records, invalid = _parsed(doc, shown, family, shard=None)
    return FamilyFile(
        Path(shown),
        family,
        dict(sorted(records.items())),
        dict(sorted(invalid.items())),
        sharded="shards" in doc,
    )


def _parsed(
    doc: Any, shown: str, family: str, *, shard: str | None
) -> tuple[dict[str, Record], dict[str, RegistryError]]:
    # No pass markers: a revision's files are read once, and no store is needed or written.
    return parse_records(
        doc["records"], Path(shown), family, SchemaPasses(None), shard=shard, suspect=doc.suspect
    )
