"""The Hub remote against the loopback Hub (download and upload protocols), with the real
``huggingface_hub`` client, through the fault proxy the other remotes' tests use."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import huggingface_hub.constants
import pytest

from fixture_store import registry as registry_mod
from fixture_store.errors import UsageError
from fixture_store.objects.store import Store
from fixture_store.registry import HubRepo, Registry
from fixture_store.remotes import config, open_remote
from fixture_store.remotes.base import Retry, object_key
from fixture_store.remotes.hub import HubRemote
from fixture_store.remotes.sync import Outcome, plan, pull, push
from fixture_store.verify import verify_names
from tests.support.cli import add_file_and_case, run
from tests.support.hubserver import HubState, hub_server
from tests.support.s3server import FaultProxy

COMMIT = "0123456789abcdef0123456789abcdef01234567"
REPO = "hf://datasets/org/fixtures"
FAST = Retry(attempts=3, backoff=0.01, total=10.0)
TOKEN = "hf_loopbacktokenneverprinted"
WEIGHTS = bytes(range(256)) * 16  # binary and 4 KiB: the loopback Hub takes it through LFS


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[tuple[HubState, FaultProxy]]:
    """The loopback Hub behind the fault proxy; the client's endpoint is the proxy."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_ETAG_TIMEOUT", 5)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DOWNLOAD_TIMEOUT", 5)
    with hub_server(COMMIT) as (endpoint, state), FaultProxy(endpoint) as proxy:
        proxy.faults.match = "\0"  # nothing is spoiled until a test says what
        state.public_base = proxy.url
        monkeypatch.setenv("HF_ENDPOINT", proxy.url)
        yield state, proxy


def _project(project: Path) -> Registry:
    add_file_and_case(project)
    (project / "data" / "w.bin").write_bytes(WEIGHTS)
    assert run("add", "data/w.bin", "--name", "fam/w", "--kind", "fixture")[0] == 0
    return registry_mod.load(project)


def _remote(**kwargs: object) -> HubRemote:
    return HubRemote("hubby", HubRepo.parse(REPO), retry=FAST, **kwargs)  # type: ignore[arg-type]


def test_the_url_names_a_dataset_or_model_repo_and_an_optional_branch() -> None:
    assert HubRepo.parse("hf://datasets/org/x") == HubRepo("dataset", "org/x", "main")
    assert HubRepo.parse("hf://org/x") == HubRepo("model", "org/x", "main")
    assert HubRepo.parse("hf://models/org/x@dev") == HubRepo("model", "org/x", "dev")
    assert HubRepo.parse(f"hf://org/x@{COMMIT}").pinned
    spec = config.RemoteSpec.from_url("hf://datasets/org/x")
    assert spec.kind == "hub"
    assert isinstance(open_remote(spec), HubRemote)
    for bad in ("hf://org", "hf://spaces/org/x", "hf://org/x/y", "hf://org/x@", "hf://../x"):
        with pytest.raises(UsageError) as e:
            config.check_url(bad)
        assert "hf://datasets/ORG/NAME" in (e.value.fix or "")


def test_a_hub_remote_takes_no_s3_settings() -> None:
    with pytest.raises(UsageError, match="for S3 remotes"):
        config.RemoteSpec.from_json("h", {"url": REPO, "profile": "p"}, "pyproject.toml")


def test_push_makes_one_commit_and_pull_reads_it_back_verified(
    project: Path, store: Store, tmp_path: Path, hub: tuple[HubState, FaultProxy]
) -> None:
    state, _ = hub
    registry = _project(project)
    the_plan = plan(registry, registry.names())
    report = push(store, registry, _remote(), the_plan)
    assert {r.outcome for r in report.results} == {Outcome.PUSHED}, report.results
    assert report.commits == tuple(state.commits) and len(state.commits) == 1
    assert report.at == state.commits[0]
    held = state.snapshots[state.commits[0]]
    for digest in the_plan.objects.values():
        assert held[("dataset", "org/fixtures", object_key(digest))].content == (
            store.object_path(digest).read_bytes()
        )
    assert any("/lfs-upload/" in p for _, p, _ in state.requests)  # the weights went by LFS
    other = Store.at(tmp_path / "other").ensure()
    pulled = pull(other, registry, _remote(), the_plan)
    assert {r.outcome for r in pulled.results} == {Outcome.PULLED}
    assert pulled.at == state.commits[0]
    assert all(r.ok for r in verify_names(other, registry, registry.names()))


