"""The provenance report: a static site of the registry as a person reviews it.

An index page (every family with its counts by status, the lineage between families as a graph,
every known failure) and one page per family (its artifacts with their status, source,
tolerance and parents, the lineage of each artifact drawn as a graph, its tolerances and the
known failures that match it). Status is what ``verify`` says of each artifact now: verified,
missing, gap, invalid (a record that does not validate), mismatch or unsafe.

The pages are the same on every machine whose store verifies: no time, no path of this machine
(the store's location reads ``$FIXTURE_STORE_DIR``, the project's ``.``), every list sorted.
"""

from __future__ import annotations

import fnmatch
import json
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from fixture_store.errors import UsageError
from fixture_store.objects import anchored, outputs
from fixture_store.objects.outputs import Target
from fixture_store.objects.store import Store
from fixture_store.pages import graph
from fixture_store.pages.shell import Filters, Section, esc, href, row_attrs
from fixture_store.pages.shell import render as render_page
from fixture_store.registry import (
    GeneratorSource,
    HubSource,
    KnownFailure,
    LocalSource,
    PackageSource,
    Record,
    Registry,
    Tolerance,
    UrlSource,
)
from fixture_store.registry.files import DIRNAME
from fixture_store.verify import Status, verify_names

INDEX = "index.html"
# Statuses in the order pages list them; a status that fails verification comes first.
STATUSES = ("invalid", "mismatch", "unsafe", "missing", "gap", "verified")
_STATUS = {
    Status.VERIFIED: "verified",
    Status.MISSING: "missing",
    Status.GAP: "gap",
    Status.INVALID_RECORD: "invalid",
    Status.MISMATCH: "mismatch",
    Status.UNSAFE: "unsafe",
    Status.UNKNOWN: "invalid",
}
COLORS = {
    "verified": "#2e7d32",
    "gap": "#00838f",
    "missing": "#ef6c00",
    "mismatch": "#c62828",
    "unsafe": "#6a1b9a",
    "invalid": "#b71c1c",
    "origin": "#3949ab",
    "unregistered": "#9e9e9e",
}
# A family's artifact graph draws at most this many nodes (the first artifacts by name, with
# their ancestors); the table lists every artifact.
GRAPH_LIMIT = 240


@dataclass(frozen=True)
class Artifact:
    """One registry name as the report shows it."""

    name: str
    family: str
    status: str
    record: Record | None  # None for a record that does not validate
    detail: str = ""
    fix: str = ""
    outcome: str = ""  # verify's own word (invalid-record, ...), for the exit code

    @property
    def failing(self) -> bool:
        return self.status not in ("verified", "gap")


@dataclass(frozen=True)
class _Plain:
    """Text without this machine's paths: the store and the project read as names."""

    store: str
    project: str

    def __call__(self, text: str) -> str:
        if self.store:
            text = text.replace(self.store, "$FIXTURE_STORE_DIR")
        return text.replace(self.project, ".") if self.project else text


@dataclass(frozen=True)
class Report:
    """What the pages show, decided from the registry and one verify of every artifact."""

    artifacts: Mapping[str, Artifact]  # by name, sorted
    families: Mapping[str, str]  # family -> description ("" when none), sorted
    known_failures: tuple[tuple[KnownFailure, tuple[str, ...]], ...]  # each with its matches
    # What the pages show of a message: this machine's paths read as names.
    plain: _Plain = field(default_factory=lambda: _Plain("", ""))
    # family -> the tolerance regeneration judges its files by when their record states none
    # (the stage's, in params.yaml)
    stage_tolerances: Mapping[str, Tolerance] = field(default_factory=dict)

    def counts(self, family: str | None = None) -> Counter[str]:
        return Counter(
            a.status for a in self.artifacts.values() if family is None or a.family == family
        )

    def members(self, family: str) -> list[Artifact]:
        return [a for a in self.artifacts.values() if a.family == family]


