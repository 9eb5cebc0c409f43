"""What a change to ``provenance/`` does to trust, record by record: what ``fixture-store diff``
shows a reviewer, in one page.

Two registries (two revisions, or a revision and the working tree) are compared by record name:

- records **added** and **removed**; a removed record whose digest an added one has is
  **renamed** (then compared field by field like any other);
- **digest** changed (a size that changed alone: **size**); **source** changed (its pin, or an
  ``upstream`` pin); **gap made** (a record turned into a declared gap) and **gap filled**;
- every tolerance change, classed **loosened**, **tightened**, **reshaped** or **reworded** by
  :mod:`.tolerances`, per rule and environment, with its ``why``;
- other **fields** changed (a description, metadata, members), named;
- a record **invalid** on either side, with why.

The result is a :class:`RegistryDiff`, a value that prints itself as text lines (one per change,
never wrapped), as JSON and as Markdown for a pull-request comment; :meth:`RegistryDiff.failing`
says which changes a CI's ``--fail-on`` list catches.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from fixture_store import display
from fixture_store.errors import RegistryError, UsageError
from fixture_store.objects.digests import Digest
from fixture_store.registry.family import Registry
from fixture_store.registry.records import Record
from fixture_store.registry.sources import NoSource, Source
from fixture_store.review.revisions import Revision
from fixture_store.review.tolerances import Direction, ToleranceChange, classify


class Kind(StrEnum):
    """What a change is, in the order a reviewer reads them (what may hide a regression first)."""

    LOOSENED = "loosened"
    DIGEST = "digest"
    SIZE = "size"
    GAP_MADE = "gap-made"
    SOURCE = "source"
    REMOVED = "removed"
    RENAMED = "renamed"
    INVALID = "invalid"
    RESHAPED = "reshaped"
    TIGHTENED = "tightened"
    REWORDED = "reworded"
    GAP_FILLED = "gap-filled"
    ADDED = "added"
    FIELDS = "fields"


_ORDER = {kind: i for i, kind in enumerate(Kind)}
# --fail-on words besides the kinds themselves.
ALIASES: Mapping[str, frozenset[Kind]] = {
    "gap": frozenset({Kind.GAP_MADE}),
    "tolerance": frozenset({Kind.LOOSENED, Kind.RESHAPED}),
    "any": frozenset(Kind),
}
_KIND_WORDS = frozenset(k.value for k in Kind)
_DIGEST_SHOWN = 16  # hex digits of a digest in text and Markdown (JSON has all 64)


@dataclass(frozen=True)
class Change:
    """One change to one record: its kind, the record's name (``old -> new`` for a rename: see
    :attr:`renamed_from`), what it was and is, where in the record (a tolerance's rule and
    environment, ``upstream``), and the ``why`` a tolerance rule gives."""

    kind: Kind
    name: str
    before: str = ""
    after: str = ""
    where: str = ""
    why: str = ""
    renamed_from: str | None = None
    # The record's digest before and after, when the change is about its bytes: in full in the
    # JSON (the text and the table shorten it).
    identity: tuple[Digest | None, Digest | None] | None = None

    @property
    def shown_name(self) -> str:
        return f"{self.renamed_from} -> {self.name}" if self.renamed_from else self.name

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind.value, "name": self.name}
        if self.renamed_from is not None:
            out["renamed_from"] = self.renamed_from
        for key in ("before", "after", "where", "why"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        if self.identity is not None:
            old, new = self.identity
            out["digest"] = {"before": _text(old), "after": _text(new)}
            out["size"] = {"before": _size(old), "after": _size(new)}
        return out

    def line(self) -> str:
        """The change as one text line: ``loosened  fam/a  record: max_abs <= 1e-05 -> ...``."""
        parts = [f"{self.kind.value:<10} {self.shown_name}"]
        if self.where:
            parts.append(f"[{self.where}]")
        if self.before or self.after:
            parts.append(_arrow(self.before, self.after))
        if self.why:
            parts.append(f"(why: {self.why})")
        return "  ".join(parts)


def _text(digest: Digest | None) -> str | None:
    return None if digest is None else digest.text


def _size(digest: Digest | None) -> int | None:
    return None if digest is None else digest.size


def _arrow(before: str, after: str) -> str:
    if before and after:
        return f"{before} -> {after}"
    return before or after


@dataclass(frozen=True)
class RegistryDiff:
    """Every change from the registry at ``before`` to the one at ``after``, in reading order."""

    before: Revision
    after: Revision
    changes: tuple[Change, ...]

    def counts(self) -> dict[str, int]:
        """How many changes of each kind there are, in :class:`Kind` order."""
        found = Counter(c.kind for c in self.changes)
        return {kind.value: found[kind] for kind in Kind if found[kind]}

    def failing(self, kinds: Iterable[Kind]) -> tuple[Change, ...]:
        """The changes of ``kinds`` (what ``--fail-on`` fails a run for)."""
        wanted = set(kinds)
        return tuple(c for c in self.changes if c.kind in wanted)

    def summary(self) -> str:
        counts = ", ".join(f"{n} {kind}" for kind, n in self.counts().items())
        return f"registry diff: {self.before} -> {self.after}: {counts or 'no changes'}"

    def lines(self) -> list[str]:
        """The text page: the summary, then one line per change (escaped and redacted when
        printed, as every line is)."""
        return [self.summary(), *(c.line() for c in self.changes)]

    def to_json(self) -> dict[str, Any]:
        return {
            "before": self.before.to_json(),
            "after": self.after.to_json(),
            "counts": self.counts(),
            "changes": [c.to_json() for c in self.changes],
        }

    def markdown(self) -> str:
        """A pull-request comment: a heading, the counts (loosened in bold) and a table of the
        changes; every value from the registry escaped for Markdown and HTML, URLs redacted."""
        title = f"### fixture-store diff: {md_text(str(self.before))} → {md_text(str(self.after))}"
        if not self.changes:
            return f"{title}\n\nNo change to the registry.\n"
        counts = ", ".join(
            f"**{n} {kind}**" if kind == Kind.LOOSENED else f"{n} {kind}"
            for kind, n in self.counts().items()
        )
        rows = [
            "| change | record | where | before | after | why |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for c in self.changes:
            kind = f"**{c.kind.value}**" if c.kind is Kind.LOOSENED else c.kind.value
            cells = [
                kind,
                md_code(c.shown_name),
                md_text(c.where),
                *map(md_code, (c.before, c.after)),
            ]
            rows.append("| " + " | ".join([*cells, md_text(c.why)]) + " |")
        return "\n".join([title, "", counts, "", *rows]) + "\n"


def parse_fail_on(text: str) -> frozenset[Kind]:
    """``loosened,digest,gap``: the kinds of change a CI fails on (the kinds, ``gap`` for
    gap-made, ``tolerance`` for loosened and reshaped, ``any``); a UsageError names an unknown
    word and the known ones."""
    kinds: set[Kind] = set()
    for word in (w.strip() for w in text.split(",")):
        if not word:
            continue
        if word in ALIASES:
            kinds |= ALIASES[word]
        elif word in _KIND_WORDS:
            kinds.add(Kind(word))
        else:
            known = ", ".join([*(k.value for k in Kind), *ALIASES])
            raise UsageError(f"--fail-on: {word!r} is no kind of change", fix=f"one of: {known}")
    return frozenset(kinds)


# -- Markdown -----------------------------------------------------------------------------------
_MD_SPECIAL = "\\`*_[]|#!~"


def md_text(text: str) -> str:
    """Free text in a Markdown table cell: escaped and redacted as every output is, then HTML's
    ``&``, ``<`` and ``>`` as entities and each character Markdown acts on backslash-escaped,
    line breaks as spaces."""
    import html

    shown = html.escape(display.text(text.replace("\n", " ")), quote=False)
    return "".join(f"\\{c}" if c in _MD_SPECIAL else c for c in shown)


def md_code(text: str) -> str:
    """A value as a code span in a table cell (empty: nothing): a fence longer than any run of
    backticks in it, and its ``|`` escaped (a table cell ends at one, even in a code span)."""
    if not text:
        return ""
    shown = display.text(text.replace("\n", " ")).replace("|", "\\|")
    fence = "`" * (max((len(r) for r in _backtick_runs(shown)), default=0) + 1)
    pad = " " if shown.startswith("`") or shown.endswith("`") else ""
    return f"{fence}{pad}{shown}{pad}{fence}"


def _backtick_runs(text: str) -> Iterator[str]:
    run = ""
    for c in text:
        if c == "`":
            run += c
        elif run:
            yield run
            run = ""
    if run:
        yield run


# -- comparing ----------------------------------------------------------------------------------
def compare(before: Registry, after: Registry, *, old: Revision, new: Revision) -> RegistryDiff:
    """Every change from ``before`` to ``after`` (see the module's docstring)."""
    old_records, old_invalid = _records(before)
    new_records, new_invalid = _records(after)
    changes: list[Change] = []
    for name, error in old_invalid.items():
        if name not in new_invalid:
            changes.append(
                Change(Kind.INVALID, name, before=f"invalid in {old}: {error.about(name)}")
            )
    for name, error in new_invalid.items():
        changes.append(Change(Kind.INVALID, name, after=f"invalid: {error.about(name)}"))
    skip = old_invalid.keys() | new_invalid.keys()
    removed = sorted(old_records.keys() - new_records.keys() - skip)
    added = sorted(new_records.keys() - old_records.keys() - skip)
    renames = _renames(removed, added, old_records, new_records)
    for gone, came in renames.items():
        identity = old_records[gone].digest, new_records[came].digest
        changes.append(Change(Kind.RENAMED, came, renamed_from=gone, identity=identity))
        changes.extend(record_changes(old_records[gone], new_records[came], renamed_from=gone))
    for name in removed:
        if name not in renames:
            was = old_records[name]
            changes.append(
                Change(Kind.REMOVED, name, before=_summary(was), identity=(was.digest, None))
            )
    renamed_to = set(renames.values())
    for name in added:
        if name not in renamed_to:
            now = new_records[name]
            changes.append(
                Change(Kind.ADDED, name, after=_summary(now), identity=(None, now.digest))
            )
    for name in sorted(old_records.keys() & new_records.keys() - skip):
        changes.extend(record_changes(old_records[name], new_records[name]))
    changes.sort(key=lambda c: (_ORDER[c.kind], c.name, c.where))
    return RegistryDiff(old, new, tuple(changes))


def _records(registry: Registry) -> tuple[dict[str, Record], dict[str, RegistryError]]:
    records = {r.name: r for r in registry.records()}
    return records, dict(registry.invalid())


def _renames(
    removed: list[str], added: list[str], old: Mapping[str, Record], new: Mapping[str, Record]
) -> dict[str, str]:
    """Removed name -> added name, paired one to one by the digest both records have."""
    by_digest: dict[str, list[str]] = {}
    for name in added:
        digest = new[name].digest
        if digest is not None:
            by_digest.setdefault(digest.text, []).append(name)
    out: dict[str, str] = {}
    for name in removed:
        digest = old[name].digest
        waiting = by_digest.get(digest.text, []) if digest is not None else []
        if waiting:
            out[name] = waiting.pop(0)
    return out


def _summary(record: Record) -> str:
    if record.gap is not None:
        return f"{record.kind} gap: {record.gap.reason}"
    return f"{record.kind} {_digest(record)}, {_source(record.source)}"


def _digest(record: Record) -> str:
    if record.digest is None:
        return "no digest"
    return f"{record.digest.text[: 7 + _DIGEST_SHOWN]}… {record.digest.size:,} bytes"


def _source(source: Source) -> str:
    return source.describe()


# Record fields compared on their own; any other is named when it changes.
_OWN_FIELDS = frozenset({"digest", "size", "source", "upstream", "tolerance", "gap"})


def record_changes(
    before: Record, after: Record, *, renamed_from: str | None = None
) -> list[Change]:
    """The changes from one record to another of the same name (or a rename's pair)."""
    name, out = after.name, []

    def add(kind: Kind, old: str = "", new: str = "", **rest: Any) -> None:
        out.append(Change(kind, name, old, new, renamed_from=renamed_from, **rest))

    identity = before.digest, after.digest

    if before.gap is None and after.gap is not None:
        add(Kind.GAP_MADE, _digest(before), f"gap: {after.gap.reason}", identity=identity)
    elif before.gap is not None and after.gap is None:
        add(Kind.GAP_FILLED, f"gap: {before.gap.reason}", _digest(after), identity=identity)
    elif before.digest is not None and after.digest is not None and before.digest != after.digest:
        same_hex = before.digest.hex == after.digest.hex
        kind = Kind.SIZE if same_hex else Kind.DIGEST
        add(kind, _digest(before), _digest(after), identity=identity)
    if before.source != after.source and not _gap_without_source(before, after):
        old, new = _source(before.source), _source(after.source)
        if old == new:  # a pin the short form leaves out
            old, new = (
                json.dumps(s.to_json(), sort_keys=True) for s in (before.source, after.source)
            )
        add(Kind.SOURCE, old, new, where="source")
    if before.upstream != after.upstream:
        ups = ("; ".join(u.describe() for u in r.upstream) or "none" for r in (before, after))
        add(Kind.SOURCE, *ups, where="upstream")
    # a gap judges nothing: its gap-made line says what matters, not its tolerance's fate
    judged = after.gap is None
    for change in classify(before.tolerance, after.tolerance) if judged else ():
        add(
            _KIND_OF[change.direction],
            change.before,
            change.after,
            where=_where(change),
            why=change.why,
        )
    old_json, new_json = before.to_json(), after.to_json()
    fields = sorted(
        k
        for k in (old_json.keys() | new_json.keys()) - _OWN_FIELDS
        if old_json.get(k) != new_json.get(k)
    )
    if before.gap is not None and after.gap is not None and before.gap != after.gap:
        fields.append("gap")
    if fields:
        add(Kind.FIELDS, new=", ".join(fields))
    return out


def _gap_without_source(before: Record, after: Record) -> bool:
    """Whether the source came or went with a gap (a gap made or filled says it already)."""
    return any(r.gap is not None and isinstance(r.source, NoSource) for r in (before, after))


_KIND_OF = {
    Direction.LOOSENED: Kind.LOOSENED,
    Direction.TIGHTENED: Kind.TIGHTENED,
    Direction.RESHAPED: Kind.RESHAPED,
    Direction.REWORDED: Kind.REWORDED,
}


def _where(change: ToleranceChange) -> str:
    return f"tolerance {change.where}"
