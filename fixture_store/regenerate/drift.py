"""Compare a regenerated candidate with its reference: bit-identical, within tolerance, or drift.

Bytes decide first (equal digests are bit-identical and need no parsing). Differing members are
read as arrays where their format allows (``.npy``/``.npz`` with numpy, ONNX ``.pb`` tensors with
``onnx.numpy_helper``, ``.safetensors`` with the safe reader, its ``__metadata__`` compared
exactly) and compared under the record's tolerance with max/mean abs/rel errors and ULPs per
array (an array's ``per_array`` override is found by ``member:name``, then by its name in the
file, its NPY name or its ONNX tensor name, then by the member path); anything else (an
``.onnx`` model, a tar archive) is compared as bytes and differing bytes are drift.
"""

from __future__ import annotations

import dataclasses
import io
import json
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np

from fixture_store import limits
from fixture_store._extras import require
from fixture_store.errors import UsageError
from fixture_store.objects import digests, trees
from fixture_store.objects.digests import Digest
from fixture_store.parity import oracle as oracle_mod
from fixture_store.parity import parts
from fixture_store.parity.arrays import ArrayComparison, Outcome, compare_many
from fixture_store.parity.ordered import first_divergence
from fixture_store.registry import Tolerance


class Verdict(StrEnum):
    IDENTICAL = "bit-identical"
    WITHIN = "within-tolerance"
    DRIFT = "drift"
    NEW = "new"
    MISSING = "missing"
    UNAVAILABLE = "unavailable"

    @property
    def ok(self) -> bool:
        return self in (Verdict.IDENTICAL, Verdict.WITHIN, Verdict.NEW)

    @property
    def passes(self) -> bool:
        """Bit-identical or within tolerance: which of the two a machine gets is its kernels'
        doing (another CPU rounds otherwise), so a tracked report says only :data:`PASS`."""
        return self in (Verdict.IDENTICAL, Verdict.WITHIN)

    @property
    def tracked(self) -> str:
        """What a tracked file says of this verdict: :data:`PASS` for both passing verdicts,
        every other verdict as itself (the same on every machine that passes)."""
        return PASS if self.passes else self.value

    @staticmethod
    def tracked_values() -> tuple[str, ...]:
        """The verdicts a tracked file can hold, in order."""
        return (PASS, *(v.value for v in Verdict if not v.passes))


# The tracked outcome of a file or artifact that is bit-identical or within its tolerance.
PASS = "pass"


def _with_verdict(value: Any, part: parts.Part, **how: Any) -> dict[str, Any]:
    """``value``'s fields of ``part`` (:func:`parts.fields_json` with ``how``), its verdict
    exact except in a tracked file (:attr:`Verdict.tracked`); the run part holds the exact one,
    a run number (see :attr:`Verdict.passes`)."""
    verdict: Verdict = value.verdict
    tracked = part is parts.Part.TRACKED
    doc = parts.fields_json(
        value,
        part,
        convert={"verdict": lambda v: v.tracked if tracked else v.value},
        **how,
    )
    if part is parts.Part.RUN:
        doc["verdict"] = verdict.value
    return doc


@dataclass(frozen=True)
class Reference:
    """What a candidate is compared with: a digest, a manifest for trees, and where bytes are."""

    label: str
    digest: Digest
    members: trees.Tree | None
    locate: Callable[[Digest], Path | None]
    # The arrays of the tolerance's oracle record, read verified (see :func:`with_oracle`).
    oracle: Mapping[str, Any] | None = None


def with_oracle(
    reference: Reference, tolerance: Tolerance | None, read: Callable[[str], Mapping[str, Any]]
) -> Reference:
    """``reference`` with the arrays of its tolerance's oracle record (``read`` reads a record's
    verified arrays), when the tolerance names an oracle."""
    if tolerance is None or tolerance.oracle is None:
        return reference
    return dataclasses.replace(reference, oracle=read(tolerance.oracle.record))


