"""A child process for the concurrency trials (see :mod:`tests.support.trials`).

``python -m tests.support.trial_child steps STEPS.json``
    runs the steps of a JSON list in order, printing one JSON line per step. A step is
    ``{"cli": [argv...]}`` (a full CLI command, run in this process through click's runner, so
    the registry and the store are loaded afresh as a real command does), ``{"write": [path,
    text]}`` (replace a file, e.g. a stage's params between regenerations) or ``{"barrier":
    [folder, parties]}`` (wait until ``parties`` children reached the same barrier, so that
    several writers start their next command together).

``python -m tests.support.trial_child gc-loop STORE PROJECT STOP``
    runs ``gc --yes`` again and again until the file STOP exists, then prints one JSON line:
    how many runs, how many had to wait for a writer in flight, and every run that did not exit
    0 or raised.

``python -m tests.support.trial_child write-loop PROJECT FAMILY RECORDS MODE``
    prints ``ready``, then rewrites ``provenance/FAMILY.json`` forever, one more record each
    time (back to one after RECORDS), the parent kills it. MODE ``load``: each write loads the
    registry and writes the family back (``write_family``); ``tight``: one transaction per
    write, nothing read, so that a kill mostly lands mid-write.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result


def _outcome(result: Result) -> dict[str, Any]:
    tb = None
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        assert result.exc_info is not None
        tb = "".join(traceback.format_exception(*result.exc_info))
    elif "Traceback (most recent call last)" in result.stderr:
        tb = result.stderr
    return {"exit": result.exit_code, "stdout": result.stdout, "stderr": result.stderr, "tb": tb}


def _invoke(argv: list[str]) -> Result:
    from fixture_store.cli import main

    return CliRunner().invoke(main, argv)


def _barrier(folder: str, parties: int) -> None:
    here = Path(folder)
    here.mkdir(parents=True, exist_ok=True)
    (here / f"{os.getpid()}").touch()
    deadline = time.monotonic() + 120
    while sum(1 for _ in here.iterdir()) < parties:
        if time.monotonic() > deadline:
            raise SystemExit(f"barrier {folder}: the other writers never came")
        time.sleep(0.001)


def steps(spec: str) -> None:
    for step in json.loads(Path(spec).read_text()):
        if "write" in step:
            path, text = step["write"]
            tmp = Path(path + ".trial-tmp")
            tmp.write_text(text)
            os.replace(tmp, path)
            continue
        if "barrier" in step:
            _barrier(*step["barrier"])
            continue
        line = {"argv": step["cli"], **_outcome(_invoke(step["cli"]))}
        print(json.dumps(line), flush=True)


def gc_loop(store: str, project: str, stop: str) -> None:
    runs, waited, bad = 0, 0, []
    argv = ["--store", store, "--registry", project, "gc", "--yes", "--json"]
    while not os.path.exists(stop):
        outcome = _outcome(_invoke(argv))
        runs += 1
        waited += "waiting for the store's writers" in outcome["stderr"]
        if outcome["exit"] != 0 or outcome["tb"]:
            bad.append(outcome)
        time.sleep(random.uniform(0, 0.003))  # let writers in between two collections
    print(json.dumps({"runs": runs, "waited": waited, "bad": bad}), flush=True)


def write_loop(project: str, family: str, count: str, mode: str) -> None:
    from fixture_store import registry as registry_mod
    from tests.support.trials import sigkill_record

    root = Path(project)
    k = len(registry_mod.load(root).families[family].records)
    every = [sigkill_record(family, i, int(count)) for i in range(int(count))]
    print("ready", flush=True)
    while True:
        k = k % int(count) + 1
        if mode == "load":  # what a script does: load the registry, write the family back
            registry_mod.write_family(registry_mod.load(root), family, every[:k])
        else:  # back to back, so that most of the time is spent writing
            with registry_mod.transaction(root) as tx:
                tx.write(family, every[:k], description="", known_failures=())


def main() -> None:
    command, *args = sys.argv[1:]
    if command == "steps":
        steps(*args)
    elif command == "gc-loop":
        gc_loop(*args)
    elif command == "write-loop":
        write_loop(*args)
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main()
