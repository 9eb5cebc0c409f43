"""The one escaping function and the one redacting formatter every output goes through."""

from __future__ import annotations

import ast
import json
import string
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import fixture_store
from fixture_store import display
from fixture_store.errors import ArtifactError, UsageError


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("fam/a", "fam/a"),
        ("fam/[bold]x", "fam/[bold]x"),
        ("\x1b[2Jx", "\\x1b[2Jx"),
        ("a\rb\x07\x08", "a\\rb\\x07\\x08"),
        ("evil\u202etxt.exe", "evil\\u202etxt.exe"),
        ("\ud800", "\\ud800"),
        ("\x9b31m", "\\x9b31m"),
        ("two\nlines", "two\\nlines"),
    ],
)
def test_escape_shows_every_non_printable_character(text: str, shown: str) -> None:
    assert display.escape(text) == shown
    shown.encode("ascii" if not shown.isascii() else "utf-8")  # encodable anywhere


def test_a_message_keeps_its_line_breaks_and_nothing_else() -> None:
    assert display.escape("a\x1b\nb", keep="\n") == "a\\x1b\nb"


def test_an_error_renders_escaped_wherever_it_is_printed() -> None:
    error = ArtifactError("fam/\x1b[31mx", "missing object", fix="fixture-store fetch \x1b]0;t\x07")
    assert "\x1b" not in str(error) and "\x07" not in str(error)
    assert "fam/\\x1b[31mx" in str(error)
    assert str(UsageError("one\ntwo")) == "one\ntwo"


@pytest.mark.parametrize(
    ("url", "shown", "what"),
    [
        ("s3://bucket/prefix", "s3://bucket/prefix", None),
        ("https://h.example/m", "https://h.example/m", None),
        ("/data/remote", "/data/remote", None),
        ("file:///data/a@b", "file:///data/a@b", None),
        ("https://u:p/w@h/x", "https://***@h/x", "user name or password"),
        ("/data//user@host", "/data//user@host", None),
        (
            "https://registry.example/@scope/pkg@1.0/f",
            "https://registry.example/@scope/pkg@1.0/f",
            None,
        ),
        ("http://[::1]:9000/b", "http://[::1]:9000/b", None),
        ("http://127.0.0.1:9000/b", "http://127.0.0.1:9000/b", None),
        ("https://u:pw@h/x", "https://***@h/x", "user name or password"),
        ("s3://AKIA:pw@bucket", "s3://***@bucket", "user name or password"),
        ("HTTPS://a@b@h/", "HTTPS://***@h/", "user name or password"),
        ("https://h/x?X-Amz-Signature=abc&a=1", "https://h/x?X-Amz-Signature=***&a=1", "X-Amz"),
        ("https://h/x?token=t", "https://h/x?token=***", "'token'"),
        ("https://h/x?a=1&sig=s;api_key=k", "https://h/x?a=1&sig=***;api_key=***", "'api_key'"),
        ("https://h/x#access_token=t", "https://h/x#access_token=***", "'access_token'"),
        ("https://h/x?download=true", "https://h/x?download=true", None),
        # The Hub's notation: '@' names a revision (a repository without an owner), never a user.
        (f"hf://gpt2@{'a' * 40}/model.bin", f"hf://gpt2@{'a' * 40}/model.bin", None),
        ("HF://gpt2@main/f", "HF://gpt2@main/f", None),
        ("hf://datasets/org/name@v1/f?token=t", "hf://datasets/org/name@v1/f?token=***", "'token'"),
    ],
)
def test_the_formatter_redacts_credentials(url: str, shown: str, what: str | None) -> None:
    assert display.url(url) == shown
    found = display.credential_in(url)
    assert (found is None) if what is None else (found is not None and what in found)


_SECRET = st.text(string.ascii_letters + string.digits + "+/=_-.~%!$", min_size=6, max_size=40)
_HOST = st.from_regex(r"[a-z][a-z0-9-]{0,20}(\.[a-z]{2,5}){0,2}", fullmatch=True)
_PARAM = st.sampled_from(
    ["X-Amz-Signature", "X-Amz-Credential", "X-Amz-Security-Token", "token", "access_token",
     "sig", "api_key", "apiKey", "key", "secret", "password", "auth", "SessionToken"]
)  # fmt: skip


