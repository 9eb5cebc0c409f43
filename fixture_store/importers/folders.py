"""Which folder import a command line asks for: a Hugging Face cache (:mod:`.hfcache`), a Git
LFS repository or ``git lfs ls-files --long`` output (:mod:`.gitlfs`), or, with ``--package``
and no manifest, an installed distribution's ``RECORD`` (:mod:`.installed`). Anything else is a
manifest file, read by the formats of :data:`fixture_store.importers.FORMATS`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType, ModuleType

from fixture_store.errors import UsageError
from fixture_store.importers import gitlfs, held, hfcache, installed
from fixture_store.importers.plan import Origin, Plan

FORMATS: Mapping[str, ModuleType] = MappingProxyType(
    {module.FORMAT: module for module in (hfcache, gitlfs)}
)


def plan_for(
    fmt: str | None, manifest: str | None, requirement: str | None, options: held.Options
) -> tuple[Plan, Origin] | None:
    """The plan and origin of a folder import; ``None`` when ``manifest`` is a manifest file
    (then ``--revision`` is refused: it selects a commit of a Hub cache; ``--include`` and
    ``--exclude`` select the entries of every import)."""
    found = _plan_for(fmt, manifest, requirement, options)
    if found is not None and options.root is not None:
        raise UsageError(
            "--root names the folder a manifest's paths are relative to; a folder import "
            "(a Hugging Face cache, a Git LFS repository, an installed distribution) has none",
            fix="leave --root out",
        )
    return found


def _plan_for(
    fmt: str | None, manifest: str | None, requirement: str | None, options: held.Options
) -> tuple[Plan, Origin] | None:
    if manifest is None:
        if requirement is None:
            raise UsageError(
                "give the manifest (or folder) to import: fixture-store import [FORMAT] MANIFEST",
                fix="or --package NAME==VERSION alone, to import an installed distribution",
            )
        return installed.plan(requirement, options)
    path = Path(manifest)
    module = FORMATS.get(fmt) if fmt is not None else None
    if module is None and fmt is None and path.is_dir():
        module = next((m for m in FORMATS.values() if m.claims(path)), None)
        if module is None:
            raise UsageError(
                f"{manifest} is a folder, and neither a Hugging Face cache (models--ORG--NAME, "
                "or its snapshots/COMMIT) nor a Git LFS repository",
                fix="name a manifest file, or the folder's format: fixture-store import "
                f"{' | '.join(FORMATS)} {manifest}",
            )
    if module is not None:
        done: tuple[Plan, Origin] = module.plan(path, options)
        return done
    if options.revision is not None:
        raise UsageError(
            "--revision selects a commit of a Hugging Face cache, not of a manifest",
            fix="leave it out",
        )
    return None