def build(
    store: Store,
    registry: Registry,
    *,
    families: Sequence[str] = (),
    full: bool = False,
    workers: int | None = None,
    stage_tolerances: Mapping[str, Tolerance] | None = None,
) -> Report:
    """Verify every artifact of ``families`` (all when none) and gather what the pages show;
    ``stage_tolerances``: each regenerated family's stage tolerance (see :class:`Report`)."""
    names = registry.select((), families)
    results = verify_names(store, registry, names, full=full, workers=workers)
    plain = _Plain(str(store.root), str(registry.root))
    records = {r.name: r for r in registry.records()}
    artifacts = {
        r.name: Artifact(
            r.name,
            r.name.split("/", 1)[0],
            _STATUS[r.status],
            records.get(r.name),
            r.message,
            r.fix or "",
            str(r.status),
        )
        for r in sorted(results, key=lambda r: r.name)
    }
    chosen = sorted({a.family for a in artifacts.values()} | set(families))
    every = registry.names()
    known = tuple(
        (k, tuple(n for n in fnmatch.filter(every, k.pattern) if n in artifacts))
        for k in sorted(registry.known_failures(), key=lambda k: (k.pattern, k.runtime))
    )
    return Report(
        artifacts,
        {f: registry.families[f].description or "" for f in chosen if f in registry.families},
        tuple((k, m) for k, m in known if m or not families),
        plain,
        dict(stage_tolerances or {}),
    )


def page_of(family: str) -> str:
    return f"family-{family}.html"


# -- writing ----------------------------------------------------------------------------------
def write_html(report: Report, directory: Target | str | os.PathLike[str]) -> list[Path]:
    """The index and one page per family in ``directory`` (by the output primitive); a family
    page left by an earlier report of a family that is gone is removed. Returns the pages
    written, index first. A folder that cannot be written is a UsageError naming it."""
    target = outputs.target(directory)
    pages = {INDEX: render_index(report)}
    pages.update((page_of(f), render_family(report, f)) for f in report.families)
    try:
        with target.folder() as folder:
            _write_pages(folder, pages)
    except OSError as e:
        raise UsageError(
            f"cannot write the provenance report to {target.path}: {e.strerror or e}",
            fix="give --html a folder that can be created and written",
        ) from e
    return [target.path / name for name in pages]


def _write_pages(folder: anchored.Folder, pages: Mapping[str, str]) -> None:
    for stale in folder.names():
        if fnmatch.fnmatchcase(stale, "family-*.html") and stale not in pages:
            folder.unlink(stale)
    for name, text in pages.items():
        folder.write_atomically(name, text.encode("utf-8"))


def _counts_cells(counts: Counter[str]) -> str:
    return "".join(f"<td class='n'>{_count(counts.get(s, 0))}</td>" for s in STATUSES)


def _count(n: int) -> str:
    """A count as every cell of the report writes it: thousands separated, zero left blank."""
    return f"{n:,}" if n else ""


def _status_head() -> str:
    return "".join(
        f"<th><span class='dot' style='background:{COLORS[s]}'></span>{s}</th>" for s in STATUSES
    )


def _summary(counts: Counter[str]) -> str:
    return ", ".join(f"{counts[s]:,} {s}" for s in STATUSES if counts.get(s))


def render_index(report: Report) -> str:
    total = report.counts()
    rows = "".join(
        f"<tr><td class='name'><a href='{esc(page_of(f))}'>{esc(f)}</a></td>"
        f"<td class='n'>{sum(report.counts(f).values()):,}</td>{_counts_cells(report.counts(f))}"
        f"<td class='n'>{_count(len(_known_for(report, f)))}</td><td>{esc(d)}</td></tr>"
        for f, d in report.families.items()
    )
    families = (
        "<table style='width:100%'>"
        f"<tr><th>family</th><th>artifacts</th>{_status_head()}<th>known failures</th>"
        f"<th>description</th></tr>{rows}"
        f"<tr><th>all</th><th class='n'>{sum(total.values()):,}</th>"
        + "".join(f"<th class='n'>{_count(total.get(s, 0))}</th>" for s in STATUSES)
        + f"<th class='n'>{_count(len(report.known_failures))}</th><th></th></tr></table>"
    )
    failing = [a for a in report.artifacts.values() if a.failing]
    sections = [
        Section("families", "Families", families),
        Section(
            "lineage",
            "Lineage between families",
            "<p class='muted'>where each family's artifacts come from: a pinned source, or the "
            "artifacts of another family through a generator stage (the edge's label, with the "
            "number of artifacts it made)</p>" + _family_graph(report),
        ),
        Section(
            "not-verified",
            f"Artifacts that do not verify ({len(failing)})",
            _artifact_table(failing, report) if failing else "<p>none</p>",
        ),
        Section(
            "known-failures",
            f"Known failures ({len(report.known_failures)})",
            _known_table(report.known_failures),
        ),
    ]
    intro = (
        f"<p>{len(report.families)} families · {sum(total.values()):,} artifacts: "
        f"{esc(_summary(total))}</p>"
    )
    return render_page("fixture-store provenance", intro, sections)


