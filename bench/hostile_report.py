"""The hostile report: every hostile-input harness of ``bench/`` in one run, one summary table.

It runs, with modest rounds by default (a few minutes on two cores):

- the concurrency trials (``bench/trials.py``): writers racing ``gc``, concurrent adds, registry
  writers killed mid-write; one row per kind;
- the links report (``bench/hostile_links.py``): links, FIFOs and folders planted under every
  root fixture-store writes or reads below; one row per surface;
- the secrets report (``bench/hostile_secrets.py``): a credential in a URL at every entry point;
  one row for all of them;
- the bodies report (``bench/hostile_bodies.py``): ``pull`` against a hostile S3 server; one row
  per case, with its peak memory against the promised bound (the clean pull's peak plus
  7 ranges of 8 MiB and a byte each);
- the outputs report (``bench/hostile_outputs.py``): every option that writes at a path the user
  names, aimed at the store (links to objects, the objects, new files in it); one row per option;
- the claims report (``bench/hostile_claims.py``): registry edits that move a tensor's range, and
  hostile certificates and signing keys, against what says "verified"; one row each;
- the structures report (``bench/hostile_structures.py``): hostile JSON where commands read it,
  a damaged pack index entry, hostile Hub answers; one row per surface.

Columns: rounds, objects lost, bytes outside the store (files created or changed outside every
root), secrets printed (or written where they should not be), hostile input accepted (values or
bytes handed out as verified, a refused key signing), tracebacks, other faults (records lost,
stray files, files written into the store, hangs, exits other than the expected refusal, an
honest input refused), peak memory and its bound,
and whether the row is within bounds: every count zero, the peak within its bound. The exit
status is 1 if any row is not.

    uv run python -m bench.hostile_report
    uv run python -m bench.hostile_report --rounds 50 --links-rounds 50 --json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from bench import (
    hostile_bodies,
    hostile_claims,
    hostile_links,
    hostile_outputs,
    hostile_secrets,
    hostile_structures,
)
from bench.trials import SCALE
from tests.support import trials

PARTS = ("trials", "links", "secrets", "bodies", "outputs", "claims", "structures")
REPO = Path(__file__).resolve().parents[1]
COUNTS = (
    "objects_lost",
    "bytes_outside",
    "secrets_printed",
    "accepted",
    "tracebacks",
    "other_faults",
)


@dataclass
class Row:
    """One line of the summary; ``peak_mib`` and ``bound_mib`` only where memory is measured."""

    surface: str
    rounds: int
    objects_lost: int = 0
    bytes_outside: int = 0
    secrets_printed: int = 0
    accepted: int = 0
    tracebacks: int = 0
    other_faults: int = 0
    peak_mib: float | None = None
    bound_mib: float | None = None

    @property
    def within_bounds(self) -> bool:
        peak_ok = self.peak_mib is None or self.bound_mib is None or self.peak_mib <= self.bound_mib
        return peak_ok and all(getattr(self, c) == 0 for c in COUNTS)

    def to_json(self) -> dict[str, object]:
        return {**asdict(self), "within_bounds": self.within_bounds}


def trial_rows(rounds: int) -> list[Row]:
    """Every concurrency trial kind, ``rounds`` rounds (scaled as ``bench/trials.py`` does)."""
    work = Path(tempfile.mkdtemp(prefix="fixture-store-report-trials-"))
    rows = []
    try:
        for kind, trial in trials.TRIALS.items():
            t = trial(work / kind, max(1, round(rounds * SCALE.get(kind, 1.0))))
            rows.append(
                Row(
                    f"trials: {t.kind}",
                    t.rounds,
                    objects_lost=t.objects_lost,
                    tracebacks=t.tracebacks,
                    other_faults=t.records_lost + t.stray_files + t.unexpected_exits,
                )
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return rows


def link_rows(rounds: int) -> list[Row]:
    return [
        Row(
            f"links: {t.surface}",
            t.rounds,
            objects_lost=t.objects_lost,
            bytes_outside=t.bytes_outside,
            tracebacks=t.tracebacks,
            other_faults=t.hangs + t.unexpected_exits,
        )
        for t in hostile_links.run(list(hostile_links.SURFACES), rounds)
    ]


def secret_rows(rounds: int) -> list[Row]:
    totals = hostile_secrets.run(rounds)
    count = sum(totals.values(), start=Counter[str]())
    return [
        Row(
            f"secrets: {len(totals)} entry points",
            rounds * len(totals),
            secrets_printed=count["printed"] + count["written"],
            tracebacks=count["tracebacks"],
            other_faults=count["other exits"],
        )
    ]


def body_rows(error_mib: int, extra_mib: int) -> list[Row]:
    cwd = Path.cwd()
    os.chdir(REPO)
    try:
        found = hostile_bodies.measure(error_mib, extra_mib)
    finally:
        os.chdir(cwd)
    bound = hostile_bodies.bound_mib(found)
    return [
        Row(
            f"bodies: {c.name}",
            1,
            tracebacks=int(c.traceback),
            other_faults=int(not c.expected_exit),
            peak_mib=round(c.peak_mib, 1),
            bound_mib=round(bound, 1),
        )
        for c in found
    ]


def output_rows(rounds: int) -> list[Row]:
    return [
        Row(
            f"outputs: {surface}",
            n,
            objects_lost=c["objects lost"],
            tracebacks=c["tracebacks"],
            other_faults=c["store writes"] + c["other exits"],
        )
        for surface, (n, c) in hostile_outputs.run(rounds).items()
    ]


def claim_rows(rounds: int) -> list[Row]:
    return [
        Row(
            f"claims: {surface}",
            n,
            accepted=c["accepted"],
            tracebacks=c["tracebacks"],
            other_faults=c["honest refused"],
        )
        for surface, (n, c) in hostile_claims.run(rounds).items()
    ]


def structure_rows(rounds: int) -> list[Row]:
    return [
        Row(
            f"structures: {name}",
            rounds,
            objects_lost=found["objects_lost"],
            tracebacks=found["tracebacks"],
            other_faults=found["other_faults"],
        )
        for name, found in hostile_structures.run(rounds).items()
    ]


def table(rows: list[Row]) -> str:
    heads = ["surface", "rounds", "objects lost", "bytes outside", "secrets printed",
             "accepted", "tracebacks", "other faults", "peak MiB / bound",
             "within bounds"]  # fmt: skip

    def cells(r: Row) -> list[str]:
        peak = "-" if r.peak_mib is None else f"{r.peak_mib:.0f} / {r.bound_mib:.0f}"
        counts = [str(getattr(r, c)) for c in COUNTS]
        return [r.surface, str(r.rounds), *counts, peak, "yes" if r.within_bounds else "no"]

    lines = [heads, *map(cells, rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(heads))]

    def text(line: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([text(heads), rule, *(text(line) for line in lines[1:])])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10, help="rounds per trial kind (10)")
    parser.add_argument("--links-rounds", type=int, default=10, help="per links surface (10)")
    parser.add_argument("--secrets-rounds", type=int, default=5, help="per entry point (5)")
    parser.add_argument("--error-mib", type=int, default=64, help="error body size (64)")
    parser.add_argument("--extra-mib", type=int, default=64, help="filler after a range (64)")
    parser.add_argument("--surface-rounds", type=int, default=1, help="outputs, claims (1)")
    parser.add_argument("--structures-rounds", type=int, default=10, help="per surface (10)")
    parser.add_argument("--only", choices=PARTS, action="append", help="only these (repeatable)")
    parser.add_argument("--json", action="store_true", help="print one JSON line per row")
    args = parser.parse_args(argv)
    parts: dict[str, Callable[[], list[Row]]] = {
        "trials": lambda: trial_rows(args.rounds),
        "links": lambda: link_rows(args.links_rounds),
        "secrets": lambda: secret_rows(args.secrets_rounds),
        "bodies": lambda: body_rows(args.error_mib, args.extra_mib),
        "outputs": lambda: output_rows(args.surface_rounds),
        "claims": lambda: claim_rows(args.surface_rounds),
        "structures": lambda: structure_rows(args.structures_rounds),
    }
    chosen = [part for name, part in parts.items() if not args.only or name in args.only]
    rows = [row for part in chosen for row in part()]
    if args.json:
        for row in rows:
            print(json.dumps(row.to_json()))
    else:
        print(table(rows))
    return 0 if all(r.within_bounds for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
