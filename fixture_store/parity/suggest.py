"""Calibration with evidence: bounds proposed from the errors candidates actually show.

``fixture-store tolerance suggest NAME --candidate FILE...`` compares each candidate (an NPZ,
NPY or safetensors file: the outputs of one run, one regeneration or one runtime) with the
verified reference ``NAME``, and reports every array's largest error per metric over the runs.
It proposes, for each metric asked for, the bound :func:`propose` gives:

    the largest error observed, times :data:`MARGIN` (2), rounded *up* to one significant
    digit; never below the dtype's floor (:func:`dtype_floor`); a ULP count rounded up to a
    whole number of ULPs, at least 1.

Why this margin: a bound equal to what was observed fails the next run that is a little worse
by chance (another seed, another BLAS), and one far above it lets a real regression through;
twice the worst of several runs is the practice of kernel projects (FlashAttention judges its
kernel by at most twice PyTorch's own error), and one significant digit keeps the registry
readable and the diff reviewable. The dtype floor is the ``"metric": "default"`` row of the
array's dtype (:data:`~fixture_store.registry.dtypes.DEFAULT_TABLE`, torch.testing's): a bound
tighter than the dtype's own tolerance would fail on the next change of kernels that is still
within rounding. An observed error that is infinite (a NaN or an infinity where the reference
has something else) has no bound: calibrating over it is refused.

The proposal is one rule for the record (the largest per-array proposal of each metric) or,
with ``scope="array"``, one ``per_array`` entry per array; :func:`accept` writes it into the
registry in one transaction, with a ``why`` and the ``evidence`` (maxima observed, how many
runs, which environments), and returns the diff of the family file it wrote.
"""

from __future__ import annotations

import difflib
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from pathlib import Path
from typing import Any

import numpy as np

from fixture_store.access import Fixtures
from fixture_store.errors import RegistryError, UsageError
from fixture_store.parity.arrays import ArrayComparison, compare_arrays, dtype_name
from fixture_store.readers import formats
from fixture_store.registry import Content, Registry, Tolerance, family_of, ordered, parse_record
from fixture_store.registry import transaction as registry_transaction
from fixture_store.registry.dtypes import DEFAULT_TABLE
from fixture_store.registry.tolerance import Metric

MARGIN = 2
MARGIN_TEXT = (
    "2x the largest error observed, rounded up to one significant digit (ULPs: to a whole "
    "number, at least 1), never below the dtype's default (torch.testing's table)"
)
# The metrics a proposal may bound, and the ArrayComparison field that measures each.
MEASURED: Mapping[Metric, str] = {
    Metric.RMS: "rms",
    Metric.MAX_ABS: "max_abs",
    Metric.MEAN_ABS: "mean_abs",
    Metric.MAX_REL: "max_rel",
    Metric.ULP: "max_ulp",
    Metric.COSINE: "cosine",
}
DEFAULT_METRICS = (Metric.RMS, Metric.MAX_ABS)
SCOPES = ("record", "array")


@dataclass(frozen=True)
class Observation:
    """One array's largest error per metric over the runs."""

    name: str
    dtype: str
    errors: tuple[tuple[Metric, float], ...]

    def error(self, metric: Metric) -> float:
        return dict(self.errors)[metric]