def render_family(report: Report, family: str) -> str:
    members = report.members(family)
    counts = report.counts(family)
    known = _known_for(report, family)
    kinds = sorted({a.record.kind.value for a in members if a.record is not None})
    sections = [
        Section("lineage", "Lineage", _lineage_section(report, family, members)),
        Section(
            "tolerances", "Tolerances", _tolerances(members, report.stage_tolerances.get(family))
        ),
        Section("known-failures", f"Known failures ({len(known)})", _known_table(known)),
        Section(
            "artifacts",
            f"Artifacts ({len(members):,})",
            f"<p class='muted'>showing <span class='shown'>{len(members)}</span> of "
            f"{len(members)}</p>" + _artifact_table(members, report),
        ),
    ]
    description = report.families.get(family, "")
    intro = (
        f"<p>{len(members):,} artifacts: {esc(_summary(counts))} · registry file "
        f"<code>{esc(DIRNAME)}/{esc(family)}.json</code></p>"
        + (f"<p>{esc(description)}</p>" if description else "")
    )
    filters = Filters(
        checks=(
            ("status", [s for s in STATUSES if counts.get(s)]),
            ("kind", [*kinds, *(["(invalid)"] if counts.get("invalid") else [])]),
        )
    )
    return render_page(
        f"{family} · fixture-store provenance",
        intro,
        sections,
        filters=filters,
        links=(("← all families", INDEX),),
    )


def _known_for(report: Report, family: str) -> list[tuple[KnownFailure, tuple[str, ...]]]:
    prefix = f"{family}/"
    return [(k, m) for k, m in report.known_failures if any(n.startswith(prefix) for n in m)]


def _known_table(known: Sequence[tuple[KnownFailure, tuple[str, ...]]]) -> str:
    if not known:
        return "<p>none</p>"
    rows = "".join(
        f"<tr><td><code>{esc(k.pattern)}</code></td><td>{esc(k.runtime)}</td>"
        f"<td>{esc(k.outcome or 'any')}</td><td class='n'>{len(m)}</td>"
        f"<td>{esc(_bounds(k))}</td><td>{esc(k.condition or '')}</td><td>{esc(k.reason)}</td>"
        f"<td>{esc(_declared_in(k))}</td></tr>"
        for k, m in known
    )
    return (
        "<table class='wide'><colgroup><col style='width:21%'><col style='width:8%'>"
        "<col style='width:9%'><col style='width:6%'><col style='width:10%'>"
        "<col style='width:9%'><col><col style='width:13%'></colgroup>"
        "<tr><th>pattern</th><th>runtime</th><th>outcome</th><th>cases</th><th>bounds</th>"
        f"<th>condition</th><th>reason</th><th>declared in</th></tr>{rows}</table>"
    )


def _bounds(k: KnownFailure) -> str:
    parts = [f"max_abs {k.max_abs:g}" if k.max_abs is not None else ""]
    parts.append(f"max_rel {k.max_rel:g}" if k.max_rel is not None else "")
    return ", ".join(p for p in parts if p)


def _declared_in(k: KnownFailure) -> str:
    return f"{DIRNAME}/{Path(k.file).name}" if k.file else ""


def _tolerances(members: Iterable[Artifact], stage: Tolerance | None = None) -> str:
    """Each distinct tolerance with how many artifacts are judged by it; those whose record
    states none are judged exactly by a parity assertion and, regenerated, by their stage's
    tolerance (``stage``), which the page says rather than calling their parity exact."""
    seen: Counter[str] = Counter()
    unstated = 0
    for a in members:
        if a.record is not None and a.record.tolerance is not None:
            seen[_tolerance_text(a.record)] += 1
        elif a.record is not None:
            unstated += 1
    if stage is not None and unstated:
        text = json.dumps(stage.to_json(), sort_keys=True)
        seen[f"{text} (none recorded: regeneration uses its stage's, in params.yaml)"] = unstated
    if not seen:
        return "<p>no artifact of this family records a tolerance (parity is exact)</p>"
    rows = "".join(
        f"<tr><td><code>{esc(t)}</code></td><td class='n'>{n:,}</td></tr>"
        for t, n in sorted(seen.items())
    )
    return f"<table><tr><th>tolerance</th><th>artifacts</th></tr>{rows}</table>"


