"""A long-lived worker of the guard mutation campaign: one copy of the repository, many guards.

``run.py`` starts one worker per job, in a copy of its own (the working directory, first on
``PYTHONPATH``), and sends it one request per line on stdin:

    {"file": "fixture_store/x.py", "original": "...", "replacement": "...",
     "args": ["tests/test_x.py::test_y"], "timeout": 300, "store": "/tmp/.../store-3"}

For each request the worker applies the one replacement to its copy, forks a child that runs
pytest on the request's tests with that break in place, waits for it (killing its whole process
group past the timeout), and puts the file back byte for byte before it answers with one JSON
line: ``{"code": <pytest exit, -1 on timeout>, "output": "...", "error": "..."}``. A request
without ``file`` runs the tests unbroken (the baseline).

The worker imports pytest and the heavy third-party modules once, before any guard; it never
imports the copy's own packages (``fixture_store``, ``tests``), so each forked child imports them
fresh, from the copy, with the break applied. That is what a fresh ``python -m pytest`` per guard
gave, without a new interpreter, a new copy of the repository and a second of imports per guard.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

PYTEST = ["-x", "-q", "-p", "no:cacheprovider", "-n", "0"]
# Plugins of dependencies that no guard's tests use; loading them cost a second of each run.
UNUSED_PLUGINS = ["-p", "no:hydra_pytest", "-p", "no:hypothesispytest"]
# The copy's own packages: imported only by the forked children, never by the worker itself.
OWN_PACKAGES = ("fixture_store", "tests", "models", "bench")
# Third-party modules every guard's run imports; loaded once here, inherited by every fork. Not
# pytest plugins (xdist, hypothesis): pytest warns that it cannot rewrite an imported plugin.
PRELOAD = (
    "pytest",
    "_pytest.pytester",
    "numpy",
    "click",
    "click.testing",
    "rich.console",
    "rich.table",
    "jsonschema",
    "platformdirs",
    "filelock",
    "zstandard",
    "lz4.frame",
    "blake3",
    "yaml",
)


def preload() -> None:
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            __import__(name)
    leaked = sorted(n for n in sys.modules if n.split(".")[0] in OWN_PACKAGES)
    if leaked:
        raise SystemExit(f"the worker imported the copy's own modules before any guard: {leaked}")


def drop_bytecode(source: Path) -> None:
    """Remove the compiled forms of ``source`` (plain and pytest's rewritten): a break of the
    same length written within the second of the original's mtime would otherwise look unchanged
    to the bytecode check."""
    for pyc in (source.parent / "__pycache__").glob(f"{source.stem}.*.pyc"):
        with contextlib.suppress(FileNotFoundError):
            pyc.unlink()


def _child(args: list[str], store: str, log: str) -> None:
    """In the forked child: a process group of its own, output to ``log``, then pytest."""
    code = 3
    try:
        os.setpgid(0, 0)
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.environ["FIXTURE_STORE_DIR"] = store
        import pytest

        code = int(pytest.main([*PYTEST, *UNUSED_PLUGINS, *args]))
        imported = sys.modules.get("fixture_store")
        root = str(Path.cwd().resolve()) + os.sep
        if imported is not None and not str(Path(str(imported.__file__)).resolve()).startswith(
            root
        ):
            print(f"the run imported {imported.__file__}, not the copy's fixture_store")
            code = 3
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def run_tests(args: list[str], store: str, timeout: float) -> tuple[int, str]:
    """pytest on ``args`` in a forked child; (exit code or -1 on timeout, its output)."""
    with tempfile.NamedTemporaryFile(prefix="guard-", suffix=".log", delete=False) as f:
        log = f.name
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(args, store, log)
        deadline = time.monotonic() + timeout
        status: int | None = None
        while status is None:
            done, raw = os.waitpid(pid, os.WNOHANG)
            if done:
                status = raw
            elif time.monotonic() > deadline:
                _kill_group(pid)
                os.waitpid(pid, 0)
                status = -1
            else:
                time.sleep(0.02)
        # Whatever the tests left running (a server, a child) ends with the run.
        _kill_group(pid)
        output = Path(log).read_text(encoding="utf-8", errors="replace")
        if status == -1:
            return -1, output
        if os.WIFSIGNALED(status):
            return 128 + os.WTERMSIG(status), output
        return os.WEXITSTATUS(status), output
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(log)


def handle(request: dict[str, Any]) -> dict[str, Any]:
    args = [str(a) for a in request["args"]]
    timeout, store = float(request["timeout"]), str(request["store"])
    if not request.get("file"):
        code, output = run_tests(args, store, timeout)
        return {"code": code, "output": output, "error": ""}
    target = Path(str(request["file"]))
    if not target.is_file():
        return {"code": None, "output": "", "error": f"no file {request['file']}"}
    original = target.read_bytes()
    text = original.decode("utf-8")
    found = text.count(request["original"])
    if found != 1:
        return {
            "code": None,
            "output": "",
            "error": f"the original text is found {found} times in {request['file']} (needs "
            "exactly once): re-target the guard's snippet",
        }
    try:
        target.write_text(text.replace(request["original"], request["replacement"]), "utf-8")
        drop_bytecode(target)
        code, output = run_tests(args, store, timeout)
    finally:
        target.write_bytes(original)
        drop_bytecode(target)
    return {"code": code, "output": output, "error": ""}


def main() -> int:
    preload()
    # The protocol's own channel: pytest's output goes to each child's log, never here.
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    print(json.dumps({"ready": os.getpid()}), file=channel, flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            answer = handle(json.loads(line))
        except Exception:
            answer = {"code": None, "output": "", "error": traceback.format_exc()}
        print(json.dumps(answer), file=channel, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