@dataclass(frozen=True)
class Suggestion:
    """What ``suggest`` observed and proposes for one record."""

    name: str
    runs: int
    environments: tuple[str, ...]
    metrics: tuple[Metric, ...]
    observations: tuple[Observation, ...]
    scope: str = "record"
    intermediates: tuple[str, ...] = ()  # an ordered record's intermediates: a rule of their own
    digest: str = ""  # the reference observed against: accept writes only over that one

    def bounds(self, obs: Observation) -> dict[Metric, float | None]:
        return {m: propose(obs.error(m), m, obs.dtype) for m in self.metrics}

    def record_bounds(self, role: str = "") -> dict[Metric, float | None]:
        """Each metric's bound for the record's rule (``role`` ``""``: its outputs, every array
        of a record without intermediates) or its intermediates' (``"intermediates"``): the
        largest of those arrays' proposals."""
        out: dict[Metric, float | None] = {}
        group = self._group(role)
        for m in self.metrics:
            each = [propose(o.error(m), m, o.dtype) for o in group]
            out[m] = None if any(b is None for b in each) else max(b or 0.0 for b in each)
        return out

    def unbounded(self) -> list[tuple[str, Metric]]:
        """The (array, metric) pairs whose observed error is infinite: no bound holds."""
        return [(o.name, m) for o in self.observations for m in self.metrics if not _finite(o, m)]

    def rules(self, why: str | None = None) -> dict[str, dict[str, Any]]:
        """The rules to write: ``{"": rule}`` for the record, else ``{array: rule}``."""
        if self.scope == "record":
            rules = {}
            for role in ("", ordered.KEY):
                group = self._group(role)
                if group:
                    observed = {m: max(o.error(m) for o in group) for m in self.metrics}
                    rules[role] = self._rule(self.record_bounds(role), observed, why)
            return rules
        return {o.name: self._rule(self.bounds(o), dict(o.errors), why) for o in self.observations}

    def _group(self, role: str) -> list[Observation]:
        inner = set(self.intermediates)
        return [o for o in self.observations if (o.name in inner) == (role == ordered.KEY)]

    def _rule(
        self,
        bounds: Mapping[Metric, float | None],
        observed: Mapping[Metric, float],
        why: str | None,
    ) -> dict[str, Any]:
        checks = [{"metric": m.value, "max": _number(bounds[m], m)} for m in self.metrics]
        rule: dict[str, Any] = checks[0] if len(checks) == 1 else {"checks": checks}
        seen = {m.value: _number(observed[m], m) for m in self.metrics}
        runs = f"{self.runs} run{'s' * (self.runs != 1)}"
        envs = ", ".join(self.environments) or "environment not stated"
        said = ", ".join(f"{k} {v:.3g}" for k, v in seen.items())
        calibrated = f"calibrated over {runs} ({envs}): largest {said}, bounds 2x that"
        rule["why"] = f"{why}; {calibrated}" if why else calibrated
        rule["evidence"] = {
            "observed": seen,
            "runs": self.runs,
            "environments": list(self.environments),
            "margin": MARGIN_TEXT,
        }
        return rule

    def to_json(self) -> dict[str, Any]:
        arrays = []
        for o in self.observations:
            bounds = self.bounds(o)
            arrays.append(
                {
                    "name": o.name,
                    "dtype": o.dtype,
                    "observed": {m.value: _json_number(e) for m, e in o.errors},
                    "proposed": {m.value: bounds[m] for m in self.metrics},
                }
            )
        return {
            "name": self.name,
            "runs": self.runs,
            "environments": list(self.environments),
            "scope": self.scope,
            "margin": MARGIN_TEXT,
            "arrays": arrays,
            "proposed": {m.value: b for m, b in self.record_bounds().items()},
            **(
                {
                    "intermediates_proposed": {
                        m.value: b for m, b in self.record_bounds(ordered.KEY).items()
                    }
                }
                if self.intermediates
                else {}
            ),
        }


def round_up(value: float) -> float:
    """``value`` rounded up to one significant digit (``2.4e-6`` -> ``3e-6``, ``3e-6`` stays),
    decided on its decimal text to 12 significant digits: float noise in the last bits
    (``2.0000000000000018e-3``, twice an error of ``1e-3`` computed in float64) does not push a
    bound to the next digit."""
    if value <= 0:
        return 0.0
    exact = Decimal(format(value, ".12g"))
    quantum = Decimal(1).scaleb(exact.adjusted())
    return float((exact / quantum).to_integral_value(ROUND_CEILING) * quantum)


def dtype_floor(metric: Metric, dtype: str) -> float:
    """The least bound proposed for ``metric`` over ``dtype``: from the dtype's row of the
    default table, (rtol, atol): ``atol`` for the absolute metrics (max_abs, mean_abs, rms),
    ``rtol`` for max_rel, ``rtol**2 / 2`` for cosine (two vectors each element of which is
    within ``rtol`` relative are about that far from parallel), 1 ULP for ulp; 0 for a dtype
    with no row (integers, booleans: compared exactly)."""
    if metric is Metric.ULP:
        return 1.0
    row = DEFAULT_TABLE.get(dtype)
    if row is None:
        return 0.0
    rtol, atol = row
    if metric is Metric.MAX_REL:
        return rtol
    if metric is Metric.COSINE:
        return round_up(rtol * rtol / 2)
    return atol


