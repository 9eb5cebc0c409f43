"""Pinned environments: an isolated virtual environment per requirement set, made by uv.

A generator declares the upstream it needs as exact pins. Its environment lives in the store's
``envs/<key>`` folder, keyed by the digest of (python, pins), so every checkout and CI job sharing a
store shares it. The environment actually used (every installed distribution, Python, platform) is
read back from the generator's own report and recorded with its outputs. The generator runs with
the generator kit on its ``PYTHONPATH`` (:mod:`fixture_store.regenerate.protocol`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock

from fixture_store.errors import FixtureStoreError, UsageError
from fixture_store.objects.store import Store
from fixture_store.regenerate import protocol

_PIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*==[0-9A-Za-z][0-9A-Za-z.+!-]*")


class GeneratorError(FixtureStoreError):
    """A pinned environment could not be made or refused to run the generator."""


@dataclass(frozen=True)
class PinnedEnv:
    """Exact pins (``name==version``) and the Python minor version they run under."""

    requirements: tuple[str, ...]
    python: str
    without: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for req in self.requirements:
            if _PIN.fullmatch(req) is None:
                raise UsageError(
                    f"requirement {req!r} is not an exact pin",
                    fix="write 'name==exact.version' in params.yaml",
                )
        object.__setattr__(self, "requirements", tuple(sorted(self.requirements, key=str.lower)))

    @property
    def key(self) -> str:
        doc = {"python": self.python, "requirements": list(self.requirements)}
        blob = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()[:20]

    def folder(self, store: Store) -> Path:
        return store.root / "envs" / self.key

    def python_path(self, store: Store) -> Path:
        return self.folder(store) / "bin" / "python"


def uv_binary() -> str:
    """The uv executable: the one running us (``$UV``), else the one on PATH."""
    found = os.environ.get("UV") or shutil.which("uv")
    if not found:
        raise UsageError(
            "uv is needed to make pinned generator environments and was not found",
            fix="install uv (python3 -m pip install uv) and rerun",
        )
    return found


def ensure(
    env: PinnedEnv,
    store: Store,
    *,
    offline: bool = False,
    log: Callable[[str], None] = lambda _m: None,
) -> Path:
    """The environment's interpreter, making the environment once (atomically) if needed.

    Making one is the only time regeneration reaches the package index (through uv; uv's cache
    first). ``offline`` makes it from uv's cache alone, and says so clearly when the cache
    lacks a pin. uv's own progress lines go to ``log`` while it works.

    ``envs/`` and the environment's own folder must be plain folders of the store: a link
    there is refused (:class:`StoreError`), so no interpreter outside the store is run and no
    removal reaches through it. Inside an environment links are normal (``bin/python``).
    """
    folder = env.folder(store)
    python = env.python_path(store)
    if _complete(store, env):
        return python
    store.ensure()
    store.plain("envs", create=True)
    with FileLock(str(folder) + ".lock"):
        if _complete(store, env):
            return python
        staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{env.key}-"))
        where = "uv's cache only (--offline)" if offline else "the package index, through uv"
        log(f"making the pinned environment {' '.join(env.requirements)} from {where}")
        try:
            uv = uv_binary()
            clean = {
                k: v
                for k, v in os.environ.items()
                if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT")
            }
            # Relocatable so the staged folder can be renamed into place.
            flags = ["--offline"] if offline else []
            _run(
                [
                    uv,
                    "venv",
                    "--quiet",
                    *flags,
                    "--relocatable",
                    "--python",
                    env.python,
                    str(staging),
                ],
                clean,
                env,
                offline=offline,
                log=log,
            )
            _run(
                [
                    uv,
                    "pip",
                    "install",
                    *flags,
                    "--python",
                    str(staging / "bin" / "python"),
                    *env.requirements,
                ],
                clean,
                env,
                offline=offline,
                log=log,
            )
            (staging / "requirements.txt").write_text("\n".join(env.requirements) + "\n")
            (staging / ".complete").write_text("")
            if store.plain("envs", env.key):  # an incomplete one; shutil.rmtree refuses links
                shutil.rmtree(folder)
            os.rename(staging, folder)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
    return python


def _complete(store: Store, env: PinnedEnv) -> bool:
    """Whether the environment was made completely, in plain folders of the store."""
    if not store.plain("envs", env.key):
        return False
    return (env.folder(store) / ".complete").is_file() and env.python_path(store).exists()


def _run(
    cmd: Sequence[str],
    environ: dict[str, str],
    env: PinnedEnv,
    *,
    offline: bool,
    log: Callable[[str], None],
) -> None:
    """Run a uv command, passing each line it prints to ``log`` as it comes."""
    lines: list[str] = []
    with subprocess.Popen(
        cmd, env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip())
            if line.strip():
                log(f"  uv: {line.strip()}")
    if proc.returncode == 0:
        return
    tail = "\n".join(ln for ln in lines[-8:] if ln.strip())
    pins = " ".join(env.requirements)
    if offline:
        raise GeneratorError(
            f"cannot make the pinned environment {pins} (python {env.python}) offline: "
            f"uv's cache does not hold everything it needs: {tail}",
            fix="make it once with the network (the same command without --offline)",
        )
    raise GeneratorError(
        f"could not make the pinned environment {pins} (python {env.python}): {tail}",
        fix="check the pins in params.yaml exist for this Python and platform",
    )


def run_generator(
    python: Path | str,
    script: Path,
    out: Path,
    env: PinnedEnv,
    *,
    stage: str,
    args: Sequence[str] = (),
    stream_stderr: bool = True,
) -> None:
    """Run a generator script with its pins enforced; raise with its message if it refuses."""
    cmd = [str(python), str(script), "--out", str(out)]
    for req in env.requirements:
        cmd += ["--require", req]
    for name in env.without:
        cmd += ["--without", name]
    cmd += list(args)
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    environ["PYTHONHASHSEED"] = "0"
    # The generator kit, importable without fixture-store in the pinned environment; the
    # folder holds nothing else, so no other module of the package leaks onto the path.
    environ["PYTHONPATH"] = str(protocol.kit_folder())
    proc = subprocess.run(cmd, env=environ, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        refusal = [ln for ln in lines if ln.startswith("error:") or ln.lstrip().startswith("fix:")]
        message = "\n".join(refusal or lines[-12:])
        raise GeneratorError(
            f"generator {script.name} of stage {stage!r} failed (exit {proc.returncode}):\n"
            f"{message}",
            fix=f"fixture-store regenerate {stage}  (runs it in its pinned environment)",
        )
    if stream_stderr and proc.stderr.strip():
        with contextlib.suppress(OSError):
            sys.stderr.write(_quiet(proc.stderr))


def _quiet(text: str) -> str:
    """Keep the generator's own summary lines; upstream warnings are noise in a report."""
    keep = [ln for ln in text.splitlines() if not ("Warning" in ln or ln.startswith("  "))]
    return "\n".join(keep[-5:]) + ("\n" if keep else "")


# Machine details a generator's environment.json reports that do not define the environment: the
# kernel build string and the architecture differ between a laptop, a colleague's workstation and
# a CI runner that make the same bytes from the same pins. They stay in the run's own
# environment.json (in the untracked scratch folder); the registry and the tracked reports keep
# only what defines the environment, so ``dvc.lock`` is the same on every machine.
MACHINE_DETAILS = ("platform", "machine")


def defining(environment: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a recorded environment that defines it: pins, lock digest, interpreter line.

    The Python version is cut to ``major.minor`` (the patch level is a machine detail: the pins
    and the interpreter line decide what a generator computes); everything a generator added
    itself (``stage``, a converter version) is kept as written.
    """
    kept = {k: v for k, v in environment.items() if k not in MACHINE_DETAILS}
    python = kept.get("python")
    if isinstance(python, str) and python.count(".") >= 2:  # noqa: PLR2004 - major.minor.patch
        kept["python"] = ".".join(python.split(".")[:2])
    return kept
