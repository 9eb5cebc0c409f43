"""Remotes: caches of the store's bytes that a team and CI share (DESIGN decision 9).

``base`` (the layout, the interface every kind implements, errors, retries), one module per
kind (``folder``: a path or ``file://``; ``s3``: S3-compatible object storage through boto3, the
``s3`` extra; ``https``: a read-only mirror of the same layout; ``hub``: a Hugging Face Hub repo,
the ``hub`` extra), ``config`` (named remotes in
``pyproject.toml`` and the user's file) and ``sync`` (push and pull of the objects records
reference) and ``mirrors`` (the remotes a fetch tries first).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

from fixture_store.remotes.base import Remote
from fixture_store.remotes.config import RemoteSpec


def open_remote(
    spec: RemoteSpec, *, jobs: int = 8, note: Callable[[str], None] | None = None
) -> Remote:
    """The remote ``spec`` describes, ready to use (its client made, nothing sent yet);
    ``note`` hears what a remote says while it works (a Hub commit retried after a 429)."""
    if spec.kind == "s3":
        from fixture_store.remotes.s3 import S3Remote

        return S3Remote.connect(spec, jobs=jobs)
    if spec.kind == "hub":
        from fixture_store.remotes.hub import HubRemote

        remote = HubRemote(spec.name, spec.hub)
        if note is not None:
            remote.note = note
        return remote
    if spec.kind == "https":
        from fixture_store.remotes.https import HttpsRemote

        return HttpsRemote(spec.name, spec.url.rstrip("/"))
    from fixture_store.remotes.folder import FolderRemote

    path = spec.url.removeprefix("file://") if spec.url.startswith("file://") else spec.url
    return FolderRemote(spec.name, Path(path).expanduser().absolute())


__all__ = ["Remote", "RemoteSpec", "open_remote"]


def mirror_specs(project: Path, remote: str | None = None) -> list[RemoteSpec]:
    """The remotes a command tries before a record's pinned source: ``remote`` alone, or every
    configured one, the default first (:meth:`RemoteConfig.mirrors`); a configuration error or
    an unknown ``remote`` is raised here, before anything is opened."""
    from fixture_store.remotes import config

    conf = config.load(project)
    return [conf.resolve(remote)] if remote is not None else conf.mirrors()


def mirrors_opener(project: Path, remote: str | None = None) -> Callable[[], tuple[Remote, ...]]:
    """The remotes of :func:`mirror_specs` (resolved now: a bad name fails at once), opened on
    the first call and kept: a command that ends up needing none makes no client."""
    specs = mirror_specs(project, remote)
    return functools.cache(lambda: tuple(open_remote(spec) for spec in specs))


def configured_mirrors(project: Path, remote: str | None = None) -> tuple[Remote, ...]:
    """The remotes of :func:`mirror_specs`, opened."""
    return mirrors_opener(project, remote)()
