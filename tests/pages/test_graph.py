"""The layered layout: upstream in the first column, chains on straight rows, cycles cut,
the same graph always drawn the same."""

from __future__ import annotations

from fixture_store.pages.graph import Edge, Node, columns, render


def _nodes(*ids: str) -> list[Node]:
    return [Node(i, i) for i in ids]


def test_a_node_sits_one_column_after_its_deepest_parent() -> None:
    edges = [
        Edge("up", "w"),
        Edge("w", "archive"),
        Edge("archive", "fixture"),
        Edge("w", "fixture"),
    ]
    grid = columns(_nodes("fixture", "archive", "w", "up"), edges)
    assert grid == [["up"], ["w"], ["archive"], ["fixture"]]


def test_parallel_chains_keep_their_rows() -> None:
    # b's chain sorts before a's by name in the later columns, but follows its parent's row
    edges = [Edge("a", "z1"), Edge("b", "y1"), Edge("z1", "z2"), Edge("y1", "y2")]
    grid = columns(_nodes("a", "b", "z1", "y1", "z2", "y2"), edges)
    assert grid == [["a", "b"], ["z1", "y1"], ["z2", "y2"]]


def test_a_cycle_is_cut_not_followed() -> None:
    grid = columns(_nodes("a", "b", "c"), [Edge("a", "b"), Edge("b", "c"), Edge("c", "a")])
    assert sorted(n for column in grid for n in column) == ["a", "b", "c"]


def test_the_same_graph_gives_the_same_svg_whatever_the_input_order() -> None:
    nodes = [Node("up", "up", link="x.html#up"), Node("down", "a <label> & more")]
    edges = [Edge("up", "down", "stage (1)")]
    first = render(nodes, edges, title="t")
    assert render(list(reversed(nodes)), edges, title="t") == first
    assert first.startswith("<svg") and "a &lt;label&gt; &amp; more" in first
    assert "<a href='x.html#up'>" in first and ">stage (1)</text>" in first


def test_a_parent_sits_between_its_children_and_chains_stay_level() -> None:
    from fixture_store.pages.graph import rows

    edges = [Edge("up", "w1"), Edge("up", "w2"), Edge("w1", "a"), Edge("w1", "b")]
    edges += [Edge("w2", "c"), Edge("w2", "d")]
    grid = columns(_nodes("up", "w1", "w2", "a", "b", "c", "d"), edges)
    row = rows(grid, edges)
    assert [row[n] for n in ("a", "b", "c", "d")] == [0, 1, 2, 3]
    assert row["w1"] in (0, 1) and row["w2"] in (2, 3)  # each between its two children
    assert row["up"] in (1, 2)
    chain = [Edge("x", "y"), Edge("y", "z")]
    assert set(rows(columns(_nodes("x", "y", "z"), chain), chain).values()) == {0}
