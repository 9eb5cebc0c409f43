import hashlib
import io
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fixture_store.errors import DigestFormatError
from fixture_store.objects import digests
from fixture_store.objects.digests import Digest

EMPTY = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def test_empty_stream_has_the_known_sha256() -> None:
    assert digests.of_stream(io.BytesIO(b"")) == Digest(EMPTY, 0)


def test_file_digest_matches_bytes_digest(tmp_path: Path) -> None:
    data = bytes(range(256)) * 9000  # spans several read chunks
    p = tmp_path / "f"
    p.write_bytes(data)
    assert digests.of_file(p) == digests.of_bytes(data)
    assert digests.of_file(p).size == len(data)


def test_parse_round_trips_the_record_form() -> None:
    d = digests.parse("sha256:" + EMPTY, 0)
    assert d.text == "sha256:" + EMPTY and d.size == 0


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (EMPTY, "lacks the 'sha256:' prefix"),
        ("sha256:" + EMPTY[:-1], "has 63 hex characters"),
        ("sha256:" + EMPTY + "0", "has 65 hex characters"),
        ("sha256:" + EMPTY.upper(), "upper case; write it in lower case"),
        ("sha256:" + "g" * 64, "non-hex"),
        ("md5:" + "0" * 32, "unsupported digest algorithm 'md5'"),
        (None, "must be a string"),
    ],
)
def test_malformed_digest_text_is_refused_with_the_reason(text: object, needle: str) -> None:
    with pytest.raises(DigestFormatError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        digests.parse(text, 0)


@pytest.mark.parametrize("size", [-1, 1.5, "3", True, None])
def test_bad_size_is_refused(size: object) -> None:
    with pytest.raises(DigestFormatError, match="size must be a non-negative integer"):
        digests.parse("sha256:" + EMPTY, size)


@pytest.mark.parametrize("size", [0, 5, digests.CHUNK, 3 * digests.CHUNK + 17])
@pytest.mark.parametrize("read_ahead", [True, False])
def test_both_digests_of_a_file_match_each_hash_alone(
    tmp_path: Path, size: int, read_ahead: bool
) -> None:
    import hashlib
    import os

    import blake3

    data = os.urandom(size)
    path = tmp_path / "f"
    path.write_bytes(data)
    digest, b3 = digests.of_file_both(path, read_ahead=read_ahead)
    assert digest == Digest(hashlib.sha256(data).hexdigest(), size)
    assert b3 == blake3.blake3(data).hexdigest()


def test_read_small_returns_whole_small_files_only(tmp_path: Path) -> None:
    small, exact = tmp_path / "small", tmp_path / "exact"
    small.write_bytes(b"x" * 99)
    exact.write_bytes(b"y" * 100)
    assert digests.read_small(small, limit=100) == b"x" * 99
    assert digests.read_small(exact, limit=100) is None  # streamed instead


@pytest.mark.parametrize(
    ("use_blake3", "want_blake3"), [(False, False), (True, False), (False, True)]
)
def test_the_small_file_path_hashes_like_the_streaming_one(
    tmp_path: Path, use_blake3: bool, want_blake3: bool
) -> None:
    import os

    from fixture_store.objects.store import Store
    from fixture_store.verify import hash_path

    store = Store.at(tmp_path / "store").ensure()
    hexpart = store.put_bytes(os.urandom(4096)).hex
    root = str(store.root)
    fast = hash_path(root, hexpart, use_blake3, want_blake3, small=True)
    streamed = hash_path(root, hexpart, use_blake3, want_blake3, small=False)
    assert fast == streamed
    assert (fast.sha256 is None) == use_blake3 and (fast.blake3 is None) == (
        not use_blake3 and not want_blake3
    )


_DIGEST_TEXT = st.one_of(
    st.builds(
        lambda h: "sha256:" + h, st.text(alphabet="0123456789abcdefABG", min_size=62, max_size=66)
    ),
    st.text(alphabet="sha256:0f", max_size=72),
    st.sampled_from(["sha256:" + "a" * 64 + "\n", "SHA256:" + "a" * 64, "sha1:" + "a" * 64]),
)


@given(_DIGEST_TEXT, st.one_of(st.integers(-2, 2**64), st.booleans(), st.none()))
def test_parse_accepts_and_refuses_as_the_field_checks_do(text: str, size: object) -> None:
    """digests.parse takes a one-match path for well-formed text; it gives the same Digest, or
    the same refusal, as parse_hex and check_size field by field."""
    try:
        expected: object = digests.Digest(digests.parse_hex(text), digests.check_size(size))
    except DigestFormatError:
        expected = DigestFormatError
    try:
        got: object = digests.parse(text, size)
    except DigestFormatError:
        got = DigestFormatError
    assert got == expected


@pytest.mark.parametrize(
    ("text", "algorithm"),
    [("md5:" + "0" * 32, "md5"), ("sha1:" + "a" * 40, "sha1"), ("sha256:" + EMPTY, "sha256")],
)
def test_an_awaited_digest_parses_and_prints_itself(text: str, algorithm: str) -> None:
    awaited = digests.Awaited.parse(text)
    assert (awaited.algorithm, str(awaited)) == (algorithm, text)
    assert awaited.weak is (algorithm != "sha256")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("md5:" + "0" * 31, "has 31 hex characters, md5 has 32"),
        ("sha1:" + "A" * 40, "is not lower-case hex after 'sha1:'"),
        ("MD5:" + "0" * 32, "unsupported digest algorithm 'MD5': write it 'md5'"),
        ("sha512:" + "0" * 128, "a gap awaits 'sha256:<hex>'"),
        (EMPTY, "lacks the 'sha256:' prefix"),
    ],
)
def test_an_awaited_digest_that_is_not_one_is_refused_with_the_reason(
    text: str, needle: str
) -> None:
    with pytest.raises(DigestFormatError, match=needle.replace("(", r"\(")):
        digests.Awaited.parse(text)


def test_only_a_sha256_names_the_bytes_a_weak_digest_awaits_them_checked() -> None:
    data = b"abc"
    sha = digests.of_bytes(data)
    assert digests.Awaited.parse(sha.text).names(sha)
    md5 = digests.Awaited("md5", hashlib.md5(data).hexdigest())
    assert md5.hasher().name == "md5"
    assert not md5.names(sha)  # an md5 is proved against the bytes themselves, never a SHA-256
