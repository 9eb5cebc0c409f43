"""The Hub remote: a model or dataset repo of the Hugging Face Hub (``hf://datasets/ORG/NAME``).

The repo holds the layout every remote has (``objects/sha256/ab/<62 hex>``). Reads are at one
commit, never at a branch: the remote's branch (default ``main``) is resolved to its commit once,
and every look and download of the run names that commit; each file's metadata must answer for
it, with the object's size and LFS sha256, before its body is read (the Hub source's own checks,
:func:`fixture_store.sources.hub.announced_problem`), and pull hashes what it writes like for
every remote (DESIGN decision 9).

A push stages the objects the repo lacks and lands them in commits made by ``huggingface_hub``'s
own upload API (``HfApi.create_commit`` with ``CommitOperationAdd``: pre-upload, LFS batch and
upload, commit), at most :data:`FILES_PER_COMMIT` objects each (a push that needs more commits
than the Hub takes in an hour says so before the first), then reads the repo back at the last
commit: only objects it holds as pushed are claimed (an LFS file by its size and sha256, any
other file by its git blob id, computed from the bytes pushed). ``push --create-repo`` creates a
missing repo, private (:meth:`HubRemote.ensure_repo`); without it a missing repo is a usage
error naming the fix. The token is the
client's (``HF_TOKEN``, or the stored login); it is never printed or written, and every message
passes through :func:`fixture_store.display.text` with the token itself blanked.
"""

from __future__ import annotations

import contextlib
import io
import logging
import threading
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from fixture_store import display
from fixture_store._extras import require
from fixture_store.errors import EXIT_USAGE, FixtureStoreError
from fixture_store.objects import digests as digests_mod
from fixture_store.objects.digests import Digest
from fixture_store.registry import HubRepo
from fixture_store.remotes.base import (
    Landed,
    MissingRemoteObject,
    ReadOnlyRemote,
    RemoteError,
    RemoteObject,
    Retry,
    TransientRemoteError,
    object_key,
)
from fixture_store.sources import answers
from fixture_store.sources import hub as hub_source
from fixture_store.sources.transfer import Chunks, DownloadPolicy, sooner

if TYPE_CHECKING:
    from fixture_store.sources import FetchContext
    from fixture_store.sources.ranges import Span

# The Hub's documented limits ("Repository limitations and recommendations"), and its rate limit.
FILES_PER_COMMIT = 100  # "commit size: < 100 files": a push of more makes several commits
COMMITS_PER_HOUR = 128  # the Hub's rate limit on commits to one repo (its 429 names it)
FILES_PER_REPO = 100_000  # "files per repo: < 100k"
ENTRIES_PER_FOLDER = 10_000  # "< 10k": the 256 shard folders keep a repo far below it
FILE_SIZE = 50 * 10**9  # the largest file the Hub takes: 50 GB (20 GB recommended)
PATHS_PER_LOOK = 500  # paths asked about in one paths-info request
COMMIT_MESSAGE = "fixture-store push: {count} object(s)"
_TOO_MANY_REQUESTS = 429
_SERVER_ERROR = 500
HUB_FIX = (
    "check HF_ENDPOINT, your token (HF_TOKEN or `hf auth login`) and that the repo exists "
    "(push --create-repo creates it)"
)

Note = Callable[[str], None]


class MissingHubRepo(RemoteError):
    """The Hub has no such repo (or the token cannot see it): the remote's URL or the setup is
    wrong, not the transfer."""

    exit_code = EXIT_USAGE