def test_a_second_push_finds_everything_there_and_makes_no_commit(
    project: Path, store: Store, hub: tuple[HubState, FaultProxy]
) -> None:
    state, _ = hub
    registry = _project(project)
    the_plan = plan(registry, registry.names())
    push(store, registry, _remote(), the_plan)
    again = push(store, registry, _remote(), the_plan)
    assert {r.outcome for r in again.results} == {Outcome.PRESENT}
    assert again.commits == () and len(state.commits) == 1


def test_more_objects_than_a_commit_takes_are_pushed_in_several_commits(
    project: Path, store: Store, hub: tuple[HubState, FaultProxy]
) -> None:
    state, _ = hub
    registry = _project(project)
    the_plan = plan(registry, registry.names())
    report = push(store, registry, _remote(files_per_commit=2), the_plan)
    assert len(report.commits) == 2 == len(state.commits)  # 4 objects, 2 a commit
    assert report.at == report.commits[-1]
    assert {r.outcome for r in report.results} == {Outcome.PUSHED}


@pytest.mark.usefixtures("store")
def test_push_pin_writes_the_commit_and_a_colleague_fetches_with_no_remote(
    project: Path,
    tmp_path: Path,
    hub: tuple[HubState, FaultProxy],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state, _ = hub
    _project(project)
    assert run("remote", "add", "hubby", REPO, "--default")[0] == 0
    code, stdout, stderr = run("push", "--all", "--pin")
    assert code == 0, stdout + stderr
    (commit,) = state.commits
    assert f"committed {commit}" in stdout
    assert f"pinned 2 record(s) to commit {commit}" in stdout
    assert "not pinned: fam/case: a tree" in stdout
    assert TOKEN not in stdout + stderr
    registry = registry_mod.load(project)
    source = registry.get("fam/w").source
    assert source.to_json() == {
        "type": "hub",
        "repo_id": "org/fixtures",
        "repo_type": "dataset",
        "revision": commit,
        "path": object_key(registry.get("fam/w").object),
    }
    assert registry.get("fam/case").source.type == "local"
    # A colleague: another store, no remote configured; fetch reads the pinned commit.
    monkeypatch.setenv("FIXTURE_STORE_CONFIG", str(tmp_path / "colleague.toml"))
    monkeypatch.setenv("FIXTURE_STORE_DIR", str(tmp_path / "colleague-store"))
    code, stdout, stderr = run("fetch", "fam/w", "fam/a")
    assert code == 0, stdout + stderr
    assert run("verify", "fam/w", "fam/a")[0] == 0


@pytest.mark.usefixtures("store")
def test_pin_is_refused_for_a_remote_that_is_not_the_hub(project: Path, tmp_path: Path) -> None:
    _project(project)
    code, _, stderr = run("push", "--all", "--pin", "--remote", str(tmp_path / "folder"))
    assert code == 2
    assert "not a Hub repo" in stderr and "Traceback" not in stderr


def test_pull_reads_at_the_commit_the_branch_named_when_it_started(
    project: Path, store: Store, tmp_path: Path, hub: tuple[HubState, FaultProxy]
) -> None:
    state, _ = hub
    registry = _project(project)
    the_plan = plan(registry, registry.names())
    push(store, registry, _remote(), the_plan)
    state.requests.clear()
    remote = _remote()
    at = remote.commit()
    state.branches["main"] = "f" * 40  # the branch moves on after the pull resolved it
    other = Store.at(tmp_path / "other").ensure()
    pulled = pull(other, registry, remote, the_plan)
    assert pulled.at == at and {r.outcome for r in pulled.results} == {Outcome.PULLED}
    resolves = [p for m, p, _ in state.requests if "/revision/" in p]
    assert len(resolves) == 1
    reads = [p for m, p, _ in state.requests if "/resolve/" in p]
    assert reads and all(f"/resolve/{at}/" in p for p in reads)


# -- faults, through the proxy --------------------------------------------------------------------
@pytest.mark.usefixtures("store")
def test_a_commit_that_fails_half_way_claims_nothing_and_pins_nothing(
    project: Path, hub: tuple[HubState, FaultProxy]
) -> None:
    state, proxy = hub
    _project(project)
    proxy.faults.match = "/commit/"
    proxy.faults.errors = 100  # the LFS uploads went through; every commit answers 500
    before = (project / "provenance").read_bytes() if (project / "provenance").is_file() else None
    sources = {n: registry_mod.load(project).get(n).source for n in ("fam/a", "fam/w")}
    code, stdout, stderr = run("push", "--all", "--pin", "--remote", REPO)
    assert code == 1, stdout + stderr
    assert "Traceback" not in stdout + stderr
    assert state.commits == [] and state.blobs  # uploaded, never committed
    assert "fam/w" in stderr and "no commit was made of them" in stderr, stderr
    assert "none of them is claimed" in stderr and "Upload" not in stderr  # no client bars
    assert "push again" in stderr  # the fix
    assert "pinned 0 record(s)" in stdout and "committed" not in stdout
    after = registry_mod.load(project)
    assert {n: after.get(n).source for n in sources} == sources
    assert before is None or (project / "provenance").read_bytes() == before
    assert TOKEN not in stdout + stderr


@pytest.mark.usefixtures("store")
def test_a_429_with_retry_after_is_waited_out_and_said(
    project: Path, hub: tuple[HubState, FaultProxy]
) -> None:
    state, proxy = hub
    _project(project)
    proxy.faults.match = "/commit/"
    proxy.faults.throttle = 1
    proxy.faults.retry_after = 1
    code, stdout, stderr = run("push", "--all", "--remote", REPO)
    assert code == 0, stdout + stderr
    assert "answered 429 to commit 1; retrying in 1s (attempt 2 of 5)" in stderr
    (commit,) = state.commits
    assert f"committed {commit}" in stdout
    assert [s for m, p, s in proxy.faults.seen if "/commit/" in p] == [429, 200]


def test_a_429_asking_longer_than_the_bounds_gives_up_naming_the_limit(
    project: Path, store: Store, hub: tuple[HubState, FaultProxy]
) -> None:
    state, proxy = hub
    registry = _project(project)
    proxy.faults.match = "/commit/"
    proxy.faults.throttle = 1
    proxy.faults.retry_after = 3600
    report = push(store, registry, _remote(), plan(registry, ["fam/w"]))
    (result,) = report.results
    assert result.outcome is Outcome.FAILED and state.commits == []
    assert "128 an hour" in result.message and "asks to wait 3600s" in result.message


def test_an_lfs_upload_the_hub_receives_short_is_refused(
    project: Path, store: Store, hub: tuple[HubState, FaultProxy]
) -> None:
    """The proxy forwards the upload 10 bytes short: the Hub's verify refuses it."""
    state, proxy = hub
    registry = _project(project)
    proxy.faults.match = "/lfs-upload/"
    proxy.faults.short_put = 10
    report = push(store, registry, _remote(), plan(registry, ["fam/w"]))
    (result,) = report.results
    assert result.outcome is Outcome.FAILED and state.commits == []
    assert result.name == "fam/w" and "none of them is claimed" in result.message
    assert "objects/sha256/" in result.message  # which file the client failed to upload


@pytest.mark.usefixtures("store")
def test_a_commit_holding_other_bytes_than_pushed_is_not_claimed_or_pinned(
    project: Path, hub: tuple[HubState, FaultProxy]
) -> None:
    """A Hub that checks nothing takes the short upload and commits it: the read-back at the
    commit sees the wrong size, and the object is neither claimed nor pinned."""
    state, proxy = hub
    _project(project)
    state.check_uploads = False
    proxy.faults.match = "/lfs-upload/"
    proxy.faults.short_put = 10
    code, stdout, stderr = run("push", "fam/w", "fam/a", "--pin", "--remote", REPO)
    assert code == 1, stdout + stderr
    (commit,) = state.commits
    assert f"the repo holds {len(WEIGHTS) - 10:,} bytes" in stderr and commit in stderr
    assert "fam/w" in stderr and "Traceback" not in stderr
    assert "pinned 0 record(s)" in stdout
    assert registry_mod.load(project).get("fam/w").source.type == "local"


def test_pull_refuses_a_hub_answering_for_another_commit(
    project: Path, store: Store, tmp_path: Path, hub: tuple[HubState, FaultProxy]
) -> None:
    state, _ = hub
    registry = _project(project)
    the_plan = plan(registry, ["fam/w"])
    push(store, registry, _remote(), the_plan)
    state.answered_commit = "e" * 40  # the resolve answers name another commit than asked
    other = Store.at(tmp_path / "other").ensure()
    (result,) = pull(other, registry, _remote(), the_plan).results
    assert result.outcome is Outcome.FAILED, result
    assert f"answered for commit '{'e' * 40}'" in result.message
    assert not list(other.iter_objects())


@pytest.mark.usefixtures("store")
@pytest.mark.usefixtures("hub")
def test_pin_writes_nothing_when_any_artifact_of_the_push_failed(project: Path) -> None:
    registry = _project(project)
    code, _, _ = run("push", "fam/a", "--remote", REPO)  # fam/a is on the Hub already
    assert code == 0
    w = registry.get("fam/w").object
    Store.at(Path(os.environ["FIXTURE_STORE_DIR"])).object_path(w).unlink()
    code, stdout, stderr = run("push", "fam/a", "fam/w", "--pin", "--remote", REPO)
    assert code == 1, stdout + stderr
    assert "missing: fam/w" in stderr or "fam/w" in stderr
    assert (
        "pinned 0 record(s)" in stdout and "not pinned: fam/w: the push did not complete" in stdout
    )
    assert registry_mod.load(project).get("fam/a").source.type == "local"


def test_a_remote_naming_a_commit_is_read_there_and_never_pushed_to(
    project: Path, store: Store, tmp_path: Path, hub: tuple[HubState, FaultProxy]
) -> None:
    state, _ = hub
    registry = _project(project)
    the_plan = plan(registry, ["fam/w"])
    push(store, registry, _remote(), the_plan)
    (commit,) = state.commits
    code, _, stderr = run("push", "fam/w", "--remote", f"{REPO}@{commit}")
    assert code == 2 and "names a commit: it is read at that commit" in stderr, stderr
    assert "fix: push to the repo's branch" in stderr and "Traceback" not in stderr
    state.branches["main"] = "f" * 40  # the branch moved: a remote at the commit does not care
    pinned = HubRemote("at", HubRepo.parse(f"{REPO}@{commit}"), retry=FAST)
    other = Store.at(tmp_path / "other").ensure()
    state.requests.clear()
    (result,) = pull(other, registry, pinned, the_plan).results
    assert result.outcome is Outcome.PULLED
    assert not any("/revision/" in p for _, p, _ in state.requests)  # nothing to resolve


@pytest.mark.usefixtures("store", "hub")
def test_fetch_takes_a_hub_remote_as_its_mirror(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(project)
    assert run("remote", "add", "hubby", REPO, "--default")[0] == 0
    assert run("push", "fam/w")[0] == 0
    (project / "data" / "w.bin").unlink()  # the local source is gone: only the Hub has the bytes
    monkeypatch.setenv("FIXTURE_STORE_DIR", str(tmp_path / "colleague-store"))
    code, stdout, stderr = run("fetch", "fam/w")
    assert code == 0, stdout + stderr
    assert run("verify", "fam/w")[0] == 0


# -- the read-back of regular files, creating the repo, pacing ----------------------------------
@pytest.mark.usefixtures("store")
def test_a_regular_file_the_hub_commits_changed_is_not_claimed_or_pinned(
    project: Path, hub: tuple[HubState, FaultProxy]
) -> None:
    """The Hub keeps fam/a (small text) outside LFS and commits it with a byte changed, its size
    kept: its git blob id is not that of the bytes pushed, so it is neither claimed nor pinned."""
    state, _ = hub
    _project(project)
    state.rewrite_regular = True
    code, stdout, stderr = run("push", "fam/w", "fam/a", "--pin", "--remote", REPO)
    assert code == 1, stdout + stderr
    (commit,) = state.commits
    a = registry_mod.load(project).get("fam/a").object
    held = state.snapshots[commit][("dataset", "org/fixtures", object_key(a))]
    assert not held.lfs and len(held.content) == a.size  # same size, other bytes
    assert "fam/a" in stderr and "with git blob id" in stderr and commit in stderr, stderr
    assert "Traceback" not in stderr
    assert "pinned 0 record(s)" in stdout
    assert registry_mod.load(project).get("fam/a").source.type == "local"


@pytest.mark.usefixtures("store")
def test_a_missing_repo_is_a_usage_error_naming_create_repo(
    project: Path, hub: tuple[HubState, FaultProxy]
) -> None:
    state, _ = hub
    _project(project)
    state.missing.add(("dataset", "org/fixtures"))
    code, stdout, stderr = run("push", "--all", "--remote", REPO)
    assert code == 2, stdout + stderr
    assert "the Hub has no dataset repo 'org/fixtures'" in stderr, stderr
    assert "--create-repo" in stderr
    assert "hf repos create org/fixtures --repo-type dataset --private" in stderr
    assert "Traceback" not in stderr and TOKEN not in stdout + stderr
    assert state.commits == [] and state.created == []


@pytest.mark.usefixtures("store")
def test_create_repo_creates_a_missing_repo_private_and_keeps_an_existing_one(
    project: Path, hub: tuple[HubState, FaultProxy]
) -> None:
    state, _ = hub
    _project(project)
    state.missing.add(("dataset", "org/fixtures"))
    code, stdout, stderr = run("push", "--all", "--create-repo", "--remote", REPO)
    assert code == 0, stdout + stderr
    assert state.created == [("dataset", "org/fixtures", "private")]
    assert "created the dataset repo, private" in stderr
    (commit,) = state.commits
    assert f"committed {commit}" in stdout
    state.requests.clear()
    code, stdout, stderr = run("push", "--all", "--create-repo", "--remote", REPO)
    assert code == 0, stdout + stderr
    assert not any(p == "/api/repos/create" for _, p, _ in state.requests)
    assert len(state.created) == 1 and "created" not in stderr


@pytest.mark.usefixtures("store")
def test_create_repo_is_refused_for_a_remote_that_is_not_the_hub(
    project: Path, tmp_path: Path
) -> None:
    _project(project)
    code, _, stderr = run("push", "--all", "--create-repo", "--remote", str(tmp_path / "f"))
    assert code == 2
    assert "--create-repo creates a Hub repo" in stderr and "not a Hub repo" in stderr
    assert "Traceback" not in stderr
    assert not (tmp_path / "f").exists()


def test_a_push_needing_more_commits_than_an_hour_takes_says_so_before_the_first(
    project: Path, store: Store, hub: tuple[HubState, FaultProxy]
) -> None:
    state, _ = hub
    registry = _project(project)
    said: list[tuple[int, str]] = []

    def remote(per_hour: int) -> HubRemote:
        note = lambda line: said.append((len(state.commits), line))  # noqa: E731
        return _remote(files_per_commit=1, commits_per_hour=per_hour, note=note)

    push(store, registry, remote(1), plan(registry, ["fam/w"]))  # one commit: fits the hour
    assert len(state.commits) == 1 and said == []
    report = push(store, registry, remote(2), plan(registry, registry.names()))
    assert len(report.commits) == 3 and {r.outcome for r in report.results} <= {
        Outcome.PUSHED,
        Outcome.PRESENT,
    }
    ((before, line),) = said
    assert before == 1  # said before the push's first commit
    assert "3 objects make 3 commits of up to 1 files" in line
    assert "the Hub takes 2 commits an hour to a repo" in line
    assert "at least 1 hour(s)" in line and "pushing again sends the rest" in line
