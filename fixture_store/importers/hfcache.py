"""A Hugging Face cache: the files ``huggingface_hub`` downloaded, imported as Hub sources
pinned at the commit they were downloaded at, their bytes verified where they lie.

The cache keeps a repository in ``models--ORG--NAME`` (``datasets--``, ``spaces--``): its
``snapshots/<commit>/`` folder holds each file as a link into ``blobs/``, where a file stored in
LFS is named by its SHA-256 and any other file by its git blob id (the SHA-1 of
``blob <size>\\0`` and the bytes). Both names are checked against the bytes; a file that cannot
be checked (a regular file in the snapshot, as a cache without links holds, or a blob named by
neither) is named with the reason and not imported. A git blob id is SHA-1: it vouches for the
bytes the way DVC's md5 does, as the cache's own check before the SHA-256 of the same bytes is
recorded.

The cache is input: a link in the snapshot is resolved by its text alone and must name a file
directly in the repository's ``blobs/`` folder, read through the path primitive; a link
anywhere else is refused and nothing is imported.

``import CACHE/models--ORG--NAME/snapshots/<commit>``, or the repository folder with
``--revision`` (a commit, or a ref the cache recorded in ``refs/``; default ``main``, or the
only snapshot when the cache recorded no ``main``).
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from fixture_store.errors import RegistryError, UsageError
from fixture_store.importers import held
from fixture_store.importers.entry import ExpectedDigest, ManifestEntry
from fixture_store.importers.plan import (
    Accepted,
    Located,
    Mismatch,
    Plan,
    Unverified,
    check_bytes,
)
from fixture_store.objects import digests
from fixture_store.objects.anchored import Folder
from fixture_store.registry import HubSource, Where

FORMAT = "hf-cache"
_REPO = re.compile(r"(models|datasets|spaces)--(.+)")
_COMMIT = re.compile(r"[0-9a-f]{40}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_TYPES = {"models": None, "datasets": "dataset", "spaces": "space"}
DEFAULT_REF = "main"


@dataclass(frozen=True)
class HubCacheOrigin:
    """Files of one Hub repository at one commit, as its cache holds them."""

    repo_id: str
    repo_type: str | None
    commit: str

    def manifest(self, _path: str) -> tuple[str, str]:
        raise NotImplementedError  # a cache has no manifest: its snapshot is read

    def name(self, _manifest: str) -> str:
        return HubSource(self.repo_id, self.commit, "", self.repo_type).uri().rstrip("/")

    def locate(self, entry: ManifestEntry) -> Located | None:
        raise NotImplementedError  # the snapshot's links are resolved by plan()

    def unlisted(self, _listed: frozenset[str], _manifest: str) -> list[str]:
        return []

    def source(self, path: str) -> HubSource:
        return HubSource(self.repo_id, self.commit, path, self.repo_type)


def claims(path: Path) -> bool:
    """Whether ``path`` is a cached repository folder or one of its snapshots."""
    if path.parent.name == "snapshots":
        return _REPO.fullmatch(path.parent.parent.name) is not None
    return _REPO.fullmatch(path.name) is not None and (path / "snapshots").is_dir()


def plan(path: Path, options: held.Options) -> tuple[Plan, HubCacheOrigin]:
    """Check every file of the snapshot against its blob's name; nothing is stored."""
    repo, commit = _repository(path, options.revision)
    match = _REPO.fullmatch(repo.name)
    assert match is not None  # claims() said so
    origin = HubCacheOrigin(match[2].replace("--", "/"), _TYPES[match[1]], commit)
    try:
        HubSource(origin.repo_id, commit, "x", origin.repo_type).check(Where(str(repo), None))
    except RegistryError as e:
        raise UsageError(f"{repo}: not a cached Hub repository: {e.reason}") from None
    accepted: list[Accepted] = []
    mismatched: list[Mismatch] = []
    unverified: list[Unverified] = []
    absent: list[ManifestEntry] = []
    with Folder.root(repo, refuse=held.refusal) as folder:
        for rel, target in _snapshot_files(folder, commit):
            if not held.included(rel, options.include):
                continue
            shown = f"{repo.name}/snapshots/{commit}"
            if target is None:
                unverified.append(Unverified(rel, shown, _NOT_A_LINK))
                continue
            blob = _blob(rel, target, f"{shown}/{rel}", repo)
            outcome = _check(
                folder,
                rel,
                blob,
                shown=shown,
                origin=origin,
                scratch=options.scratch,
                snapshot=repo / "snapshots" / commit,
            )
            if isinstance(outcome, Accepted):
                accepted.append(outcome)
            elif isinstance(outcome, Mismatch):
                mismatched.append(outcome)
            elif isinstance(outcome, Unverified):
                unverified.append(outcome)
            else:
                absent.append(outcome)
    name = origin.name("")
    return (
        Plan(
            FORMAT,
            name,
            tuple(accepted),
            tuple(absent),
            tuple(mismatched),
            (),
            tuple(unverified),
        ),
        origin,
    )


_NOT_A_LINK = (
    "a regular file in the snapshot, not a link into blobs/ (a cache made without links): "
    "no blob name to check its bytes against"
)


