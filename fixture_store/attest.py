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
import contextlib
import json
import math
import os
import platform
import re
import stat
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

from fixture_store import bounded_json
from fixture_store._extras import require
from fixture_store.errors import (
    AttestationError,
    FixtureStoreError,
    UnknownArtifactError,
    UsageError,
)
from fixture_store.objects import digests
from fixture_store.registry import Record, Registry, nesting

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


def subject_name(path: Path) -> str:
    """The name a certificate gives the candidate at ``path``: the path as it was given,
    normalized (``./x/../y/m.bin`` is ``y/m.bin``), in POSIX form, an absolute path below the
    current folder made relative to it (so another checkout verifies it from its own root);
    never its base name alone, which two candidates in two folders share."""
    normal = Path(os.path.normpath(path))
    if normal.is_absolute():
        with contextlib.suppress(ValueError):
            normal = normal.relative_to(os.path.normpath(os.getcwd()))
    return normal.as_posix()


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
            return cls(name or subject_name(path), digests.of_file(path))
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
    seen: set[str] = set()
    for subject in subjects:
        if subject.name in seen:
            raise UsageError(
                f"the subject {subject.name} is given twice: a certificate names each candidate "
                "once, by its path",
                fix="give each --subject once (the outputs file is a subject already)",
            )
        seen.add(subject.name)
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


