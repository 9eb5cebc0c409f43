"""Directed graphs drawn as inline SVG, laid out by a small layered layout of our own.

Left to right: a node's column is the longest path to it from a node with no incoming edge
(upstream first, then what was made from it), and within a column nodes are ordered by the
mean row of their parents (two sweeps, ties by id), so parallel chains stay on straight rows.
The same nodes and edges always give the same bytes: nothing depends on hash order or time.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

NODE_HEIGHT = 34
ROW_GAP = 10
COLUMN_GAP = 56
CHAR_WIDTH = 6.6  # 11 px sans-serif, on average
MIN_WIDTH = 110
MAX_CHARS = 34  # a longer label is cut in the middle; the tooltip has it whole
PAD = 8


@dataclass(frozen=True)
class Node:
    id: str
    label: str
    sub: str = ""  # a second, smaller line (a kind, a count, a status)
    color: str = "#90a4ae"  # the box's border and tint
    link: str | None = None
    title: str = ""  # the tooltip (defaults to the id)


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    label: str = ""
    dashed: bool = False


def columns(nodes: Sequence[Node], edges: Sequence[Edge]) -> list[list[str]]:
    """Node ids by column (longest path from a root), each column in drawing order."""
    ids = sorted({n.id for n in nodes})
    parents: dict[str, list[str]] = defaultdict(list)
    for e in edges:
        if e.source != e.target:
            parents[e.target].append(e.source)
    depth: dict[str, int] = {}

    def depth_of(node: str, visiting: frozenset[str]) -> int:
        if node not in depth:
            ups = [p for p in parents[node] if p not in visiting]  # a cycle is cut, not followed
            depth[node] = 1 + max((depth_of(p, visiting | {node}) for p in ups), default=-1)
        return depth[node]

    for node in ids:
        depth_of(node, frozenset())
    grid: list[list[str]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for node in ids:
        grid[depth[node]].append(node)
    return _ordered(grid, parents)


def _ordered(grid: list[list[str]], parents: Mapping[str, list[str]]) -> list[list[str]]:
    """Each column sorted by the mean row of the node's parents (then by id), twice."""
    for _ in range(2):
        row = {node: i for column in grid for i, node in enumerate(column)}
        for c in range(1, len(grid)):
            grid[c] = sorted(grid[c], key=functools.partial(_barycenter, parents=parents, row=row))
            row.update({n: i for i, n in enumerate(grid[c])})
    return grid


def _barycenter(
    node: str, parents: Mapping[str, list[str]], row: Mapping[str, int]
) -> tuple[float, str]:
    ups = [row[p] for p in parents.get(node, ()) if p in row]
    return (sum(ups) / len(ups) if ups else float(row[node]), node)


STEP = NODE_HEIGHT + ROW_GAP


def rows(grid: Sequence[Sequence[str]], edges: Sequence[Edge]) -> dict[str, int]:
    """The row of each node (its y is ``row * STEP``): from upstream down, a node sits level with
    the mean row of its parents; then from downstream up, a parent sits level with the mean row
    of its children. A column keeps its order and never puts two nodes in one row, so a parent
    of two children sits between them and parallel chains stay straight."""
    parents: dict[str, list[str]] = {}
    children: dict[str, list[str]] = {}
    for e in edges:
        parents.setdefault(e.target, []).append(e.source)
        children.setdefault(e.source, []).append(e.target)
    y = {n: float(i) for column in grid for i, n in enumerate(column)}
    order = list(range(1, len(grid)))
    for columns_, near in ((order, parents), (order[::-1], children)):
        for c in columns_ if near is parents else [c - 1 for c in columns_]:
            _settle(grid[c], near, y)
    low = min(y.values(), default=0.0)
    return {n: round(v - low) for n, v in y.items()}


def _settle(column: Sequence[str], near: Mapping[str, list[str]], y: dict[str, float]) -> None:
    """Move each node of ``column`` (in order) to the mean row of its ``near`` nodes, or below
    the node before it if that row is taken."""
    floor = -float("inf")
    for node in column:
        around = [y[n] for n in near.get(node, ()) if n in y]
        wanted = sum(around) / len(around) if around else y[node]
        y[node] = max(round(wanted), floor + 1)
        floor = y[node]


def _short(text: str) -> str:
    if len(text) <= MAX_CHARS:
        return text
    half = (MAX_CHARS - 1) // 2
    return f"{text[:half]}…{text[-(MAX_CHARS - 1 - half) :]}"