def propose(observed: float, metric: Metric, dtype: str) -> float | None:
    """The bound for an observed error (``None``: infinite, no bound holds)."""
    if not math.isfinite(observed):
        return None
    if metric is Metric.ULP:
        return float(max(1, math.ceil(MARGIN * observed)))
    return max(round_up(MARGIN * observed), dtype_floor(metric, dtype))


def read_candidate(path: Path, reference: Mapping[str, Any]) -> dict[str, np.ndarray[Any, Any]]:
    """A candidate's arrays, read by the safe readers: an NPZ, an NPY (the one array of a
    one-array reference) or a safetensors file, by its leading bytes."""
    from fixture_store.readers import npy, safetensors

    if not path.is_file():
        raise UsageError(
            f"candidate {path} is not a file",
            fix="pass --candidate with an .npz, .npy or .safetensors file",
        )
    kind = formats.sniff(path)
    if kind == "zip":
        return npy.read_npz(path, artifact=str(path))
    if kind == "safetensors":
        return {
            k: np.asarray(v) for k, v in safetensors.open_tensors(path, artifact=str(path)).items()
        }
    if kind == "npy":
        if len(reference) != 1:
            raise UsageError(
                f"candidate {path} is one NPY array where the reference holds "
                f"{len(reference)} arrays",
                fix=f"write the candidate as an NPZ of {', '.join(sorted(reference))}",
            )
        return {next(iter(reference)): npy.read_npy(path, artifact=str(path))}
    raise UsageError(
        f"candidate {path} is no NPZ, NPY or safetensors file (it looks like {kind})",
        fix="pass --candidate with the arrays of one run as .npz, .npy or .safetensors",
    )


def observe(
    expected: Mapping[str, Any],
    candidates: Sequence[tuple[str, Mapping[str, Any]]],
    tolerance: Tolerance | None,
    metrics: Sequence[Metric],
) -> tuple[Observation, ...]:
    """Each array's largest error per metric over the ``(label, arrays)`` candidates."""
    tol = tolerance or Tolerance()
    worst: dict[str, dict[Metric, float]] = {k: dict.fromkeys(metrics, 0.0) for k in expected}
    for label, given in candidates:
        _check_names(label, expected, given)
        for key, values in expected.items():
            exp = np.asarray(values)
            rule = tol.for_array(key, dtype=dtype_name(exp.dtype))
            compared = compare_arrays(key, exp, given[key], rule)
            _check_measured(label, compared, exp)
            for m in metrics:
                seen = float(getattr(compared, MEASURED[m]))
                worst[key][m] = max(worst[key][m], seen)
    return tuple(
        Observation(k, dtype_name(np.asarray(expected[k]).dtype), tuple(worst[k].items()))
        for k in sorted(expected)
    )


def suggest(
    view: Fixtures,
    name: str,
    candidates: Sequence[str | os.PathLike[str]],
    *,
    metrics: Sequence[Metric] = (),
    environments: Sequence[str] = (),
    scope: str = "record",
) -> Suggestion:
    """Observe ``candidates`` against the verified reference ``name`` and propose bounds for
    ``metrics`` (default: those of the record's rule that take a ``max``, else rms and
    max_abs). ``environments``: one for every candidate, or one for all of them."""
    if not candidates:
        raise UsageError("nothing to calibrate on", fix="pass --candidate FILE (one per run)")
    if environments and len(environments) not in (1, len(candidates)):
        raise UsageError(
            f"{len(environments)} environments for {len(candidates)} candidates",
            fix="give one --environment for every candidate (in order), or one for all",
        )
    record = view.verified(name)
    if record.content is not Content.ARRAYS:
        raise UsageError(
            f"{name} is not an NPY/NPZ/safetensors reference: calibration compares arrays",
            fix="calibrate a record of an .npy, .npz or .safetensors file",
        )
    expected, given = _outputs(view.arrays(name), record.tolerance)
    chosen = tuple(metrics) or _metrics_of(record.tolerance, expected)
    read = [
        (str(p), _without(given, read_candidate(Path(p), expected), str(p))) for p in candidates
    ]
    observations = observe(expected, read, record.tolerance, chosen)
    envs = tuple(dict.fromkeys(environments))
    steps = record.tolerance.intermediates if record.tolerance is not None else None
    inner = steps.sequence(expected) if steps is not None else ()
    digest = str(record.digest) if record.digest is not None else ""
    return Suggestion(name, len(read), envs, chosen, observations, scope, inner, digest)