def _private_key_place(path: Path) -> None:
    """Refuse a private key others can read, as ssh refuses one: a file with any group or
    other permission bit, or one inside a git work tree (where ``git add .`` commits it)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return  # _read_key says why it cannot be read
    if os.name == "posix" and mode & 0o077:
        raise UsageError(
            f"the private key {path} can be read by others (mode {stat.S_IMODE(mode):04o}): "
            "a signing key must be yours alone, as ssh requires of its keys",
            fix=f"chmod 600 {path}",
        )
    resolved = path.resolve()
    for folder in resolved.parents:
        if os.path.lexists(folder / ".git"):
            raise UsageError(
                f"the private key {path} is inside the git work tree {folder}: `git add .` "
                "would commit it for everyone who can read the repository",
                fix="move the key out of the work tree (to your home folder, or a secret your "
                "CI provides) and pass its path",
            )


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
    _private_key_place(path)  # a private key indeed: it must be its owner's alone
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


@dataclass(frozen=True)
class Envelope:
    """A DSSE envelope as read, every field type-checked: the payload, its type, and each
    signature's bytes with its ``keyid`` (a hint, as the DSSE spec says: ``None`` when absent,
    never what decides which key verifies it)."""

    payload: bytes
    payload_type: str
    signatures: tuple[tuple[str | None, bytes], ...]

    def pae(self) -> bytes:
        """The DSSE pre-authentication encoding: what each signature signs."""
        kind = self.payload_type.encode("utf-8")
        return b"DSSEv1 %d %b %d %b" % (len(kind), kind, len(self.payload), self.payload)


_ENVELOPE_KEYS = frozenset({"payload", "payloadType", "signatures"})
_SIGNATURE_KEYS = frozenset({"sig", "keyid"})
_BASE64 = re.compile(r"[A-Za-z0-9+/_-]*={0,2}")


def _base64(path: Path, text: object, field: str) -> bytes:
    """A DSSE base64 field (standard or URL-safe alphabet), strictly."""
    if not isinstance(text, str):
        raise _not_an_envelope(path, f"its {field} is {_kind(text)}, not a base64 string")
    if _BASE64.fullmatch(text) is None or len(text.rstrip("=")) % 4 == 1:
        raise _not_an_envelope(path, f"its {field} is not base64")
    padded = text.replace("-", "+").replace("_", "/") + "=" * (-len(text) % 4)
    try:
        return base64.b64decode(padded, validate=True)
    except binascii.Error:
        raise _not_an_envelope(path, f"its {field} is not base64") from None


_JSON_KINDS = (
    (bool, "a boolean"),  # before int: a bool is an int to Python
    (int | float, "a number"),
    (str, "a string"),
    (list, "a list"),
    (dict, "an object"),
)


def _kind(value: object) -> str:
    """What a JSON value is, in words (a message never echoes an envelope's values)."""
    if value is None:
        return "null"
    return next((said for t, said in _JSON_KINDS if isinstance(value, t)), type(value).__name__)


def parse_envelope(path: Path, raw: object) -> Envelope:
    """The envelope of the JSON value ``raw``, every field checked for its type: an object of
    exactly ``payload`` (base64), ``payloadType`` (a string) and ``signatures`` (a non-empty
    list of objects of ``sig``, base64, and optionally ``keyid``, a string)."""
    if not isinstance(raw, dict):
        raise _not_an_envelope(path, f"it holds {_kind(raw)}, not a JSON object")
    if set(raw) != _ENVELOPE_KEYS:
        missing, extra = sorted(_ENVELOPE_KEYS - set(raw)), sorted(set(raw) - _ENVELOPE_KEYS)
        said = "; ".join(
            [*([f"no {', '.join(missing)}"] if missing else []),
             *([f"unknown {', '.join(map(repr, extra))}"] if extra else [])]
        )  # fmt: skip
        raise _not_an_envelope(path, f"its fields are not a DSSE envelope's ({said})")
    payload = _base64(path, raw["payload"], "payload")
    kind = raw["payloadType"]
    if not isinstance(kind, str):
        raise _not_an_envelope(path, f"its payloadType is {_kind(kind)}, not a string")
    signatures = raw["signatures"]
    if not isinstance(signatures, list) or not signatures:
        raise _not_an_envelope(path, "its signatures are not a non-empty list")
    found: list[tuple[str | None, bytes]] = []
    for i, sig in enumerate(signatures):
        field = f"signatures[{i}]"
        if not isinstance(sig, dict) or "sig" not in sig or set(sig) - _SIGNATURE_KEYS:
            raise _not_an_envelope(path, f"its {field} is not an object of sig and keyid")
        keyid = sig.get("keyid")
        if keyid is not None and not isinstance(keyid, str):
            raise _not_an_envelope(path, f"its {field}.keyid is {_kind(keyid)}, not a string")
        found.append((keyid, _base64(path, sig["sig"], f"{field}.sig")))
    return Envelope(payload, kind, tuple(found))


def load_envelope(path: Path) -> Envelope:
    """The DSSE envelope in ``path``, read under a size and a depth bound and type-checked."""
    require("attest", for_what="verifying " + FOR_WHAT)
    try:
        data = path.read_bytes()[: _MAX_ENVELOPE + 1]
    except OSError as e:
        raise UsageError(
            f"cannot read {path}: {e.strerror or e}",
            fix="pass the .intoto.json file fixture-store attest (or --fixture-store-attest) wrote",
        ) from None
    if len(data) > _MAX_ENVELOPE:
        raise _not_an_envelope(path, f"larger than {_MAX_ENVELOPE:,} bytes")
    return parse_envelope(path, _json(path, data, "it"))


def _json(path: Path, data: bytes, what: str) -> Any:
    """JSON ``data`` (the envelope, or its payload), its nesting bounded before it is parsed."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _not_an_envelope(path, f"{what} is not UTF-8 text") from None
    if nesting.first_too_deep(text) is not None:
        raise _not_an_envelope(path, f"{what} nests more than {nesting.MAX_DEPTH} levels deep")
    try:
        return bounded_json.loads(text, cap=_MAX_ENVELOPE)
    except ValueError as e:
        raise _not_an_envelope(path, f"{what} is not JSON ({e})") from None


def _payload(path: Path, envelope: Envelope) -> dict[str, Any]:
    if envelope.payload_type != PAYLOAD_TYPE:
        raise _not_an_envelope(path, f"its payload type is {envelope.payload_type!r}")
    doc = _json(path, envelope.payload, "its payload")
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
    unchecked: tuple[str, ...] = ()

    @property
    def result(self) -> str:
        return str(self.statement["predicate"].get("result"))


def check_signature(path: Path, envelope: Envelope, key: Any, key_file: Path) -> None:
    """One of the envelope's signatures verifies with ``key``. Every signature is tried with
    the key whatever its ``keyid`` says: the keyid is a hint (DSSE), and a certificate whose
    hint is missing or another tool's is still checked by its signature alone."""
    require("attest", for_what="verifying " + FOR_WHAT)
    from securesystemslib.exceptions import UnverifiedSignatureError
    from securesystemslib.signer import Signature  # type: ignore[attr-defined]

    pae = envelope.pae()
    for _hint, sig in envelope.signatures:
        try:
            key.verify_signature(Signature(key.keyid, sig.hex()), pae)
        except UnverifiedSignatureError:
            continue
        return
    raise AttestationError(
        f"the signature of {path} does not verify with the key {key_file} "
        f"(keyid {key.keyid[:16]}…): it was signed with another key, or its statement "
        "was changed after signing",
        fix="pass the public key of whoever signed it; a changed certificate must be "
        "written again (fixture-store attest)",
    )


@dataclass(frozen=True)
class Checked:
    """What the candidates given showed: the problems found, and the subjects checked."""

    problems: list[str]
    checked: frozenset[str]


def check_candidates(doc: Mapping[str, Any], candidates: Sequence[Path]) -> Checked:
    """Each candidate file against the subject named by its path as given (normalized); a
    certificate that names its subjects by bare file names (the pytest plugin's, and earlier
    ones) is matched by the candidate's file name when exactly one subject has it. A subject
    the certificate names twice is a problem, never matched."""
    names: list[str] = []
    subjects: dict[str, object] = {}
    problems: list[str] = []
    for s in doc["subject"]:
        name = s.get("name") if isinstance(s, dict) else None
        digest = s.get("digest") if isinstance(s, dict) else None
        sha = digest.get("sha256") if isinstance(digest, dict) else None
        if not isinstance(name, str) or not isinstance(sha, str):
            problems.append(f"a subject of the certificate has no name or sha256: {s!r}")
            continue
        names.append(name)
        subjects[name] = sha
    twice = sorted({n for n in names if names.count(n) > 1})
    for name in twice:
        problems.append(
            f"the certificate names the subject {name!r} twice: which file it means is "
            "ambiguous, so neither is checked"
        )
        del subjects[name]
    checked: set[str] = set()
    for path in candidates:
        now = Subject.of_file(path)
        name = now.name
        if name not in subjects and "/" not in path.name and path.name in subjects:
            name = path.name  # a certificate naming its subject by file name
        if name in twice or (name not in subjects and path.name in twice):
            continue  # said above
        if name not in subjects:
            problems.append(
                f"candidate {path}: the certificate has no subject named {now.name!r} "
                f"(its subjects: {', '.join(names) or 'none'})"
            )
            continue
        checked.add(name)
        if subjects[name] != now.digest.hex:
            problems.append(
                f"candidate {path} changed: the certificate was signed for sha256:"
                f"{str(subjects[name])[:16]}…, the file is now {now.digest.text[:23]}…"
            )
    return Checked(problems, frozenset(checked))


def subject_names(doc: Mapping[str, Any]) -> list[str]:
    """The names of the certificate's subjects, in its order."""
    return [str(s.get("name")) for s in doc["subject"] if isinstance(s, dict) and "name" in s]


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
    path: Path,
    key_file: Path,
    registry: Registry,
    candidates: Sequence[Path] = (),
    *,
    all_subjects: bool = False,
) -> Verified:
    """Check the certificate at ``path``: its signature (raises :class:`AttestationError`: an
    unsigned statement says nothing), then each candidate and each reference (the problems
    returned, each naming what changed). The subjects no candidate checked are named in
    ``unchecked``; with ``all_subjects`` each of them is a problem too."""
    envelope = load_envelope(path)
    key = public_key(key_file)
    check_signature(path, envelope, key, key_file)
    doc = _payload(path, envelope)
    checked = check_candidates(doc, candidates)
    unchecked = tuple(n for n in dict.fromkeys(subject_names(doc)) if n not in checked.checked)
    problems = checked.problems + check_references(doc, registry)
    if all_subjects:
        problems += [
            f"subject {name!r} was not checked: no --candidate names it" for name in unchecked
        ]
    return Verified(doc, tuple(problems), unchecked)


def decode_payload(envelope: Mapping[str, Any]) -> dict[str, Any]:
    """The statement inside an envelope written by :func:`sign` (no signature check)."""
    doc: dict[str, Any] = bounded_json.loads(base64.b64decode(envelope["payload"]))
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
