"""What a regeneration publishes: the bit-identical candidates put into the store (how a
generated artifact is fetched) and, with ``accept``, every candidate put and its record written,
in one registry transaction refused if a record compared against changed meanwhile. The caller
holds the store's writer lock from the first put until the records are written (see
:func:`fixture_store.regenerate.run.regenerate`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fixture_store import ingest, limits
from fixture_store import registry as registry_mod
from fixture_store.errors import UnknownArtifactError, UsageError
from fixture_store.objects import trees
from fixture_store.objects.digests import Digest
from fixture_store.objects.store import Store
from fixture_store.readers import content
from fixture_store.regenerate import stages as stages_mod
from fixture_store.regenerate.drift import ArtifactComparison, Verdict
from fixture_store.regenerate.outputs import Output
from fixture_store.registry import (
    Annotations,
    GeneratorSource,
    Kind,
    Record,
    Registry,
    family_of,
)
from fixture_store.registry.frozen import thaw

if TYPE_CHECKING:
    from fixture_store.readers.range_tap import RangeDigests


def put_identical(
    store: Store, outputs: list[Output], comparisons: list[ArtifactComparison]
) -> list[str]:
    """Put every bit-identical candidate into the store: how a generated artifact is fetched."""
    by_name = {o.name: o for o in outputs}
    fetched = []
    for c in comparisons:
        if c.verdict is Verdict.IDENTICAL:
            _put(store, by_name[c.name])
            fetched.append(c.name)
    return fetched


def _put(store: Store, o: Output, pending: RangeDigests | None = None) -> Digest:
    """Store an output; ``pending`` range digests are taken in the read that hashes it."""
    if o.path.is_dir():
        return ingest.ingest_folder(store, o.path).digest
    tap = pending.update if pending else None
    return store.write_files([o.path], taps=[tap])[0].digest


def accept_outputs(
    store: Store,
    registry: Registry,
    stage: stages_mod.Stage,
    outputs: list[Output],
    comparisons: list[ArtifactComparison],
    *,
    environment: Mapping[str, Any],
    input_digests: Mapping[str, Digest],
) -> list[str]:
    by_name = {o.name: o for o in outputs}
    verdicts = {c.name: c.verdict for c in comparisons}
    changed: dict[str, Record] = {}
    compared: dict[str, Record | None] = {}
    produced: dict[str, Digest] = {}
    from fixture_store.readers.range_tap import RangeDigests  # numpy: only when accepting

    pending = {o.name: RangeDigests(o.name) for o in outputs}
    described = {o.name: _describe(registry, o, pending[o.name]) for o in outputs}  # hostile: no
    for o in outputs:
        produced[o.name] = _put(store, o, pending[o.name])
    described = {n: _filled(d, pending[n]) for n, d in described.items()}
    source = GeneratorSource(stage.name, stage.generator, dict(environment), stage.params_json())
    for name, o in by_name.items():
        redescribed = _redescribed(registry, o, produced[name])
        if redescribed is not None:
            changed[name], compared[name] = redescribed
            continue
        lineage = _lineage(o, input_digests, produced)
        if verdicts[name] is Verdict.IDENTICAL:
            registered = registry.get(name)
            updated = _identical_updated(
                registered, described[name], o.annotations, lineage=lineage, source=source
            )
            if updated is not None:
                changed[name], compared[name] = updated, registered
            continue
        digest = produced[name]
        about = described[name]
        if o.path.is_dir():
            members: trees.Tree | None = trees.hash_folder(o.path)[0]
            media = None
        else:
            members, media = about.members, about.media_type or ingest.media_type_by_name(o.path)
        record = Record(
            name,
            o.kind,
            source,
            digest,
            media_type=media,
            members=members,
            arrays=about.arrays,
            header=about.header,
        )
        try:
            old: Record | None = registry.get(name)
        except UnknownArtifactError:
            old = None
        compared[name] = old
        if old is not None:
            record = _reviewed_from(old, record)
        record = o.annotations.apply(record)
        if lineage:
            record = dataclasses.replace(record, lineage=lineage)
        changed[name] = registry_mod.check_record(record, file=f"provenance/{family_of(name)}.json")
    _write_accepted(registry, changed, compared)
    return sorted(changed)


def _lineage(
    o: Output, input_digests: Mapping[str, Digest], produced: Mapping[str, Digest]
) -> tuple[str, ...]:
    """The digests of the parents an output names: inputs or other outputs of the stage."""
    lineage = []
    for parent in o.parents:
        d = input_digests.get(parent) or produced.get(parent)
        if d is None:
            raise UsageError(
                f"{o.name} names parent {parent!r}, which is neither an input "
                "nor an output of the stage"
            )
        lineage.append(d.text)
    return tuple(lineage)


def _redescribed(registry: Registry, o: Output, digest: Digest) -> tuple[Record, Record] | None:
    """A video whose container is its record's but whose decoded description (its metadata,
    which the generator writes) differs, say under a new decoder pin: the record with the new
    description, source and identity kept, and the record it replaces."""
    if o.kind is not Kind.VIDEO or o.annotations.metadata is None:
        return None
    try:
        old = registry.get(o.name)
    except UnknownArtifactError:
        return None
    if old.object != digest or thaw(old.metadata) == thaw(o.annotations.metadata):
        return None
    new = dataclasses.replace(old, metadata=o.annotations.metadata)
    return registry_mod.check_record(new, file=f"provenance/{family_of(o.name)}.json"), old


def _filled(described: content.Described, pending: RangeDigests) -> content.Described:
    if not pending or described.arrays is None:
        return described
    return dataclasses.replace(described, arrays=pending.fill(described.arrays))


def _describe(registry: Registry, o: Output, pending: RangeDigests) -> content.Described:
    """The content manifest of a file output (a folder's members are objects of their own),
    read under the profile its record will name; a hostile output is refused. The digests of
    its array ranges are left to ``pending``, taken as the output is stored."""
    if o.path.is_dir():
        return content.PLAIN
    try:
        registered = registry.get(o.name).profile
    except UnknownArtifactError:
        registered = None
    profile = limits.profile(o.annotations.profile or registered)
    return content.describe(
        o.path,
        kind=o.kind,
        array_name=o.path.name.removesuffix(".npy"),
        profile=profile,
        artifact=o.name,
        pending=pending,
    )


def _identical_updated(
    record: Record,
    described: content.Described,
    declared: Annotations,
    *,
    lineage: tuple[str, ...],
    source: GeneratorSource,
) -> Record | None:
    """The registered record of bytes regenerated bit-identical, with the content manifest it
    lacked and what the generator declares of them now (a tolerance, metadata, ...: accepting
    is how such a change reaches the registry); ``None`` when that changes nothing. Bytes now
    derived from other parents (a stage that reads a new upstream, making the same bytes) get
    the new lineage and the source of the run that derived them: the record says how they are
    made now."""
    updated = declared.apply(ingest.with_content(record, described))
    if lineage and lineage != record.lineage:
        updated = dataclasses.replace(updated, lineage=lineage, source=source)
    if updated == record:
        return None
    return registry_mod.check_record(updated, file=f"provenance/{record.family}.json")


def _write_accepted(
    registry: Registry, changed: Mapping[str, Record], compared: Mapping[str, Record | None]
) -> None:
    """Write the accepted records in one registry transaction; refuse them all if a record
    compared against changed meanwhile (another writer rewrote it): the verdict no longer says
    how the two differ."""
    with registry_mod.transaction(registry.root) as tx:
        rewritten: dict[str, dict[str, Record]] = {}
        for name, record in sorted(changed.items()):
            family = family_of(name)
            if family not in rewritten:
                existing = tx.family(family, known=registry.families.get(family))
                rewritten[family] = dict(existing.records) if existing else {}
            if rewritten[family].get(name) != compared[name]:
                raise UsageError(
                    f"{name} changed in provenance/{family}.json while it was being "
                    "regenerated; nothing was accepted",
                    fix="run the regeneration again, to compare against the record as it is now",
                )
            rewritten[family][name] = record
        for family, records in rewritten.items():
            tx.write(family, records.values())


def _reviewed_from(old: Record, new: Record) -> Record:
    """``new`` with what the registered record says beyond its bytes (lineage, arrays,
    tolerance, license, profile, description, metadata, a declared gap, upstreams, seed, input
    shape, command); identity, source and
    manifest are the candidate's (its arrays too when the registered record lists none)."""
    return dataclasses.replace(
        new,
        lineage=old.lineage,
        arrays=old.arrays if old.arrays is not None else new.arrays,
        header=old.header if old.arrays is not None else new.header,  # the arrays' own
        # ... written in the form the registered record has: an accept is no migration.
        arrays_as_objects=old.arrays_as_objects if old.arrays is not None else False,
        tolerance=old.tolerance,
        license=old.license,
        profile=old.profile,
        description=old.description,
        metadata=old.metadata,
        gap=old.gap,
        upstream=old.upstream,
        seed=old.seed,
        input_shape=old.input_shape,
        command=old.command,
    )
