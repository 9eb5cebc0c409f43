"""The tar walk: members of a decoded tar stream, read forward once in stream mode (``r|``).

Every decoded byte, tar headers included, is counted by the decoder's budget; nothing is seeked
or buffered whole. Links, devices, FIFOs and sparse files are refused, and so are headers that tar
readers resolve differently (:mod:`.tarheaders`); after the end-of-archive marker only zeros may
follow.
"""

from __future__ import annotations

import tarfile
from collections.abc import Iterator
from typing import BinaryIO

from fixture_store.readers.archives._common import RAW_CHUNK, Format, fail
from fixture_store.readers.archives._members import Checker, MemberSink
from fixture_store.readers.archives.decode import Budget, decoded_stream
from fixture_store.readers.archives.tarheaders import Header, check_headers, logging_tarinfo

_TAR_KIND = {
    tarfile.SYMTYPE: ("symlink", "is a symbolic link"),
    tarfile.LNKTYPE: ("hardlink", "is a hard link"),
    tarfile.CHRTYPE: ("device", "is a character device"),
    tarfile.BLKTYPE: ("device", "is a block device"),
    tarfile.FIFOTYPE: ("fifo", "is a FIFO"),
}


def read_tar_members(
    f: BinaryIO, fmt: Format, checker: Checker, budget: Budget, sink: MemberSink
) -> None:
    """Walk the tar stream ``f``: each member is admitted by ``checker`` and read by ``sink``."""
    stream = decoded_stream(f, fmt, budget)
    artifact = checker.artifact
    log: list[Header] = []
    try:
        tf = tarfile.open(fileobj=stream, mode="r|", tarinfo=logging_tarinfo(log))  # noqa: SIM115
    except tarfile.ReadError as e:
        raise fail(artifact, "corrupt", f"not a readable tar stream: {e}") from None
    try:
        with tf:
            mark = 0
            while True:
                try:
                    info = tf.next()
                except tarfile.ReadError as e:
                    raise fail(artifact, "corrupt", f"bad tar header: {e}") from None
                if info is None:
                    break
                # The header blocks since the previous member: this member's chain.
                check_headers(artifact, info, log[mark:], tf.pax_headers)
                mark = len(log)
                if info.type in _TAR_KIND:
                    rule, what = _TAR_KIND[info.type]
                    checker.check_path(info.name)
                    raise fail(artifact, rule, f"member {info.name!r} {what}")
                if _is_folder(info, checker):
                    continue
                if info.issparse():
                    # Holes expand outside the decoded-byte count: a cheap bomb, never needed.
                    raise fail(artifact, "sparse", f"member {info.name!r} is a sparse file")
                if not info.isreg():
                    raise fail(
                        artifact,
                        "member-type",
                        f"member {info.name!r} has unsupported type {info.type!r}",
                    )
                path = checker.admit(info.name, info.size)
                reader = tf.extractfile(info)
                assert reader is not None
                actual = sink(path, _chunks_of(reader, artifact, path))  # type: ignore[arg-type]
                checker.done(path, actual)
            end = tf.offset
    except EOFError as e:  # from the decoders through tarfile
        raise fail(artifact, "truncated", f"archive ends early: {e}") from None
    stream.drain()
    if stream.last_nonzero_end > end:
        raise fail(
            artifact, "trailing-garbage", "non-zero bytes after the tar end-of-archive marker"
        )
    if stream.position - end < 2 * tarfile.BLOCKSIZE:
        raise fail(artifact, "truncated", "tar stream lacks its end-of-archive marker")


def _is_folder(info: tarfile.TarInfo, checker: Checker) -> bool:
    """Whether the entry is a folder (not a member): its path is checked, it holds nothing."""
    if not info.isdir():
        return False
    checker.folders.add(checker.check_path(info.name.rstrip("/")))
    if info.size:  # bsdtar skips that many bytes, tarfile and GNU tar none
        raise fail(checker.artifact, "corrupt", f"folder {info.name!r} has content")
    return True


def _chunks_of(reader: BinaryIO, artifact: str, path: str) -> Iterator[bytes]:
    while True:
        try:
            chunk = reader.read(RAW_CHUNK)
        except (tarfile.ReadError, EOFError) as e:
            raise fail(artifact, "truncated", f"member {path!r} is truncated: {e}") from None
        if not chunk:
            return
        yield chunk
