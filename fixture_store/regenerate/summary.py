"""The last pipeline step: verify what the stages registered and summarise their reports.

Writes DVC metrics (counts per stage: bit-identical / within tolerance / drift, files and
artifacts; verification counts; the checkpoint chain's worst parity error) and DVC plots
(per-file errors of within-tolerance files, ULPs included; per-case parity errors).
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fixture_store.errors import UsageError
from fixture_store.objects.store import Store
from fixture_store.registry import Registry
from fixture_store.verify import Result, verify_names


@dataclass(frozen=True)
class Summary:
    stages: Mapping[str, Mapping[str, Any]]
    verify: Mapping[str, int]
    results: tuple[Result, ...]
    within_rows: tuple[dict[str, Any], ...]
    parity_rows: tuple[dict[str, Any], ...]

    @property
    def ok(self) -> bool:
        return all(s["ok"] for s in self.stages.values()) and all(r.ok for r in self.results)

    def metrics(self) -> dict[str, Any]:
        total: Counter[str] = Counter()
        for s in self.stages.values():
            total.update({k: v for k, v in s["files"].items()})
        doc: dict[str, Any] = {
            "stages": {k: dict(v) for k, v in self.stages.items()},
            "total_files": dict(sorted(total.items())),
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
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise UsageError(
            f"cannot read the regeneration report {path}: {e}",
            fix="fixture-store regenerate STAGE --report PATH",
        ) from e
    if not isinstance(doc, dict) or "stage" not in doc:
        raise UsageError(f"{path} is not a regeneration report")
    return doc


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
        files = {k.replace("-", "_"): v for k, v in doc["file_counts"].items()}
        stages[doc["stage"]] = {
            "ok": bool(doc["ok"]),
            "artifacts": sum(doc["counts"].values()),
            "files": files,
        }
        families.update(doc.get("families") or ())
        for art in doc["artifacts"]:
            for m in art.get("members", []):
                if m["verdict"] != "within-tolerance":
                    continue
                for a in m["arrays"]:
                    within_rows.append(
                        {
                            "stage": doc["stage"],
                            "file": f"{art['name']}/{m['path']}",
                            "max_abs": a["max_abs"],
                            "mean_abs": a["mean_abs"],
                            "max_rel": a["max_rel"],
                            "mean_rel": a["mean_rel"],
                            # Reports written before ULPs were counted have none.
                            "max_ulp": a.get("max_ulp", ""),
                        }
                    )
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


def write(summary: Summary, metrics: Path, plots: Path | None) -> None:
    metrics.parent.mkdir(parents=True, exist_ok=True)
    metrics.write_text(json.dumps(summary.metrics(), indent=2, sort_keys=True) + "\n")
    if plots is None:
        return
    plots.mkdir(parents=True, exist_ok=True)
    for name, rows, cols in (
        (
            "within-tolerance.csv",
            summary.within_rows,
            ("file", "stage", "max_abs", "mean_abs", "max_rel", "mean_rel", "max_ulp"),
        ),
        (
            "parity.csv",
            summary.parity_rows,
            ("case", "module", "max_abs", "mean_abs", "max_rel", "within"),
        ),
    ):
        with open(plots / name, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(cols), extrasaction="ignore")
            w.writeheader()
            for row in sorted(rows, key=lambda r: str(r[cols[0]])):
                w.writerow(row)
