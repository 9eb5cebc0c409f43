"""Names of the one grammar (:mod:`fixture_store.objects.names`) for property tests: accepted
names as real projects ship them, and near misses that break exactly one rule."""

from __future__ import annotations

import unicodedata

from hypothesis import strategies as st

from fixture_store.objects import names

# Printable ASCII but '/' and '\\' (the characters a real project's names hold: a leading '_'
# or '.', spaces, parentheses, '@', '~', '+', ':'), and a few non-ASCII letters in NFC.
_ASCII = "".join(chr(c) for c in range(0x20, 0x7F) if chr(c) not in "/\\")
_ALPHABET = _ASCII + "éÅßøñ日本ü"


def _segment_ok(segment: str) -> bool:
    return segment not in (".", "..")


SEGMENTS = st.text(alphabet=_ALPHABET, min_size=1, max_size=6).filter(_segment_ok)
ACCEPTED = (
    st.lists(SEGMENTS, min_size=1, max_size=3)
    .map("/".join)
    .filter(lambda n: not (n[1:2] == ":" and n[0].isascii() and n[0].isalpha()))
)

# Each way a name breaks one rule, as (what is done to an accepted name, the rule's words).
FLAWS: dict[str, str] = {
    "parent": "'..' segment",
    "dot": "'.' or '..' segment",
    "empty": "empty, '.' or '..' segment",
    "absolute": "is absolute",
    "backslash": "holds a backslash",
    "nul": "control character",
    "escape": "control character",
    "bidi": "not printable",
    "long": "a filesystem allows 255",
    "drive": "drive letter",
}


def near_miss(name: str, flaw: str) -> str:
    """``name`` with one rule broken."""
    return {
        "parent": f"{name}/../x",
        "dot": f"{name}/./x",
        "empty": f"{name}//x",
        "absolute": f"/{name}",
        "backslash": f"{name}\\x",
        "nul": f"{name}\x00",
        "escape": f"{name}\x1b[31m",
        "bidi": f"{name}\u202egnp.exe",
        "long": f"{name}/{'é' * 128}",
        "drive": f"C:{name}",
    }[flaw]


MISSES = st.tuples(ACCEPTED, st.sampled_from(sorted(FLAWS))).map(
    lambda pair: (near_miss(pair[0], pair[1]), FLAWS[pair[1]])
)


def reason(name: str) -> str:
    """Why the grammar refuses ``name`` (its reason, the same words everywhere)."""
    try:
        names.parse(name)
    except names.NameRefusedError as e:
        return e.reason
    raise AssertionError(f"{name!r} is accepted")


def distinct(batch: list[str]) -> bool:
    """No two names of ``batch`` collide, and none is another's folder (a file beside a folder
    of the same name cannot both be on disk)."""
    keys = [names.key(n) for n in batch]
    if len(set(keys)) != len(keys):
        return False
    folders = {k.rsplit("/", i)[0] for k in keys for i in range(1, k.count("/") + 1)}
    return not folders & set(keys)


def nfd(name: str) -> str:
    return unicodedata.normalize("NFD", name)
