"""Run a stage's generator in its pinned environment, compare every output, optionally accept.

Without ``accept`` the registry is never changed and the store only gains objects when ``fetch``
asks for it and the candidate is bit-identical to its record (that is how a generator-sourced
artifact is fetched: rebuilt and checked against the digest the registry already holds).
Putting candidates and accepting them hold the store's writer lock (``gc`` waits), and the
records are rewritten in one registry transaction, refused if a record compared against changed
meanwhile (see :mod:`fixture_store.objects.store` and :mod:`fixture_store.registry.files`).
"""

from __future__ import annotations

import fnmatch
import json
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fixture_store import registry as registry_mod
from fixture_store.access import Fixtures
from fixture_store.errors import UnknownArtifactError, UsageError
from fixture_store.objects import digests, trees
from fixture_store.objects.digests import Digest
from fixture_store.objects.store import Store
from fixture_store.parity import parts
from fixture_store.readers import video
from fixture_store.regenerate import accepting, drift, envs, protocol
from fixture_store.regenerate import restore as restore_mod
from fixture_store.regenerate import stages as stages_mod
from fixture_store.regenerate.drift import ArtifactComparison, Reference, Verdict, compare
from fixture_store.regenerate.frames import compare_frames
from fixture_store.regenerate.outputs import Output, read_details, read_outputs
from fixture_store.registry import (
    Kind,
    Record,
    Registry,
    family_of,
)
from fixture_store.remotes.base import Remote
from fixture_store.remotes.mirrors import Mirrors
from fixture_store.verify import Verifier

# The remotes registered bytes are pulled from, opened on first need: a run that pulls nothing
# makes no client (and needs no extra, such as boto3 for an S3 remote).
Remotes = Callable[[], Sequence[Remote]]


@dataclass(frozen=True)
class Report:
    """A stage's regeneration. What passes, drifts or is missing is tracked; whether a passing
    file is bit-identical or within its tolerance is a run number (another machine's kernels
    round otherwise, see :attr:`Verdict.passes`), as are the time, the scratch folder, what this
    store lacked and fetched, and the machine details of the environment (``envs.defining``
    says which)."""

    stage: str = field(metadata=parts.KEY)
    scratch: Path = field(default=Path(), metadata=parts.RUN)
    environment: Mapping[str, Any] = field(default_factory=dict)
    comparisons: tuple[ArtifactComparison, ...] = ()
    accepted: tuple[str, ...] = ()
    fetched: tuple[str, ...] = field(default=(), metadata=parts.RUN)
    seconds: float = field(default=0.0, metadata=parts.RUN)
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def counts(self) -> dict[str, int]:
        c = Counter(str(x.verdict) for x in self.comparisons)
        return {str(v): c.get(str(v), 0) for v in Verdict}

    @property
    def member_counts(self) -> dict[str, int]:
        """Files, not artifacts: a tree contributes each of its members."""
        c: Counter[str] = Counter()
        for comp in self.comparisons:
            if comp.verdict in (Verdict.NEW, Verdict.MISSING):
                c[str(comp.verdict)] += 1
                continue
            if comp.verdict is Verdict.IDENTICAL or not comp.members:
                c[str(comp.verdict)] += comp.files
                continue
            for m in comp.members:
                c[str(m.verdict)] += 1
        return {str(v): c.get(str(v), 0) for v in Verdict}

    @property
    def ok(self) -> bool:
        return all(c.verdict.ok for c in self.comparisons)

    def to_json(self, part: parts.Part = parts.Part.ALL) -> dict[str, Any]:
        """The report, or one of its parts (:mod:`fixture_store.parity.parts`): the tracked part
        is the same on every machine whose files pass (bit-identical or within tolerance)."""
        tracked = part is parts.Part.TRACKED
        doc = parts.fields_json(
            self,
            part,
            skip=("comparisons", "environment", "details"),
            convert={"seconds": lambda s: round(s, 3)},
        )
        counts, files = self.counts, self.member_counts
        if tracked:
            counts, files = _tracked_counts(counts), _tracked_counts(files)
        if part is not parts.Part.RUN:
            doc.update(
                ok=self.ok,
                families=sorted({family_of(c.name) for c in self.comparisons}),
            )
            if self.details:
                doc["details"] = dict(self.details)
        doc.update(counts=counts, file_counts=files)
        environment = dict(self.environment)
        doc["environment"] = envs.defining(environment) if tracked else environment
        doc["artifacts"] = [
            c.to_json(part)
            for c in self.comparisons
            if not (c.verdict.passes if tracked else c.verdict is Verdict.IDENTICAL)
        ]
        return doc


