"""``fixture-store tolerance``: calibrate a record's tolerance from the errors runs show."""

from __future__ import annotations

import click
from rich.table import Table

from fixture_store.access import Fixtures
from fixture_store.cli._common import Context, handle_errors, leave, out, print_json
from fixture_store.parity import suggest as suggest_mod
from fixture_store.registry.environment import Environment
from fixture_store.registry.tolerance import Metric


@click.group()
def tolerance() -> None:
    """Calibrate tolerances from evidence.

    Compare the outputs of runs with a verified reference, report the errors they show and
    propose bounds (fixture-store tolerance suggest)."""


@tolerance.command()
@click.argument("name")
@click.option(
    "--candidate",
    "candidates",
    multiple=True,
    required=True,
    metavar="FILE",
    help="The arrays of one run (.npz, .npy or .safetensors); repeat for each run.",
)
@click.option(
    "--metric",
    "metrics",
    multiple=True,
    type=click.Choice([m.value for m in suggest_mod.MEASURED]),
    help="A metric to bound (repeatable; default: the record's metrics that take a max, "
    "else rms and max_abs).",
)
@click.option(
    "--environment",
    "environments",
    multiple=True,
    metavar="ENV",
    help="Where the candidates were computed (device:cuda,runtime:torch): one for all, or "
    "one per --candidate in order.",
)
@click.option(
    "--scope",
    type=click.Choice(suggest_mod.SCOPES),
    default="record",
    show_default=True,
    help="One rule for the record, or one per_array entry per array.",
)
@click.option("--why", metavar="TEXT", help="The reason written with the bounds.")
@click.option("--accept", is_flag=True, help="Write the proposed bounds into the registry.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.pass_obj
@handle_errors
def suggest(
    obj: Context,
    name: str,
    candidates: tuple[str, ...],
    metrics: tuple[str, ...],
    environments: tuple[str, ...],
    scope: str,
    why: str | None,
    accept: bool,
    as_json: bool,
) -> None:
    """Propose bounds from the errors of runs.

    Compare each --candidate with the verified reference NAME, print every array's largest
    error per metric over the runs and the bound proposed for it: 2x the largest observed,
    rounded up to one significant digit, never below the dtype's default. With --accept, write
    the bounds into the record (one registry transaction), with a why and the evidence (the
    maxima observed, the number of runs, the environments), and print the diff written.
    Exit 1 when an error is infinite (no bound holds)."""
    registry = obj.registry()
    envs = [str(Environment.parse(e)) for e in environments]
    chosen = [Metric(m) for m in dict.fromkeys(metrics)]
    found = suggest_mod.suggest(
        Fixtures(obj.store, registry),
        name,
        candidates,
        metrics=chosen,
        environments=envs,
        scope=scope,
    )
    written = suggest_mod.accept(registry, found, why) if accept else None
    if as_json:
        doc = found.to_json()
        if written is not None:
            doc["diff"] = written
        print_json(doc)
    else:
        _print(found, written)
    if found.unbounded():
        leave(1)


def _print(found: suggest_mod.Suggestion, written: str | None) -> None:
    table = Table(title=f"{found.name}: {found.runs} run(s), largest error -> proposed bound")
    table.add_column("array", overflow="fold")
    table.add_column("dtype")
    for m in found.metrics:
        table.add_column(m.value, justify="right")
    for o in found.observations:
        bounds = found.bounds(o)
        table.add_row(o.name, o.dtype, *(_cell(o.error(m), bounds[m]) for m in found.metrics))
    out.print(table)
    out.print(f"environments: {', '.join(found.environments) or 'not stated'}")
    out.print(f"margin: {suggest_mod.MARGIN_TEXT}")
    for array, metric in found.unbounded():
        out.print(f"no bound: {array} shows an infinite {metric.value} error")
    if written is not None:
        out.print("written to the registry:", markup=False)
        out.print(written, markup=False, highlight=False)
    elif not found.unbounded():
        rules = found.rules()
        for where, rule in rules.items():
            names = {"": "the record's rule", "intermediates": "the intermediates' rule"}
            what = names.get(where, f"per_array {where!r}")
            checks = rule.get("checks") or [rule]
            said = " and ".join(f"{c['metric']} <= {c['max']:g}" for c in checks)
            out.print(f"proposed, {what}: {said}", markup=False)
        out.print("to write it (a reviewed registry diff): add --accept", markup=False)


def _cell(observed: float, bound: float | None) -> str:
    if bound is None:
        return f"{observed:.3g} -> none"
    return f"{observed:.3g} -> {bound:g}"


@tolerance.command(name="set")
@click.argument("name")
@click.argument("rule")
@click.option(
    "--array",
    metavar="ARRAY",
    help="Set the rule of this array (per_array) instead of the record's own rule.",
)
@click.option("--why", metavar="TEXT", help="The reason written with the rule.")
@click.pass_obj
@handle_errors
def set_cmd(obj: Context, name: str, rule: str, array: str | None, why: str | None) -> None:
    """Change one rule of a tolerance alone.

    RULE is METRIC<=BOUND (max_abs<=1e-5) or the JSON object of a rule ({"metric": "rms",
    "max": 1e-4}). It replaces the record's own rule (with --array, that array's per_array
    rule); every other field of the tolerance and of the record is kept. One registry
    transaction; the diff written is printed. A rule the registry cannot parse writes nothing
    (exit 2)."""
    parsed = suggest_mod.parse_rule(rule)
    if why is not None:
        parsed["why"] = why
    out.print(suggest_mod.set_rule(obj.registry(), name, parsed, array=array), markup=False)
