"""The claims report: hostile registry edits and certificates against what says "verified"
(issue 34, classes 2 and 3).

Not a timed benchmark. Each case is a hostile input whose only right answer is a refusal:

- ranges: a ranged safetensors record edited so that tensor ``a`` is served from other bytes
  (a neighbour's range and digest, the header's bytes, two tensors swapped, a header digest
  of other bytes), read by ``Fixtures.tensor`` from the record's source;
- certificates: ``verify-attestation`` of a candidate holding its namesake's bytes, of a
  certificate naming a subject twice, with ``--all-subjects`` and a subject left unchecked, of
  envelopes whose fields have the wrong type or nest deep; and ``attest`` with a private key
  others can read or inside a git work tree.

It counts what must never happen: a hostile input accepted (values handed out, or exit 0), a
traceback, and, for the honest controls (each record and certificate unedited, a keyid that is
missing or another tool's), a refusal.

    uv run python -m bench.hostile_claims
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from click.testing import CliRunner

from fixture_store.cli import main as cli

COUNTS = ("accepted", "tracebacks", "honest refused")
A = np.full((512, 256), 1.0, dtype=np.float32)
B = np.full((512, 256), 2.0, dtype=np.float32)


@contextmanager
def _folder(prefix: str) -> Iterator[Path]:
    top = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)


# -- ranges ---------------------------------------------------------------------------------
def _ranged(top: Path) -> tuple[dict[str, Any], bytes]:
    from safetensors.numpy import save

    from fixture_store.readers import content
    from fixture_store.registry import Kind

    data = save({"a": A, "b": B})
    (top / "p").mkdir()
    (top / "p" / "model.safetensors").write_bytes(data)
    described = content.describe(
        top / "p" / "model.safetensors", kind=Kind.CHECKPOINT, array_name="model"
    )
    raw = {
        "kind": "checkpoint",
        "source": {"type": "local", "path": "model.safetensors"},
        "digest": "sha256:" + hashlib.sha256(data).hexdigest(),
        "size": len(data),
        "media_type": described.media_type,
        "arrays": {k: dict(v) for k, v in (described.arrays or {}).items()},
    }
    if getattr(described, "header", None):  # (a release before headers were recorded: none)
        raw["header"] = dict(described.header or {})
    return raw, data


def _neighbour(raw: dict[str, Any], _data: bytes) -> None:
    a, b = raw["arrays"]["a"], raw["arrays"]["b"]
    a.update(offset=b["offset"], sha256=b["sha256"])


def _header_bytes(raw: dict[str, Any], data: bytes) -> None:
    a = raw["arrays"]["a"]
    a.update(offset=0, sha256=hashlib.sha256(data[: a["length"]]).hexdigest())


def _swapped(raw: dict[str, Any], _data: bytes) -> None:
    a, b = raw["arrays"]["a"], raw["arrays"]["b"]
    for key in ("offset", "sha256"):
        a[key], b[key] = b[key], a[key]


def _other_header(raw: dict[str, Any], data: bytes) -> None:
    raw.setdefault("header", {"length": 8 + int.from_bytes(data[:8], "little")})
    raw["header"]["sha256"] = hashlib.sha256(data[1 : raw["header"]["length"] + 1]).hexdigest()


RANGES: dict[str, Callable[[dict[str, Any], bytes], None] | None] = {
    "a record unedited (honest)": None,
    "a given b's range and digest": _neighbour,
    "a given the header's bytes": _header_bytes,
    "a and b swapped": _swapped,
    "a header digest of other bytes": _other_header,
}


def _range_round(case: str) -> Counter[str]:
    from fixture_store.access import Fixtures
    from fixture_store.errors import FixtureStoreError
    from fixture_store.objects.store import Store
    from tests.support.fetchutil import make_registry

    found: Counter[str] = Counter()
    edit = RANGES[case]
    with _folder("fixture-store-claims-") as top:
        raw, data = _ranged(top)
        if edit is not None:
            edit(raw, data)
        try:
            fixtures = Fixtures(Store.at(top / "store"), make_registry(top / "p", {"c/m": raw}))
            got = fixtures.tensor("c/m", "a")
        except FixtureStoreError:
            found["honest refused"] += edit is None
            return found
        except Exception:  # what the report counts
            found["tracebacks"] += 1
            return found
        found["accepted"] += edit is not None
        found["honest refused"] += edit is None and not np.array_equal(got, A)
    return found


# -- certificates ---------------------------------------------------------------------------
def _keys(folder: Path) -> tuple[Path, Path]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    folder.mkdir(parents=True, exist_ok=True)
    private = ed25519.Ed25519PrivateKey.generate()
    priv, pub = folder / "key.pem", folder / "key.pub"
    priv.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    priv.chmod(0o600)
    pub.write_bytes(
        private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return priv, pub


def _cli(root: Path, store: Path, *args: str) -> tuple[int, str, BaseException | None]:
    env = {"FIXTURE_STORE_DIR": str(store), "COLUMNS": "200",
           "FIXTURE_STORE_CONFIG": str(root.parent / "user.toml")}  # fmt: skip
    cwd = Path.cwd()
    os.chdir(root)
    try:
        result = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=True)
    finally:
        os.chdir(cwd)
    return result.exit_code, result.stdout + result.stderr, result.exception


def _edit_envelope(cert: Path, change: Callable[[dict[str, Any]], None]) -> None:
    envelope = json.loads(cert.read_text())
    change(envelope)
    cert.write_text(json.dumps(envelope))


def _resign(cert: Path, key: Path, change: Callable[[dict[str, Any]], None]) -> None:
    from fixture_store import attest

    doc = json.loads(base64.b64decode(json.loads(cert.read_text())["payload"]))
    change(doc)
    cert.write_bytes(attest.dumps(attest.sign(doc, key)))


# A certificate case: (root, private key, certificate) -> the command; and whether it is honest.
CertCase = tuple[Callable[[Path, Path, Path], list[str]], bool]


def _namesake(root: Path, _key: Path, _cert: Path) -> list[str]:
    (root / "x" / "model.bin").write_bytes((root / "y" / "model.bin").read_bytes())
    return ["--candidate", "x/model.bin"]


def _twice(root: Path, key: Path, cert: Path) -> list[str]:
    def change(doc: dict[str, Any]) -> None:
        doc["subject"][0]["name"] = doc["subject"][1]["name"] = "model.bin"

    _resign(cert, key, change)
    (root / "x" / "model.bin").write_bytes((root / "y" / "model.bin").read_bytes())
    return ["--candidate", "x/model.bin"]


def _field(change: Callable[[dict[str, Any]], None]) -> Callable[[Path, Path, Path], list[str]]:
    def case(_root: Path, _key: Path, cert: Path) -> list[str]:
        _edit_envelope(cert, change)
        return []

    return case


def _deep(_root: Path, _key: Path, cert: Path) -> list[str]:
    cert.write_text('{"payload": ' + "[" * 5000 + "]" * 5000 + "}")
    return []


CERTIFICATES: dict[str, CertCase] = {
    "all subjects checked (honest)": (
        lambda _r, _k, _c: [
            *("--candidate", "x/model.bin", "--candidate", "y/model.bin"),
            *("--candidate", "outputs.npz", "--all-subjects"),
        ],
        True,
    ),
    "keyid missing (honest)": (_field(lambda e: e["signatures"][0].pop("keyid")), True),
    "keyid another tool's (honest)": (
        _field(lambda e: e["signatures"][0].update(keyid="f" * 64)),
        True,
    ),
    "a candidate with its namesake's bytes": (_namesake, False),
    "a subject named twice": (_twice, False),
    "--all-subjects, one unchecked": (
        lambda _r, _k, _c: ["--candidate", "x/model.bin", "--all-subjects"],
        False,
    ),
    "sig a number": (_field(lambda e: e["signatures"][0].update(sig=5)), False),
    "payload a list": (_field(lambda e: e.update(payload=[])), False),
    "signatures an object": (_field(lambda e: e.update(signatures={})), False),
    "keyid a number": (_field(lambda e: e["signatures"][0].update(keyid=7)), False),
    "nested 5,000 deep": (_deep, False),
}
KEYS = ("key readable by others", "key inside a git work tree")


@contextmanager
def _attested() -> Iterator[tuple[Path, Path, Path, Path]]:
    """A project with a reference, a certificate about x/model.bin, y/model.bin and the
    outputs: (root, store, private key, certificate)."""
    with _folder("fixture-store-claims-") as top:
        root, store = top / "project", top / "store"
        (root / "provenance").mkdir(parents=True)
        for name in ("x", "y"):
            (root / name).mkdir()
            (root / name / "model.bin").write_bytes(f"{name} weights ".encode() * 40)
        array = np.arange(6, dtype=np.float32)
        np.savez(root / "ref.npz", w=array)
        np.savez(root / "outputs.npz", w=array)
        priv, _pub = _keys(top / "keys")
        assert _cli(root, store, "add", "ref.npz", "--name", "f/r", "--kind", "fixture")[0] == 0
        code, out, _ = _cli(
            root, store, "attest", "f/r", "outputs.npz", "--subject", "x/model.bin",
            "--subject", "y/model.bin", "--key", str(priv), "-o", "cert.json",
        )  # fmt: skip
        assert code == 0, out
        yield root, store, priv, root / "cert.json"


def _cert_round(case: str) -> Counter[str]:
    found: Counter[str] = Counter()
    with _attested() as (root, store, priv, cert):
        if case in KEYS:
            key = priv
            if case == KEYS[0]:
                priv.chmod(0o644)
            else:
                (root / ".git").mkdir()
                key = root / "key.pem"
                shutil.copy(priv, key)
                key.chmod(0o600)
            code, output, error = _cli(root, store, "attest", "f/r", "outputs.npz",
                                       "--key", str(key), "-o", "again.json")  # fmt: skip
            honest = False
        else:
            command, honest = CERTIFICATES[case]
            extra = command(root, priv, cert)
            pub = priv.with_suffix(".pub")
            code, output, error = _cli(
                root, store, "verify-attestation", str(cert), "--key", str(pub), *extra
            )
        found["tracebacks"] += "Traceback" in output or not isinstance(error, SystemExit | None)
        found["accepted"] += not honest and code == 0
        found["honest refused"] += honest and code != 0
    return found


def run(rounds: int = 1) -> dict[str, tuple[int, Counter[str]]]:
    """Every ranges case and every certificate case, ``rounds`` times: the rounds run and what
    they saw (the :data:`COUNTS`), per surface."""
    out: dict[str, tuple[int, Counter[str]]] = {}
    for surface, cases, one in (
        ("ranges", list(RANGES), _range_round),
        ("certificates", [*CERTIFICATES, *KEYS], _cert_round),
    ):
        total: Counter[str] = Counter({c: 0 for c in COUNTS})
        for _ in range(rounds):
            for case in cases:
                total += one(case)
        out[surface] = (rounds * len(cases), total)
    return out


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=1, help="rounds per case (1)")
    args = parser.parse_args(argv)
    totals = run(args.rounds)
    print(f"{'surface':<12}  rounds  " + "  ".join(COUNTS))
    for name, (n, total) in totals.items():
        print(f"{name:<12}  {n:>6}  " + "  ".join(f"{total[c]:>{len(c)}}" for c in COUNTS))
    bad = sum(total[c] for _, total in totals.values() for c in COUNTS)
    print("faults: " + ("none" if not bad else f"{bad} (must be 0)"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