@dataclass(frozen=True)
class MemberComparison:
    """How one file of a candidate compares. Its verdict is tracked; its arrays' errors, its
    reason (a within-tolerance file's "arrays are equal" or its error) and where its bytes sit
    are run numbers (:mod:`fixture_store.parity.parts`)."""

    path: str = field(metadata=parts.KEY)
    verdict: Verdict
    arrays: tuple[ArrayComparison, ...] = field(default=(), metadata=parts.RUN)
    reason: str = field(default="", metadata=parts.RUN)
    candidate: Path | None = field(default=None, metadata=parts.RUN)
    registered: Path | None = field(default=None, metadata=parts.RUN)

    def to_json(self, part: parts.Part = parts.Part.ALL) -> dict[str, Any]:
        return _with_verdict(self, part)

    @property
    def max_abs(self) -> float:
        return max((a.max_abs for a in self.arrays), default=0.0)

    @property
    def max_rel(self) -> float:
        return max((a.max_rel for a in self.arrays), default=0.0)

    @property
    def max_ulp(self) -> float:
        return max((a.max_ulp for a in self.arrays), default=0.0)


@dataclass(frozen=True)
class ArtifactComparison:
    """How one candidate compares with its record. A within-tolerance candidate's digest is a
    run number: another machine's kernels make other bytes within the same tolerance."""

    name: str = field(metadata=parts.KEY)
    kind: str
    verdict: Verdict
    candidate_digest: Digest | None = field(default=None, metadata=parts.RUN)
    registered_digest: Digest | None = None
    reference: str = ""
    members: tuple[MemberComparison, ...] = ()
    reason: str = ""
    files: int = 1

    @property
    def differing(self) -> tuple[MemberComparison, ...]:
        return tuple(m for m in self.members if m.verdict is not Verdict.IDENTICAL)

    def to_json(self, part: parts.Part = parts.Part.ALL) -> dict[str, Any]:
        """Its members that are not bit-identical; a tracked file lists only those that do not
        pass, and says ``pass`` for bit-identical and within tolerance alike."""
        doc = _with_verdict(self, part, skip=("members", "files"))
        shown = (
            [m for m in self.members if not m.verdict.passes]
            if part is parts.Part.TRACKED
            else self.differing
        )
        doc["members"] = [m.to_json(part) for m in shown]
        return doc


def _pb_arrays(data: bytes) -> dict[str, Any] | None:
    """The arrays of an ONNX TensorProto / SequenceProto / OptionalProto, or None if not one."""
    require("onnx", for_what="comparing regenerated ONNX tensors", modules=("onnx",))
    import onnx
    from onnx import numpy_helper

    tensor = onnx.TensorProto()
    try:
        tensor.ParseFromString(data)
    except Exception:
        tensor.Clear()
    if tensor.data_type != 0:
        return {"": numpy_helper.to_array(tensor)}
    seq = onnx.SequenceProto()
    try:
        seq.ParseFromString(data)
    except Exception:
        return None
    if seq.elem_type == onnx.SequenceProto.TENSOR:
        return {f"[{i}]": numpy_helper.to_array(t) for i, t in enumerate(seq.tensor_values)}
    return None


def _npy_arrays(data: bytes, suffix: str) -> dict[str, Any] | None:
    try:
        if suffix == ".npy":
            return {"": np.load(io.BytesIO(data), allow_pickle=False)}
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            return {k: npz[k] for k in sorted(npz.files)}
    except (ValueError, OSError, EOFError):
        return None


def _safetensors_arrays(data: bytes, _suffix: str) -> dict[str, Any] | None:
    """The tensors of a safetensors file, its header checked first under the largest profile
    (the bytes are in memory already), plus its ``__metadata__`` as one string compared exactly:
    weights equal but metadata changed is drift, not a serialisation detail."""
    from fixture_store.errors import UnsafeArrayError
    from fixture_store.readers import safetensors

    try:
        header = safetensors.parse_header(io.BytesIO(data), len(data), limits.GIB_1, "candidate")
    except UnsafeArrayError:
        return None
    arrays: dict[str, Any] = {
        name: safetensors.tensor_at(data, header, name, artifact="candidate")
        for name in header.tensors
    }
    arrays[safetensors.METADATA_KEY] = np.array(json.dumps(dict(header.metadata), sort_keys=True))
    return arrays


