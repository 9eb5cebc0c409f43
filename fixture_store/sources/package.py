"""The package source: a file or folder inside a distribution pinned by exact version and digest.

The distribution is fetched with the machine's own package tooling (``python -m pip download``),
so the index it comes from is whatever the machine is configured to use; no index address is
written here. The downloaded file is checked against the record's ``file_digest`` before it is
opened, then kept in the store as an object addressed by that digest: every record pointing into
the same distribution shares one download, and ``--offline`` can still extract from it.

Wheels are fetched with the tags written in their file name (``--platform``, ``--abi``, ...), so
the same pinned file is downloaded on every machine, whatever its own platform.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import BinaryIO

from filelock import FileLock

from fixture_store._extras import require
from fixture_store.errors import IntegrityError, UsageError
from fixture_store.objects import digests
from fixture_store.objects.digests import Digest
from fixture_store.registry import PackageSource, Record
from fixture_store.sources import FetchContext, SourceError, put_object, put_tree, source_as
from fixture_store.sources.members import SafeArchive, open_archive
from fixture_store.sources.transfer import DEADLINE_ENV

PIP_ENV_VAR = "FIXTURE_STORE_PIP"
TIMEOUT_S = 900


def pip_command() -> list[str]:
    """The package tool: ``$FIXTURE_STORE_PIP`` if set, else this interpreter's pip."""
    override = os.environ.get(PIP_ENV_VAR)
    if override:
        return shlex.split(override)
    require("package", for_what="fetching a package source")
    return [sys.executable, "-m", "pip"]


def selection_flags(filename: str) -> list[str]:
    """pip flags that select exactly ``filename`` whatever the local platform."""
    if not filename.endswith(".whl"):
        return ["--no-binary", ":all:"]
    parts = filename[: -len(".whl")].split("-")
    if len(parts) not in (5, 6):
        raise UsageError(f"{filename!r} is not a wheel file name (name-version-py-abi-platform)")
    pytag, abi, platform = parts[-3:]
    pytag = pytag.split(".")[0]
    impl = "".join(ch for ch in pytag if ch.isalpha())
    version = pytag[len(impl) :]
    flags = ["--only-binary", ":all:", "--implementation", impl, "--abi", abi]
    if version:
        flags += ["--python-version", version[0] + ("." + version[1:] if version[1:] else "")]
    for tag in platform.split("."):
        flags += ["--platform", tag]
    return flags


def download(requirement: str, filename: str, dest: Path, timeout: float = TIMEOUT_S) -> Path:
    """Run the package tool to download exactly ``filename`` of ``requirement`` into ``dest``.

    The tool is killed after ``timeout`` seconds in total, whatever the index does.
    """
    cmd = [
        *pip_command(),
        "download",
        "--no-deps",
        "--disable-pip-version-check",
        "--progress-bar",
        "off",
        "--dest",
        str(dest),
        *selection_flags(filename),
        requirement,
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError as e:
        raise UsageError(
            f"cannot run the package tool {cmd[0]!r}: {e.strerror}",
            fix=f"install pip, or set ${PIP_ENV_VAR} to a pip command",
        ) from e
    except subprocess.TimeoutExpired as e:
        raise UsageError(
            f"downloading {requirement} ({filename}) took longer than {timeout:g}s; "
            "the package tool was stopped and nothing was stored",
            fix=f"check network access and the package index configuration, or allow more "
            f"time with {DEADLINE_ENV}=SECONDS",
        ) from e
    if proc.returncode != 0:
        tail = "\n    ".join((proc.stderr or proc.stdout).strip().splitlines()[-4:])
        if "No module named pip" in proc.stderr:
            raise UsageError(
                f"{sys.executable} has no pip to download {requirement}",
                fix=f"uv add 'fixture-store[package]', or set ${PIP_ENV_VAR}",
            )
        raise UsageError(
            f"the package tool could not download {requirement} ({filename}):\n    {tail}",
            fix="check network access and the package index configuration (pip config list)",
        )
    path = dest / filename
    if not path.is_file():
        got = ", ".join(sorted(p.name for p in dest.iterdir())) or "nothing"
        raise UsageError(f"the package tool downloaded {got}, not the pinned file {filename}")
    return path


def ensure_distribution(ctx: FetchContext, record: Record) -> SafeArchive:
    """The verified distribution of ``record``, downloaded at most once per store."""
    source = source_as(record, PackageSource)
    hexpart = source.file_hex
    with ctx.key_lock(hexpart):
        cached = ctx.shared.get(hexpart)
        if isinstance(cached, SafeArchive):
            return cached
        ctx.store.ensure()
        # Across processes too: concurrent fetches sharing a store download it once.
        with FileLock(str(ctx.store.root / "locks" / f"dist-{hexpart[:16]}.lock")):
            archive = _load(ctx, record, source)
        ctx.shared[hexpart] = archive
        return archive


def _load(ctx: FetchContext, record: Record, source: PackageSource) -> SafeArchive:
    requirement, filename = source.requirement, source.file
    hexpart, size = source.file_hex, source.file_size
    present = size is not None and not ctx.needs(Digest(hexpart, size))
    if not present and size is None and ctx.store.object_path(hexpart).is_file():
        present = digests.of_file(ctx.store.object_path(hexpart)).hex == hexpart
    if not present:
        ctx.require_online(record, f"the distribution {filename} of {requirement}")
        ctx.store.ensure()
        with tempfile.TemporaryDirectory(dir=ctx.store.temp_folder(), prefix="pkg-") as tmp:
            # An explicit download deadline bounds the package tool too.
            path = download(requirement, filename, Path(tmp), ctx.policy.deadline or TIMEOUT_S)
            got = path.stat().st_size
            expected = Digest(hexpart, size if size is not None else got)
            try:
                # Checked while copying into the store, before anything opens it as an archive.
                ctx.store.write_file(path, expected, replace=True)
            except IntegrityError as e:
                ctx.count_refused(got)
                raise SourceError(
                    record.name,
                    f"the distribution {filename} of {requirement} does not match the pinned "
                    f"file_digest: {e.message}",
                    fix="the index serves different bytes for this pin; check the index "
                    "configuration, or review the record's file_digest",
                ) from e
            ctx.count_download(got)
    try:
        return open_archive(ctx.store.object_path(hexpart), filename)
    except UsageError as e:
        raise SourceError(
            record.name, f"cannot read the distribution {filename}: {e.message}"
        ) from e


def member_name(base: str, member: str | None) -> str:
    return base if member is None else f"{base.rstrip('/')}/{member}"


def fetch(ctx: FetchContext, record: Record) -> None:
    archive = ensure_distribution(ctx, record)
    base = source_as(record, PackageSource).path

    def open_member(name: str, size: int) -> BinaryIO:
        try:
            return archive.open(name, size)
        except UsageError as e:
            raise SourceError(
                record.name, e.message, fix="review the record's source path and members"
            ) from e

    tree = record.tree
    if tree is not None:
        sizes = dict(tree.members)
        put_tree(ctx, record, tree, lambda m: open_member(member_name(base, m), sizes[m].size))
        return
    if ctx.needs(record.object):
        with open_member(base, record.object.size) as stream:
            put_object(ctx, record, stream, record.object)