def _tolerance_text(record: Record) -> str:
    tolerance = record.tolerance
    return json.dumps(tolerance.to_json(), sort_keys=True) if tolerance is not None else ""


def _artifact_table(members: Sequence[Artifact], report: Report) -> str:
    index = _digest_names(report)
    rows = "".join(_artifact_row(a, index, report.plain) for a in members)
    return (
        "<table class='wide'><colgroup><col style='width:27%'><col style='width:8%'>"
        "<col style='width:8%'><col style='width:22%'><col style='width:13%'><col></colgroup>"
        "<tr><th>artifact</th><th>kind</th><th>status</th><th>source</th><th>tolerance</th>"
        f"<th>parents · detail</th></tr>{rows}</table>"
    )


def _artifact_row(a: Artifact, index: Mapping[str, str], plain: _Plain) -> str:
    record = a.record
    kind = record.kind.value if record is not None else "(invalid)"
    parents = []
    if record is not None:
        for digest in record.lineage:
            parent = index.get(digest)
            parents.append(
                f"<a href='{href(parent, page_of(parent.split('/', 1)[0]))}'>"
                f"<code>{esc(parent)}</code></a>"
                if parent
                else f"<code>{esc(digest[:19])}…</code> (no record)"
            )
    detail = "<br>".join(parents)
    if a.detail:
        detail += ("<br>" if detail else "") + esc(plain(a.detail))
    if a.fix:
        detail += f"<br><span class='muted'>fix: {esc(plain(a.fix))}</span>"
    source = record.source.describe() if record is not None else ""
    tolerance = _tolerance_text(record) if record is not None else ""
    return (
        f"<tr id='{esc(a.name)}' {row_attrs(status=a.status, kind=kind)}>"
        f"<td><code>{esc(a.name)}</code></td><td>{esc(kind)}</td>"
        f"<td style='color:{COLORS[a.status]}'>{esc(a.status)}</td>"
        f"<td><code>{esc(source)}</code></td><td><code>{esc(tolerance)}</code></td>"
        f"<td>{detail}</td></tr>"
    )


def _digest_names(report: Report) -> dict[str, str]:
    """The name of the record with each digest (the first by name)."""
    found: dict[str, str] = {}
    for a in report.artifacts.values():
        if a.record is not None and a.record.digest is not None:
            found.setdefault(a.record.digest.text, a.name)
    return found


# -- lineage graphs ---------------------------------------------------------------------------
def origin(record: Record) -> str | None:
    """Where a record's bytes come from when no other record made them: a pinned source."""
    match record.source:
        case PackageSource() as src:
            return f"package {src.requirement}"
        case HubSource() as src:
            return f"hub {src.repo_id}@{src.revision[:12]}"
        case UrlSource() as src:
            return f"url {urlsplit(src.url).hostname or ''}"
        case LocalSource():
            return "local files"
    return None


def _stage(record: Record) -> str:
    return record.source.stage if isinstance(record.source, GeneratorSource) else ""


def _family_graph(report: Report, focus: str | None = None) -> str:
    """Families and pinned sources as nodes; an edge per way one feeds another, labelled with
    the generator stage and the number of artifacts (only ``focus``'s edges when given)."""
    digests = _digest_names(report)
    edges: Counter[tuple[str, str, str]] = Counter()
    for a in report.artifacts.values():
        record = a.record
        if record is None:
            continue
        parents = {digests[d].split("/", 1)[0] for d in record.lineage if d in digests}
        for parent in sorted(parents):
            edges[(f"family:{parent}", f"family:{a.family}", _stage(record))] += 1
        root = origin(record)
        if not parents and root is not None:
            edges[(f"origin:{root}", f"family:{a.family}", _stage(record))] += 1
        for up in record.upstream:
            edges[(f"upstream:{up.uri()}", f"family:{a.family}", "upstream")] += 1
    if focus is not None:
        edges = Counter({k: n for k, n in edges.items() if f"family:{focus}" in k[:2]})
    ids = sorted(
        {i for s, t, _ in edges for i in (s, t)}
        | ({f"family:{focus}"} if focus else set(f"family:{f}" for f in report.families))
    )
    nodes = [_family_node(report, i) for i in ids]
    drawn = [
        graph.Edge(s, t, f"{stage} ({n:,})" if stage else f"{n:,}", dashed=stage == "upstream")
        for (s, t, stage), n in sorted(edges.items())
    ]
    gap = max((int(len(e.label) * graph.CHAR_WIDTH) + 24 for e in drawn), default=0)
    return graph.render(
        nodes, drawn, title="lineage between families", column_gap=max(gap, graph.COLUMN_GAP)
    )


