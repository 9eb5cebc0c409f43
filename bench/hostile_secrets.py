"""The secrets report: every entry point a credential can come in by, over many rounds, each
round with a fresh random secret in a random place of a URL.

Not a timed benchmark: it prints, per entry point, the rounds run and what must never happen
(secrets printed on stdout or stderr, secrets written into a file the round did not plant,
tracebacks, exits other than the refusal's 2: nothing is downloaded, the refusal comes first);
every count must be zero, and the exit status says whether they all were.

Entry points: a remote's ``url`` and ``endpoint_url`` in ``pyproject.toml`` and in the user's
file (read by push, pull, fetch and remote list), ``remote add`` (URL and ``--endpoint-url``),
``--remote`` on push, pull and fetch, a record's ``source.url``, and ``add --source`` of an
``hf://`` source. URLs are https, http, s3, ftp and the Hub's hf:// (whose '@' otherwise names a
revision).

    uv run python -m bench.hostile_secrets                 # 50 rounds of each
    uv run python -m bench.hostile_secrets --rounds 200
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import string
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from click.testing import CliRunner

from fixture_store.cli import main as cli

COUNTS = ("printed", "written", "tracebacks", "other exits")
_ALPHABET = string.ascii_letters + string.digits + "+/=_-.~!$"
_PARAMS = ("X-Amz-Signature", "X-Amz-Credential", "X-Amz-Security-Token", "token",
           "access_token", "sig", "api_key", "secret", "password")  # fmt: skip


def _secret(rng: random.Random) -> str:
    return "S3cr" + "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(8, 32)))


def _url(rng: random.Random, secret: str) -> str:
    """A URL holding ``secret`` in its user information, its password or a parameter."""
    scheme = rng.choice(["https", "s3", "http", "ftp", "hf"])
    where = rng.choice(["user", "password", "query", "fragment"])
    # The Hub's notation: a repo (type first), where '@' otherwise names a revision.
    host = (
        rng.choice(["datasets/org/name", "models/org/name"]) if scheme == "hf" else "host.example"
    )
    if where == "user":
        return f"{scheme}://{secret.replace('/', '')}@{host}/prefix"
    if where == "password":
        return f"{scheme}://me:{secret}@{host}/prefix"
    sep = "?" if where == "query" else "#"
    return f"{scheme}://{host}/prefix{sep}a=1&{rng.choice(_PARAMS)}={secret}"


@contextmanager
def _project() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="fixture-store-secrets-"))
    try:
        project = root / "project"
        (project / "provenance").mkdir(parents=True)
        (project / "data").mkdir()
        (project / "data" / "a.bin").write_bytes(b"alpha" * 100)
        yield project
    finally:
        shutil.rmtree(root, ignore_errors=True)


# An entry point: given the project, a URL holding the secret and the secret, it plants what it
# needs (returning the files it wrote on purpose) and the command to run.
Entry = Callable[[Path, str], tuple[list[Path], list[str]]]


def _pyproject(key: str, command: list[str]) -> Entry:
    def plant(project: Path, url: str) -> tuple[list[Path], list[str]]:
        remote = f'url = "{url}"' if key == "url" else f'url = "s3://b/p"\nendpoint_url = "{url}"'
        path = project / "pyproject.toml"
        text = '[tool.fixture-store]\ndefault-remote = "team"\n\n'
        path.write_text(text + f"[tool.fixture-store.remotes.team]\n{remote}\n")
        return [path], command

    return plant


def _user_file(project: Path, url: str) -> tuple[list[Path], list[str]]:
    path = project.parent / "user.toml"
    path.write_text(f'default-remote = "team"\n[remotes.team]\nurl = "{url}"\n')
    return [path], ["push", "--all"]


def _on_the_command_line(verb: str) -> Entry:
    return lambda _project, url: ([], [verb, "--all", "--remote", url])


def _registry(project: Path, url: str) -> tuple[list[Path], list[str]]:
    path = project / "provenance" / "fam.json"
    record = {"kind": "fixture", "digest": "sha256:" + "0" * 64, "size": 1,
              "source": {"type": "url", "url": url}}  # fmt: skip
    path.write_text(json.dumps({"format_version": 1, "records": {"fam/a": record}}))
    return [path], ["verify"]


def _add_hub_source(url: str) -> list[str]:
    """``add --source`` of an hf:// source at a commit, holding the URL's credential."""
    where = url.split("://", 1)[1].replace("/prefix", f"@{'a' * 40}/a.bin", 1)
    return [
        "add",
        "data/a.bin",
        "--name",
        "fam/a",
        "--kind",
        "fixture",
        "--source",
        f"hf://{where}",
    ]


