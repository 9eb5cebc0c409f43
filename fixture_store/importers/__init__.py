"""Importing the manifests projects already keep: pooch registries, ``sha256sum`` output (and
``md5sum``, ``sha1sum``, ``sha512sum``), DVC ``.dvc`` files and ``dvc.lock``, hand-rolled JSON
manifests and plain JSON maps, a wheel's ``RECORD`` and TFDS checksum files; and the
data people already have in folders (:mod:`.folders`: a Hugging Face cache, a Git LFS
repository, an installed distribution).

Nothing is trusted on first use (DESIGN decision 2): a manifest only states digests; the bytes
are hashed and checked against them (:mod:`~fixture_store.importers.plan`) before anything is
registered, and registration (:mod:`~fixture_store.importers.register`) writes every record of
one import in one registry transaction, or none. Each format is one module with
``parse(text, shown) -> tuple[ManifestEntry, ...]`` and ``looks_like(text, shown) -> bool``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from fixture_store.errors import UsageError
from fixture_store.importers import dvc, held, jsonmanifest, pooch, sha256sum, tfds, wheelrecord
from fixture_store.importers import plan as plan_mod
from fixture_store.importers.entry import ManifestEntry, ManifestError

Parse = Callable[[str, str], tuple[ManifestEntry, ...]]
Detect = Callable[[str, str], bool]
# Rows a format lists without a digest to check them by: reported, never silently dropped.
Undigested = Callable[[str, str], tuple[plan_mod.Unverified, ...]]

FORMATS: Mapping[str, tuple[Parse, Detect]] = MappingProxyType(
    {
        module.FORMAT: (module.parse, module.looks_like)
        for module in (pooch, sha256sum, dvc, jsonmanifest, wheelrecord, tfds)
    }
)


def detect(text: str, shown: str) -> str:
    """The one format ``text`` (read from ``shown``) reads as; UsageError if none or several."""
    hits = [name for name, (_, looks_like) in FORMATS.items() if looks_like(text, shown)]
    if len(hits) != 1:
        found = "none" if not hits else " and ".join(hits)
        raise UsageError(
            f"cannot tell the format of {shown}: it reads as {found}",
            fix=f"name it: fixture-store import FORMAT {shown}  (FORMAT: {', '.join(FORMATS)})",
        )
    return hits[0]


@dataclass(frozen=True)
class ReadOptions:
    """What an import is told about reading its manifest besides the format: where a JSON
    map's entries are (a JSON pointer), where bare ``OWNER/NAME`` upstreams live (``hf`` or
    ``github``), and the ``base_url`` a pooch registry's files are downloaded from (pooch's
    ``base_url + name``, for a name its registry gives no URL)."""

    json_pointer: str | None = None
    upstream_host: str | None = None
    base_url: str | None = None


def parse(
    fmt: str | None, text: str, shown: str, options: ReadOptions | None = None
) -> tuple[str, tuple[ManifestEntry, ...]]:
    """The format (``fmt``, or the one detected) and the entries of the manifest."""
    options = options or ReadOptions()
    name = detect(text, shown) if fmt is None else fmt
    if name not in FORMATS:
        raise UsageError(f"unknown manifest format {name!r}", fix=f"one of {', '.join(FORMATS)}")
    if options.json_pointer is not None and name != jsonmanifest.FORMAT:
        raise UsageError(
            f"--json-pointer reads a JSON manifest; {shown} reads as {name}",
            fix="leave --json-pointer out, or name the json format",
        )
    if options.base_url is not None and name != pooch.FORMAT:
        raise UsageError(
            f"--base-url is a pooch registry's; {shown} reads as {name}",
            fix="leave --base-url out",
        )
    if name == jsonmanifest.FORMAT:
        entries = jsonmanifest.parse(text, shown, options.json_pointer, options.upstream_host)
    else:
        entries = FORMATS[name][0](text, shown)
    if options.base_url is not None:
        entries = pooch.with_base_url(entries, options.base_url)
    return name, entries


UNDIGESTED: Mapping[str, Undigested] = MappingProxyType({wheelrecord.FORMAT: wheelrecord.hashless})


def plan_import(
    origin: plan_mod.Origin,
    manifest: str,
    fmt: str | None = None,
    selection: held.Selection = held.EVERY,
    options: ReadOptions | None = None,
) -> plan_mod.Plan:
    """Read ``manifest`` from ``origin``, parse it (``fmt``, else detected) and check the bytes
    of every listed file ``selection`` keeps against it; nothing is stored or registered. A row
    the format lists without a digest (a RECORD row with no hash) is reported as unverified,
    not as an orphan."""
    text, shown = origin.manifest(manifest)
    name, entries = parse(fmt, text, shown, options)
    done = plan_mod.make_plan(name, manifest, entries, origin, selection)
    reader = UNDIGESTED.get(name)
    found = () if reader is None else reader(text, shown)
    del text  # the entries are all that is needed of it now
    undigested = tuple(u for u in found if selection.keeps(u.path))
    if not undigested:
        return done
    said = {u.path for u in undigested}
    return dataclasses.replace(
        done,
        orphans=tuple(o for o in done.orphans if o not in said),
        unverified=done.unverified + undigested,
    )


__all__ = [
    "FORMATS",
    "ManifestEntry",
    "ManifestError",
    "ReadOptions",
    "detect",
    "parse",
    "plan_import",
]
