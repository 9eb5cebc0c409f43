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

# A URL's scheme and authority (up to the first '/', '?' or '#'), where user information is.
_AUTHORITY = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://([^/?#]*)")
# The rest of a URL inside free text that may carry a credential: '://' and what follows up to a
# space or a quote, holding an '@', a '?' or a '#'. The search starts at the literal '://' (a
# pattern starting at the scheme would be tried at every letter of the text) and a URL without
# those characters costs no Python call: a 20 MB JSON report of plain URLs is scanned in C.
_URL_TAIL = re.compile(r"://[^\s'\"<>`@?#]*[@?#][^\s'\"<>`]*")
_NOT_ALNUM = re.compile(r"[^a-z0-9]")
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")
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
    flat = _NOT_ALNUM.sub("", name.lower())
    return any(word in flat for word in _SECRET_WORDS)


def credential_in(text: str) -> str | None:
    """What credential the URL ``text`` carries, in words that do not repeat it (``None`` if
    none): a user name or password, or the parameters whose names say they hold one."""
    if _userinfo_end(text):
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
    end = _userinfo_end(text)
    head = text if not end else text[: text.index("//") + 2] + f"{REDACTED}@" + text[end:]
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
    parts: list[str] = []
    done = 0
    for m in _URL_TAIL.finditer(text):
        start = m.start()
        while start > done and text[start - 1] in _SCHEME_CHARS:
            start -= 1
        if start < m.start() and _may_hold_credential(m[0]):  # a scheme before '://': a URL
            parts += [text[done:start], url(text[start : m.end()])]
            done = m.end()
    return "".join(parts) + text[done:] if parts else text


def _may_hold_credential(tail: str) -> bool:
    """Whether a URL's tail has user information or a parameter :func:`secret_name` may call a
    credential: a test cheaper than :func:`url` for the common plain query (``?download=1``)."""
    if "@" in tail:
        return True
    flat = _NOT_ALNUM.sub("", tail.lower())  # as secret_name flattens a name, or more
    return any(word in flat for word in _SECRET_WORDS)


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


# Schemes whose '@' names a revision: ``hf://gpt2@<sha>/file`` is a repository without an owner
# at a commit (the Hub's token comes from HF_TOKEN, never a URL). An '@' there is user
# information only where no repository and revision can be read (:func:`_revision_userinfo`).
_REVISION_AT = ("hf://",)
# What follows the '@' of user information in the Hub's notation, never a revision: a repo type.
_REPO_TYPES = ("datasets/", "spaces/", "models/")
# A Hub access token's shape: never a repository name.
_HUB_TOKEN = re.compile(r"hf_[A-Za-z0-9]{16,}")


def _userinfo_end(text: str) -> int:
    """Where the user information of the URL ``text`` ends (just past its '@'), 0 if it has
    none. An authority whose "port" is not a number (``me:pa`` of ``https://me:pa/ss@host``, a
    password typed with a '/') holds user information up to the last '@' before the query: so
    a password is never shown in part, and an '@' in a path (``https://host/@scope/x``) is not
    taken for one."""
    m = _AUTHORITY.match(text)
    if m is None:
        return 0
    if text[:8].lower().startswith(_REVISION_AT):
        return _revision_userinfo(text, m.start(1), m[1])
    authority = m[1]
    if "@" in authority:
        return m.start(1) + authority.rindex("@") + 1
    _, colon, port = authority.rpartition(":")
    if colon and not port.isdigit() and not authority.endswith("]"):  # [::1] is an address
        last = text.rfind("@", m.start(1), len(text) - len(_query_part(text)))
        return last + 1 if last >= 0 else 0
    return 0


def _revision_userinfo(text: str, start: int, authority: str) -> int:
    """Where the user information of a URL in the Hub's notation ends (0: none). Its first
    segment reads ``REPO@REVISION`` or ``ORG``; it holds user information when that cannot be
    read so: a ':' before the '@' (no repository name or revision holds one, git's ref rules
    forbid it), a repo type right after the '@' (``hf://TOKEN@datasets/org/x``: the notation puts
    the type first), a second '@' in the repository that follows (``hf://TOKEN@org/x@REV``), or
    a token's shape before it (``hf_...``)."""
    if "@" not in authority:
        if ":" not in authority:
            return 0
        last = text.rfind("@", start, len(text) - len(_query_part(text)))  # a '/' in a password
        return last + 1 if last >= 0 else 0
    user, _, _rest = authority.partition("@")
    after = text[start + len(user) + 1 : len(text) - len(_query_part(text))]
    repo = "/".join(after.split("/")[:2])  # what would be ORG/NAME after user information
    if (
        ":" in user
        or after.lower().startswith(_REPO_TYPES)
        or "@" in repo  # a second '@': the repo's own revision follows user information
        or _HUB_TOKEN.fullmatch(user)
    ):
        return start + authority.rindex("@") + 1
    return 0


def _query_part(text: str) -> str:
    """``text`` from its first '?' or '#' on (its query and fragment), "" if it has neither."""
    m = re.search(r"[?#]", text)
    return "" if m is None else text[m.start() :]


def _redact_param(m: re.Match[str]) -> str:
    if not secret_name(m["name"]) or not m["value"]:
        return m[0]
    return f"{m['sep']}{m['name']}={REDACTED}"
