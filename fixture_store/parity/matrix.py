"""The expectations matrix: for each record, which environments have a rule, which were verified.

A row is one rule of one record: an ``expectations`` entry (its conditions), or the record's own
rule (``""``) where runs were judged by it. It is *verified* when the run log holds a passing run
judged by that rule against the reference the record names now (its digest); *failing* when the
log holds runs of it against that reference and none passed; *never* otherwise. Runs against an
older reference do not count: a new reference has to be verified again.

:func:`add_from_run` turns a verified environment into a registry entry: the conditions given
(each a fact of a logged passing run's environment) keyed to the rule that judged the run, with
a ``why`` naming the evidence. It returns the new record; the command shows the diff and writes
only when asked.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from fixture_store.errors import UsageError
from fixture_store.parity.runlog import Run
from fixture_store.registry import Record, Registry, Tolerance, conditions, parse_record
from fixture_store.registry.environment import Environment
from fixture_store.registry.expectations import KEY

VERIFIED, FAILING, NEVER = "verified", "failing", "never"
_JUDGING = ("metric", "checks", "atol", "rtol", "max", "floor")


@dataclass(frozen=True)
class Row:
    record: str
    rule: str  # the expectation's conditions; "" for the record's own rule
    status: str  # VERIFIED, FAILING or NEVER
    environments: tuple[str, ...] = ()  # where it passed (or, failing, where it ran)
    runs: int = 0
    last: str = ""

    def to_json(self) -> dict[str, object]:
        return {
            "record": self.record,
            "rule": self.rule,
            "status": self.status,
            "environments": list(self.environments),
            "runs": self.runs,
            "last": self.last or None,
        }


def rows(registry: Registry, runs: Iterable[Run], names: Iterable[str] | None = None) -> list[Row]:
    """The matrix over the records ``names`` (default: every record with expectations or runs)."""
    by_record: dict[str, list[Run]] = {}
    for run in runs:
        by_record.setdefault(run.record, []).append(run)
    wanted = list(names) if names is not None else None
    out: list[Row] = []
    for record in registry.records():
        expectations = record.tolerance.expectations if record.tolerance else None
        if wanted is not None and record.name not in wanted:
            continue
        if wanted is None and not expectations and record.name not in by_record:
            continue
        digest = str(record.digest) if record.digest else ""
        current = [r for r in by_record.get(record.name, ()) if r.digest == digest]
        keys = [e.key for e in expectations or ()]
        if not keys or any(r.rule == "" for r in current):
            keys.insert(0, "")
        out.extend(_row(record.name, key, [r for r in current if r.rule == key]) for key in keys)
    return out


def _row(record: str, rule: str, runs: list[Run]) -> Row:
    if not runs:
        return Row(record, rule, NEVER)
    passed = [r for r in runs if r.ok]
    shown = passed or runs
    return Row(
        record,
        rule,
        VERIFIED if passed else FAILING,
        tuple(sorted({r.environment for r in shown})),
        len(runs),
        max(r.at for r in runs),
    )


def add_from_run(record: Record, runs: Iterable[Run], given: str) -> Record:
    """``record`` with an ``expectations`` entry for the conditions ``given``, from a passing
    run logged in an environment where they all hold; a UsageError when there is none, or the
    entry exists."""
    try:
        keyed = conditions.parse_all(given)
    except UsageError as e:
        raise UsageError(f"--env {given!r}: {e.message}", fix=e.fix) from None
    key = ",".join(keyed)
    tolerance = record.tolerance or Tolerance()
    if any(e.key == key for e in tolerance.expectations or ()):
        raise UsageError(
            f"{record.name} already has an expectation for {key!r}",
            fix="edit it in the registry, or name other conditions with --env",
        )
    digest = str(record.digest) if record.digest else ""
    evidence = [
        r
        for r in runs
        if r.record == record.name
        and r.ok
        and r.digest == digest
        and all(conditions.holds(c, Environment.parse(r.environment)) for c in keyed)
        and _rule(tolerance, r.environment) == r.rule  # judged by the rule that holds there now
    ]
    if not evidence:
        raise UsageError(
            f"the run log holds no passing run of {record.name} (its reference as registered "
            f"now) in an environment where {key} holds",
            fix=f"run its parity test there first (pytest --fixture-store-env {key}), then "
            "add the environment from that run",
        )
    last = max(evidence, key=lambda r: r.at)
    judged = tolerance.in_environment(Environment.parse(last.environment)).to_json()
    entry = {k: judged[k] for k in _JUDGING if k in judged}
    entry["why"] = (
        f"verified in {last.environment} ({len(evidence)} passing run(s), last {last.at}, "
        f"{last.arrays} arrays)"
    )
    raw = record.to_json()
    raw["tolerance"] = {**tolerance.to_json(), KEY: {**_entries(tolerance), key: entry}}
    return parse_record(record.name, raw, file="the run log's entry")


def _rule(tolerance: Tolerance, environment: str) -> str:
    found = tolerance.expectation(Environment.parse(environment))
    return found.key if found is not None else ""


def _entries(tolerance: Tolerance) -> dict[str, object]:
    return {e.key: e.to_json() for e in tolerance.expectations or ()}


def diff(old: Record, new: Record) -> str:
    """The change to the record's registry JSON, as a unified diff."""
    import difflib

    before = json.dumps(old.to_json(), indent=2).splitlines(keepends=True)
    after = json.dumps(new.to_json(), indent=2).splitlines(keepends=True)
    return "".join(difflib.unified_diff(before, after, f"a/{old.name}", f"b/{new.name}"))