def _tracked_counts(counts: Mapping[str, int]) -> dict[str, int]:
    """Counts by verdict as a tracked file holds them: bit-identical and within tolerance as
    one ``pass``."""
    out = dict.fromkeys(Verdict.tracked_values(), 0)
    for verdict, n in counts.items():
        out[Verdict(verdict).tracked] += n
    return out


def stage_for(root: Path, target: str) -> tuple[stages_mod.Stage, list[str]]:
    """The stage to run for STAGE or an artifact name/pattern, and the names to compare."""
    all_stages = stages_mod.load(root)
    if target in all_stages:
        return all_stages[target], []
    family = family_of(target) if "/" in target else target
    for stage in all_stages.values():
        if family in stage.families:
            return stage, [target]
    raise UsageError(
        f"{target!r} is neither a stage nor an artifact of one",
        fix=f"stages: {', '.join(sorted(all_stages)) or '(none)'}",
    )


def regenerate(  # noqa: PLR0913 - the regenerate command's options, each keyword-only
    root: Path,
    store: Store,
    target: str,
    *,
    scratch: Path | None = None,
    accept: bool = False,
    fetch: bool = False,
    python: str | None = None,
    offline: bool = False,
    remotes: Remotes = lambda: (),
    log: Callable[[str], None] = lambda _m: None,
) -> Report:
    """Run ``target``'s stage and compare every output with its record.

    With ``fetch`` or ``accept``, a record whose registered bytes the store lacks and that this
    machine does not remake bit for bit (another CPU's kernels) has them pulled from ``remotes()``
    (the team's copy, verified against the record like every pull) and is compared again, so a
    candidate within its tolerance passes and the store holds the record; with no remote that
    has them it stays ``unavailable``."""
    started = time.perf_counter()
    registry = registry_mod.load(root)
    stage, only = stage_for(root, target)
    scratch = _fresh_folder(scratch or Path(tempfile.mkdtemp(prefix=f"regenerate-{stage.name}-")))
    input_names = _expand(registry, stage.inputs)
    if fetch or accept:
        restore(root, store, input_names, python=python, offline=offline, remotes=remotes, log=log)
    inputs = [_resolve_input(store, registry, name) for name in input_names]
    out = scratch / "candidates"
    _run_generator(
        root,
        store,
        stage,
        _generator_args(stage, inputs, scratch),
        out,
        python=python,
        offline=offline,
        log=log,
    )
    outputs = _selected(read_outputs(out, stage=stage.name), only, stage)
    environment = protocol.load(out, protocol.ENVIRONMENT_FILE, stage=stage.name)
    comparisons = [_compare_output(store, registry, stage, o, scratch / "inspect") for o in outputs]
    if (fetch or accept) and not offline:
        pulled = _registered_from(remotes, store, registry, comparisons, log)
        comparisons = [
            _compare_output(store, registry, stage, o, scratch / "inspect")
            if o.name in pulled
            else c
            for o, c in zip(outputs, comparisons, strict=True)
        ]
    if not only:
        comparisons += _no_longer_produced(registry, stage, outputs)
    fetched: list[str] = []
    accepted: list[str] = []
    if fetch or accept:
        with store.writing():  # from the first candidate put until the records are written
            fetched = accepting.put_identical(store, outputs, comparisons)
            if accept:
                input_digests = {n: d for n, _p, d in inputs}
                accepted = accepting.accept_outputs(
                    store,
                    registry,
                    stage,
                    outputs,
                    comparisons,
                    environment=envs.defining(environment),
                    input_digests=input_digests,
                )
    return Report(
        stage.name,
        scratch,
        environment,
        tuple(comparisons),
        tuple(accepted),
        tuple(fetched),
        time.perf_counter() - started,
        read_details(out),
    )