def render(
    nodes: Sequence[Node], edges: Sequence[Edge], *, title: str, column_gap: int = COLUMN_GAP
) -> str:
    """The graph as one ``<svg>`` element (with a ``<title>``), sized to its content; edge
    labels sit at the middle of their edge, on a white halo."""
    by_id = {n.id: n for n in nodes}
    grid = columns(nodes, [e for e in edges if e.source in by_id and e.target in by_id])
    widths = [
        max(
            MIN_WIDTH,
            *(
                int(max(len(_short(by_id[n].label)), len(by_id[n].sub)) * CHAR_WIDTH) + 2 * PAD
                for n in column
            ),
        )
        for column in grid
    ]
    drawn = [e for e in edges if e.source in by_id and e.target in by_id]
    row = rows(grid, drawn)
    place: dict[str, tuple[int, int, int]] = {}  # id -> x, y, width
    x = PAD
    for column, width in zip(grid, widths, strict=True):
        for node in column:
            place[node] = (x, PAD + row[node] * STEP, width)
        x += width + column_gap
    total_w = max(x - column_gap + PAD, 2 * PAD)
    # one row more below the last: an edge that skips columns bows under its row
    total_h = PAD * 2 + (max(row.values(), default=-1) + 2) * STEP
    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' class='graph' role='img' "
        f"viewBox='0 0 {total_w} {total_h}' width='{total_w}' height='{total_h}' "
        "font-family='system-ui,sans-serif' font-size='11'>"
        f"<title>{escape(title)}</title>"
        "<defs><marker id='arrow' viewBox='0 0 10 10' refX='10' refY='5' markerWidth='7' "
        "markerHeight='7' orient='auto-start-reverse'><path d='M0,0L10,5L0,10z' "
        "fill='#78909c'/></marker></defs>"
    ]
    parts += [_edge(e, place) for e in drawn]
    parts += [_node(by_id[n], *place[n]) for column in grid for n in column]
    parts.append("</svg>")
    return "".join(parts)


def _edge(e: Edge, place: Mapping[str, tuple[int, int, int]]) -> str:
    """A curve from the source's right side to the target's left side; one that skips columns
    bows below the row it leaves, so it passes between the boxes it skips, not through them."""
    sx, sy, sw = place[e.source]
    tx, ty, _ = place[e.target]
    x1, y1 = sx + sw, sy + NODE_HEIGHT // 2
    x2, y2 = tx, ty + NODE_HEIGHT // 2
    mid = (x1 + x2) // 2
    skips = any(x1 < x < x2 for x, y, _ in place.values() if y in (sy, ty))
    # the curve's lowest point is 3/4 of the bow: the middle of the gap under its row
    bow = (NODE_HEIGHT + ROW_GAP) * 2 // 3 if skips else 0
    c1, c2 = (x1 + COLUMN_GAP, x2 - COLUMN_GAP) if skips else (mid, mid)
    dash = " stroke-dasharray='4 3'" if e.dashed else ""
    path = (
        f"<path d='M{x1},{y1} C{c1},{y1 + bow} {c2},{y2 + bow} {x2},{y2}' fill='none' "
        f"stroke='#78909c'{dash} marker-end='url(#arrow)'><title>{escape(e.source)} → "
        f"{escape(e.target)}{escape(': ' + e.label) if e.label else ''}</title></path>"
    )
    if not e.label:
        return path
    label_y = (y1 + y2) // 2 + (bow * 3 // 4 + 4 if skips else -4)
    return (
        path + f"<text x='{mid}' y='{label_y}' text-anchor='middle' fill='#37474f' "
        f"font-size='10' stroke='#fff' stroke-width='3' paint-order='stroke'>"
        f"{escape(e.label)}</text>"
    )


def _node(n: Node, x: int, y: int, width: int) -> str:
    box = (
        f"<g><title>{escape(n.title or n.id)}</title>"
        f"<rect x='{x}' y='{y}' width='{width}' height='{NODE_HEIGHT}' rx='4' fill='#fff'/>"
        f"<rect x='{x}' y='{y}' width='{width}' height='{NODE_HEIGHT}' rx='4' "
        f"fill='{n.color}' fill-opacity='0.12' stroke='{n.color}' stroke-width='1.5'/>"
        f"<text x='{x + PAD}' y='{y + 14}' fill='#212121'>{escape(_short(n.label))}</text>"
        f"<text x='{x + PAD}' y='{y + 27}' fill='#546e7a' font-size='10'>{escape(n.sub)}</text>"
        "</g>"
    )
    if n.link is None:
        return box
    return f"<a href='{escape(n.link)}'>{box}</a>"
