"""Write docs/cli.md, the CLI reference, from the click commands themselves.

    uv run python scripts/cli_reference.py           # rewrite docs/cli.md
    uv run python scripts/cli_reference.py --check   # exit 1 if docs/cli.md is not what it writes

Every command in the CLI's lazy table (fixture_store/cli/app.py) gets its own section with the
help text click prints for ``--help``, at a fixed width, so the page says exactly what the
commands say and ``tests/scripts/test_cli_reference.py`` fails when the two drift apart, then
its examples (:data:`EXAMPLES`: each parses against the command's own options, which the test
checks, so an example cannot name an option the command does not have).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import click

from fixture_store.cli.app import COMMANDS, load_command, main

PAGE = Path(__file__).resolve().parents[1] / "docs" / "cli.md"
WIDTH = 100

INTRO = """\
# CLI reference

This page is generated from the commands themselves by `scripts/cli_reference.py`; do not edit it
by hand (`uv run python scripts/cli_reference.py` rewrites it, and a test fails when it is stale).

Global options come before the command: `fixture-store [--store DIR] [--registry DIR] COMMAND ...`.
Every command has `--help` (or `-h`). Exit codes: `0` everything asked for verified, `1` something
failed verification, `2` a usage or registry error. Tables go to stdout, errors to stderr, and
`--json` (where a command has it) gives machine output: indented at a terminal, one line when a
program reads it (a pipe or a file, as `gh` prints it; `jq .` indents it again).
"""


# At least one example per command: a command line, then what it does.
EXAMPLES: dict[str, tuple[tuple[str, str], ...]] = {
    "verify-attestation": (
        (
            "fixture-store verify-attestation converted.intoto.json --key parity.pub "
            "--candidate converted.safetensors",
            "check the certificate's signature, the checkpoint's bytes and the registry, offline",
        ),
    ),
    "add": (
        (
            "fixture-store add tests/data/*.npz --family reference --kind fixture "
            "--tolerance mean_abs:5e-4",
            "register every NPZ file as reference/<file name>, judged by mean_abs <= 5e-4",
        ),
        (
            "fixture-store add --name reference/large.npz --kind fixture --gap 'needs a GPU run'",
            "declare an artifact the project cannot have yet",
        ),
    ),
    "attest": (
        (
            "fixture-store attest equimo/dinov2_reference.npz outputs.npz --subject "
            "converted.safetensors --key ~/.keys/parity.pem -o converted.intoto.json",
            "sign a certificate that the converted checkpoint's outputs are at parity",
        ),
    ),
    "check": (
        (
            "fixture-store check",
            "check every registry file and record without the store (the pre-commit hook)",
        ),
    ),
    "diff": (
        ("fixture-store diff", "what the uncommitted registry change does to trust"),
        (
            "fixture-store diff origin/main HEAD --format markdown --fail-on loosened,digest,gap",
            "a pull request's registry change as a comment; exit 1 if it loosens a tolerance, "
            "replaces a digest or makes a gap",
        ),
    ),
    "compare": (
        (
            "fixture-store compare --family onnx-node --runtime ort --report compare.html",
            "run ONNX Runtime on every case of onnx-node and write the HTML report",
        ),
    ),
    "expectations": (
        ("fixture-store expectations", "which environments have a rule, verified where, or never"),
        (
            "fixture-store expectations add equimo/dinov2_reference.npz --env device:cuda "
            "--from-run",
            "show the registry diff that adds device:cuda from a passing run (--write writes it)",
        ),
    ),
    "fetch": (
        ("fixture-store fetch --all", "bring every artifact from its pinned source, verified"),
        ("fixture-store fetch reference/logits.npz", "bring back one artifact"),
    ),
    "gc": (
        ("fixture-store gc", "list the objects no record references (a dry run)"),
        ("fixture-store gc --yes", "and delete them"),
    ),
    "import": (
        (
            "fixture-store import sha256sum data/SHA256SUMS --family reference",
            "register the files a SHA256SUMS lists, after checking their bytes against it",
        ),
    ),
    "init": (("fixture-store init", "create provenance/ here and the object store"),),
    "list": (("fixture-store list --family reference", "the artifacts of one family"),),
    "migrate": (
        (
            "fixture-store migrate pywt",
            "the family's arrays manifests grouped by dtype and shape, in one transaction",
        ),
    ),
    "path": (
        (
            "fixture-store path reference/logits.npz",
            "print the path of the verified bytes (exit 1 if they do not verify)",
        ),
    ),
    "provenance": (
        (
            "fixture-store provenance checkpoints/test_Linear.tar.zst",
            "the in-toto statement of a converted checkpoint, its lineage as dependencies",
        ),
    ),
    "pull": (
        ("fixture-store pull --all --remote team", "bring every object from the remote team"),
    ),
    "push": (
        (
            "fixture-store push --family reference --remote team",
            "upload a family's objects that verify to the remote team",
        ),
    ),
    "regenerate": (
        (
            "fixture-store regenerate checkpoints --fetch",
            "rebuild the checkpoints stage in its pinned environment and compare with the registry",
        ),
    ),
    "regenerate-summary": (
        (
            "fixture-store regenerate-summary reports/onnx-node.json --all --full "
            "--metrics metrics/regeneration.json",
            "verify everything and summarise the stage's report as DVC metrics",
        ),
    ),
    "rehash": (("fixture-store rehash --family reference", "record BLAKE3 beside SHA-256"),),
    "remote": (
        (
            "fixture-store remote add team s3://my-bucket/fixtures --default",
            "declare an S3 remote and make it the default",
        ),
        ("fixture-store remote list", "the remotes, the default first"),
    ),
    "report": (
        (
            "fixture-store report --html reports/provenance",
            "verify every artifact and write the provenance report's pages",
        ),
    ),
    "show": (
        ("fixture-store show reference/logits.npz --lineage", "a record and its chain of parents"),
    ),
    "status": (("fixture-store status", "counts per family, without hashing anything"),),
    "tolerance": (
        (
            "fixture-store tolerance suggest reference/logits.npz --candidate run1.npz "
            "--candidate run2.npz --environment device:cpu,runtime:jax",
            "the largest error of two runs per array and metric, and the bounds proposed",
        ),
        (
            "fixture-store tolerance suggest reference/logits.npz --candidate run1.npz "
            "--metric rms --why 'the upstream test bounds the RMS' --accept",
            "write the proposed bound with its why and evidence (prints the diff)",
        ),
    ),
    "verify": (
        ("fixture-store verify", "verify every artifact (cached where nothing changed)"),
        ("fixture-store verify --full", "re-hash every object"),
    ),
}


def _examples(name: str) -> str:
    lines = "\n".join(f"# {what}\n$ {line}" for line, what in EXAMPLES.get(name, ()))
    return f"Example{'s' if len(EXAMPLES.get(name, ())) > 1 else ''}:\n\n```console\n{lines}\n```\n"


def _help(command: click.Command, name: str, parent: click.Context | None) -> str:
    ctx = command.make_context(
        name,
        [],
        parent=parent,
        resilient_parsing=True,  # no required argument or option is checked
        terminal_width=WIDTH,
        max_content_width=WIDTH,
    )
    return command.get_help(ctx).rstrip()


def render() -> str:
    """The whole page, as it should be committed."""
    root = main.make_context(
        "fixture-store", [], resilient_parsing=True, terminal_width=WIDTH, max_content_width=WIDTH
    )
    parts = [INTRO, "## fixture-store\n", f"```text\n{main.get_help(root).rstrip()}\n```\n"]
    for name in sorted(COMMANDS):
        parts.append(f"## {name}\n")
        command = load_command(name)
        parts.append(f"```text\n{_help(command, name, root)}\n```\n")
        parts.append(_examples(name))
        if isinstance(command, click.Group):  # each subcommand's options too
            group = command.make_context(name, [], parent=root, resilient_parsing=True)
            for sub in sorted(command.commands):
                parts.append(f"### {name} {sub}\n")
                parts.append(f"```text\n{_help(command.commands[sub], sub, group)}\n```\n")
    return "\n".join(parts)


def main_(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="Only check that the page is current.")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = PAGE.read_text(encoding="utf-8") if PAGE.is_file() else ""
        if current != text:
            sys.stderr.write(
                f"{PAGE.name} is stale\n  fix: uv run python scripts/cli_reference.py\n"
            )
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main_())
