"""What reaches a human, a log or JSON (DESIGN decision 15): text escaped, URLs redacted.

Two functions every output goes through, in the lowest layer so that every module can:

- :func:`escape` shows a user-supplied string (a record name, a path, a value) with its control
  and other non-printable characters escaped as ``repr`` spells them (``\\x1b``, ``\\u202e``,
  ``\\ud800``) and without quotes, so that a name cannot move a terminal's cursor, recolour it,
  reorder its text or crash an encoder. The consoles of the CLI and the rendering of the library's
  errors apply it to everything they print; a message keeps its own line breaks
  (``keep="\\n"``), a name on its own does not.
- :func:`url` shows a URL (a remote, an endpoint, a source) with the credentials it may carry
  replaced by ``***``: the user information (``user:password@``) and the value of every query or
  fragment parameter whose name says it carries a signature, a token, a key or a password.
  :func:`credential_in` says which of those a URL carries, for the settings that refuse them;
  :func:`redact` does the same to every URL inside a message, and the consoles of the CLI and
  the rendering of errors apply it to everything they print, after the settings refused it.

Nothing here imports the rest of the package.
"""

from __future__ import annotations

import re

REDACTED = "***"

# A URL's scheme and what may hold user information: up to its query or fragment, since a
# password typed with a '/' in it would otherwise end the authority early and show its tail.
_AUTHORITY = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://(?!/)[^?#]*")  # file:///... has none
# The user information of a URL: from '//' to the last '@' before its query or fragment.
_USERINFO = re.compile(r"(?<=//)[^?#]*@")
# A URL inside free text that may carry a credential: a scheme, '://', and what follows up to a
# space or a quote, holding an '@', a '?' or a '#' (a URL without them is left to the regular
# expression engine alone: a JSON report of 10^5 plain URLs costs no Python call per URL).
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`@?#]*[@?#][^\s'\"<>`]*")
# A parameter of a query or fragment: its separator, its name, its value.
_PARAM = re.compile(r"(?P<sep>[?&;#])(?P<name>[^=&;#]*)=(?P<value>[^&;#]*)")
# Words a parameter's name holds when its value is a credential (lower case, letters and digits
# only): X-Amz-Signature, X-Amz-Credential, X-Amz-Security-Token, sig (a SAS token), token,
# access_token, api_key, apikey, key, secret, password, passwd, pwd, auth, session.
_SECRET_WORDS = ("sig", "token", "key", "secret", "pass", "pwd", "auth", "credential", "session")


def escape(text: str, *, keep: str = "") -> str:
    """``text`` with every non-printable character but those in ``keep`` escaped as ``repr``
    spells it (without quotes); printable text is returned as it is."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in keep else repr(c)[1:-1] for c in text)


def secret_name(name: str) -> bool:
    """Whether a query parameter (or configuration key) named ``name`` carries a credential."""
    flat = re.sub(r"[^a-z0-9]", "", name.lower())
    return any(word in flat for word in _SECRET_WORDS)


def credential_in(text: str) -> str | None:
    """What credential the URL ``text`` carries, in words that do not repeat it (``None`` if
    none): a user name or password, or the parameters whose names say they hold one."""
    if _USERINFO.search(_authority_part(text)):
        return "a user name or password (user:password@)"
    names = sorted(
        {m["name"] for m in _PARAM.finditer(_query_part(text)) if secret_name(m["name"])}
    )
    if names:
        shown = ", ".join(repr(escape(n)) for n in names)
        return f"the parameter{'s' if len(names) > 1 else ''} {shown}"
    return None


def url(text: str) -> str:
    """``text`` (a URL, or a path) as it may be shown: credentials replaced by ``***``, and
    escaped."""
    head = _authority_part(text)
    head = _USERINFO.sub(f"{REDACTED}@", head, count=1) + text[len(head) :]
    query = _query_part(head)
    return escape(head[: len(head) - len(query)] + _PARAM.sub(_redact_param, query))


def text(text: str, *, keep: str = "") -> str:
    """``text`` as it may reach a human or a log: every URL in it redacted (:func:`redact`), then
    escaped (:func:`escape`)."""
    return escape(redact(text), keep=keep)


def redact(text: str) -> str:
    """``text`` (a message, a line) with every URL in it shown as :func:`url` shows it."""
    if "://" not in text:
        return text
    return _URL_IN_TEXT.sub(lambda m: url(m[0]), text)


def type_name(value: object) -> str:
    """What a wrongly typed setting holds, in words, for a message that must not echo it."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "an empty string" if not value else "a string"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return f"a {type(value).__name__}"


def _authority_part(text: str) -> str:
    """``text`` up to its query or fragment, where user information can be, if it starts with
    ``scheme://``; "" otherwise (a path)."""
    m = _AUTHORITY.match(text)
    return "" if m is None else m[0]


def _query_part(text: str) -> str:
    """``text`` from its first '?' or '#' on (its query and fragment), "" if it has neither."""
    m = re.search(r"[?#]", text)
    return "" if m is None else text[m.start() :]


def _redact_param(m: re.Match[str]) -> str:
    if not secret_name(m["name"]) or not m["value"]:
        return m[0]
    return f"{m['sep']}{m['name']}={REDACTED}"
