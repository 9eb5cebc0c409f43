from __future__ import annotations

import io
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from fixture_store.errors import IntegrityError, StoreError
from fixture_store.objects import digests, statecache
from fixture_store.objects.store import PROVE_BY_CACHE_MIN, Store, default_root


def test_put_bytes_lands_at_the_content_address_read_only(store: Store) -> None:
    d = store.put_bytes(b"hello")
    path = store.object_path(d)
    assert path == store.root / "objects" / "sha256" / d.hex[:2] / d.hex[2:]
    assert path.read_bytes() == b"hello"
    assert path.stat().st_mode & 0o222 == 0
    assert list(store.tmp_dir.iterdir()) == []


def test_put_with_wrong_expected_digest_stores_nothing(store: Store) -> None:
    wrong = digests.of_bytes(b"other")
    with pytest.raises(IntegrityError, match=r"expected sha256:.*got sha256:.*nothing was stored"):
        store.put_bytes(b"hello", wrong)
    assert list(store.iter_objects()) == []
    assert list(store.tmp_dir.iterdir()) == []


def test_put_with_wrong_size_reads_at_most_one_byte_past_it(store: Store) -> None:
    data = b"x" * 1000
    expected = digests.of_bytes(data[:10])
    stream = io.BytesIO(data)
    with pytest.raises(IntegrityError, match="or more"):
        store.write_stream(stream, expected)
    assert stream.tell() == 11


def test_second_put_keeps_the_first_copy(store: Store) -> None:
    d = store.put_bytes(b"same")
    ino = store.object_path(d).stat().st_ino
    store.put_bytes(b"same", d)
    assert store.object_path(d).stat().st_ino == ino


def test_put_with_replace_repairs_a_damaged_object(store: Store) -> None:
    d = store.put_bytes(b"good bytes")
    p = store.object_path(d)
    os.chmod(p, 0o644)
    p.write_bytes(b"evil bytes")
    store.put_bytes(b"good bytes", d, replace=True)
    assert p.read_bytes() == b"good bytes"


@pytest.mark.parametrize("how", ["put_bytes", "write_files", "link"])
def test_an_existing_object_is_proved_before_it_is_kept(
    store: Store, tmp_path: Path, how: str
) -> None:
    d = store.put_bytes(b"good bytes")
    p = store.object_path(d)
    os.chmod(p, 0o644)
    p.write_bytes(b"evil bytes")  # same size: only its bytes tell
    src = tmp_path / "src.bin"
    src.write_bytes(b"good bytes")
    if how == "put_bytes":
        store.put_bytes(b"good bytes", d)  # no replace: the damaged copy is not trusted
    else:
        assert [s.digest for s in store.write_files([src], link=how == "link")] == [d]
    assert p.read_bytes() == b"good bytes" and p.stat().st_mode & 0o222 == 0
    assert not list(store.tmp_dir.rglob("*put-*"))  # the checked bytes were published, not left


def test_a_proof_in_the_cache_is_for_the_stat_it_saw(store: Store) -> None:
    good = os.urandom(PROVE_BY_CACHE_MIN)  # large enough to be proved by the cache
    d = store.put_bytes(good)
    p = store.object_path(d)
    ino = p.stat().st_ino
    store.put_bytes(good, d)  # hashed once, and proved in the verified-state cache
    assert p.stat().st_ino == ino  # intact: kept
    seen = p.stat()
    assert statecache.proves(store.state_dir, d.hex, seen, None)
    os.chmod(p, 0o644)
    with open(p, "r+b") as f:  # damaged in place, later: same inode and size, another mtime
        f.write(b"evil")
    os.utime(p, ns=(seen.st_atime_ns, seen.st_mtime_ns + 10**9))
    store.put_bytes(good, d)
    assert p.read_bytes() == good


def _truncate(path: Path, size: int) -> None:
    os.chmod(path, 0o644)
    with open(path, "r+b") as f:
        f.truncate(size)