ENTRIES: dict[str, Entry] = {
    **{
        f"pyproject {key} -> {' '.join(cmd)}": _pyproject(key, cmd)
        for key in ("url", "endpoint_url")
        for cmd in (
            ["push", "--all"],
            ["pull", "--all"],
            ["fetch", "--all"],
            ["remote", "list", "--json"],
        )
    },
    "user file url -> push": _user_file,
    "remote add URL": lambda _p, url: ([], ["remote", "add", "team", url]),
    "remote add --endpoint-url": lambda _p, url: (
        [],
        ["remote", "add", "team", "s3://b/p", "--endpoint-url", url],
    ),
    **{f"--remote on {verb}": _on_the_command_line(verb) for verb in ("push", "pull", "fetch")},
    "record source.url -> verify": _registry,
    "add --source hf://": lambda _p, url: ([], _add_hub_source(url)),
}


def _round(name: str, rng: random.Random) -> Counter[str]:
    secret = _secret(rng)
    url = _url(rng, secret)
    if "endpoint" in name:  # an endpoint is http(s): the secret must be what is refused
        for scheme in ("s3://", "ftp://", "hf://"):
            url = url.replace(scheme, "https://", 1)
    entry = ENTRIES[name]
    found: Counter[str] = Counter()
    with _project() as project:
        planted, args = entry(project, url)
        env = {"FIXTURE_STORE_DIR": str(project.parent / "store"),
               "FIXTURE_STORE_CONFIG": str(project.parent / "user.toml"),
               "COLUMNS": "200"}  # fmt: skip
        cwd = Path.cwd()
        os.chdir(project)
        try:
            result = CliRunner().invoke(cli, args, env=env, catch_exceptions=True)
        finally:
            os.chdir(cwd)
        output = result.stdout + result.stderr
        found["printed"] += secret in output
        found["tracebacks"] += "Traceback" in output or not isinstance(
            result.exception, SystemExit | None
        )
        found["other exits"] += result.exit_code != 2  # noqa: PLR2004 - the refusal's code
        for path in project.parent.rglob("*"):
            if path.is_file() and path not in planted:
                found["written"] += secret.encode() in path.read_bytes()
    return found


def run(rounds: int, seed: int = 22) -> dict[str, Counter[str]]:
    """``rounds`` rounds of every entry point: what each saw (the :data:`COUNTS`)."""
    rng = random.Random(seed)
    totals: dict[str, Counter[str]] = {}
    for name in ENTRIES:
        total: Counter[str] = Counter({c: 0 for c in COUNTS})
        for _ in range(rounds):
            total += _round(name, rng)
        totals[name] = total
    return totals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=50, help="rounds per entry (default 50)")
    parser.add_argument("--seed", type=int, default=22)
    args = parser.parse_args(argv)
    width = max(map(len, ENTRIES))
    print(f"{'entry point':<{width}}  rounds  " + "  ".join(COUNTS))
    totals = run(args.rounds, args.seed)
    for name, total in totals.items():
        cells = "  ".join(f"{total[c]:>{len(c)}}" for c in COUNTS)
        print(f"{name:<{width}}  {args.rounds:>6}  {cells}")
    bad = sum(total[c] for total in totals.values() for c in COUNTS)
    print("secrets printed or written: " + ("none" if not bad else f"{bad} (must be 0)"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
