"""The generator kit: what a generator script needs to speak generator protocol 1.

``fixture-store regenerate`` runs a stage's generator in the stage's pinned environment, where
fixture-store itself is not installed. The runner puts the folder holding this one module on the
generator's ``PYTHONPATH``, so a generator can ``import fixture_store_generator`` there. It uses
the standard library alone. The protocol is described in the documentation (docs/generators.md);
in short, a generator:

- takes ``--out DIR`` (where it writes), ``--inputs FILE`` (JSON list of its verified inputs),
  ``--require name==version`` and ``--without name`` (repeatable), ``--family``, and one
  ``--kebab-case`` flag per key of the stage's ``args`` (:func:`parser`);
- refuses to run, with exit code 3 and a message naming each wrong pin, in any other environment
  (:func:`checked`);
- writes its candidates under ``--out``, then ``outputs.json`` (:func:`write_outputs`) and
  ``environment.json`` (:func:`write_environment`).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import platform
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

PROTOCOL = 1
EXIT_WRONG_ENVIRONMENT = 3
OUTPUTS_FILE = "outputs.json"
ENVIRONMENT_FILE = "environment.json"


def parse_pin(text: str) -> tuple[str, str]:
    """``name==version`` as ``(name, version)``; anything else stops the generator (exit 2)."""
    name, sep, version = text.partition("==")
    if not sep or not name or not version:
        raise SystemExit(f"error: {text!r} is not an exact pin; write 'name==version'")
    return name.strip(), version.strip()


def require(pins: Iterable[str], *, stage: str) -> None:
    """Exit with a clear message unless every pin is installed at exactly its version."""
    wrong: list[str] = []
    for text in pins:
        name, version = parse_pin(text)
        try:
            have = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            have = None
        if have != version:
            wrong.append(f"{name}=={version} is pinned but {have or 'nothing'} is installed")
    if wrong:
        sys.stderr.write(
            f"error: generator for stage {stage!r} refuses to run in this environment: "
            + "; ".join(wrong)
            + f"\n  fix: fixture-store regenerate {stage}  (runs it in its pinned environment)\n"
        )
        raise SystemExit(EXIT_WRONG_ENVIRONMENT)


def absent(names: Iterable[str], *, stage: str) -> None:
    """Exit unless the named packages are NOT installed (an upstream that changes with them)."""
    present = []
    for name in names:
        try:
            present.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            continue
    if present:
        sys.stderr.write(
            f"error: generator for stage {stage!r} must run without {', '.join(present)}: the "
            "pinned upstream output changes when it is installed\n"
            f"  fix: fixture-store regenerate {stage}  (runs it in its pinned environment)\n"
        )
        raise SystemExit(EXIT_WRONG_ENVIRONMENT)


def parser(
    description: str | None, *, family: str, inputs_required: bool = False
) -> argparse.ArgumentParser:
    """The arguments every generator takes; a generator adds its own, then calls :func:`checked`."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--out", type=Path, required=True, help="Folder to write the candidates to.")
    p.add_argument(
        "--inputs",
        type=Path,
        required=inputs_required,
        help="JSON list of the verified inputs (name and path of each).",
    )
    p.add_argument(
        "--require",
        action="append",
        default=[],
        help="Exact pins of the environment (name==version); refused otherwise.",
    )
    p.add_argument(
        "--without", action="append", default=[], help="Packages that must not be installed."
    )
    p.add_argument("--family", default=family, help="Family of the records.")
    return p


def checked(
    p: argparse.ArgumentParser,
    *,
    upstream: Iterable[str],
    stage: str,
    argv: Sequence[str] | None = None,
) -> argparse.Namespace:
    """Parse the arguments, then refuse to run unless the upstream pins and ``--require`` hold
    and every ``--without`` package is absent."""
    args = p.parse_args(argv)
    require((*upstream, *args.require), stage=stage)
    absent(args.without, stage=stage)
    return args


def read_inputs(path: Path | None) -> dict[str, Path]:
    """The verified inputs the runner hands over (``--inputs``): name -> path (a file, or a
    folder for a tree artifact). ``None`` (no ``--inputs``) gives no inputs."""
    if path is None:
        return {}
    return {row["name"]: Path(row["path"]) for row in json.loads(path.read_text(encoding="utf-8"))}


def environment() -> dict[str, object]:
    """What this process actually runs on: Python, platform and every installed distribution."""
    packages = {
        (d.metadata["Name"] or "").lower(): d.version for d in importlib.metadata.distributions()
    }
    packages = dict(sorted(packages.items()))
    frozen = "\n".join(f"{k}=={v}" for k, v in packages.items()).encode()
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "packages": packages,
        "packages_digest": "sha256:" + hashlib.sha256(frozen).hexdigest(),
    }


def write_environment(out: Path, extra: Mapping[str, object] | None = None) -> None:
    """Write ``environment.json``: :func:`environment` plus what the generator adds (``extra``,
    such as its stage or converter version). It is recorded in each accepted record's source."""
    doc = {**environment(), **(extra or {})}
    (out / ENVIRONMENT_FILE).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")


def write_outputs(out: Path, outputs: Sequence[Mapping[str, Any]]) -> None:
    """Write ``outputs.json``: one entry per artifact (``name``, ``kind``, ``path`` relative to
    ``out``, optional ``parents`` and descriptive fields such as ``tolerance`` or ``metadata``)."""
    doc = {"protocol": PROTOCOL, "outputs": [dict(o) for o in outputs]}
    (out / OUTPUTS_FILE).write_text(json.dumps(doc, indent=1) + "\n")
