"""The last pipeline step: verify what the stages registered and summarise their reports.

Writes DVC metrics (a headline a person reads in ``dvc metrics show``: files that pass and
drifted over every stage, artifacts verified) and DVC plots (per-case parity errors of the
checkpoint chain, registry data). Which passing files are bit-identical and which within their
tolerance, and the per-file errors of the latter (ULPs included), are run numbers
(:mod:`fixture_store.parity.parts`): another machine's kernels round otherwise. They are read
from the stages' run reports and written to the run folders beside the metrics and the plots,
which no stage tracks.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fixture_store import bounded_json
from fixture_store.errors import UsageError
from fixture_store.objects import outputs
from fixture_store.objects.outputs import Target
from fixture_store.objects.store import Store
from fixture_store.parity import parts
from fixture_store.regenerate.drift import PASS, Verdict
from fixture_store.registry import Registry
from fixture_store.verify import Result, Status, verify_names

# The keys of a stage's file counts that pass: a run report's split, or a tracked file's one.
_PASSING = ("bit_identical", "within_tolerance", PASS)


@dataclass(frozen=True)
class Summary:
    stages: Mapping[str, Mapping[str, Any]]
    verify: Mapping[str, int]
    results: tuple[Result, ...]
    within_rows: tuple[dict[str, Any], ...]
    parity_rows: tuple[dict[str, Any], ...]

    @property
    def failures(self) -> tuple[Result, ...]:
        """The artifacts that did not verify; a declared gap verifies as a gap, as in
        ``verify``, so a project with one still passes its pipeline."""
        return tuple(r for r in self.results if not r.ok and r.status is not Status.GAP)

    @property
    def ok(self) -> bool:
        return all(s["ok"] for s in self.stages.values()) and not self.failures

    def headline(self) -> dict[str, int]:
        """The counts ``dvc metrics show`` prints: files that pass (bit-identical or within
        tolerance: the same on every machine that passes) and drifted, artifacts verified; files
        new, missing or unavailable and artifacts that did not verify only when there are some
        (each is a column)."""
        total = self.total_files()
        doc = {
            PASS: sum(total.get(k, 0) for k in _PASSING),
            "drift": total.get("drift", 0),
            "verified": self.verify.get("verified", 0),
        }
        for key in ("new", "missing", "unavailable"):
            if total.get(key):
                doc[key] = total[key]
        if self.failures:
            doc["not_verified"] = len(self.failures)
        return doc

    def run_headline(self) -> dict[str, int]:
        """This machine's split of the passing files: bit-identical and within tolerance (the
        files of a stage whose run report is gone count as ``pass``)."""
        total = self.total_files()
        return {
            "identical": total.get("bit_identical", 0),
            "within": total.get("within_tolerance", 0),
            PASS: total.get(PASS, 0),
        }

    def total_files(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        for s in self.stages.values():
            total.update({k: v for k, v in s["files"].items()})
        return dict(sorted(total.items()))

    def metrics(self) -> dict[str, Any]:
        """Everything summarised: per stage, in total, verification, the checkpoint chain."""
        total = self.total_files()
        doc: dict[str, Any] = {
            "stages": {k: dict(v) for k, v in self.stages.items()},
            "total_files": total,
            "verify": dict(self.verify),
            "ok": self.ok,
        }
        if self.parity_rows:
            doc["parity"] = {
                "cases": len(self.parity_rows),
                "max_abs": max(r["max_abs"] for r in self.parity_rows),
                "max_rel": max(r["max_rel"] for r in self.parity_rows),
                "within": sum(1 for r in self.parity_rows if r["within"]),
            }
        return doc


def _load(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            doc = bounded_json.load(f)
    except (OSError, ValueError) as e:
        raise UsageError(
            f"cannot read the regeneration report {path}: {e}",
            fix="fixture-store regenerate STAGE --report PATH",
        ) from e
    if not isinstance(doc, dict) or "stage" not in doc:
        raise UsageError(
            f"{path} is not a regeneration report",
            fix="pass the files written by: fixture-store regenerate STAGE --report PATH",
        )
    return doc


def _load_run(path: Path) -> dict[str, Any]:
    """The run report beside a stage report (its errors and times), or nothing when the
    stage wrote none there."""
    try:
        with open(parts.run_path(path), "rb") as f:
            doc = bounded_json.load(f)
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _within_rows(doc: dict[str, Any], run: dict[str, Any]) -> list[dict[str, Any]]:
    """Per array of a within-tolerance file: its errors, from the stage's run report."""
    rows = []
    for art in run.get("artifacts", []):
        for m in art.get("members", []):
            if m.get("verdict") != Verdict.WITHIN.value:
                continue
            for a in m.get("arrays", []):
                rows.append(
                    {
                        "stage": doc["stage"],
                        "file": f"{art['name']}/{m['path']}",
                        "max_abs": a["max_abs"],
                        "mean_abs": a["mean_abs"],
                        "max_rel": a["max_rel"],
                        "mean_rel": a["mean_rel"],
                        "max_ulp": a.get("max_ulp", ""),
                    }
                )
    return rows


