"""The structures report: hostile JSON, hostile pack index entries and hostile server answers,
over many rounds, each round with a fresh random attack (issue 34, classes 5-7).

Not a timed benchmark: per surface it prints the rounds run and what must never happen
(objects lost: an honest object a pull did not land; tracebacks; other faults: an exit other
than the expected one, a failure blamed on another object than the damaged one, a hostile
answer taken as valid); every count must be zero, and the exit status says whether they were.

- ``bounded JSON``: a document nested 1,000 to 200,000 deep, or a line of 1 to 4 MiB, planted
  where a command reads JSON: the run log (``expectations``), a folder remote's pack index
  (``pull``), a registry family file (``verify``), a JSON manifest (``import``), a certificate
  (``verify-attestation``); each command must end with its one-line answer, never a
  ``RecursionError``, and a pull must still land every object;
- ``pack entries``: one entry of a folder remote's pack index shifted onto its neighbour, sent
  past its pack's end, or given a value of the wrong type; ``pull`` must land every other
  object and fail only the damaged one;
- ``Hub answers``: random refs (judged as ``git check-ref-format`` judges them), ``Retry-After``
  values, commit ids and Hub source paths through the checks at the door: nothing invalid is
  taken as valid.

    uv run python -m bench.hostile_structures                 # 10 rounds of each
    uv run python -m bench.hostile_structures --rounds 50
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import string
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from click.testing import CliRunner, Result

from fixture_store.cli import main as cli
from fixture_store.errors import FixtureStoreError
from fixture_store.objects import digests
from fixture_store.registry import HubRepo, parse_record
from fixture_store.registry.pins import ref_problem
from fixture_store.remotes.packs import INDEXES, index_key
from fixture_store.sources import answers

COUNTS = ("objects_lost", "tracebacks", "other_faults")
OBJECTS = 6


@contextmanager
def _project() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="fixture-store-structures-"))
    try:
        project = root / "project"
        (project / "provenance").mkdir(parents=True)
        (project / "data").mkdir()
        for i in range(OBJECTS):
            (project / "data" / f"o{i}.bin").write_bytes(f"object {i}\n".encode() * (10 + i))
        yield project
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _cli(project: Path, *args: str) -> Result:
    env = {
        "FIXTURE_STORE_DIR": str(project.parent / "store"),
        "FIXTURE_STORE_CONFIG": str(project.parent / "user.toml"),
        "COLUMNS": "200",
    }
    cwd = Path.cwd()
    os.chdir(project)
    try:
        return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=True)
    finally:
        os.chdir(cwd)


def _traceback(result: Result) -> bool:
    return "Traceback" in result.output or not isinstance(result.exception, SystemExit | None)


def _added(project: Path) -> None:
    for i in range(OBJECTS):
        _cli(project, "add", f"data/o{i}.bin", "--name", f"fam/o{i}", "--kind", "fixture")


def _pushed(project: Path) -> Path:
    _added(project)
    remote = project.parent / "remote"
    _cli(project, "push", "--all", "--remote", str(remote))
    return remote


def _pulled(project: Path, remote: Path) -> tuple[Result, set[str]]:
    """``pull --all`` into a fresh store; the records that verify there after."""
    shutil.rmtree(project.parent / "store")
    result = _cli(project, "pull", "--all", "--remote", str(remote))
    verified = _cli(project, "verify", "--json")
    rows = json.loads(verified.stdout or "{}").get("results", [])
    return result, {r["name"] for r in rows if r.get("status") == "verified"}


# -- bounded JSON ----------------------------------------------------------------------------
def _hostile_json(rng: random.Random) -> bytes:
    kind = rng.choice(["array", "object", "mixed", "long"])
    depth = rng.choice([1_000, 10_000, 100_000, 200_000])
    if kind == "array":
        return b"[" * depth + b"]" * depth
    if kind == "object":
        return b'{"a":' * depth + b"1" + b"}" * depth
    if kind == "mixed":
        return b'[{"x":' * (depth // 2) + b"0" + b"}]" * (depth // 2)
    return b'{"a": "' + b"x" * rng.randint(1 << 20, 4 << 20) + b'"}'


def _json_run_log(project: Path, data: bytes) -> Counter[str]:
    state = project.parent / "store" / "state"
    state.mkdir(parents=True, exist_ok=True)
    (state / "parity-runs.jsonl").write_bytes(data + b"\n")
    result = _cli(project, "expectations", "--json")
    return Counter(tracebacks=_traceback(result), other_faults=result.exit_code != 0)


def _json_pack_index(project: Path, data: bytes) -> Counter[str]:
    remote = _pushed(project)
    (remote / index_key(digests.of_bytes(data).hex)).write_bytes(data)
    result, verified = _pulled(project, remote)
    return Counter(
        objects_lost=OBJECTS - len(verified),
        tracebacks=_traceback(result),
        other_faults=result.exit_code != 0,
    )


def _json_registry(project: Path, data: bytes) -> Counter[str]:
    (project / "provenance" / "fam.json").write_bytes(data)
    result = _cli(project, "verify")
    return Counter(tracebacks=_traceback(result), other_faults=result.exit_code != 2)  # noqa: PLR2004


def _json_manifest(project: Path, data: bytes) -> Counter[str]:
    (project / "data" / "manifest.json").write_bytes(data)
    result = _cli(project, "import", "json", "data/manifest.json", "--family", "imp")
    return Counter(tracebacks=_traceback(result), other_faults=result.exit_code != 2)  # noqa: PLR2004


def _json_certificate(project: Path, data: bytes) -> Counter[str]:
    (project / "cert.json").write_bytes(data)
    (project / "key.pub").write_text("not a key\n")
    result = _cli(project, "verify-attestation", "cert.json", "--key", "key.pub")
    return Counter(tracebacks=_traceback(result), other_faults=result.exit_code not in (1, 2))


JSON_PLACES: dict[str, Callable[[Path, bytes], Counter[str]]] = {
    "run log (expectations)": _json_run_log,
    "pack index (pull)": _json_pack_index,
    "registry file (verify)": _json_registry,
    "JSON manifest (import)": _json_manifest,
    "certificate (verify-attestation)": _json_certificate,
}


def _bounded_json(rng: random.Random) -> Counter[str]:
    place = rng.choice(list(JSON_PLACES))
    with _project() as project:
        return JSON_PLACES[place](project, _hostile_json(rng))


# -- pack entries ----------------------------------------------------------------------------
def _pack_entry(rng: random.Random) -> Counter[str]:
    with _project() as project:
        remote = _pushed(project)
        (index,) = (remote / INDEXES).iterdir()
        doc = json.loads(index.read_bytes())
        entries = sorted(doc["objects"].items(), key=lambda kv: kv[1][1])
        at = rng.randrange(1, len(entries))
        victim, (pack, _, length) = entries[at]
        attack = rng.choice(["shift", "past", "type"])
        if attack == "shift":  # onto the middle of its neighbour before
            doc["objects"][victim] = [pack, entries[at - 1][1][1] + 1, length]
        elif attack == "past":
            doc["objects"][victim] = [pack, doc["packs"][pack][1], length]
        else:
            doc["objects"][victim] = [pack, rng.choice(["0", None, -1, 1.5, [0]]), length]
        data = json.dumps(doc, separators=(",", ":")).encode()
        os.chmod(index, 0o644)
        index.unlink()
        (remote / index_key(digests.of_bytes(data).hex)).write_bytes(data)
        names = {
            json.loads(r.read_text())["records"][n]["digest"].removeprefix("sha256:"): n
            for r in (project / "provenance").glob("*.json")
            for n in json.loads(r.read_text())["records"]
        }
        result, verified = _pulled(project, remote)
        blamed = {names[h] for h in names if h in result.output and names[h] not in verified}
        honest = set(names.values()) - {names[victim]}
        return Counter(
            objects_lost=len(honest - verified),
            tracebacks=_traceback(result),
            other_faults=int(result.exit_code != 1) + len(blamed - {names[victim]}),
        )


# -- Hub answers -----------------------------------------------------------------------------
_REF_ALPHABET = string.ascii_letters + string.digits + "-_./@{}~^:?*[\\ "


def _git_takes(name: str) -> bool | None:
    git = shutil.which("git")
    if git is None:
        return None
    done = subprocess.run(
        [git, "check-ref-format", "--allow-onelevel", name], capture_output=True, check=False
    )
    return done.returncode == 0


def _hub_answers(rng: random.Random) -> Counter[str]:
    found: Counter[str] = Counter()
    name = "".join(rng.choice(_REF_ALPHABET) for _ in range(rng.randint(1, 8)))
    verdict = _git_takes(name)
    if verdict is not None and (ref_problem(name) is None) != verdict:
        found["other_faults"] += 1
    try:
        repo = HubRepo.parse(f"hf://datasets/org/x@{name}")
        found["other_faults"] += ref_problem(repo.revision) is not None
    except FixtureStoreError:
        pass
    except Exception:  # any other exception is what the report counts
        found["tracebacks"] += 1
    value = rng.choice(["-5", "1.5", "", " 12 ", "soon", "Wed, 02 Dec 2099 12:00:00 GMT",
                        "99999999999999999999", "0x10", "+3", "1e3"])  # fmt: skip
    waited = answers.retry_after(value)
    valid = value.strip().isdigit() or "GMT" in value
    found["other_faults"] += (waited is not None) != valid or (waited is not None and waited < 0)
    commit = rng.choice(["main", "a" * 39, "A" * 40, "g" * 40, "../" + "a" * 37, 5, None])
    found["other_faults"] += answers.commit_id(commit) is not None
    path = rng.choice(["../other/x", "a/../../b", "/abs", "a\\b", "", "a//b", "./a"])
    raw = {
        "kind": "fixture",
        "digest": "sha256:" + "a" * 64,
        "size": 1,
        "source": {"type": "hub", "repo_id": "org/x", "revision": "b" * 40, "path": path},
    }
    try:
        parse_record("fam/a", raw, file="bench")
        found["other_faults"] += 1
    except FixtureStoreError:
        pass
    return found


SURFACES: dict[str, Callable[[random.Random], Counter[str]]] = {
    "bounded JSON": _bounded_json,
    "pack entries": _pack_entry,
    "Hub answers": _hub_answers,
}


def run(rounds: int, seed: int = 34) -> dict[str, Counter[str]]:
    """``rounds`` rounds of every surface: what each saw (the :data:`COUNTS`)."""
    rng = random.Random(seed)
    totals: dict[str, Counter[str]] = {}
    for name, surface in SURFACES.items():
        total: Counter[str] = Counter({c: 0 for c in COUNTS})
        for _ in range(rounds):
            total.update(surface(rng))
        totals[name] = total
    return totals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10, help="rounds per surface (default 10)")
    parser.add_argument("--seed", type=int, default=34)
    args = parser.parse_args(argv)
    totals = run(args.rounds, args.seed)
    width = max(map(len, SURFACES))
    print(f"{'surface':<{width}}  rounds  " + "  ".join(COUNTS))
    for name, total in totals.items():
        cells = "  ".join(f"{total[c]:>{len(c)}}" for c in COUNTS)
        print(f"{name:<{width}}  {args.rounds:>6}  {cells}")
    bad = sum(total[c] for total in totals.values() for c in COUNTS)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
