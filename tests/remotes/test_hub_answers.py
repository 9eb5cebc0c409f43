"""Answers from a server checked at the door (issue 34 class 7): commit ids, refs by git's
check-ref-format rules, ``Retry-After`` as RFC 9110 defines it, Hub paths without ``..``."""

from __future__ import annotations

import ast
import inspect
import re
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import pytest

import fixture_store
from fixture_store import registry as registry_mod
from fixture_store.errors import RegistryError, UsageError
from fixture_store.objects.store import Store
from fixture_store.registry import HubRepo
from fixture_store.registry import sources as sources_mod
from fixture_store.registry.pins import ref_problem
from fixture_store.remotes.sync import Outcome, plan, push
from fixture_store.sources import answers
from tests.remotes import test_hub
from tests.remotes.test_hub import REPO, _project, _remote
from tests.support.cli import run
from tests.support.hubserver import HubState
from tests.support.s3server import FaultProxy

PACKAGE = Path(fixture_store.__file__).parent
hub = test_hub.hub  # the loopback Hub behind the fault proxy
NOW = datetime(2026, 12, 2, 12, 0, 0, tzinfo=UTC)


# -- Retry-After (RFC 9110 10.2.3: HTTP-date / delay-seconds) -----------------------------------
@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("120", 120.0),
        (" 0 ", 0.0),
        ("Wed, 02 Dec 2026 12:01:00 GMT", 60.0),  # IMF-fixdate
        ("Wednesday, 02-Dec-26 12:00:30 GMT", 30.0),  # obsolete RFC 850
        ("Wed Dec  2 12:00:10 2026", 10.0),  # obsolete asctime
        ("Wed, 02 Dec 2026 11:00:00 GMT", 0.0),  # in the past: no wait
        ("-5", None),
        ("1.5", None),
        ("soon", None),
        ("", None),
        (None, None),
    ],
)
def test_retry_after_is_delta_seconds_or_an_http_date(value: str | None, seconds: float) -> None:
    assert answers.retry_after(value, now=NOW) == seconds


def test_retry_after_reads_the_header_of_an_answer() -> None:
    assert answers.retry_after_of({"Retry-After": "7"}) == 7.0
    assert answers.retry_after_of({}) is None and answers.retry_after_of(None) is None


# -- refs: git check-ref-format --allow-onelevel ------------------------------------------------
REFS = ["main", "feature/x", "v1.0", "release-2026.12", "..", "a..b", "@", "a@{1}", "x.lock",
        "a/.hidden", ".x", "a b", "a~1", "a^", "a:b", "a?", "a*", "a[b", "a\\b", "x/", "/x",
        "a//b", "x.", "", "a\x01b", "refs/heads/ok", "a/b.lock/c", "a@b"]  # fmt: skip


@pytest.mark.parametrize("name", REFS)
def test_a_ref_is_judged_as_git_judges_it(name: str) -> None:
    git = shutil.which("git")
    if git is None or "\x01" in name:  # git's argv cannot carry every byte
        expected = name in {"main", "feature/x", "v1.0", "release-2026.12", "refs/heads/ok", "a@b"}
    else:
        done = subprocess.run(
            [git, "check-ref-format", "--allow-onelevel", name], capture_output=True, check=False
        )
        expected = done.returncode == 0
    assert (ref_problem(name) is None) is expected, ref_problem(name)


@pytest.mark.parametrize("revision", ["..", "a..b", "x.lock", "a~1", ".hidden", "a@{1}"])
def test_a_hub_remote_at_a_ref_git_refuses_is_refused(revision: str) -> None:
    with pytest.raises(UsageError, match=r"no branch name|malformed @REVISION"):
        HubRepo.parse(f"hf://datasets/org/x@{revision}")
    assert HubRepo.parse("hf://datasets/org/x@feature/y").revision == "feature/y"


@pytest.mark.usefixtures("project")
def test_remote_add_of_a_hub_url_at_dotdot_is_one_line() -> None:
    code, _, err = run("remote", "add", "x", "hf://datasets/org/x@..")
    assert code == 2 and "no branch name" in err and "Traceback" not in err


# -- Hub paths in records ---------------------------------------------------------------------
@pytest.mark.parametrize("path", ["../other/model.bin", "a/../../x", "/abs", "a\\b", ""])
def test_a_pinned_hub_source_path_that_leaves_the_repo_is_an_invalid_record(path: str) -> None:
    raw = {
        "kind": "fixture",
        "digest": "sha256:" + "a" * 64,
        "size": 3,
        "source": {"type": "hub", "repo_id": "org/x", "revision": "b" * 40, "path": path},
    }
    with pytest.raises(RegistryError) as caught:
        registry_mod.parse_record("fam/a", raw, file="t")
    assert caught.value.field == "source.path"