def _repository(path: Path, revision: str | None) -> tuple[Path, str]:
    """The repository folder and the commit of the snapshot to import."""
    if path.parent.name == "snapshots":
        commit = path.name
        if revision is not None and revision != commit:
            raise UsageError(
                f"{path} is the snapshot of {commit}, not of --revision {revision}",
                fix="import the repository folder with --revision, or the snapshot alone",
            )
        repo = path.parent.parent
    else:
        repo, commit = path, _resolve(path, revision)
    if _COMMIT.fullmatch(commit) is None:
        raise UsageError(f"{path}: {commit!r} is not a 40-hex commit, as snapshot folders are")
    if not (repo / "snapshots" / commit).is_dir():
        raise UsageError(
            f"{repo} has no snapshot of {commit}",
            fix=f"huggingface-cli download {repo.name} --revision {commit}, then import again",
        )
    return repo, commit


def _resolve(repo: Path, revision: str | None) -> str:
    """A commit as given, or the commit the cache's ``refs/REVISION`` names; no revision:
    ``refs/main``, else the cache's only snapshot."""
    snapshots = sorted(os.listdir(repo / "snapshots"))
    if revision is None:
        if not (repo / "refs" / DEFAULT_REF).is_file() and len(snapshots) == 1:
            return snapshots[0]
        revision = DEFAULT_REF
    if _COMMIT.fullmatch(revision):
        return revision
    with Folder.root(repo, refuse=held.refusal) as folder:
        try:
            with folder.folder("refs", *revision.split("/")[:-1]) as refs:
                text = refs.read_bytes(revision.rsplit("/", maxsplit=1)[-1])
        except (FileNotFoundError, NotADirectoryError, ValueError):
            raise UsageError(
                f"{repo} has no ref {revision!r} (refs/{revision})",
                fix=f"pass --revision COMMIT (snapshots: {', '.join(snapshots) or 'none'})",
            ) from None
    return text.decode("ascii", "replace").strip()


def _snapshot_files(folder: Folder, commit: str) -> Iterator[tuple[str, str | None]]:
    """Each file of the snapshot, by path, with its link's text (``None``: not a link)."""
    pending = [""]
    while pending:
        rel = pending.pop()
        parts = ["snapshots", commit, *(rel.split("/") if rel else [])]
        with folder.folder(*parts) as here:
            for entry in sorted(here.scandir(), key=lambda e: e.name):
                path = f"{rel}/{entry.name}" if rel else entry.name
                if entry.is_symlink():
                    yield path, os.readlink(entry.name, dir_fd=here.fd)
                elif entry.is_dir(follow_symlinks=False):
                    pending.append(path)
                elif entry.is_file(follow_symlinks=False):
                    yield path, None
                else:
                    raise held.refusal(here.child(entry.name), "not a regular file")


def _blob(rel: str, target: str, shown: str, repo: Path) -> str:
    """The blob a snapshot link names: it must resolve, by its text, to a file directly in the
    repository's ``blobs/`` folder."""
    if os.path.isabs(target):
        resolved = None
        for base in {os.path.abspath(repo), os.path.realpath(repo)}:
            inside = os.path.relpath(os.path.normpath(target), base)
            if not inside.startswith(".."):
                resolved = inside.replace(os.sep, "/")
    else:
        link_dir = posixpath.dirname(f"snapshots/x/{rel}")
        resolved = posixpath.normpath(posixpath.join(link_dir, target))
    folder, _, name = (resolved or "").partition("/")
    if folder != "blobs" or not name or "/" in name:
        raise UsageError(
            f"{shown} links to {target!r}, outside the cache's blobs/ folder: a cache's "
            "snapshot links only into blobs/; nothing was imported",
            fix=f"remove the link, or download the file again (hf_hub_download) into {repo.parent}",
        )
    return name


def _check(
    folder: Folder,
    rel: str,
    blob: str,
    *,
    shown: str,
    origin: HubCacheOrigin,
    scratch: Path,
    snapshot: Path,
) -> Accepted | Mismatch | Unverified | ManifestEntry:
    """The blob's bytes checked against its name: a SHA-256 (LFS) or a git blob id. The copy
    in ``scratch`` is named by its snapshot path, the file the user's cache shows."""
    lfs = _SHA256.fullmatch(blob) is not None
    if not lfs and _COMMIT.fullmatch(blob) is None:
        return Unverified(
            rel, shown, f"its blob {blob!r} is named by neither a sha256 nor a git blob id"
        )
    copied = held.copy_in(folder, ["blobs", blob], scratch)
    if lfs:
        entry = ManifestEntry(rel, (ExpectedDigest("sha256", blob),), shown)
        # A dangling link (the blob was never downloaded, or was removed) is absent.
        located = Located(copied, origin.source(rel), str(snapshot / rel)) if copied else None
        return entry if located is None else check_bytes(entry, located)
    if copied is None:
        return Unverified(rel, shown, f"its blob {blob} is not in blobs/ (a dangling link)")
    located = Located(copied, origin.source(rel), str(snapshot / rel))
    blob_id, digest = digests.git_blob_id_of_file(copied)
    read = ManifestEntry(rel, (ExpectedDigest("sha256", digest.hex),), shown)
    if blob_id != blob:
        return Mismatch(
            read, f"the git blob id of the bytes is {blob_id}, the blob is named {blob}"
        )
    return Accepted(read, digest, located)