def summarise(
    reports: Iterable[Path],
    registry: Registry,
    store: Store,
    *,
    everything: bool = False,
    full: bool = False,
) -> Summary:
    """Summarise the reports and verify the families they cover (``everything``: the registry).

    ``full`` re-hashes every object instead of trusting the verified-state cache.
    """
    stages: dict[str, dict[str, Any]] = {}
    within_rows: list[dict[str, Any]] = []
    families: set[str] = set()
    for path in reports:
        doc = _load(path)
        run = _load_run(path)
        # This machine's split of the passing files where its run report has it, else the
        # tracked counts (``pass``).
        exact = run.get("file_counts") if run.get("stage") == doc["stage"] else None
        counted = exact if isinstance(exact, dict) else doc["file_counts"]
        files = {k.replace("-", "_"): v for k, v in counted.items()}
        stages[doc["stage"]] = {
            "ok": bool(doc["ok"]),
            "artifacts": sum(doc["counts"].values()),
            "files": files,
        }
        families.update(doc.get("families") or ())
        within_rows.extend(_within_rows(doc, run))
    chosen = [n for n in registry.names() if everything or n.split("/", 1)[0] in families]
    results = tuple(verify_names(store, registry, chosen, full=full))
    verify = Counter(str(r.status) for r in results)
    parity_rows = []
    for r in registry.records():
        parity = (r.metadata or {}).get("parity")
        if parity:
            parity_rows.append(
                {
                    "case": r.name,
                    "module": (r.metadata or {}).get("module"),
                    "max_abs": parity["max_abs"],
                    "mean_abs": parity["mean_abs"],
                    "max_rel": parity["max_rel"],
                    "within": parity["within"],
                }
            )
    return Summary(
        stages,
        dict(sorted(verify.items())),
        results,
        tuple(within_rows),
        tuple(sorted(parity_rows, key=lambda r: r["case"])),
    )


def write(
    summary: Summary,
    metrics: Target | str | os.PathLike[str],
    plots: Target | str | os.PathLike[str] | None,
) -> None:
    """The headline at ``metrics`` and this machine's split of its passing files in its run
    folder (``metrics/run/``); the parity plot in ``plots`` and the within-tolerance files'
    errors in its run folder (``plots/run/``); every file by the output primitive."""
    metrics = outputs.target(metrics)
    for target, doc in (
        (metrics, summary.headline()),
        (metrics.beside(parts.run_path(metrics.path)), summary.run_headline()),
    ):
        target.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    if plots is None:
        return
    folder = outputs.target(plots)
    for path, rows, cols in (
        (
            parts.run_path(folder.path / "within-tolerance.csv"),
            summary.within_rows,
            ("file", "stage", "max_abs", "mean_abs", "max_rel", "mean_rel", "max_ulp"),
        ),
        (
            folder.path / "parity.csv",
            summary.parity_rows,
            ("case", "module", "max_abs", "mean_abs", "max_rel", "within"),
        ),
    ):
        text = io.StringIO(newline="")
        w = csv.DictWriter(text, fieldnames=list(cols), extrasaction="ignore")
        w.writeheader()
        for row in sorted(rows, key=lambda r: str(r[cols[0]])):
            w.writerow(row)
        folder.beside(path).write_text(text.getvalue())