@dataclass(frozen=True)
class Restoration:
    """What :func:`restore` did: the stages it ran and the records still missing after them."""

    stages: tuple[str, ...]
    restored: tuple[str, ...]
    still_missing: tuple[str, ...]


def restore(
    root: Path,
    store: Store,
    names: Iterable[str],
    *,
    python: str | None = None,
    offline: bool = False,
    remotes: Remotes = lambda: (),
    log: Callable[[str], None] = lambda _m: None,
) -> Restoration:
    """Bring the generator-made records among ``names`` that the store lacks back into it, by
    running their stages with ``fetch`` (producers of missing inputs first).

    A record comes back only with its own bytes: made bit-identically here, or pulled from
    ``remotes()`` when this machine makes other bytes; one that no remote has stays missing and is
    listed, never replaced by other bytes.
    """
    names = list(names)
    registry = registry_mod.load(root)
    todo = restore_mod.plan(registry, stages_mod.load(root), Verifier(store), names)
    for stage in todo.stages:
        log(f"restoring {stage}: its generator-made records are not in the store")
        regenerate(
            root,
            store,
            stage,
            fetch=True,
            python=python,
            offline=offline,
            remotes=remotes,
            log=log,
        )
    verifier = Verifier(store)
    wanted = todo.names
    back = [n for n in wanted if verifier.verify(registry.get(n)).ok]
    return Restoration(todo.stages, tuple(back), tuple(n for n in wanted if n not in set(back)))


def _fresh_folder(path: Path) -> Path:
    """``path`` created empty (whatever was there is removed)."""
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def _generator_args(
    stage: stages_mod.Stage, inputs: list[tuple[str, Path, Digest]], scratch: Path
) -> list[str]:
    """The generator's command line: the verified inputs (as a file it reads) and the stage's
    arguments."""
    inputs_file = scratch / protocol.INPUTS_FILE
    inputs_file.write_text(
        json.dumps(
            [{"name": n, "path": str(p), "digest": d.text, "size": d.size} for n, p, d in inputs],
            indent=2,
        )
        + "\n"
    )
    args = ["--inputs", str(inputs_file)]
    for key, value in sorted(stage.args.items()):
        args += [f"--{key.replace('_', '-')}", str(value)]
    return args


def _run_generator(
    root: Path,
    store: Store,
    stage: stages_mod.Stage,
    args: list[str],
    out: Path,
    *,
    python: str | None,
    offline: bool,
    log: Callable[[str], None],
) -> None:
    """Run the stage's generator into ``out``: in ``python`` if given, else in its pinned
    environment."""
    interpreter = python or str(envs.ensure(stage.env, store, offline=offline, log=log))
    log(
        f"running {stage.generator} in {'this interpreter' if python else 'pinned environment'}"
        f" ({', '.join(stage.env.requirements)})"
    )
    envs.run_generator(
        interpreter, root / stage.generator, out, stage.env, stage=stage.name, args=args
    )


def _selected(outputs: list[Output], only: list[str], stage: stages_mod.Stage) -> list[Output]:
    """The outputs matching the patterns ``only`` (all of them without patterns)."""
    if not only:
        return outputs
    outputs = [o for o in outputs if any(fnmatch.fnmatchcase(o.name, p) for p in only)]
    if not outputs:
        raise UnknownArtifactError(only[0], f"stage {stage.name!r} produces no such artifact")
    return outputs


