"""What an import says about a manifest's fields: the fields no table knows (kept verbatim in
``metadata.unknown_fields``) and the fields read under another name, for ``--json`` (every
field by its JSON pointer) and for people (one row per field, counted over the entries)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fixture_store.importers.entry import ManifestEntry
from fixture_store.importers.fields import UNKNOWN_FIELDS


def fields_json(entries: Iterable[ManifestEntry]) -> dict[str, Any]:
    """Every unknown field's pointer and every mapping, once each, in manifest order."""
    unknown: dict[str, None] = {}
    mapped: dict[str, dict[str, Any]] = {}
    for entry in entries:
        unknown.update(dict.fromkeys(entry.unknown))
        mapped.update((m.pointer, m.to_json()) for m in entry.mapped)
    return {"unknown_fields": list(unknown), "mapped_fields": list(mapped.values())}


def _relative(entry: ManifestEntry, pointer: str) -> str:
    """``pointer`` inside the entry, as a row shows it (``upstream/commit``); a field of the
    document itself keeps its whole pointer (``/generated_by``)."""
    prefix = f"{entry.pointer}/" if entry.pointer is not None else None
    return pointer[len(prefix) :] if prefix and pointer.startswith(prefix) else pointer


def lines(entries: Iterable[ManifestEntry]) -> list[str]:
    """The human table: one row per field, with how many entries carry it and where it went."""
    unknown: dict[str, int] = {}
    mapped: dict[tuple[str, str], int] = {}
    for entry in entries:
        for pointer in entry.unknown:
            row = _relative(entry, pointer)
            unknown[row] = unknown.get(row, 0) + 1
        for m in entry.mapped:
            lands = f"{m.lands} ({m.note})" if m.note else m.lands
            key = (_relative(entry, m.pointer), lands)
            mapped[key] = mapped.get(key, 0) + 1
    out: list[str] = []
    if mapped:
        out.append("fields read under another name (field, entries, read as):")
        width = max(len(field) for field, _ in mapped)
        out += [f"  {f:<{width}}  {n:>5}  {lands}" for (f, lands), n in mapped.items()]
    if unknown:
        out.append(
            f"fields the importer does not know, kept verbatim in metadata.{UNKNOWN_FIELDS} "
            "(field, entries):"
        )
        width = max(len(field) for field in unknown)
        out += [f"  {f:<{width}}  {n:>5}" for f, n in unknown.items()]
    return out