def accept(registry: Registry, suggestion: Suggestion, why: str | None = None) -> str:
    """Write the proposal into the record (one registry transaction) and return the unified
    diff of the record's JSON; a UsageError (nothing written) when a bound is infinite."""
    unbounded = suggestion.unbounded()
    if unbounded:
        array, metric = unbounded[0]
        raise UsageError(
            f"{suggestion.name}: array {array!r} shows an infinite {metric.value} error (a NaN "
            "or an infinity where the reference has something else): no bound holds; nothing "
            "was written",
            fix="fix the candidate that produced it, or calibrate without it",
        )
    name = suggestion.name
    family = family_of(name)
    with registry_transaction(registry.root) as tx:
        current = tx.family(family, known=registry.families.get(family))
        if current is None or name not in current.records:
            raise UsageError(f"{name} is no longer in the registry; nothing was written")
        records = dict(current.records)
        now = records[name].digest
        if suggestion.digest and str(now) != suggestion.digest:
            raise UsageError(
                f"{name} changed since the candidates were compared with it (its reference is "
                f"now {now}); nothing was written",
                fix="run tolerance suggest again against the reference registered now",
            )
        before = records[name].to_json()
        tolerance = _written(before.get("tolerance"), suggestion.rules(why))
        after = {**before, "tolerance": tolerance}
        records[name] = parse_record(name, after, file=str(tx.directory / f"{family}.json"))
        tx.write(family, records.values())
    return diff(name, before, records[name].to_json())


def parse_rule(text: str) -> dict[str, Any]:
    """A rule as typed: ``METRIC<=BOUND`` (``max_abs<=1e-5``) or the JSON object of a rule
    (``{"metric": "rms", "max": 1e-4, "why": "..."}``). The registry's tolerance parser judges
    it when it is written."""
    text = text.strip()
    if text.startswith("{"):
        from fixture_store.importers.entry import load_json

        rule = load_json(text, "RULE")
        if not isinstance(rule, dict):
            raise UsageError("RULE must be a JSON object", fix='{"metric": "max_abs", "max": 1e-5}')
        return rule
    metric, sep, bound = text.partition("<=")
    try:
        value = float(bound) if sep else None
    except ValueError:
        value = None
    if value is None or not metric.strip():
        raise UsageError(
            f"RULE {text!r} is neither METRIC<=BOUND nor a JSON object",
            fix='write max_abs<=1e-5, or {"metric": "max_abs", "max": 1e-5}',
        )
    return {"metric": metric.strip(), "max": value}


def set_rule(
    registry: Registry, name: str, rule: Mapping[str, Any], *, array: str | None = None
) -> str:
    """Write one rule into the record ``name`` (its own rule, or ``array``'s in ``per_array``),
    keeping every other field of its tolerance and record, in one registry transaction; return
    the unified diff of the record's JSON. A rule the registry cannot parse writes nothing."""
    family = family_of(name)
    with registry_transaction(registry.root) as tx:
        current = tx.family(family, known=registry.families.get(family))
        if current is None or name not in current.records:
            raise UsageError(
                f"{name} is not a record of the registry; nothing was written",
                fix="fixture-store list shows the records",
            )
        records = dict(current.records)
        before = records[name].to_json()
        tolerance = _written(before.get("tolerance"), {array or "": dict(rule)})
        after = {**before, "tolerance": tolerance}
        try:
            records[name] = parse_record(name, after, file=str(tx.directory / f"{family}.json"))
        except RegistryError as e:
            raise UsageError(
                f"{name}: RULE {dict(rule)}: {e.reason}; nothing was written",
                fix="give a rule of a metric the parity page lists (max_abs<=1e-5, rms<=1e-4)",
            ) from e
        tx.write(family, records.values())
    return diff(name, before, records[name].to_json())