def _compare_output(
    store: Store, registry: Registry, stage: stages_mod.Stage, o: Output, inspect_dir: Path
) -> ArtifactComparison:
    """How one candidate compares with its record; ``new`` when it has none."""
    reference, record = _reference(store, registry, o.name)
    if reference is None:
        cand = trees.hash_folder(o.path)[0].digest if o.path.is_dir() else digests.of_file(o.path)
        return ArtifactComparison(o.name, o.kind, Verdict.NEW, cand, None)
    tolerance = (record.tolerance if record else None) or o.annotations.tolerance or stage.tolerance
    reference = drift.with_oracle(reference, tolerance, Fixtures(store, registry).arrays)
    cmp = compare(o.name, o.kind, o.path, reference, tolerance, inspect_dir=inspect_dir)
    if o.kind is Kind.VIDEO:
        frames_tol = tolerance.for_array("frames") if tolerance else video.DEFAULT_TOLERANCE
        recorded = record.metadata if record else None
        return compare_frames(cmp, recorded, o.annotations.metadata, frames_tol)
    return cmp


def _registered_from(
    remotes: Remotes,
    store: Store,
    registry: Registry,
    comparisons: list[ArtifactComparison],
    log: Callable[[str], None],
) -> set[str]:
    """The names among ``comparisons`` not remade bit for bit here whose registered bytes the
    store lacked and now holds, pulled from the first remote that has them all (each object
    hashed while written and published only if it is its record's)."""
    verifier = Verifier(store)
    wanted = [
        c.name
        for c in comparisons
        if c.verdict in _NOT_REMADE and not verifier.verify(registry.get(c.name)).ok
    ]
    opened = remotes() if wanted else ()
    if not opened:
        return set()
    mirrors = Mirrors(store, tuple(opened))
    pulled: set[str] = set()
    with store.writing():
        for name in wanted:
            remote, tried, _failed = mirrors.pull(
                registry.get(name),
                verifier.lacks,
                lambda _n: None,
            )
            if remote is not None:
                pulled.add(name)
            else:
                log(f"{name}: its registered bytes are on no remote ({'; '.join(tried)})")
    if pulled:
        log(f"{len(pulled)} records this machine does not remake bit for bit: pulled from remotes")
    return pulled


# A candidate that is not its record's bytes: the registered ones come from a remote, if any.
_NOT_REMADE = (Verdict.WITHIN, Verdict.DRIFT, Verdict.UNAVAILABLE)


def _no_longer_produced(
    registry: Registry, stage: stages_mod.Stage, outputs: list[Output]
) -> list[ArtifactComparison]:
    """A ``missing`` comparison for every record of the stage's families it did not produce."""
    produced = {o.name for o in outputs}
    missing = []
    for fam in {family_of(o.name) for o in outputs} | {stage.family}:
        f = registry.families.get(fam)
        for name, rec in f.records.items() if f else ():
            if name not in produced:
                missing.append(
                    ArtifactComparison(
                        name,
                        rec.kind,
                        Verdict.MISSING,
                        None,
                        rec.digest,
                        reason=f"registered, but stage {stage.name!r} no longer produces it",
                    )
                )
    return missing


def _expand(registry: Registry, patterns: Iterable[str]) -> list[str]:
    names: list[str] = []
    for p in patterns:
        names += registry.select([p])  # an input without a record is refused here
    return sorted(set(names))


def _resolve_input(store: Store, registry: Registry, name: str) -> tuple[str, Path, Digest]:
    """A verified input: the store's object (or tree checkout); never unverified bytes."""
    record = registry.get(name)
    fixtures = Fixtures(store, registry)
    path = fixtures.tree(name) if record.is_tree else fixtures.path(name)
    return name, path, record.object


def _reference(
    store: Store, registry: Registry, name: str
) -> tuple[Reference | None, Record | None]:
    """The registered side of a comparison; its bytes are used only after they verify."""
    try:
        record = registry.get(name)
    except UnknownArtifactError:
        return None, None
    verifier = Verifier(store)

    def locate(d: Digest) -> Path | None:
        return None if verifier.lacks(d) else store.object_path(d)

    return Reference("registry", record.object, record.tree, locate), record
