"""The links report runs: a round of every surface, every count zero (so the bench cannot rot)."""

from __future__ import annotations

from bench import hostile_links


def test_every_surface_of_the_links_report_counts_zero() -> None:
    tallies = hostile_links.run(list(hostile_links.SURFACES), 2, seed=7)
    assert [t.surface for t in tallies] == list(hostile_links.SURFACES)
    assert all(t.rounds == 2 for t in tallies)
    assert [t.row() for t in tallies if not t.clean] == [], [t.notes for t in tallies]
