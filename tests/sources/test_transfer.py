"""Download bounds as values: the deadline, the minimum rate over a window, the env knobs."""

from __future__ import annotations

import ast
import contextlib
import socket
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

import fixture_store
from fixture_store.cli.app import main
from fixture_store.errors import UsageError
from fixture_store.limits import KiB
from fixture_store.objects.store import Store
from fixture_store.sources import FetchContext
from fixture_store.sources.transfer import (
    DEADLINE_ENV,
    DEADLINE_FLOOR_S,
    ERROR_BODY_CAP,
    MIN_RATE,
    MIN_RATE_ENV,
    BelowMinimumRate,
    BodyCut,
    BoundedBody,
    Chunks,
    DeadlineExceeded,
    DownloadPolicy,
    RateMeter,
    bounded_by,
    current_deadline,
    deadline_in,
    error_body,
    read_answer,
    watch,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_default_deadline_is_the_floor_plus_the_size_at_the_minimum_rate() -> None:
    policy = DownloadPolicy()
    assert policy.deadline_for(0) == DEADLINE_FLOOR_S
    assert policy.deadline_for(160 * KiB) == DEADLINE_FLOOR_S + 10
    assert DownloadPolicy(deadline=5).deadline_for(10**12) == 5


def test_a_deadline_cuts_each_read_then_refuses_the_next() -> None:
    clock = FakeClock()
    deadline = DownloadPolicy(deadline=10).start(0, read_timeout=30, clock=clock)
    assert deadline.next_read_timeout() == 10
    clock.now += 9.5
    assert deadline.next_read_timeout() == pytest.approx(0.5)
    clock.now += 0.5
    assert deadline.expired
    with pytest.raises(DeadlineExceeded, match="deadline of 10s passed"):
        deadline.next_read_timeout()


def test_a_steady_trickle_fails_once_a_full_window_has_passed() -> None:
    clock = FakeClock()
    meter = RateMeter(min_rate=MIN_RATE, window=10, clock=clock)
    for _ in range(79):
        clock.now += 0.125
        meter.add(125)  # 1,000 B/s: the first 10 s give the server the benefit of the doubt
    clock.now += 0.125
    with pytest.raises(BelowMinimumRate) as info:
        meter.add(125)
    assert "received 10,000 bytes in the last 10.0s (1.0 KiB/s)" in str(info.value)
    assert "below the minimum rate of 16.0 KiB/s" in str(info.value)


def test_a_fast_start_does_not_buy_a_later_stall() -> None:
    clock = FakeClock()
    meter = RateMeter(min_rate=1000, window=10, clock=clock)
    meter.add(1_000_000)
    for _ in range(9):
        clock.now += 1
        meter.add(100)
    clock.now += 1
    with pytest.raises(BelowMinimumRate, match=r"received 1,000 bytes in the last 10\.0s"):
        meter.add(100)  # the window now holds only what came after the burst


def test_a_rate_above_the_minimum_passes_for_as_long_as_it_lasts() -> None:
    clock = FakeClock()
    meter = RateMeter(min_rate=1000, window=10, clock=clock)
    for _ in range(1000):
        clock.now += 0.5
        meter.add(600)
    assert meter.total == 600_000


def test_a_fast_body_passes_and_memory_stays_bounded() -> None:
    clock = FakeClock()
    meter = RateMeter(min_rate=MIN_RATE, window=10, clock=clock)
    for _ in range(100_000):
        clock.now += 0.001
        meter.add(64 * KiB)
    assert len(meter._samples) <= 22


def test_environment_sets_the_deadline_and_the_rate() -> None:
    policy = DownloadPolicy.from_env({DEADLINE_ENV: "90", MIN_RATE_ENV: "1024"})
    assert policy.deadline == 90 and policy.min_rate == 1024
    assert DownloadPolicy.from_env({}) == DownloadPolicy()
    assert DownloadPolicy.from_env({DEADLINE_ENV: " "}) == DownloadPolicy()


@pytest.mark.parametrize("value", ["0", "-1", "soon", "inf", "nan"])
@pytest.mark.parametrize("var", [DEADLINE_ENV, MIN_RATE_ENV])
def test_a_bad_environment_value_is_a_usage_error_naming_it(var: str, value: str) -> None:
    with pytest.raises(UsageError) as info:
        DownloadPolicy.from_env({var: value})
    assert f"${var}={value!r} is not a positive number" in info.value.message
    assert info.value.fix is not None and f"unset {var}" in info.value.fix


def test_a_fetch_context_reads_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DEADLINE_ENV, "42")
    assert FetchContext(Store.at(tmp_path), tmp_path).policy.deadline == 42
    monkeypatch.setenv(DEADLINE_ENV, "soon")
    with pytest.raises(UsageError, match=DEADLINE_ENV):
        FetchContext(Store.at(tmp_path), tmp_path)


