"""Bringing generator-made objects back into a store that lacks them, by running their stages.

A generator-made record has no download to repeat: its bytes come back only when its stage runs
again in its pinned environment and produces them bit-identically (``regenerate --fetch`` puts
exactly those). A store can lack them for ordinary reasons — a fresh CI runner, another
``FIXTURE_STORE_DIR``, a ``gc`` — while everything DVC tracks is unchanged, so DVC alone would
call the pipeline up to date. :func:`plan` says which stages must run, producers of missing
inputs before their consumers; :func:`fixture_store.regenerate.run.restore` runs them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from graphlib import CycleError, TopologicalSorter

from fixture_store.errors import UsageError
from fixture_store.regenerate.stages import Stage
from fixture_store.registry import GeneratorSource, Registry
from fixture_store.verify import Verifier


@dataclass(frozen=True)
class Plan:
    """The stages to run, in order, and the missing records each is to bring back."""

    stages: tuple[str, ...]
    missing: Mapping[str, tuple[str, ...]]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for stage in self.stages for n in self.missing.get(stage, ()))


def producer(registry: Registry, name: str) -> str | None:
    """The stage that makes record ``name``, or ``None`` if its bytes come from elsewhere."""
    source = registry.get(name).source
    return source.stage if isinstance(source, GeneratorSource) else None


def missing_generated(
    registry: Registry, verifier: Verifier, names: Iterable[str]
) -> dict[str, list[str]]:
    """Generator-made records among ``names`` whose objects do not verify, by stage."""
    by_stage: dict[str, list[str]] = {}
    for name in names:
        stage = producer(registry, name)
        record = registry.get(name)
        if stage is None or (record.digest is None and record.gap is not None):
            continue
        if not verifier.verify(record).ok:
            by_stage.setdefault(stage, []).append(name)
    return by_stage


def plan(
    registry: Registry,
    stages: Mapping[str, Stage],
    verifier: Verifier,
    names: Iterable[str],
) -> Plan:
    """The stages that bring ``names`` back, each after the stages making its missing inputs."""
    missing = missing_generated(registry, verifier, names)
    needed: dict[str, set[str]] = {}
    todo = list(missing)
    while todo:
        stage = todo.pop()
        if stage in needed:
            continue
        if stage not in stages:
            raise UsageError(
                f"records name the generator stage {stage!r}, which params.yaml does not declare",
                fix=f"declare the stage {stage!r} in params.yaml, or re-add the records",
            )
        inputs = [n for p in stages[stage].inputs for n in registry.select([p])]
        upstream = missing_generated(registry, verifier, inputs)
        needed[stage] = set(upstream) - {stage}
        todo += upstream
    try:
        order = tuple(TopologicalSorter(needed).static_order())
    except CycleError as e:
        raise UsageError(
            f"generator stages feed each other in a cycle: {' -> '.join(e.args[1])}",
            fix="make one stage's outputs independent of the other's in params.yaml",
        ) from e
    return Plan(order, {s: tuple(sorted(n)) for s, n in missing.items()})