@given(
    scheme=st.sampled_from(["https", "http", "s3", "ftp", "HTTPS"]),
    user=st.one_of(st.none(), _SECRET.filter(lambda u: "/" not in u)),  # a '/' ends the host
    password=st.one_of(st.none(), _SECRET),
    host=_HOST,
    path=st.from_regex(r"(/[a-z0-9._-]{1,8}){0,3}", fullmatch=True),
    params=st.lists(st.tuples(_PARAM, _SECRET), max_size=3),
    plain=st.lists(st.tuples(st.sampled_from(["a", "prefix", "x-id"]), st.text("xyz", max_size=5))),
)
def test_no_credential_survives_the_formatter(
    scheme: str,
    user: str | None,
    password: str | None,
    host: str,
    path: str,
    params: list[tuple[str, str]],
    plain: list[tuple[str, str]],
) -> None:
    userinfo = "" if user is None else user + ("" if password is None else f":{password}") + "@"
    pairs = [*plain, *params]
    query = ("?" + "&".join(f"{k}={v}" for k, v in pairs)) if pairs else ""
    url = f"{scheme}://{userinfo}{host}{path}{query}"
    shown = display.url(url)
    secrets = [s for s in (user, password, *(v for _, v in params)) if s]
    in_text = display.redact(f"error: cannot reach {url}: refused")
    in_json = display.redact(json.dumps({"message": f'endpoint "{url}" failed'}))
    for secret in secrets:
        assert secret not in shown, (url, shown)
        assert secret not in in_text and secret not in in_json, (url, in_text, in_json)
    assert (display.credential_in(url) is not None) == bool(userinfo or params)
    assert display.credential_in(shown) is None or "***" in shown
    assert host in shown and path in shown  # what locates it stays


# -- every caller goes through the formatter ----------------------------------------------------
PACKAGE = Path(fixture_store.__file__).parent
# What names a URL or an endpoint in the package's code.
URL_ATTRIBUTES = frozenset({"url", "endpoint_url", "endpoint", "base"})
URL_NAMES = frozenset({"url", "endpoint_url", "endpoint"})
# (module, the expression interpolated): why it may skip display.url.
ALLOWED = {
    ("sources/url.py", "url"): "a record's source.url, refused with a credential when the "
    "registry is parsed (registry.where.check_no_credential); the errors it is put in render "
    "redacted again (FixtureStoreError.__str__, the CLI's consoles)",
    ("registry/upstream.py", "self.url"): "uri(): the provenance statement's URI of a registry "
    "URL, refused with a credential when the registry is parsed; describe() uses display.url",
    ("remotes/https.py", "self.base"): "url(digest): the address a request is sent to, not output",
    ("remotes/s3.py", "self.url"): "s3://BUCKET/PREFIX rebuilt from a spec config.check_url "
    "accepted, which holds no user information or parameters",
    ("objects/statcheck.py", "self.base"): "a folder path, not a URL",
}


def _names_a_url(value: ast.expr) -> bool:
    return (isinstance(value, ast.Attribute) and value.attr in URL_ATTRIBUTES) or (
        isinstance(value, ast.Name) and value.id in URL_NAMES
    )


def _put_into_text(node: ast.AST) -> list[ast.expr]:
    """The expressions ``node`` puts into text: an f-string's field, the operands of ``+`` and
    ``%``, the arguments of ``.format``."""
    if isinstance(node, ast.FormattedValue):
        return [node.value]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mod):
        right = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
        return [node.left, *right]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
    ):
        return [*node.args, *(k.value for k in node.keywords)]
    return []


def _interpolated_urls(path: Path) -> Iterator[tuple[int, str]]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        for value in _put_into_text(node):
            if _names_a_url(value):
                yield value.lineno, ast.unparse(value)


def test_no_module_interpolates_a_url_but_through_the_formatter() -> None:
    found = {
        (path.relative_to(PACKAGE).as_posix(), line, expr)
        for path in sorted(PACKAGE.rglob("*.py"))
        for line, expr in _interpolated_urls(path)
    }
    bypass = sorted(f"{m}:{line}: {expr}" for m, line, expr in found if (m, expr) not in ALLOWED)
    assert not bypass, (
        "these f-strings put a URL into text without fixture_store.display.url (which redacts "
        f"credentials); wrap them, or allow-list them in ALLOWED with the reason: {bypass}"
    )
    stale = sorted(set(ALLOWED) - {(m, expr) for m, _, expr in found})
    assert not stale, f"ALLOWED names interpolations that are gone: {stale}"


def test_the_walk_finds_a_bypass(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('def f(spec):\n    return f"remote at {spec.endpoint_url}"\n')
    assert list(_interpolated_urls(module)) == [(2, "spec.endpoint_url")]
    module.write_text('def f(spec):\n    return "at " + spec.url + " or %s" % (spec.endpoint,)\n')
    assert sorted(_interpolated_urls(module)) == [(2, "spec.endpoint"), (2, "spec.url")]
    module.write_text('def f(url):\n    return "at {}".format(url)\n')
    assert list(_interpolated_urls(module)) == [(2, "url")]
    module.write_text('def f(spec):\n    return f"remote at {display.url(spec.url)}"\n')
    assert list(_interpolated_urls(module)) == []
