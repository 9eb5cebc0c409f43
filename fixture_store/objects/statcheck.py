"""Whether object files still have the stats that were proved: one ``lstat`` each, relative to
its shard folder, and the part of a large list that a second process checks beside this one.

A warm verify answered by its snapshot spends nearly all its time here: 3 x 10^5 ``lstat``
calls at 10^5 records. One loop holds the interpreter lock between calls, so threads do not
overlap them (measured slower); a second process does. A list of at least :data:`SPLIT_AT`
objects on a machine with two cores or more is cut in two: this file, run as a script by the
same interpreter (``python -I -S statcheck.py``: no site, no environment, nothing imported but
``os``, ``sys`` and ``array``), checks the second half from what it reads on its standard
input while the caller checks the first. Any failure of the child (it cannot start, it dies,
it answers anything but ``1``) counts as "not the proved stats", which costs the caller one
full verify, never a wrong answer.

What the child reads: the store's objects folder (its length, 4 bytes, then UTF-8), the
number of objects (8 bytes), their SHA-256 as hex (64 ASCII bytes each), then their stats (4
signed 64-bit integers each, this machine's byte order).
"""

from __future__ import annotations

import array
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the child imports nothing it does not use
    from typing import BinaryIO

HEX = 64
# Fewer objects are checked in one process: a child's start costs about 15 ms, the
# lstats of 10^4 objects about 20 ms.
SPLIT_AT = 20_000
_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Folders:
    """The store's shard folders, each opened once (never through a link) and closed at exit."""

    def __init__(self, base: str) -> None:
        self.base, self.fds = base, dict[str, int]()

    def __enter__(self) -> Callable[[str], int]:
        return self.fd

    def __exit__(self, *_: object) -> None:
        for fd in self.fds.values():
            os.close(fd)

    def fd(self, shard: str) -> int:
        fd = self.fds.get(shard)
        if fd is None:
            fd = self.fds[shard] = os.open(f"{self.base}/{shard}", _FLAGS)
        return fd


def matches(base: str, objects: str, stats: Sequence[int]) -> bool:
    """Whether each object (``objects``: their hex one after another, sorted, so that one shard
    folder's come together) has its four ``stats`` (inode, size, mtime_ns, ctime_ns): one loop
    of lstats relative to the shard folders under ``base``, each opened once (a quarter faster
    than a path from the root for each of 3 x 10^5 objects). A file that is missing or cannot
    be read is not a match."""
    with Folders(base) as folder:
        lstat, it = os.lstat, iter(stats)
        shard, fd = "", -1
        steps = zip(range(0, len(objects), HEX), it, it, it, it, strict=True)
        for at, ino, size, mtime, ctime in steps:
            try:
                if objects[at : at + 2] != shard:
                    shard = objects[at : at + 2]
                    fd = folder(shard)
                st = lstat(objects[at + 2 : at + HEX], dir_fd=fd)
            except OSError:
                return False
            if (
                st.st_ino != ino
                or st.st_size != size
                or st.st_mtime_ns != mtime
                or st.st_ctime_ns != ctime
            ):
                return False
    return True


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on every platform
        return os.cpu_count() or 1


def holds(base: str, objects: str, stats: Sequence[int]) -> bool:
    """:func:`matches`, the second half checked by a child process beside this one when the
    list is long and there is a core for it."""
    count = len(objects) // HEX
    if count < SPLIT_AT or _cores() < 2:  # noqa: PLR2004 - two processes
        return matches(base, objects, stats)
    half = count // 2
    payload = b"".join(
        (
            len(encoded := base.encode("utf-8", "surrogateescape")).to_bytes(4, "little"),
            encoded,
            (count - half).to_bytes(8, "little"),
            objects[half * HEX :].encode("ascii"),
            array.array("q", stats[half * 4 :]).tobytes(),
        )
    )
    import subprocess  # only a large warm verify pays for it
    import threading

    try:
        child = subprocess.Popen(
            [sys.executable, "-I", "-S", __file__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
    except OSError:
        return matches(base, objects, stats)
    assert child.stdin is not None
    assert child.stdout is not None
    writer = threading.Thread(target=_send, args=(child.stdin, payload), daemon=True)
    writer.start()
    answer = b""
    try:
        if matches(base, objects[: half * HEX], stats[: half * 4]):
            answer = child.stdout.read(2)  # "1" or "0", then the end of the stream
    finally:
        if answer != b"1":  # this half failed first, or the child did: it is not waited for
            child.kill()
        child.wait()
        writer.join()
        child.stdout.close()
    return answer == b"1" and child.returncode == 0


def _send(stream: BinaryIO, payload: bytes) -> None:
    try:
        stream.write(payload)
        stream.close()
    except OSError:  # the child died: its answer says so
        pass


def _child() -> None:
    data = sys.stdin.buffer.read()
    size = int.from_bytes(data[:4], "little")
    base = data[4 : 4 + size].decode("utf-8", "surrogateescape")
    at = 4 + size
    count = int.from_bytes(data[at : at + 8], "little")
    at += 8
    objects = data[at : at + count * HEX].decode("ascii")
    stats = array.array("q")
    stats.frombytes(data[at + count * HEX :])
    if len(objects) != count * HEX or len(stats) != 4 * count:
        raise SystemExit(2)
    sys.stdout.write("1" if matches(base, objects, stats) else "0")


if __name__ == "__main__":
    _child()