def test_fetch_help_documents_the_knobs() -> None:
    result = CliRunner().invoke(main, ["fetch", "--help"])
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert DEADLINE_ENV in text and MIN_RATE_ENV in text


# -- the one bounded reader (DESIGN 14) --------------------------------------------------------


class Endless:
    """A server body that never ends: every read is answered in full."""

    def __init__(self) -> None:
        self.asked = 0

    def read1(self, n: int) -> bytes:
        self.asked += n
        return b"x" * n


def test_a_body_is_read_no_further_than_what_was_asked_and_one_byte() -> None:
    source = Endless()
    body = BoundedBody(source.read1, 1000)
    assert len(body.read_all()) == 1001  # the caller sees it is longer, and reads no more
    assert source.asked == 1001 and body.read() == b""


def test_a_body_that_ends_early_is_a_cut_transfer() -> None:
    parts = iter([b"abc", b""])
    with pytest.raises(BodyCut, match="ended after 3 of 10 bytes"):
        BoundedBody(lambda _n: next(parts), 10).read_all()


def test_a_body_is_not_read_once_its_deadline_has_passed() -> None:
    clock = FakeClock()
    deadline = DownloadPolicy(deadline=5).start(10, read_timeout=1, clock=clock)
    source = Endless()
    body = BoundedBody(source.read1, 10**9, deadline)
    assert body.read(10) == b"x" * 10
    clock.now += 6
    with pytest.raises(DeadlineExceeded):
        body.read(10)
    assert source.asked == 10


def test_an_error_body_is_read_for_its_first_kib_only() -> None:
    source = Endless()
    assert len(error_body(source.read1)) == ERROR_BODY_CAP
    assert source.asked <= ERROR_BODY_CAP + 1  # one more: to know it is longer
    assert read_answer(source.read1, 100) == (b"x" * 100, False)  # longer: the rest unread
    assert read_answer(Chunks(iter([b"ab", b"cd"])).read1, 100) == (b"abcd", True)


def test_a_socket_read_under_a_deadline_is_cut_when_it_passes() -> None:
    """A server that sends nothing (or a byte now and then, within each read's timeout) holds
    a read until the deadline, no longer: the socket is shut down under the reader."""
    ours, theirs = socket.socketpair()
    got: list[bytes] = []
    try:
        with bounded_by(deadline_in(0.2)) as deadline:
            assert current_deadline() is deadline
            watch(ours)
            reader = threading.Thread(target=lambda: got.append(ours.recv(10)))
            reader.start()
            reader.join(30)
        assert got == [b""]  # woken with an end of stream, not left waiting for the peer
        with bounded_by(deadline_in(60)) as outer, bounded_by(deadline_in(600)) as inner:
            assert inner is outer  # a nested bound never extends the one in force
        assert current_deadline() is None
    finally:
        ours.close()
        theirs.close()


def test_a_shorter_deadline_nested_inside_a_longer_one_is_the_one_in_force() -> None:
    """An object's deadline inside a command's longer one still bounds the object: a socket
    read under it is cut when the shorter one passes, and the longer one is back after it."""
    ours, theirs = socket.socketpair()
    got: list[bytes] = []
    try:
        with bounded_by(deadline_in(600)) as outer:
            with bounded_by(deadline_in(0.2)) as inner:
                assert inner is not outer and current_deadline() is inner
                watch(ours)
                reader = threading.Thread(target=lambda: got.append(ours.recv(10)))
                reader.start()
                reader.join(10)
            assert current_deadline() is outer
        assert got == [b""]  # cut at the inner deadline, not left to wait for the outer one
    finally:
        with contextlib.suppress(OSError):
            ours.shutdown(socket.SHUT_RDWR)  # wakes the reader if it is still waiting
        ours.close()
        theirs.close()