READERS: Mapping[str, Callable[[bytes, str], dict[str, Any] | None]] = {
    ".pb": lambda data, _suffix: _pb_arrays(data),
    ".npy": _npy_arrays,
    ".npz": _npy_arrays,
    ".safetensors": _safetensors_arrays,
}


def _divergence(
    tolerance: Tolerance, arrays: Mapping[str, str], results: tuple[ArrayComparison, ...]
) -> str:
    """An ordered record's first divergent intermediate, said before the arrays' errors
    (``""`` for a record with no intermediates); ``arrays`` maps each result to its array."""
    steps = tolerance.intermediates
    if steps is None:
        return ""
    named = [replace(r, name=arrays.get(r.name, r.name)) for r in results]
    return " ".join(first_divergence(steps, named, ()).lines()) + "; "


def _array_name(member: str, key: str, data: bytes) -> str:
    """The name a record's ``per_array`` uses for an array: its name in an NPZ, an NPY's file
    name without ``.npy`` (as its arrays manifest names it), an ONNX tensor's own name (the
    output it is)."""
    if key:
        return key
    if member.lower().endswith(".pb"):
        require("onnx", for_what="comparing regenerated ONNX tensors", modules=("onnx",))
        import onnx

        tensor = onnx.TensorProto()
        tensor.ParseFromString(data)
        return str(tensor.name)
    return Path(member).name.removesuffix(".npy")


def compare_file(
    member: str,
    candidate: Path,
    registered: Path,
    tolerance: Tolerance | None,
    oracle: Mapping[str, Any] | None = None,
) -> MemberComparison:
    """Compare two files that differ in bytes: as arrays if their format allows, else bytes."""
    suffix = Path(member).suffix.lower()
    reader = READERS.get(suffix)
    if reader is None:
        return MemberComparison(
            member,
            Verdict.DRIFT,
            reason=f"bytes differ ({suffix or 'this file'} compares as bytes)",
            candidate=candidate,
            registered=registered,
        )
    cand_bytes, reg_bytes = candidate.read_bytes(), registered.read_bytes()
    cand, reg = reader(cand_bytes, suffix), reader(reg_bytes, suffix)
    if cand is None or reg is None:
        return MemberComparison(
            member,
            Verdict.DRIFT,
            reason=f"bytes differ and do not parse as {suffix} arrays",
            candidate=candidate,
            registered=registered,
        )
    if set(cand) != set(reg):
        return MemberComparison(
            member,
            Verdict.DRIFT,
            reason=f"arrays {sorted(cand)} where {sorted(reg)} are registered",
            candidate=candidate,
            registered=registered,
        )
    tolerance = tolerance or Tolerance()  # none written: the built-in defaults
    names = {key: member + (f":{key}" if key else "") for key in sorted(reg)}
    results = compare_many(
        (
            aname,
            reg[key],
            cand[key],
            tolerance.for_array(
                aname, _array_name(member, key, reg_bytes), member, dtype=str(reg[key].dtype)
            ),
        )
        for key, aname in names.items()
    )
    outcomes = {r.outcome for r in results}
    beyond = _beyond_oracle(tolerance, oracle, reg, cand)
    if Outcome.DRIFT in outcomes or beyond:
        verdict = Verdict.DRIFT
        reason = "; ".join(
            [
                f"{r.name.removeprefix(member).lstrip(':') or 'values'}: {r.reason}"
                for r in results
                if not r.ok
            ]
            + beyond
        )
        arrays = {aname: _array_name(member, key, reg_bytes) for key, aname in names.items()}
        reason = _divergence(tolerance, arrays, results) + reason
    elif Outcome.WITHIN in outcomes:
        verdict, reason = Verdict.WITHIN, ""
    else:
        # Same arrays, different bytes: serialisation differs (names, raw_data vs fields).
        verdict, reason = Verdict.WITHIN, "bytes differ, arrays are equal"
    return MemberComparison(member, verdict, tuple(results), reason, candidate, registered)