@dataclass
class HubRemote:
    """A Hub repo as a remote (see the module's docstring)."""

    name: str
    repo: HubRepo
    retry: Retry = field(default_factory=Retry)
    files_per_commit: int = FILES_PER_COMMIT
    commits_per_hour: int = COMMITS_PER_HOUR
    note: Note = lambda _message: None
    policy: DownloadPolicy = field(default_factory=DownloadPolicy.from_env)
    sleep: Callable[[float], None] = time.sleep
    _at: str | None = None
    _held: dict[str, RemoteObject | None] = field(default_factory=dict)
    _staged: dict[str, tuple[Path, Digest]] = field(default_factory=dict)
    _local: dict[str, Path] = field(default_factory=dict)  # each object the push offered
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def label(self) -> str:
        shown = display.url(self.repo.url())
        return f"{self.name} ({shown})" if self.name != shown else shown

    @property
    def writable(self) -> bool:
        return not self.repo.pinned

    @property
    def at(self) -> str | None:
        """The commit the run reads at, once resolved."""
        return self._at

    # -- reading -------------------------------------------------------------------------------
    def commit(self) -> str:
        """The commit this run reads at: the remote's revision, resolved once."""
        with self._lock:
            if self._at is None:
                self._at = self._resolve()
            return self._at

    def _resolve(self) -> str:
        if self.repo.pinned:
            return self.repo.revision
        with self._calls(f"resolving {self.repo.revision!r} to a commit"):
            info = self._api().repo_info(
                self.repo.repo_id, repo_type=self.repo.repo_type, revision=self.repo.revision
            )
        sha = answers.commit_id(getattr(info, "sha", None))
        if sha is None:
            raise RemoteError(
                f"remote {self.label}: the Hub answered no 40-hex commit for "
                f"{display.escape(self.repo.revision)!r}",
                fix=HUB_FIX,
            )
        return sha

    def prepare(self, digests: Collection[Digest]) -> None:
        """Learn, in a few requests, which of ``digests`` the repo holds at its commit."""
        self._look(list(digests), self.commit())

    def stat(self, digest: Digest) -> RemoteObject | None:
        with self._lock:
            if digest.hex in self._held:
                return self._held[digest.hex]
        return self._look([digest], self.commit()).get(digest.hex)

    def _look(self, digests: list[Digest], revision: str) -> dict[str, RemoteObject | None]:
        """What the repo holds at ``revision`` under each digest's key (``None``: nothing)."""
        found: dict[str, RemoteObject | None] = {}
        for start in range(0, len(digests), PATHS_PER_LOOK):
            chunk = digests[start : start + PATHS_PER_LOOK]
            keys = {object_key(d): d for d in chunk}
            with self._calls("looking up objects"):
                entries = self._api().get_paths_info(
                    self.repo.repo_id,
                    list(keys),
                    repo_type=self.repo.repo_type,
                    revision=revision,
                )
            found.update(dict.fromkeys((d.hex for d in chunk), None))
            for entry in entries:
                digest = keys.get(getattr(entry, "path", ""))
                if digest is not None and hasattr(entry, "size"):
                    found[digest.hex] = _claim(entry)
        if revision == self._at:
            with self._lock:
                self._held.update(found)
        return found

    def open(self, digest: Digest) -> BinaryIO:
        require("hub", for_what="a Hub remote")
        from huggingface_hub import constants, get_hf_file_metadata, get_session, hf_hub_url

        commit = self.commit()
        endpoint = hub_source.endpoint()
        url = hf_hub_url(
            self.repo.repo_id,
            object_key(digest),
            repo_type=self.repo.repo_type,
            revision=commit,
            endpoint=endpoint,
        )
        read_timeout = float(constants.HF_HUB_DOWNLOAD_TIMEOUT)
        deadline = sooner(self.policy.start(digest.size, read_timeout=read_timeout))
        with self._calls(f"reading {digest.short}", digest=digest):
            meta = get_hf_file_metadata(
                url, timeout=deadline.next_read_timeout(), endpoint=endpoint
            )
        problem = hub_source.announced_problem(meta, commit, digest.size, digest.hex)
        if problem is not None:
            raise RemoteError(
                f"remote {self.label}: {object_key(digest)}: {problem}",
                fix="remove that object from the repo and push it again from a store where it "
                "verifies (fixture-store push NAME --remote REMOTE)",
            )
        headers = hub_source.download_headers(url, meta.location)
        stack = contextlib.ExitStack()
        with self._calls(f"reading {digest.short}", digest=digest):
            try:
                response = stack.enter_context(
                    get_session().stream(
                        "GET",
                        meta.location,
                        headers=headers,
                        timeout=deadline.next_read_timeout(),
                        follow_redirects=True,
                    )
                )
                response.raise_for_status()
            except BaseException:
                stack.close()
                raise
        return _Body(Chunks(iter(response.iter_bytes())).read1, stack.close)  # type: ignore[return-value]

    def read_range(self, ctx: FetchContext, span: Span) -> bytes:
        """The bytes of ``span`` (a range of its record's object) at the commit this run reads
        at: the object's metadata checked as a hub source's (that commit, the size, the LFS
        sha256), then one ranged GET, as :func:`~fixture_store.sources.ranges.hub_range` reads
        every Hub file's range; the caller verifies the bytes."""
        from fixture_store.sources.ranges import hub_range

        commit = self.commit()
        file = (self.repo.repo_id, object_key(span.record.object), self.repo.repo_type)
        return hub_range(ctx, span, f"remote {self.label}", file, commit)

    # -- pushing -------------------------------------------------------------------------------
    def _refuse_read_only(self) -> None:
        if not self.writable:
            raise ReadOnlyRemote(
                f"the remote {self.label} names a commit: it is read at that commit, never "
                "pushed to",
                fix="push to the repo's branch (hf://.../ORG/NAME or @BRANCH)",
            )

    def ensure_repo(self) -> bool:
        """Create the repo if the Hub has none (``push --create-repo``), private: True if it
        was created. A repo there already is left as it is, its visibility too."""
        self._refuse_read_only()
        try:
            self.commit()
        except MissingHubRepo:
            pass
        else:
            return False
        with self._calls("creating the repo"):
            self._api().create_repo(
                self.repo.repo_id, repo_type=self.repo.repo_type, private=True, exist_ok=True
            )
        self.note(f"remote {self.label}: created the {self.repo.repo_type} repo, private")
        return True

    def upload(self, path: Path, digest: Digest) -> bool:
        """Stage the object for the push's commits; False (write-once) if the repo holds it."""
        self._refuse_read_only()
        with self._lock:
            self._local[digest.hex] = path
        if self.stat(digest) is not None:
            return False
        if digest.size > FILE_SIZE:
            raise RemoteError(
                f"remote {self.label}: {digest} is larger than the {FILE_SIZE // 10**9} GB the "
                "Hub takes in one file",
                fix="keep that object on another remote (an S3 bucket or a folder)",
            )
        with self._lock:
            self._staged[digest.hex] = (path, digest)
        return True

    def land(self, claimed: Collection[Digest]) -> Landed:
        """Commit the staged objects, at most :attr:`files_per_commit` a commit, then check the
        repo at the last commit holds every one of ``claimed`` (staged or found there): the
        others are errors, never claimed."""
        staged = [self._staged[d.hex] for d in claimed if d.hex in self._staged]
        self._say_pace(len(staged))
        commits: list[str] = []
        errors: dict[str, FixtureStoreError] = {}
        for start in range(0, len(staged), self.files_per_commit):
            batch = staged[start : start + self.files_per_commit]
            try:
                commits.append(self._commit(batch, start // self.files_per_commit + 1, len(staged)))
            except FixtureStoreError as e:
                for _, digest in staged[start:]:
                    errors[digest.hex] = e
                break
        head = commits[-1] if commits else self.commit()
        rest = [d for d in claimed if d.hex not in errors]
        if commits and rest:  # read back what the commits hold: only that is claimed
            errors.update(self._check(rest, head))
        return Landed(tuple(commits), head, errors)

    def _say_pace(self, files: int) -> None:
        """Say, before the first commit, a push that needs more commits than the Hub takes in
        an hour, and the hours it takes at least."""
        commits = -(-files // self.files_per_commit)
        if commits <= self.commits_per_hour:
            return
        hours = (commits - 1) // self.commits_per_hour
        self.note(
            f"remote {self.label}: {files:,} objects make {commits:,} commits of up to "
            f"{self.files_per_commit} files; the Hub takes {self.commits_per_hour} commits an "
            f"hour to a repo, so this push takes at least {hours} hour(s): each commit the Hub "
            f"throttles (429) is waited out for up to {self.retry.total:g}s, then the push stops "
            "with what landed claimed, and pushing again sends the rest"
        )

    def _commit(self, batch: list[tuple[Path, Digest]], number: int, total: int) -> str:
        """One commit of ``batch``, retried on a 429 (after its Retry-After) or a 5xx."""
        require("hub", for_what="a Hub remote")
        from huggingface_hub import CommitOperationAdd

        started = time.monotonic()
        for attempt in range(1, self.retry.attempts + 1):
            with contextlib.ExitStack() as files:
                ops = [
                    CommitOperationAdd(
                        path_in_repo=object_key(digest),
                        # An open file, not a path: the client then uploads through LFS.
                        path_or_fileobj=files.enter_context(open(path, "rb")),
                    )
                    for path, digest in batch
                ]
                try:
                    with _quiet_client():
                        info = self._api().create_commit(
                            self.repo.repo_id,
                            ops,
                            commit_message=COMMIT_MESSAGE.format(count=len(batch)),
                            repo_type=self.repo.repo_type,
                            revision=self.repo.revision,
                        )
                except Exception as e:
                    wait, asked = self._wait(e, attempt)
                    if wait is None:
                        raise self._failed(e, batch, number, total) from e
                    spent = time.monotonic() - started
                    if attempt == self.retry.attempts or spent + wait > self.retry.total:
                        raise self._gave_up(e, batch, attempt, wait, asked=asked) from e
                    said = (
                        f"remote {self.label}: the Hub answered {_status(e)} to commit {number}; "
                        f"retrying in {wait:g}s (attempt {attempt + 1} of {self.retry.attempts})"
                    )
                else:
                    return self._made(info, batch, number)
            self.note(said)
            self.sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    def _made(self, info: object, batch: list[tuple[Path, Digest]], number: int) -> str:
        """The id the Hub answered (``info``, its commit info) for commit ``number``, checked
        at the door: a push records it and ``--pin`` writes it into records, so an id that is
        no 40-hex commit is the Hub's error here, never a registry error about a record later."""
        oid = getattr(info, "oid", None)
        commit = answers.commit_id(oid)
        if commit is None:
            first = batch[0][1]
            more = f" and {len(batch) - 1} more" if len(batch) > 1 else ""
            raise RemoteError(
                f"remote {self.label}: the Hub answered "
                f"{display.escape(repr(oid)[:80])} as the id of commit {number} "
                f"({first.short}{more}): {answers.commit_problem(oid)}, not a 40-hex commit; "
                "none of its objects is claimed and no record is pinned to it",
                fix=f"{HUB_FIX}; then push again (objects the commit made are found there)",
            )
        return commit

    def _wait(self, e: Exception, attempt: int) -> tuple[float | None, bool]:
        """How long to wait before another attempt at a commit that failed with ``e``
        (``None`` if another attempt would get the same answer), and whether the server asked
        for that wait (a valid ``Retry-After``) rather than the backoff choosing it."""
        status = _status(e)
        backoff = float(self.retry.backoff * 2.0 ** (attempt - 1))
        if status == _TOO_MANY_REQUESTS:
            after = _retry_after(e)
            return (after, True) if after is not None else (backoff, False)
        if status is not None and status >= _SERVER_ERROR:
            return backoff, False
        return None, False

    def _failed(
        self, e: Exception, batch: list[tuple[Path, Digest]], number: int, total: int
    ) -> RemoteError:
        first = batch[0][1]
        more = f" and {len(batch) - 1} more" if len(batch) > 1 else ""
        return RemoteError(
            f"remote {self.label}: commit {number} of {-(-total // self.files_per_commit)} "
            f"({first.short}{more}) failed: {self._describe(e)}; no commit was made of them "
            "and none of them is claimed",
            fix=f"{HUB_FIX}; then push again",
        )

    def _gave_up(
        self,
        e: Exception,
        batch: list[tuple[Path, Digest]],
        attempts: int,
        wait: float,
        *,
        asked: bool,
    ) -> TransientRemoteError:
        if _status(e) != _TOO_MANY_REQUESTS:
            why = f"it kept failing ({self._describe(e)})"
        elif asked:
            why = (
                f"the Hub limits commits to a repo ({COMMITS_PER_HOUR} an hour) and asks to "
                f"wait {wait:g}s"
            )
        else:
            why = (
                f"the Hub limits commits to a repo ({COMMITS_PER_HOUR} an hour) and did not say "
                f"how long to wait (no Retry-After of delta-seconds or an HTTP-date), so the "
                f"next attempt was {wait:g}s away"
            )
        return TransientRemoteError(
            f"remote {self.label}: gave up committing {len(batch)} object(s) after {attempts} "
            f"attempt(s): {why}; no commit was made of them and none of them is claimed",
            fix="push again later; a push makes one commit per "
            f"{self.files_per_commit} objects, so push more objects at once rather than often",
        )

    def _check(self, digests: list[Digest], head: str) -> dict[str, FixtureStoreError]:
        """The objects the repo does not hold at ``head`` as pushed: an LFS file by its size and
        sha256, any other file by its git blob id (that of the bytes this push offered)."""
        held = self._look(digests, head)
        errors: dict[str, FixtureStoreError] = {}
        for digest in digests:
            claim = held.get(digest.hex)
            if claim is not None and claim.holds(digest) and self._same_blob(claim, digest):
                continue
            what = (
                "nothing"
                if claim is None
                else f"{claim.size:,} bytes"
                + (f" with sha256 {claim.sha256}" if claim.sha256 else "")
                + (f" with git blob id {claim.git_blob}" if claim.sha256 is None else "")
            )
            errors[digest.hex] = RemoteError(
                f"remote {self.label}: after commit {head}, the repo holds {what} under "
                f"{object_key(digest)}, not {digest}; it is not claimed",
                fix="delete that file from the repo on the Hub, then push again",
            )
        return errors

    def _same_blob(self, claim: RemoteObject, digest: Digest) -> bool:
        """Whether a file the Hub keeps outside LFS has the git blob id of the bytes this push
        offered for ``digest`` (an object the push did not offer is taken by its size)."""
        path = self._local.get(digest.hex)
        if claim.sha256 is not None or path is None:
            return True
        blob, read = digests_mod.git_blob_id_of_file(path, read_ahead=False)
        return read == digest and claim.git_blob == blob

    # -- the client ----------------------------------------------------------------------------
    def _api(self) -> Any:
        require("hub", for_what="a Hub remote")
        from huggingface_hub import HfApi

        return HfApi(endpoint=hub_source.endpoint())

    @contextlib.contextmanager
    def _calls(self, doing: str, *, digest: Digest | None = None) -> Iterator[None]:
        """The client's errors while ``doing``, as the remote's: a missing object, a transient
        failure (5xx, 429, the network) or a refusal, each said without the token."""
        try:
            yield
        except FixtureStoreError:
            raise
        except Exception as e:
            raise self._translated(e, doing, digest) from e

    def _translated(self, e: Exception, doing: str, digest: Digest | None) -> FixtureStoreError:
        require("hub", for_what="a Hub remote")
        import httpx2 as httpx

        name = type(e).__name__
        message = f"remote {self.label}: {doing}: {self._describe(e)}"
        if digest is not None and name == "EntryNotFoundError":
            return MissingRemoteObject(f"{self.label} does not hold {digest}")
        if name == "RepositoryNotFoundError":
            return self._missing_repo()
        status = _status(e)
        if (status is not None and (status >= _SERVER_ERROR or status == _TOO_MANY_REQUESTS)) or (
            isinstance(e, httpx.TransportError)
        ):
            return TransientRemoteError(message, fix=HUB_FIX)
        return RemoteError(message, fix=HUB_FIX)

    def _missing_repo(self) -> MissingHubRepo:
        repo = self.repo
        return MissingHubRepo(
            f"remote {self.label}: the Hub has no {repo.repo_type} repo {repo.repo_id!r} (or "
            "your token cannot see it)",
            fix=f"push with --create-repo to create it (private), or create it with `hf repos "
            f"create {repo.repo_id} --repo-type {repo.repo_type} --private`; if it exists, check "
            "your token (HF_TOKEN or `hf auth login`) and HF_ENDPOINT",
        )

    def _describe(self, e: BaseException) -> str:
        """The client's error, its first line, without the token and with URLs redacted."""
        texts: list[str] = []
        for part in (e, e.__cause__):  # the client wraps an upload's HTTP error in another
            lines = str(part).strip().splitlines() if part is not None else []
            if part is None or (lines and any(lines[0] in t for t in texts)):
                continue
            texts.append(f"{type(part).__name__}: {lines[0]}" if lines else type(part).__name__)
        return display.text(_blank_token("; ".join(texts)))


def _claim(entry: Any) -> RemoteObject:
    """What a paths-info entry says the repo holds: an LFS file's size and sha256, any other
    file's size and git blob id."""
    lfs = getattr(entry, "lfs", None)
    if lfs is not None:
        return RemoteObject(entry.size, lfs.sha256)
    blob = getattr(entry, "blob_id", None)
    return RemoteObject(entry.size, None, blob if isinstance(blob, str) else None)


class _DropXetFallback(logging.Filter):
    """The client's warning that open files go through LFS, not Xet: chosen here, not news."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Falling back to HTTP upload" not in record.getMessage()


@contextlib.contextmanager
def _quiet_client() -> Iterator[None]:
    """The client without its progress bars (the push has its own) and without its warning that
    open files go by LFS."""
    require("hub", for_what="a Hub remote")
    from huggingface_hub.utils import (  # type: ignore[attr-defined]
        are_progress_bars_disabled,
        disable_progress_bars,
        enable_progress_bars,
    )

    logger = logging.getLogger("huggingface_hub._commit_api")
    drop = _DropXetFallback()
    logger.addFilter(drop)
    bars = not are_progress_bars_disabled()
    if bars:
        disable_progress_bars()
    try:
        yield
    finally:
        logger.removeFilter(drop)
        if bars:
            enable_progress_bars()


def _blank_token(text: str) -> str:
    require("hub", for_what="a Hub remote")
    from huggingface_hub import get_token

    token = get_token()
    return text.replace(token, "***") if token else text


def _status(e: BaseException) -> int | None:
    response = getattr(e, "response", None)
    code = getattr(response, "status_code", None)
    return code if isinstance(code, int) else None


def _retry_after(e: BaseException) -> float | None:
    """The seconds a 429's ``Retry-After`` asks for (delta-seconds or an HTTP-date, RFC
    9110), if it says so validly (:func:`~fixture_store.sources.answers.retry_after`)."""
    headers: Any = getattr(getattr(e, "response", None), "headers", None)
    try:
        return answers.retry_after_of(headers)
    except AttributeError:  # not a mapping of headers
        return None


class _Body(io.RawIOBase):
    """A streamed response body: ``read1`` from the client's chunks, ``close`` ends the stream."""

    def __init__(self, read1: Callable[[int], bytes], close: Callable[[], None]) -> None:
        self._read1 = read1
        self._close = close

    def readable(self) -> bool:
        return True

    def read1(self, n: int = -1) -> bytes:
        return self._read1(n if n > 0 else 1 << 20)

    def readinto(self, buf: Any) -> int:
        data = self._read1(len(buf))
        buf[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            self._close()
        super().close()