# Modules that talk to servers read a body only here: (module, function, call) -> why.
_OWN = "a bounded reader calling its own read"
_BOUNDED = "a read of a BoundedBody"
_TRANSPORT = "the transport's read1, handed to a BoundedBody (or read_answer), which alone calls it"
_ALLOWED_READS = {
    ("fixture_store/sources/transfer.py", "BoundedBody.read", "self.read1"): _TRANSPORT,
    ("fixture_store/sources/transfer.py", "BoundedBody.read_all", "self.read"): _OWN,
    ("fixture_store/sources/transfer.py", "BoundedBody.readinto", "self.read"): _OWN,
    ("fixture_store/sources/transfer.py", "read_answer", "body.read"): _BOUNDED,
    ("fixture_store/remotes/base.py", "GuardedBody.__post_init__", "self.raw.read"): _TRANSPORT,
    ("fixture_store/remotes/base.py", "GuardedBody.read", "self.body.read"): _BOUNDED,
    ("fixture_store/remotes/base.py", "GuardedBody.readinto", "self.read"): _OWN,
    ("fixture_store/remotes/s3.py", "S3Remote.get_range.once", "body.readinto"): _BOUNDED,
    ("fixture_store/remotes/s3.py", "S3Remote.get_range.once", "raw.read1"): _TRANSPORT,
    ("fixture_store/remotes/s3.py", "_Body.read1", "self.raw._raw_stream.read1"): _TRANSPORT,
    ("fixture_store/remotes/s3_answers.py", "bound_answers.send", "raw.read1"): _TRANSPORT,
    ("fixture_store/remotes/s3.py", "_RangedBody.read1", "self.read"): "ranges read bounded",
    ("fixture_store/remotes/s3.py", "_Window.sha256", "self.read"): "the store's file, sent",
    ("fixture_store/sources/hub.py", "_attempt", "body.read"): _BOUNDED,
    ("fixture_store/sources/hub.py", "_attempt", "chunks.read1"): _TRANSPORT,
    ("fixture_store/sources/hub.py", "_attempt", "response.iter_bytes"): _TRANSPORT,
    ("fixture_store/sources/ranges.py", "hub_range", "response.iter_bytes"): _TRANSPORT,
    ("fixture_store/sources/ranges.py", "hub_range", "chunks.read1"): _TRANSPORT,
    ("fixture_store/sources/ranges.py", "read1_of", "response.read"): _TRANSPORT,
    ("fixture_store/remotes/hub.py", "HubRemote.open", "response.iter_bytes"): _TRANSPORT,
    (
        "fixture_store/remotes/hub.py",
        "HubRemote.open",
        "Chunks(iter(response.iter_bytes())).read1",
    ): "a remote's stream, read by pull and fetch only through GuardedBody",
    ("fixture_store/sources/url.py", "_ErrorBody.read", "self.raw.read"): _TRANSPORT,
    ("fixture_store/sources/url.py", "_Guarded.__post_init__", "self.raw.read"): _TRANSPORT,
    ("fixture_store/sources/url.py", "_Guarded.read", "self.readinto"): _OWN,
    ("fixture_store/sources/url.py", "_Guarded.readinto", "self.body.readinto"): _BOUNDED,
}
_NETWORK_IMPORTS = ("urllib.request", "urllib.error", "http.client", "httpx", "httpx2", "boto3",
                    "botocore", "urllib3", "huggingface_hub", "socket", "ssl")  # fmt: skip
_BODY_CALLS = {"read", "read1", "readinto", "readinto1", "readline", "readlines",
               "iter_content", "iter_bytes", "iter_raw", "iter_lines", "iter_chunks"}  # fmt: skip


def _network_modules(root: Path) -> list[Path]:
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(n == m or n.startswith(f"{m}.") for n in names for m in _NETWORK_IMPORTS):
                found.append(path)
                break
    return found


def _body_reads(path: Path, rel: str) -> set[tuple[str, str, str]]:
    """Each (module, enclosing function, name) of a body-reading call or name in ``path``."""
    found: set[tuple[str, str, str]] = set()

    def visit(node: ast.AST, where: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            scope = where
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                scope = [*where, child.name]
            if isinstance(child, ast.Attribute) and child.attr in _BODY_CALLS | {"content"}:
                found.add((rel, ".".join(scope), f"{ast.unparse(child.value)}.{child.attr}"))
            if isinstance(child, ast.Name) and child.id == "StreamingBody":
                found.add((rel, ".".join(scope), child.id))
            visit(child, scope)

    visit(ast.parse(path.read_text()), [])
    return found


def test_no_module_reads_a_servers_body_but_through_the_bounded_reader() -> None:
    """Every module that imports a network client reads bodies only in the allowed places; a
    new reader of a response (``.read(``, ``iter_bytes``, ``.content``, ``StreamingBody``)
    fails here until it goes through BoundedBody, or is allowed with its reason."""
    package = Path(fixture_store.__file__).parent
    reads: set[tuple[str, str, str]] = set()
    for path in _network_modules(package):
        rel = f"fixture_store/{path.relative_to(package).as_posix()}"
        reads |= _body_reads(path, rel)
    assert reads - set(_ALLOWED_READS) == set()
    assert set(_ALLOWED_READS) - reads == set()  # the allow-list lists only what is there