def _family_node(report: Report, node: str) -> graph.Node:
    kind, _, name = node.partition(":")
    if kind != "family":
        return graph.Node(
            node, name, "pinned source" if kind == "origin" else kind, COLORS["origin"], title=name
        )
    counts = report.counts(name)
    worst = next((s for s in STATUSES if counts.get(s)), "verified")
    return graph.Node(
        node,
        name,
        f"{sum(counts.values()):,} · {_summary(counts)}",
        COLORS[worst],
        link=page_of(name) if name in report.families else None,
        title=f"{name}: {_summary(counts)}",
    )


def _lineage_section(report: Report, family: str, members: Sequence[Artifact]) -> str:
    """The family among families, then each artifact with lineage and its ancestors."""
    parts = [
        "<h3>Among families</h3>",
        _family_graph(report, focus=family),
    ]
    with_lineage = [a for a in members if a.record is not None and a.record.lineage]
    if not with_lineage:
        parts.append(
            "<p class='muted'>no artifact of this family was made from another artifact: each "
            "comes from its pinned source</p>"
        )
        return "".join(parts)
    nodes, edges = _artifact_graph(report, with_lineage)
    shown = sum(1 for n in nodes if n.id in {a.name for a in with_lineage})
    parts.append(
        f"<h3>Artifacts ({len(with_lineage):,} made from others)</h3>"
        "<p class='muted'>upstream on the left; each box is an artifact (its family and status "
        "below its name), a pinned source, or a parent with no record; a box links to its row"
        + (
            f"; the first {shown:,} of {len(with_lineage):,} artifacts are drawn"
            if shown < len(with_lineage)
            else ""
        )
        + "</p>"
        + graph.render(nodes, edges, title=f"lineage of the artifacts of {family}")
    )
    return "".join(parts)


def _artifact_graph(
    report: Report, roots: Sequence[Artifact]
) -> tuple[list[graph.Node], list[graph.Edge]]:
    digests = _digest_names(report)
    nodes: dict[str, graph.Node] = {}
    edges: list[graph.Edge] = []
    pending = list(roots)
    while pending and len(nodes) < GRAPH_LIMIT:
        _add_ancestry(report, pending.pop(0), digests, nodes, edges)
    return sorted(nodes.values(), key=lambda n: n.id), sorted(
        set(edges), key=lambda e: (e.source, e.target)
    )


def _add_ancestry(
    report: Report,
    start: Artifact,
    digests: Mapping[str, str],
    nodes: dict[str, graph.Node],
    edges: list[graph.Edge],
) -> None:
    todo = [start]
    while todo:
        a = todo.pop()
        if a.name in nodes or a.record is None:
            continue
        family, _, rest = a.name.partition("/")
        nodes[a.name] = graph.Node(
            a.name,
            rest,
            f"{family} · {a.status}",
            COLORS[a.status],
            link=href(a.name, page_of(family)),
            title=f"{a.name} ({a.record.kind.value}, {a.status})"
            + (f", made by stage {_stage(a.record)}" if _stage(a.record) else ""),
        )
        for digest in a.record.lineage:
            parent = digests.get(digest)
            if parent is None:
                nodes.setdefault(
                    digest,
                    graph.Node(digest, f"{digest[:19]}…", "no record", COLORS["unregistered"]),
                )
                edges.append(graph.Edge(digest, a.name))
                continue
            edges.append(graph.Edge(parent, a.name))
            todo.append(report.artifacts[parent])
        root = origin(a.record)
        if not a.record.lineage and root is not None:
            nodes.setdefault(
                f"origin:{root}",
                graph.Node(f"origin:{root}", root, "pinned source", COLORS["origin"], title=root),
            )
            edges.append(graph.Edge(f"origin:{root}", a.name))