@pytest.mark.parametrize("how", ["put_bytes", "write_files"])
def test_an_existing_object_of_the_wrong_size_is_replaced_not_kept(
    store: Store, tmp_path: Path, how: str
) -> None:
    good = b"the complete object"
    d = store.put_bytes(good)
    path = store.object_path(d)
    _truncate(path, 4)  # a short copy: a crash of an older writer, or disk damage
    if how == "put_bytes":
        store.put_bytes(good, d)  # no replace: only an intact-sized copy is kept
    else:
        (tmp_path / "src.bin").write_bytes(good)
        assert [s.digest for s in store.write_files([tmp_path / "src.bin"])] == [d]
    assert path.read_bytes() == good
    assert path.stat().st_mode & 0o222 == 0


def test_has_is_false_for_an_object_of_the_wrong_size(store: Store) -> None:
    d = store.put_bytes(b"twelve bytes")
    assert store.has(d)
    _truncate(store.object_path(d), 11)
    assert not store.has(d)
    _truncate(store.object_path(d), 0)
    assert not store.has(d)
    store.remove(d)
    assert not store.has(d)


def test_iter_objects_ignores_stray_names(store: Store) -> None:
    d = store.put_bytes(b"a")
    (store.objects_dir / "zz").mkdir()
    (store.objects_dir / d.hex[:2] / "not-an-object").write_text("x")
    assert [h for h, _ in store.iter_objects()] == [d.hex]


def test_location_flag_then_env_then_user_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("FIXTURE_STORE_DIR", str(tmp_path / "env"))
    assert default_root(str(tmp_path / "flag")) == tmp_path / "flag"
    assert default_root(None) == tmp_path / "env"
    monkeypatch.delenv("FIXTURE_STORE_DIR")
    assert "fixture-store" in str(default_root(None))


def test_unwritable_store_gives_a_clear_error(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        # root ignores permission bits; a file where the folder should be fails for everyone
        blocker = tmp_path / "blocked"
        blocker.write_text("")
        with pytest.raises(StoreError, match="cannot create the store"):
            Store.at(blocker / "store").ensure()
    else:
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        with pytest.raises(StoreError, match="cannot create the store"):
            Store.at(ro / "store").ensure()


_WRITER = textwrap.dedent(
    """
    import sys, time
    from fixture_store.objects.store import Store

    class Slow:
        def __init__(self):
            self.sent = 0
        def readinto(self, view):
            if self.sent >= 8 << 20:
                time.sleep(60)  # hang mid-write: the parent kills us here
            n = min(len(view), 1 << 20)
            view[:n] = b"k" * n
            self.sent += n
            return n

    Store.at(sys.argv[1]).write_stream(Slow())
    """
)


def test_a_writer_killed_mid_write_leaves_no_visible_object_and_no_stuck_lock(
    store: Store,
) -> None:
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(store.root)])
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            temps = list(store.tmp_dir.iterdir())
            if temps and temps[0].stat().st_size >= 8 << 20:
                break
            time.sleep(0.05)
        else:
            pytest.fail("writer never got going")
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert list(store.iter_objects()) == []
    # the next writer of the same shard is not blocked by the dead one
    d = store.put_bytes(b"k" * (9 << 20))
    assert store.has(d)
    # A fresh temp file may be a live writer's: only an old (or explicitly aged) one goes.
    assert store.clean_tmp() == 0
    assert store.clean_tmp(older_than=0) == 1


def _put_same(root: str) -> str:
    return Store.at(root).put_bytes(b"concurrent" * 100_000).text


def test_concurrent_puts_of_the_same_object_make_one_copy(store: Store) -> None:
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(8) as pool:
        results = pool.map(_put_same, [str(store.root)] * 8)
    assert len(set(results)) == 1
    objects = list(store.iter_objects())
    assert len(objects) == 1
    assert digests.of_file(objects[0][1]).text == results[0]
    assert list(store.tmp_dir.iterdir()) == []