def test_every_source_with_a_path_checks_it() -> None:
    """The walk: a source type that carries a path runs the path rule in its check."""
    unchecked = []
    for _, cls in inspect.getmembers(sources_mod, inspect.isclass):
        if cls.__module__ != sources_mod.__name__ or "path" not in getattr(
            cls, "__annotations__", {}
        ):
            continue
        check = getattr(cls, "check", None)
        if check is None or "_check_relpath" not in inspect.getsource(check):
            unchecked.append(cls.__name__)
    assert unchecked == []


# -- commit ids and Retry-After from a live (loopback) Hub --------------------------------------
@pytest.mark.usefixtures("store")
def test_a_commit_id_that_is_no_commit_is_the_hubs_error_and_pins_nothing(
    project: Path, hub: tuple[HubState, object]
) -> None:
    state, _ = hub
    registry = _project(project)
    before = {n: registry.get(n).source for n in registry.names()}
    state.answered_oid = "main"
    code, stdout, stderr = run("push", "--all", "--pin", "--remote", REPO)
    assert code == 1, stdout + stderr
    assert "the Hub answered 'main' as the id of commit 1" in stderr
    assert "source.revision" not in stderr and "Traceback" not in stdout + stderr
    after = registry_mod.load(project)
    assert {n: after.get(n).source for n in after.names()} == before


def test_a_retry_after_that_is_no_number_is_not_reported_as_asked(
    project: Path, store: Store, hub: tuple[HubState, FaultProxy]
) -> None:
    state, proxy = hub
    registry = _project(project)
    proxy.faults.match = "/commit/"
    proxy.faults.throttle = 10
    proxy.faults.retry_after = "-5"  # type: ignore[assignment]
    (result,) = push(store, registry, _remote(), plan(registry, ["fam/w"])).results
    assert result.outcome is Outcome.FAILED and state.commits == []
    assert "asks to wait" not in result.message and "did not say how long" in result.message


def test_a_retry_after_http_date_is_the_wait_it_names(
    project: Path, store: Store, hub: tuple[HubState, FaultProxy]
) -> None:
    state, proxy = hub
    registry = _project(project)
    proxy.faults.match = "/commit/"
    proxy.faults.throttle = 1
    proxy.faults.retry_after = format_datetime(  # type: ignore[assignment]
        datetime.now(UTC) + timedelta(hours=1), usegmt=True
    )
    (result,) = push(store, registry, _remote(), plan(registry, ["fam/w"])).results
    assert result.outcome is Outcome.FAILED and state.commits == []
    assert "asks to wait 3" in result.message  # ~3600s, not the backoff


# -- the walk ------------------------------------------------------------------------------------
def test_retry_after_is_read_only_by_the_answers_module() -> None:
    """The walk: the header's name is spelled in code (not prose) only where it is parsed."""
    texts = {p: p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.py")}
    readers = [
        p.relative_to(PACKAGE).as_posix()
        for p, text in texts.items()
        if "retry-after" in text.lower()  # only these can spell it in code
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.strip().lower() == "retry-after"
    ]
    assert readers == ["sources/answers.py"]


_COMMIT_FIELDS = {"oid", "sha", "commit_hash"}
_READS_COMMIT = re.compile(r'\.(oid|sha|commit_hash)\b|"(oid|sha|commit_hash)"')


def test_every_commit_id_a_server_answers_is_checked_where_it_is_read() -> None:
    """The walk: a function that reads a commit id off a Hub answer (``.oid``, ``.sha``,
    ``.commit_hash``) also checks it through :mod:`fixture_store.sources.answers`."""
    unchecked = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if _READS_COMMIT.search(text) is None:  # cannot read one
            continue
        tree = ast.parse(text)
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef):
                continue
            reads = any(
                (isinstance(n, ast.Attribute) and n.attr in _COMMIT_FIELDS)
                or (
                    isinstance(n, ast.Call)
                    and isinstance(n.func, ast.Name)
                    and n.func.id == "getattr"
                    and len(n.args) > 1
                    and isinstance(n.args[1], ast.Constant)
                    and n.args[1].value in _COMMIT_FIELDS
                )
                for n in ast.walk(fn)
            )
            checks = any(
                isinstance(n, ast.Attribute)
                and isinstance(n.value, ast.Name)
                and n.value.id == "answers"
                and n.attr in ("commit_id", "commit_problem")
                for n in ast.walk(fn)
            )
            if reads and not checks:
                unchecked.append(f"{path.relative_to(PACKAGE)}:{fn.name}")
    assert unchecked == []
