"""Signed parity certificates: an in-toto Statement v1 about a candidate, in a DSSE envelope.

A certificate says "these bytes (the candidate: a converted checkpoint, or the outputs a test
compared) were at parity with these verified references, under these tolerances, on this
environment", in a form a machine checks offline:

- the **subject** is each candidate file, by its sha256;
- the **predicate** (:data:`PREDICATE_TYPE`, documented in ``docs/attestations.md``) holds the
  outcome (``PASSED``/``FAILED``, the vocabulary of in-toto's test-result predicate), the
  reference records with their digests and their tolerance as the registry writes it, the errors
  measured per array, and the environment the comparison ran on;
- the **envelope** is DSSE, signed with a key the user holds (a PEM file; ed25519, ECDSA or RSA)
  through securesystemslib (the ``attest`` extra).

:func:`verify` checks the signature with the user's public key, each candidate's bytes against
its subject, and each reference against today's registry (its digest and its tolerance), and
returns every problem found, each naming what changed.

The parity numbers come from the layer above as plain JSON values (``ArrayComparison.to_json``):
this module signs and checks, it does not compare.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import os
import platform
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

from fixture_store._extras import require
from fixture_store.errors import (
    AttestationError,
    FixtureStoreError,
    UnknownArtifactError,
    UsageError,
)
from fixture_store.objects import digests
from fixture_store.registry import Record, Registry

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
PREDICATE_TYPE = "urn:fixture-store:predicate:parity:v1"
PASSED = "PASSED"
FAILED = "FAILED"
KEY_ENV = "FIXTURE_STORE_ATTEST_KEY"
PUBLIC_KEY_ENV = "FIXTURE_STORE_ATTEST_PUBLIC_KEY"
FOR_WHAT = "a signed parity certificate"
_MAX_ENVELOPE = 64 * 1024 * 1024  # a certificate is small; a larger file is not one
_MAX_KEY = 1024 * 1024


@dataclass(frozen=True)
class Subject:
    """A candidate file by name and digest."""

    name: str
    digest: digests.Digest

    @classmethod
    def of_file(cls, path: Path, name: str | None = None) -> Subject:
        if not path.is_file():
            raise UsageError(
                f"the candidate {path} is not a file", fix="name the file the certificate is about"
            )
        try:
            return cls(name or path.name, digests.of_file(path))
        except OSError as e:
            raise UsageError(
                f"cannot read the candidate {path}: {e.strerror or e}",
                fix="name a file you can read",
            ) from None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "digest": {"sha256": self.digest.hex}}


def environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """What the comparison ran on: python, numpy, platform and machine; the comparison itself
    runs on the CPU in numpy (``device``), and the caller adds what it knows (its framework,
    the device the candidate ran on)."""
    import numpy as np

    env = {
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "numpy": np.__version__,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "device": "cpu",
        "fixture-store": version("fixture-store"),
    }
    env.update(extra or {})
    return env


def _finite(value: Any) -> Any:
    """JSON without NaN or Infinity (not JSON to most consumers): non-finite floats as text;
    numpy scalars as Python numbers."""
    if hasattr(value, "dtype") and hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def reference_entry(record: Record) -> dict[str, Any]:
    digest = record.object
    return {
        "name": record.name,
        "uri": f"fixture-store:{record.name}",
        "digest": {"sha256": digest.hex},
        "size": digest.size,
        "tolerance": record.tolerance.to_json() if record.tolerance is not None else None,
    }


def statement(
    subjects: Sequence[Subject],
    references: Sequence[Record],
    arrays: Sequence[Mapping[str, Any]],
    *,
    ok: bool,
    missing: Iterable[str] = (),
    extra: Iterable[str] = (),
    env: Mapping[str, str] | None = None,
    test: str | None = None,
) -> dict[str, Any]:
    """The in-toto statement of one parity result (``arrays``: one ``ArrayComparison.to_json``
    per array compared)."""
    if not subjects:
        raise UsageError("a certificate needs a candidate: name the file it is about")
    passed = [str(a["name"]) for a in arrays if a.get("outcome") != "drift"]
    failed = [str(a["name"]) for a in arrays if a.get("outcome") == "drift"]
    predicate: dict[str, Any] = {
        "result": PASSED if ok else FAILED,
        "references": [reference_entry(r) for r in references],
        "arrays": [_finite(dict(a)) for a in arrays],
        "missing": sorted(missing),
        "extra": sorted(extra),
        "passedTests": passed,
        "failedTests": failed + [f"{m} (missing)" for m in sorted(missing)],
        "environment": dict(env if env is not None else environment()),
    }
    if test is not None:
        predicate["test"] = test
    return {
        "_type": STATEMENT_TYPE,
        "subject": [s.to_json() for s in subjects],
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    }


# -- keys -----------------------------------------------------------------------------------------


def key_path(
    flag: str | os.PathLike[str] | None,
    *,
    forbidden: Iterable[Path] = (),
    env: str = KEY_ENV,
    option: str = "--key",
) -> Path:
    """The key file ``--key`` or ``$env`` names; never one inside the store or the registry
    (``forbidden``), where it would be shared with everyone who reads them."""
    chosen = flag if flag is not None else os.environ.get(env) or None
    if chosen is None:
        how = (
            "a certificate is signed with a private key you hold; make one with "
            "`openssl genpkey -algorithm ed25519 -out key.pem`"
            if env == KEY_ENV
            else "a certificate is verified with its signer's public key"
        )
        raise UsageError(f"no key: {how}", fix=f"pass {option} FILE.pem (or set {env}=FILE.pem)")
    path = Path(chosen)
    resolved = path.resolve()
    for root in forbidden:
        top = root.resolve()
        if resolved == top or top in resolved.parents:
            raise UsageError(
                f"the key {path} is inside {root}: a key there is shared with everyone who "
                "reads it",
                fix="keep the key outside the store and the registry (in your home folder, "
                "or a secret your CI provides) and pass its path",
            )
    return path


def _read_key(path: Path) -> bytes:
    try:
        data = path.read_bytes()[: _MAX_KEY + 1]
    except OSError as e:
        raise UsageError(
            f"cannot read the key {path}: {e.strerror or e}", fix="pass the path of a PEM key file"
        ) from None
    if len(data) > _MAX_KEY or b"-----BEGIN" not in data:
        raise UsageError(f"{path} is not a PEM key file", fix="pass the path of a PEM key file")
    return data


def signer(path: Path) -> Any:
    """A securesystemslib ``CryptoSigner`` over the PEM private key at ``path``."""
    require("attest", for_what=FOR_WHAT)
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from securesystemslib.signer import CryptoSigner  # type: ignore[attr-defined]

    data = _read_key(path)
    try:
        private = serialization.load_pem_private_key(data, password=None)
    except TypeError:
        raise UsageError(
            f"the key {path} is encrypted; fixture-store reads unencrypted PEM keys",
            fix=f"keep an unencrypted copy where only you can read it: openssl pkey -in {path} "
            "-out key.pem",
        ) from None
    except (ValueError, UnsupportedAlgorithm) as e:
        raise UsageError(
            f"{path} is not a PEM private key ({e})",
            fix="sign with your private key; verify with the public one",
        ) from None
    try:
        return CryptoSigner(private)
    except ValueError as e:
        raise UsageError(
            f"the key {path} is of a kind securesystemslib does not sign with ({e})",
            fix="use an ed25519, ECDSA (P-256/P-384) or RSA key",
        ) from None


def public_key(path: Path) -> Any:
    """A securesystemslib ``SSlibKey`` over the PEM public key at ``path``."""
    require("attest", for_what=FOR_WHAT)
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from securesystemslib.signer import SSlibKey  # type: ignore[attr-defined]

    data = _read_key(path)
    try:
        public = serialization.load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm) as e:
        fix = "pass the public key (openssl pkey -in key.pem -pubout -out key.pub)"
        if b"PRIVATE KEY" in data:
            raise UsageError(
                f"{path} is a private key: verification takes the public key", fix=fix
            ) from None
        raise UsageError(f"{path} is not a PEM public key ({e})", fix=fix) from None
    try:
        return SSlibKey.from_crypto(public)
    except ValueError as e:
        raise UsageError(
            f"the key {path} is of a kind securesystemslib does not verify with ({e})",
            fix="use an ed25519, ECDSA (P-256/P-384) or RSA key",
        ) from None


# -- envelopes ------------------------------------------------------------------------------------


def sign(doc: Mapping[str, Any], key: Path) -> dict[str, Any]:
    """``doc`` as a DSSE envelope signed with the private key at ``key``."""
    sslib_signer = signer(key)
    require("attest", for_what=FOR_WHAT)
    from securesystemslib.dsse import Envelope

    payload = json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()
    envelope = Envelope(payload, PAYLOAD_TYPE, {})
    envelope.sign(sslib_signer)
    envelope_dict: dict[str, Any] = envelope.to_dict()
    return envelope_dict


def dumps(envelope: Mapping[str, Any]) -> bytes:
    return (json.dumps(envelope, indent=2, sort_keys=True) + "\n").encode()


def _not_an_envelope(path: Path, why: str) -> AttestationError:
    return AttestationError(
        f"{path} is not a parity certificate: {why}",
        fix="pass the .intoto.json file fixture-store attest (or --fixture-store-attest) wrote",
    )


def load_envelope(path: Path) -> Any:
    """The DSSE envelope in ``path`` (securesystemslib ``Envelope``)."""
    require("attest", for_what="verifying " + FOR_WHAT)
    from securesystemslib.dsse import Envelope

    try:
        data = path.read_bytes()[: _MAX_ENVELOPE + 1]
    except OSError as e:
        raise UsageError(
            f"cannot read {path}: {e.strerror or e}",
            fix="pass the .intoto.json file fixture-store attest (or --fixture-store-attest) wrote",
        ) from None
    if len(data) > _MAX_ENVELOPE:
        raise _not_an_envelope(path, f"larger than {_MAX_ENVELOPE:,} bytes")
    try:
        raw = json.loads(data)
        if not isinstance(raw, dict):
            raise TypeError("not a JSON object")
        return Envelope.from_dict(raw)
    except (ValueError, TypeError, KeyError, binascii.Error) as e:
        raise _not_an_envelope(path, f"no DSSE envelope in it ({type(e).__name__}: {e})") from None


def _payload(path: Path, envelope: Any) -> dict[str, Any]:
    if envelope.payload_type != PAYLOAD_TYPE:
        raise _not_an_envelope(path, f"its payload type is {envelope.payload_type!r}")
    try:
        doc = json.loads(envelope.payload)
    except ValueError as e:
        raise _not_an_envelope(path, f"its payload is not JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("_type") != STATEMENT_TYPE:
        raise _not_an_envelope(path, "its payload is not an in-toto Statement v1")
    if doc.get("predicateType") != PREDICATE_TYPE:
        raise _not_an_envelope(
            path, f"its predicate is {doc.get('predicateType')!r}, not {PREDICATE_TYPE}"
        )
    if not isinstance(doc.get("predicate"), dict) or not isinstance(doc.get("subject"), list):
        raise _not_an_envelope(path, "its statement has no predicate or no subject list")
    return doc


@dataclass(frozen=True)
class Verified:
    """What a certificate that verified says, and every problem found (empty: it verifies)."""

    statement: dict[str, Any]
    problems: tuple[str, ...]

    @property
    def result(self) -> str:
        return str(self.statement["predicate"].get("result"))


def check_signature(path: Path, envelope: Any, key: Any, key_file: Path) -> None:
    require("attest", for_what="verifying " + FOR_WHAT)
    from securesystemslib.exceptions import VerificationError

    try:
        envelope.verify([key], 1)
    except VerificationError:
        raise AttestationError(
            f"the signature of {path} does not verify with the key {key_file} "
            f"(keyid {key.keyid[:16]}…): it was signed with another key, or its statement "
            "was changed after signing",
            fix="pass the public key of whoever signed it; a changed certificate must be "
            "written again (fixture-store attest)",
        ) from None


def check_candidates(doc: Mapping[str, Any], candidates: Sequence[Path]) -> list[str]:
    """Each candidate file against the subject of its name."""
    subjects = {
        s.get("name"): s.get("digest", {}).get("sha256")
        for s in doc["subject"]
        if isinstance(s, dict)
    }
    problems = []
    for path in candidates:
        now = Subject.of_file(path)
        if now.name not in subjects:
            problems.append(
                f"candidate {path}: the certificate has no subject named {now.name!r} "
                f"(its subjects: {', '.join(map(str, subjects)) or 'none'})"
            )
        elif subjects[now.name] != now.digest.hex:
            problems.append(
                f"candidate {path} changed: the certificate was signed for sha256:"
                f"{str(subjects[now.name])[:16]}…, the file is now {now.digest.text[:23]}…"
            )
    return problems


def check_references(doc: Mapping[str, Any], registry: Registry) -> list[str]:
    """Each reference the certificate names against today's record: digest and tolerance."""
    problems = []
    references = doc["predicate"].get("references")
    if not isinstance(references, list) or not references:
        return ["the certificate names no reference record"]
    for ref in references:
        name = ref.get("name") if isinstance(ref, dict) else None
        if not isinstance(name, str):
            problems.append(f"a reference of the certificate has no name: {ref!r}")
            continue
        try:
            now = reference_entry(registry.get(name))
        except UnknownArtifactError:
            problems.append(f"reference {name}: no record of that name in {registry.directory}")
            continue
        except FixtureStoreError as e:
            problems.append(f"reference {name}: its record cannot be read ({e.message})")
            continue
        if ref.get("digest") != now["digest"] or ref.get("size") != now["size"]:
            problems.append(
                f"reference {name} changed: the certificate was signed for sha256:"
                f"{str(ref.get('digest', {}).get('sha256'))[:16]}…, the registry now "
                f"records sha256:{now['digest']['sha256'][:16]}…"
            )
        if ref.get("tolerance") != now["tolerance"]:
            problems.append(
                f"reference {name}: its tolerance changed: the certificate applied "
                f"{json.dumps(ref.get('tolerance'), sort_keys=True)}, the registry now says "
                f"{json.dumps(now['tolerance'], sort_keys=True)}"
            )
    return problems


