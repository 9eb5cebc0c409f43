"""``fixture-store attest`` and ``fixture-store verify-attestation``: signed parity certificates
(:mod:`fixture_store.attest`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from fixture_store import attest as attest_mod
from fixture_store.access import Fixtures, npy_name
from fixture_store.cli._common import Context, OutputPath, err, handle_errors, leave, out
from fixture_store.errors import EXIT_FAILED, EXIT_OK, UsageError
from fixture_store.objects.outputs import Target
from fixture_store.parity.assertion import compare
from fixture_store.registry import Content

_NOT_INSIDE = "never one inside the store or the registry"


def _env_pairs(pairs: tuple[str, ...]) -> dict[str, str]:
    found = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(
                f"--env {pair!r} is not KEY=VALUE", fix="for example --env device=cuda:0"
            )
        found[key] = value
    return found


def _outputs(path: Path, expected: dict[str, Any], profile: Any, name: str) -> dict[str, Any]:
    """The candidate's outputs: an .npz (array name -> array) or, for a one-array reference, an
    .npy; read by the safe readers."""
    from fixture_store.readers import npy

    if not path.is_file():
        raise UsageError(f"the outputs {path} are not a file", fix="name an .npz or .npy file")
    if path.suffix == ".npz":
        return npy.read_npz(path, profile, artifact=str(path))
    if path.suffix == ".npy" and len(expected) == 1:
        return {next(iter(expected)): npy.read_npy(path, profile, artifact=str(path))}
    raise UsageError(
        f"the outputs {path} are not an .npz (or an .npy for a one-array reference) of {name}",
        fix=f"save the outputs with numpy.savez: {sorted(expected)}",
    )


@click.command(name="attest")
@click.argument("reference")
@click.argument("outputs", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--output",
    "-o",
    "output",
    required=True,
    type=OutputPath(what="certificate"),
    help="Write the signed certificate (a DSSE envelope, JSON) here.",
)
@click.option(
    "--subject",
    "subjects",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The candidate the outputs came from (a converted checkpoint), by its sha256; repeat "
    "for several. The outputs file is a subject too.",
)
@click.option(
    "--key",
    "key",
    default=None,
    help=f"Your private key, a PEM file (also ${attest_mod.KEY_ENV}); {_NOT_INSIDE}.",
)
@click.option(
    "--env",
    "env_pairs",
    multiple=True,
    metavar="KEY=VALUE",
    help="Add to the recorded environment what the comparison cannot know (the device or "
    "framework the candidate ran on); repeat for several.",
)
@click.pass_obj
@handle_errors
def attest(
    obj: Context,
    reference: str,
    outputs: Path,
    output: Target,
    subjects: tuple[Path, ...],
    key: str | None,
    env_pairs: tuple[str, ...],
) -> None:
    """Sign a parity certificate for OUTPUTS.

    Compare OUTPUTS (an .npz of the candidate's outputs) with the verified reference REFERENCE
    under its record's tolerance, and write a signed parity certificate: an in-toto statement
    whose subjects are the candidate files (--subject, and OUTPUTS) by sha256, and whose
    predicate holds the outcome, the reference with its digest and tolerance, the errors
    measured per array and the environment; signed as a DSSE envelope with your private key.
    ``fixture-store verify-attestation`` checks it offline.

    Exit 0 when the outputs are at parity, 1 when they are not (the certificate is written
    either way and says FAILED), 2 on a usage error.
    """
    from fixture_store import limits

    registry = obj.registry()
    store = obj.store
    key_file = attest_mod.key_path(key, forbidden=(store.root, registry.directory))
    env = attest_mod.environment(_env_pairs(env_pairs))
    attest_mod.signer(key_file)  # a bad key fails before the comparison runs
    fixtures = Fixtures(store, registry)
    try:
        record = fixtures.verified(reference)
        if record.content is not Content.ARRAYS:
            raise UsageError(
                f"{reference} is not an NPY/NPZ reference (kind {record.kind}): a parity "
                "certificate is about arrays compared",
                fix="attest against the record of an .npy or .npz reference",
            )
        expected = fixtures.arrays(reference)
    finally:
        fixtures.close()
    actual = _outputs(outputs, expected, limits.profile(record.profile), npy_name(record))
    report = compare(reference, expected, actual, record.tolerance)
    statement = attest_mod.statement(
        [*(attest_mod.Subject.of_file(p) for p in subjects), attest_mod.Subject.of_file(outputs)],
        [record],
        [c.to_json() for c in report.comparisons],
        ok=report.ok,
        missing=report.missing,
        extra=report.extra,
        env=env,
    )
    envelope = attest_mod.sign(statement, key_file)
    try:
        output.write_bytes(attest_mod.dumps(envelope))
    except OSError as e:
        raise UsageError(
            f"cannot write the certificate {output}: {e.strerror or e}",
            fix="name a file in a folder you can write (-o FILE)",
        ) from None
    result = statement["predicate"]["result"]
    n = len(report.comparisons)
    out.print(
        f"certificate: {output} ({result}: {n} array{'s' * (n != 1)} of {reference}; "
        f"{len(statement['subject'])} subject{'s' * (len(statement['subject']) != 1)})",
        markup=False,
    )
    if not report.ok:
        failed = statement["predicate"]["failedTests"]
        err.print(f"not at parity: {', '.join(failed) or 'extra arrays'}", markup=False)
    leave(EXIT_OK if report.ok else EXIT_FAILED)


@click.command(name="verify-attestation")
@click.argument("envelope", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--key",
    "key",
    default=None,
    help=f"The signer's public key, a PEM file (also ${attest_mod.PUBLIC_KEY_ENV}).",
)
@click.option(
    "--candidate",
    "candidates",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Check this file's bytes against the subject named by this path (as it was given to "
    "attest); repeat for several.",
)
@click.option(
    "--all-subjects",
    is_flag=True,
    help="Require every subject of the certificate to be checked by a --candidate (default: "
    "the subjects left unchecked are named on stderr).",
)
@click.pass_obj
@handle_errors
def verify_attestation(
    obj: Context,
    envelope: Path,
    key: str | None,
    candidates: tuple[Path, ...],
    all_subjects: bool,
) -> None:
    """Verify a signed parity certificate offline.

    Check ENVELOPE's signature with the public key, each --candidate's bytes against the
    subject named by its path, and each reference the certificate names against today's registry
    (its digest and its tolerance). Nothing is fetched.

    Exit 0 when everything verifies and the certificate says PASSED; 1 when anything changed
    (each change named) or the certificate records a failed parity; 2 on a usage error.
    """
    registry = obj.registry()
    key_file = attest_mod.key_path(
        key, forbidden=(obj.store.root, registry.directory), env=attest_mod.PUBLIC_KEY_ENV
    )
    verified = attest_mod.verify(
        envelope, key_file, registry, candidates, all_subjects=all_subjects
    )
    for problem in verified.problems:
        err.print(f"changed: {problem}", markup=False)
    if verified.problems:
        err.print(
            f"error: {envelope} does not verify ({len(verified.problems)} change"
            f"{'s' * (len(verified.problems) != 1)})",
            markup=False,
        )
        err.print("  fix: attest the candidate again against today's registry", markup=False)
        leave(EXIT_FAILED)
    doc = verified.statement
    subjects = attest_mod.subject_names(doc)
    refs = ", ".join(str(r.get("name")) for r in doc["predicate"]["references"])
    checked = len(subjects) - len(verified.unchecked)
    out.print(
        f"verified: {envelope}: {verified.result} ({', '.join(subjects)} against {refs}; "
        f"{checked} of {len(subjects)} subject{'s' * (len(subjects) != 1)} checked)",
        markup=False,
    )
    if verified.unchecked:
        err.print(
            f"not checked: {', '.join(verified.unchecked)} (no --candidate names "
            f"{'it' if len(verified.unchecked) == 1 else 'them'}: the signature and the "
            "references verify, these files' bytes were not compared)",
            markup=False,
        )
        err.print(
            "  fix: pass --candidate PATH for each, and --all-subjects to require it",
            markup=False,
        )
    if verified.result != attest_mod.PASSED:
        err.print(
            f"error: {envelope} is authentic but records a failed parity result", markup=False
        )
        leave(EXIT_FAILED)
    leave(EXIT_OK)