def diff(name: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """The unified diff of a record's JSON, as the registry file writes it (sorted keys)."""
    old = json.dumps(before, indent=2, sort_keys=True).splitlines()
    new = json.dumps(after, indent=2, sort_keys=True).splitlines()
    return "\n".join(
        difflib.unified_diff(old, new, f"{name} (before)", f"{name} (after)", lineterm="")
    )


def proposed_json(record_json: Mapping[str, Any], suggestion: Suggestion, why: str | None) -> Any:
    """The record's JSON with the proposal written in (what ``accept`` would write)."""
    return {
        **record_json,
        "tolerance": _written(record_json.get("tolerance"), suggestion.rules(why)),
    }


# The fields of a rule that judge: a proposal replaces them and keeps the others.
_JUDGING = ("metric", "checks", "atol", "rtol", "max", "floor", "reduce", "axis", "why", "evidence")


def _written(current: Any, rules: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    tolerance = dict(current or {})
    if "" in rules:
        tolerance = {k: v for k, v in tolerance.items() if k not in _JUDGING}
        tolerance.update(rules[""])
    if ordered.KEY in rules:  # the intermediates keep their order
        steps = {k: v for k, v in tolerance[ordered.KEY].items() if k not in _JUDGING}
        tolerance[ordered.KEY] = {**steps, **rules[ordered.KEY]}
    arrays = {k: v for k, v in rules.items() if k not in ("", ordered.KEY)}
    if not arrays:
        return tolerance
    if not tolerance.get("metric") and not tolerance.get("checks"):
        tolerance["metric"] = "exact"  # the record's own rule, for arrays no entry names
    tolerance["per_array"] = {**(tolerance.get("per_array") or {}), **arrays}
    return tolerance


def _outputs(
    arrays: Mapping[str, Any], tolerance: Tolerance | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The arrays a calibration measures (the outputs) and the record's inputs
    (registry/roles.py), which no rule judges and a candidate need not carry."""
    role = tolerance.inputs if tolerance is not None else None
    inputs = {k: v for k, v in arrays.items() if role is not None and role.holds(k)}
    return {k: v for k, v in arrays.items() if k not in inputs}, inputs


def _without(inputs: Mapping[str, Any], candidate: dict[str, Any], label: str) -> dict[str, Any]:
    """``candidate`` without the inputs it carries, each the reference's own bits (a
    candidate computed from other inputs says nothing of the outputs' error)."""
    for key in set(inputs) & set(candidate):
        exp, got = np.asarray(inputs[key]), np.asarray(candidate.pop(key))
        same = exp.dtype == got.dtype and exp.shape == got.shape
        if not same or exp.tobytes() != got.tobytes():
            raise UsageError(
                f"candidate {label} carries input {key!r} with other values than the "
                "reference's: its outputs were computed from other inputs",
                fix="calibrate on candidates computed from the reference's inputs "
                "(fixture_store.inputs(name)), or leave the inputs out of the candidate",
            )
    return candidate


def _metrics_of(tolerance: Tolerance | None, expected: Mapping[str, Any]) -> tuple[Metric, ...]:
    found: dict[Metric, None] = {}
    for key, values in expected.items():
        rule = (tolerance or Tolerance()).for_array(key, dtype=dtype_name(np.asarray(values).dtype))
        found.update((c.metric, None) for c in rule.checks if c.metric in MEASURED)
    return tuple(found) or DEFAULT_METRICS


def _check_names(label: str, expected: Mapping[str, Any], given: Mapping[str, Any]) -> None:
    missing = sorted(set(expected) - set(given))
    extra = sorted(set(given) - set(expected))
    if missing or extra:
        said = f"has no array {missing[0]!r}" if missing else f"has an array {extra[0]!r}"
        raise UsageError(
            f"candidate {label} {said} the reference does not match (the reference's arrays: "
            f"{', '.join(sorted(expected))})",
            fix="write every array of the reference, by its name, and only those",
        )


def _check_measured(label: str, compared: ArrayComparison, exp: np.ndarray[Any, Any]) -> None:
    if compared.measured or compared.ok:
        return
    raise UsageError(
        f"candidate {label}: array {compared.name!r} cannot be measured against the reference "
        f"{exp.dtype}{list(exp.shape)}: {compared.reason}",
        fix="write the candidate's arrays in the reference's dtype and shape",
    )


def _finite(obs: Observation, metric: Metric) -> bool:
    return math.isfinite(obs.error(metric))


def _json_number(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return float(value)


def _number(value: float | None, metric: Metric) -> Any:
    """A bound or an error as the registry writes it: a ULP count is a whole number."""
    number = _json_number(value)
    return int(number) if number is not None and metric is Metric.ULP else number


__all__ = [
    "MARGIN",
    "Observation",
    "Suggestion",
    "accept",
    "diff",
    "dtype_floor",
    "observe",
    "propose",
    "proposed_json",
    "read_candidate",
    "round_up",
    "suggest",
]