def verify(
    path: Path, key_file: Path, registry: Registry, candidates: Sequence[Path] = ()
) -> Verified:
    """Check the certificate at ``path``: its signature (raises :class:`AttestationError`: an
    unsigned statement says nothing), then each candidate and each reference (the problems
    returned, each naming what changed)."""
    envelope = load_envelope(path)
    key = public_key(key_file)
    check_signature(path, envelope, key, key_file)
    doc = _payload(path, envelope)
    problems = check_candidates(doc, candidates) + check_references(doc, registry)
    return Verified(doc, tuple(problems))


def decode_payload(envelope: Mapping[str, Any]) -> dict[str, Any]:
    """The statement inside an envelope written by :func:`sign` (no signature check)."""
    doc: dict[str, Any] = json.loads(base64.b64decode(envelope["payload"]))
    return doc


# -- writing certificates -------------------------------------------------------------------------


def outputs_npz(arrays: Mapping[str, Any]) -> bytes:
    """The arrays as an NPZ whose bytes depend on the arrays alone (members sorted, no time):
    the same outputs give the same subject digest."""
    import io
    import zipfile

    import numpy as np

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as npz:
        for key in sorted(arrays):
            member = io.BytesIO()
            np.save(member, np.asarray(arrays[key]), allow_pickle=False)
            npz.writestr(zipfile.ZipInfo(f"{key}.npy", (1980, 1, 1, 0, 0, 0)), member.getvalue())
    return buffer.getvalue()


def _folder_refusal(path: str, what: str) -> UsageError:
    return UsageError(
        f"a certificate would be written through {path}, which is {what}; certificates are "
        "written only into plain folders",
        fix=f"remove {path}, or name another certificate folder",
    )


def write_files(folder: Path, files: Mapping[str, bytes], *, store: Path) -> list[Path]:
    """Write ``files`` (name -> bytes) into ``folder`` through the path primitive; never inside
    the store."""
    from fixture_store.objects import outputs

    root = folder.resolve()
    target = outputs.Target(root, (store,), "certificate folder")
    with target.folder(_folder_refusal) as where:
        for name, data in files.items():
            where.write_atomically(name, data)
    return [root / name for name in files]


def file_stem(test: str, reference: str) -> str:
    """A file name for the certificate of ``reference`` compared in ``test`` (a node id)."""
    import re

    stem = reference.rsplit("/", 1)[-1].removesuffix(".npz").removesuffix(".npy")
    text = f"{test}--{stem}"
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._")[:200] or "certificate"
