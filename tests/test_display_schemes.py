"""The redacting formatter knows every scheme the project accepts (DESIGN 15; issue 34, class 4).

``remote add x hf://user:TOKEN@datasets/org/x`` was refused, and the refusal printed the token:
the formatter took every '@' of the Hub's notation for a revision. The walk reads the package's
source for every URL scheme its parsers name (a string literal that starts ``SCHEME://``), and
each must have a case here whose credential the formatter masks, finds and redacts inside text:
the next scheme a parser accepts fails here until it has one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import fixture_store
from fixture_store import display
from fixture_store.registry.upstream import GIT_SCHEME
from tests.support.cli import run

PACKAGE = Path(fixture_store.__file__).parent
SECRET = "s3cr3tT0ken"
REV = "a" * 40
# scheme -> URLs of it that carry SECRET as a credential, and how each must be shown.
MASKED: dict[str, list[tuple[str, str]]] = {
    "https": [
        (f"https://user:{SECRET}@h.example/x", "https://***@h.example/x"),
        (f"https://h.example/x?token={SECRET}", "https://h.example/x?token=***"),
    ],
    "http": [(f"http://{SECRET}@127.0.0.1:9000/b", "http://***@127.0.0.1:9000/b")],
    "s3": [(f"s3://AKIA:{SECRET}@bucket/p", "s3://***@bucket/p")],
    "file": [(f"file://u:{SECRET}@host/data", "file://***@host/data")],
    "git+https": [
        (f"git+https://u:{SECRET}@github.com/o/r@{REV}", f"git+https://***@github.com/o/r@{REV}")
    ],
    "hf": [
        (f"hf://user:{SECRET}@datasets/org/x", "hf://***@datasets/org/x"),
        (f"hf://{SECRET}@datasets/org/x", "hf://***@datasets/org/x"),
        (f"hf://user:{SECRET}@org/x", "hf://***@org/x"),
        (f"hf://user:{SECRET}@spaces/org/x", "hf://***@spaces/org/x"),
        (f"HF://u:{SECRET}@models/org/x", "HF://***@models/org/x"),
        (f"hf://hf_{SECRET}abcdefghij@org/x", "hf://***@org/x"),
        (f"hf://user:a/{SECRET}@datasets/org/x", "hf://***@datasets/org/x"),
        (f"hf://datasets/org/x?token={SECRET}", "hf://datasets/org/x?token=***"),
        (f"hf://{SECRET}@org/x@{'a' * 40}/f", f"hf://***@org/x@{'a' * 40}/f"),
    ],
}  # fmt: skip
# What the Hub's notation spells with an '@' that is no credential: shown as it is.
HUB_PLAIN = [
    f"hf://gpt2@{'a' * 40}/model.bin",
    "hf://datasets/org/name@v1/f",
    "hf://org/name@main",
    "hf://org/name@refs/pr/1/f",
    "hf://org/name@dev/a:b",
    f"hf://gpt2@{'a' * 40}/dir/@scope/f",
]


def schemes_in_the_package() -> set[str]:
    """Every scheme a string of the package's source opens with (``"s3://``, ``'hf://``...),
    and ``git+`` with ``https``, which git URLs prefix."""
    found: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        found |= {m.lower() for m in re.findall(r"[\"'`]([A-Za-z][A-Za-z0-9+.-]*)://", text)}
    assert GIT_SCHEME == "git+"  # git+ prefixes the schemes git reads
    return found | {"git+https"}


def test_every_scheme_the_parsers_name_has_a_masked_credential_case() -> None:
    schemes = schemes_in_the_package()
    assert {"https", "s3", "hf", "file"} <= schemes  # the walk sees what it must
    missing = sorted(schemes - set(MASKED))
    assert not missing, (
        f"these URL schemes appear in the package without a masked-credential case: {missing}; "
        "add one to MASKED (and teach fixture_store.display the scheme if it fails)"
    )


@pytest.mark.parametrize(
    ("url", "shown"), [case for cases in MASKED.values() for case in cases], ids=str
)
def test_the_formatter_masks_finds_and_redacts_the_credential(url: str, shown: str) -> None:
    assert display.url(url) == shown
    assert display.credential_in(url) is not None
    for text in (f"error: cannot reach {url}: refused", f'{{"url": "{url}"}}'):
        assert SECRET not in display.redact(text)
        assert SECRET not in display.text(text)


@pytest.mark.parametrize("url", HUB_PLAIN)
def test_the_hubs_revisions_are_no_credential(url: str) -> None:
    assert display.url(url) == url
    assert display.credential_in(url) is None
    assert display.redact(f"at {url} x") == f"at {url} x"


@pytest.mark.parametrize("url", [u for u, _ in MASKED["hf"]] + [u for u, _ in MASKED["s3"]])
def test_remote_add_refuses_a_credential_without_printing_it(url: str) -> None:
    code, out, err = run("remote", "add", "x", url)
    assert code == 2
    assert SECRET not in out + err and "carries a credential" in err and "Traceback" not in err
    if url.lower().startswith("hf://"):
        assert "HF_TOKEN" in err and "AWS" not in err


def test_a_hub_source_with_a_credential_is_refused_without_printing_it(project: Path) -> None:
    (project / "f.bin").write_bytes(b"x")
    code, out, err = run(
        "add", "f.bin", "--name", "fam/f", "--kind", "fixture",
        "--source", f"hf://user:{SECRET}@org/x@{'a' * 40}/f.bin",
    )  # fmt: skip
    assert code == 2 and SECRET not in out + err and "Traceback" not in err
    assert "carries a credential" in err and "HF_TOKEN" in err
