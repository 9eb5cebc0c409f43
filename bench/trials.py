"""The concurrency trials with many rounds: writers racing ``gc --yes``, concurrent adds into
one family, registry writers killed mid-write (see ``tests/support/trials.py``).

Not a timed benchmark: it prints, per trial kind, the rounds run and what must never happen
(records lost, objects lost, stray files, tracebacks, unexpected exits); every count must be
zero, and the exit status says whether they all were. Beside them, how hard each kind pressed:
how often gc ran, how often it found a writer in flight and waited for it, how many kills
landed in the middle of a registry write.

    uv run python -m bench.trials                  # every kind, 200 rounds each
    uv run python -m bench.trials --rounds 50 gc-add gc-fetch
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from tests.support import trials

# Rounds of a kind are scaled from --rounds: eight writers make eight adds per round, and a
# regeneration runs a generator per round.
SCALE = {"concurrent-adds": 0.1, "gc-regenerate": 0.5}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kinds", nargs="*", metavar="KIND", help=", ".join(trials.TRIALS))
    parser.add_argument("--rounds", type=int, default=200, help="rounds per kind (default 200)")
    parser.add_argument("--json", action="store_true", help="print the table as JSON lines")
    parser.add_argument("--keep", type=Path, help="run in this folder and keep it")
    args = parser.parse_args(argv)
    kinds = args.kinds or list(trials.TRIALS)
    unknown = sorted(set(kinds) - set(trials.TRIALS))
    if unknown:
        parser.error(f"unknown kind {unknown[0]!r}; one of {', '.join(trials.TRIALS)}")
    work = args.keep or Path(tempfile.mkdtemp(prefix="fixture-store-trials-"))
    tallies = []
    try:
        for kind in kinds:
            rounds = max(1, round(args.rounds * SCALE.get(kind, 1.0)))
            tally = trials.TRIALS[kind](work / kind, rounds)
            tallies.append(tally)
            print(json.dumps(tally.row()) if args.json else tally, flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    if not args.json:
        print()
        print(_table(tallies))
    return 0 if all(t.clean for t in tallies) else 1


def _table(tallies: list[trials.Tally]) -> str:
    """One row per kind: what must be zero, then how hard the kind pressed (gc runs, gc runs
    that found a writer in flight and waited for it, kills that landed mid-write)."""
    pressure = list(dict.fromkeys(k for t in tallies for k in t.pressure))
    heads = ["kind", "rounds", *trials.Tally.COUNTS, *pressure, "seconds"]
    rows = [
        [
            t.kind,
            str(t.rounds),
            *(str(getattr(t, c)) for c in t.COUNTS),
            *(str(t.pressure[k]) if k in t.pressure else "-" for k in pressure),
            f"{t.seconds:.1f}",
        ]
        for t in tallies
    ]
    heads = [h.replace("_", " ") for h in heads]
    widths = [max(len(r[i]) for r in [heads, *rows]) for i in range(len(heads))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in [heads, *rows]
    )


if __name__ == "__main__":
    sys.exit(main())