def _beyond_oracle(
    tolerance: Tolerance,
    oracle: Mapping[str, Any] | None,
    registered: Mapping[str, Any],
    candidate: Mapping[str, Any],
) -> list[str]:
    """The oracle judgements the candidate fails (both errors, factor and floor), if any."""
    if tolerance.oracle is None:
        return []
    if oracle is None:  # never judged without it: a pass would skip the oracle silently
        raise UsageError(
            f"the tolerance names the oracle {tolerance.oracle.record}, whose arrays were not read",
            fix="compare through regeneration, which reads the oracle's verified arrays",
        )
    judged = oracle_mod.judge(tolerance.oracle, oracle, registered, candidate)
    return [f"oracle: {j.describe()}" for j in judged if not j.ok]


def compare(
    name: str,
    kind: str,
    candidate: Path,
    reference: Reference,
    tolerance: Tolerance | None,
    *,
    inspect_dir: Path,
) -> ArtifactComparison:
    """Compare one candidate (file or folder) with its reference."""
    if candidate.is_dir():
        tree, paths = trees.hash_folder(candidate)
        cand_digest = tree.digest
        cand_members: Mapping[str, Digest] = tree.members
    else:
        cand_digest = digests.of_file(candidate)
        paths = {"": candidate}
        cand_members = {"": cand_digest}
    ref_members: Mapping[str, Digest] = (
        reference.members.members if reference.members is not None else {"": reference.digest}
    )
    common = dict(
        reference=reference.label,
        candidate_digest=cand_digest,
        registered_digest=reference.digest,
        files=len(cand_members),
    )
    if cand_digest == reference.digest:
        return ArtifactComparison(name, kind, Verdict.IDENTICAL, **common)  # type: ignore[arg-type]
    results: list[MemberComparison] = []
    for member in sorted(set(cand_members) | set(ref_members)):
        label = member or Path(name).name
        if member not in ref_members:
            results.append(
                MemberComparison(
                    label, Verdict.DRIFT, reason="not in the reference", candidate=paths[member]
                )
            )
            continue
        if member not in cand_members:
            results.append(
                MemberComparison(label, Verdict.DRIFT, reason="in the reference, not regenerated")
            )
            continue
        if cand_members[member] == ref_members[member]:
            results.append(MemberComparison(label, Verdict.IDENTICAL))
            continue
        registered = reference.locate(ref_members[member])
        if registered is None:
            results.append(
                MemberComparison(
                    label,
                    Verdict.UNAVAILABLE,
                    candidate=paths[member],
                    reason=f"registered bytes {ref_members[member].short}… are not in the store",
                )
            )
            continue
        kept = _keep(inspect_dir / name / label, paths[member], registered)
        cmp = compare_file(label, kept[0], kept[1], tolerance, reference.oracle)
        if cmp.verdict is not Verdict.DRIFT:
            shutil.rmtree(inspect_dir / name / label, ignore_errors=True)
            cmp = MemberComparison(
                cmp.path, cmp.verdict, cmp.arrays, cmp.reason, paths[member], registered
            )
        results.append(cmp)
    verdicts = {m.verdict for m in results}
    for worst in (Verdict.UNAVAILABLE, Verdict.DRIFT, Verdict.WITHIN):
        if worst in verdicts:
            verdict = worst
            break
    else:
        verdict = Verdict.WITHIN  # only the manifest differs, e.g. a renamed-equal layout
    reason = "; ".join(
        f"{m.path}: {m.reason}"
        for m in results
        if m.verdict in (Verdict.DRIFT, Verdict.UNAVAILABLE)
    )
    return ArtifactComparison(name, kind, verdict, members=tuple(results), reason=reason, **common)  # type: ignore[arg-type]


def _keep(folder: Path, candidate: Path, registered: Path) -> tuple[Path, Path]:
    """Copies of both sides, side by side, kept when the comparison is drift."""
    folder.mkdir(parents=True, exist_ok=True)
    cand = folder / "candidate"
    reg = folder / "registered"
    shutil.copyfile(candidate, cand)
    shutil.copyfile(registered, reg)
    return cand, reg
