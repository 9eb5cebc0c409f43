"""Where remotes are configured: named remotes in the project's ``pyproject.toml``, per-user
overrides in a file outside the repository, and a default.

Project (reviewed with the code, shared by the team and CI)::

    [tool.fixture-store]
    default-remote = "team"

    [tool.fixture-store.remotes.team]
    url = "s3://bucket/fixtures"
    endpoint_url = "https://s3.example.org"   # optional, for S3-compatible servers
    profile = "fixtures"                        # optional, an AWS profile
    region = "eu-west-1"                        # optional

User (``$FIXTURE_STORE_CONFIG``, else ``config.toml`` in the per-user config folder): the same
shape without the ``tool.fixture-store`` prefix. A user remote replaces the project's remote of
the same name, and a user ``default-remote`` the project's.

Credentials are never configured here: S3 remotes use the standard AWS chain (environment,
shared config and credentials files, profiles), so no secret is ever written or printed.
"""

from __future__ import annotations

import os
import re
import tempfile
import tomllib
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import platformdirs

from fixture_store import display
from fixture_store.errors import UsageError
from fixture_store.registry.sources import HUB_SCHEME, HubRepo

CONFIG_ENV = "FIXTURE_STORE_CONFIG"
PYPROJECT = "pyproject.toml"
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")
_KEYS = ("url", "endpoint_url", "profile", "region")
# Settings that are numbers: pack_threshold, the size in bytes from which a push keeps an object
# under its own key instead of in a pack (0: no packs; see fixture_store.remotes.packs).
_NUMBER_KEYS = ("pack_threshold",)
_SECTION_KEYS = ("default-remote", "remotes")  # [tool.fixture-store], and the user's file
# Settings of the project's [tool.fixture-store] only, read by their own modules (the orphan
# ignore list: fixture_store.registry.project.orphans_ignored).
PROJECT_ONLY_KEYS = ("orphans-ignore",)
CHAIN_FIX = (
    "credentials never go in the configuration or a URL: use the AWS chain "
    "(AWS_PROFILE, ~/.aws/credentials, environment variables)"
)
HUB_TOKEN_FIX = (
    "credentials never go in the configuration or a URL: a Hub remote uses the Hub client's "
    "own login (HF_TOKEN, or the token `hf auth login` stores)"
)
_SCHEMES = ("s3://", "file://", "https://", HUB_SCHEME)
_S3_ONLY_KEYS = ("endpoint_url", "profile", "region")
ADD_FIX = "fixture-store remote add NAME URL --default"


@dataclass(frozen=True)
class RemoteSpec:
    """One configured remote: a name, where it is, and how an S3 client reaches it."""

    name: str
    url: str
    endpoint_url: str | None = None
    profile: str | None = None
    region: str | None = None
    origin: str = ""  # the file that declared it ("" for a URL given on the command line)
    pack_threshold: int | None = None  # None: the default (packs.PACK_THRESHOLD)

    @property
    def kind(self) -> str:
        if self.url.startswith("s3://"):
            return "s3"
        if self.url.startswith("https://"):
            return "https"
        if self.url.startswith(HUB_SCHEME):
            return "hub"
        return "folder"

    @property
    def hub(self) -> HubRepo:
        """The Hub repo of a ``hub`` remote (its URL was checked when the spec was made)."""
        return HubRepo.parse(self.url)

    @classmethod
    def from_json(cls, name: str, raw: object, origin: str) -> RemoteSpec:
        where = f"{origin}: remote {name!r}"
        if not isinstance(raw, Mapping):
            raise UsageError(f"{where} must be a table with a 'url'")
        refuse_unknown(raw, _KEYS + _NUMBER_KEYS, where, origin)
        threshold = raw.get("pack_threshold")
        if threshold is not None and (type(threshold) is not int or threshold < 0):
            raise UsageError(
                f"{where}: pack_threshold must be a number of bytes, 0 or more (0: no packs), "
                f"not {display.type_name(threshold)}",
                fix=f"edit {origin}",
            )
        values = {k: raw.get(k) for k in _KEYS}
        for key, value in values.items():
            if value is not None and (not isinstance(value, str) or not value):
                raise UsageError(
                    f"{where}: {key} must be a non-empty string, not {display.type_name(value)}",
                    fix=f"edit {origin}",
                )
        if values["url"] is None:
            raise UsageError(
                f"{where} has no url", fix=f'add url = "s3://bucket/prefix" in {origin}'
            )
        endpoint = values["endpoint_url"]
        url = check_url(values["url"], setting=f"{where}: url")
        if endpoint is not None:
            check_endpoint(endpoint, setting=f"{where}: endpoint_url")
        s3_only = [k for k in _S3_ONLY_KEYS if values[k] is not None]
        if url.startswith(HUB_SCHEME) and s3_only:
            raise UsageError(
                f"{where}: {', '.join(s3_only)} {'is' if len(s3_only) == 1 else 'are'} for S3 "
                "remotes; a Hub remote reaches the Hub its client is set up for",
                fix=f"remove {', '.join(s3_only)} from {origin} (the Hub's own HF_ENDPOINT and "
                "HF_TOKEN, or the stored login, apply)",
            )
        if threshold is not None and url.startswith((HUB_SCHEME, "https://")):
            raise UsageError(
                f"{where}: pack_threshold is for folder and S3 remotes, which push writes packs "
                "to; a Hub remote keeps each object as its own file and an https mirror serves "
                "the packs of the folder or bucket it mirrors",
                fix=f"remove pack_threshold from {origin}",
            )
        return cls(
            check_name(name),
            url,
            endpoint,
            values["profile"],
            values["region"],
            origin,
            threshold,
        )

    @classmethod
    def from_url(cls, url: str) -> RemoteSpec:
        """A remote named by its URL alone (``--remote s3://bucket/prefix``)."""
        return cls(url, check_url(url))

    def shown(self) -> dict[str, str | int]:
        """The settings as they may be printed: every URL through :func:`display.url`."""
        out = self.to_json()
        for key in ("url", "endpoint_url"):
            value = out.get(key)
            if isinstance(value, str):
                out[key] = display.url(value)
        return out

    def to_json(self) -> dict[str, str | int]:
        """The settings as they are written to a configuration file (never printed)."""
        out: dict[str, str | int] = {"url": self.url}
        for key in ("endpoint_url", "profile", "region", "pack_threshold"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


def refuse_unknown(
    table: Mapping[str, Any], known: tuple[str, ...], where: str, origin: str
) -> None:
    """Refuse the keys of ``table`` not in ``known``, by name and never with their values; a key
    that names a credential gets the fix that says where credentials go."""
    unknown = sorted(set(table) - set(known))
    if not unknown:
        return
    secret = any(display.secret_name(k) for k in unknown)
    raise UsageError(
        f"{where}: unknown setting{'s' if len(unknown) > 1 else ''} "
        f"{', '.join(repr(display.escape(k)) for k in unknown)}; known: {', '.join(known)}",
        fix=CHAIN_FIX if secret else f"remove it from {origin}",
    )


def check_name(name: str) -> str:
    if _NAME.fullmatch(name) is None:
        raise UsageError(
            f"invalid remote name {display.escape(name)!r}: use lower-case letters, digits, "
            "'-' and '_'"
        )
    return name


def check_url(url: str, *, setting: str = "remote URL") -> str:
    """An ``s3://bucket[/prefix]``, ``https://`` or ``file://`` URL, or a folder path; never one
    that carries a credential. Refusals show the URL only through :func:`display.url`."""
    refuse_credentials(url, setting)
    if "://" in url and not url.startswith(_SCHEMES):
        raise UsageError(
            f"unsupported {setting} {display.url(url)!r}",
            fix="use s3://BUCKET/PREFIX, https://HOST/PREFIX (read-only), hf://datasets/ORG/NAME, "
            "file:///PATH or a path",
        )
    if url.startswith(HUB_SCHEME):
        try:
            HubRepo.parse(url)  # the one reading of a Hub remote's URL
        except UsageError as e:
            raise UsageError(f"{setting}: {e.message}", fix=e.fix) from e
    if url.startswith("s3://") and not url.removeprefix("s3://").split("/", 1)[0]:
        raise UsageError(
            f"{setting} {display.url(url)!r} names no bucket", fix="use s3://BUCKET/PREFIX"
        )
    return url


def check_endpoint(url: str, *, setting: str = "endpoint_url") -> str:
    """An S3 endpoint: ``https://HOST[:PORT]`` (or ``http://`` for a server on a private
    network), never carrying a credential."""
    refuse_credentials(url, setting)
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.netloc:
        raise UsageError(
            f"{setting} {display.url(url)!r} is not an http(s) URL",
            fix="use endpoint_url = https://HOST[:PORT] (the S3 server's address)",
        )
    return url


def refuse_credentials(url: str, setting: str) -> None:
    """Refuse a URL-like setting that carries a credential (user information, or a query
    parameter holding a signature, a token or a key), showing it redacted."""
    found = display.credential_in(url)
    if found is not None:
        raise UsageError(
            f"{setting} {display.url(url)!r} carries a credential ({found}); "
            "credentials never go in a URL, and it is not shown",
            fix=HUB_TOKEN_FIX if url[: len(HUB_SCHEME)].lower() == HUB_SCHEME else CHAIN_FIX,
        )


@dataclass(frozen=True)
class RemoteConfig:
    """The remotes a command may use: the project's, overridden by the user's, and the default."""

    remotes: Mapping[str, RemoteSpec] = field(default_factory=dict)
    default: str | None = None
    project_file: Path | None = None
    user_file: Path | None = None

    def resolve(self, remote: str | None) -> RemoteSpec:
        """The remote ``--remote`` names (a configured name or a URL), else the default."""
        if remote is None:
            if self.default is None:
                raise UsageError(
                    "no remote given and no default remote configured",
                    fix=f"pass --remote NAME|URL, or: {ADD_FIX}",
                )
            remote = self.default
        if remote in self.remotes:
            return self.remotes[remote]
        if "://" in remote or "/" in remote or remote.startswith("."):
            return RemoteSpec.from_url(remote)
        known = ", ".join(self.remotes) or "none"
        if _NAME.fullmatch(remote) is None:  # 'user:secret@bucket' is no name to echo
            raise UsageError(
                f"--remote is neither a remote name nor a URL (it is not shown; configured: "
                f"{known})",
                fix="pass a configured name, s3://BUCKET/PREFIX, https://HOST/PREFIX or a path",
            )
        raise UsageError(f"no remote named {remote!r} (configured: {known})", fix=ADD_FIX)

    def mirrors(self) -> list[RemoteSpec]:
        """The remotes a fetch tries before a record's pinned source: the default first, then the
        others in the order they are declared (the project's, then the user's)."""
        first = [self.remotes[self.default]] if self.default is not None else []
        return first + [spec for name, spec in self.remotes.items() if name != self.default]


def user_config_file() -> Path:
    env = os.environ.get(CONFIG_ENV)
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_config_dir("fixture-store", appauthor=False)) / "config.toml"


def load(project: Path | None) -> RemoteConfig:
    """The configuration seen from ``project`` (the folder holding ``provenance/``), if any."""
    remotes: dict[str, RemoteSpec] = {}
    default: str | None = None
    project_file = None if project is None else project / PYPROJECT
    user_file = user_config_file()
    for path, section in ((project_file, ("tool", "fixture-store")), (user_file, ())):
        if path is None:
            continue
        table = _section(_read(path), section, path)
        where = f"{path}: [{'.'.join(section)}]" if section else str(path)
        known = (*_SECTION_KEYS, *PROJECT_ONLY_KEYS) if section else _SECTION_KEYS
        refuse_unknown(table, known, where, str(path))
        for name, raw in _table(table, "remotes", path).items():
            remotes[name] = _relative_to(RemoteSpec.from_json(name, raw, str(path)), path.parent)
        value = table.get("default-remote")
        if value is not None:
            if not isinstance(value, str):
                raise UsageError(
                    f"{path}: default-remote must be a remote name, not {display.type_name(value)}",
                    fix=f"edit {path}",
                )
            default = value
    if default is not None and default not in remotes:
        raise UsageError(
            f"the default remote {default!r} is not configured (configured: "
            f"{', '.join(remotes) or 'none'})",
            fix=f"fixture-store remote add {default} URL, or change default-remote",
        )
    return RemoteConfig(remotes, default, project_file, user_file)


def _relative_to(spec: RemoteSpec, base: Path) -> RemoteSpec:
    """A folder path in a file is relative to that file's folder."""
    if spec.kind != "folder" or spec.url.startswith("file://") or os.path.isabs(spec.url):
        return spec
    return replace(spec, url=str(base / spec.url))


def _read(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise UsageError(f"cannot read {path}: {e}", fix=f"fix the TOML in {path}") from e


def _section(doc: Mapping[str, Any], keys: tuple[str, ...], path: Path) -> Mapping[str, Any]:
    table: Any = doc
    for key in keys:
        table = table.get(key, {}) if isinstance(table, Mapping) else None
    if not isinstance(table, Mapping):
        raise UsageError(f"{path}: [{'.'.join(keys)}] must be a table")
    return table


def _table(table: Mapping[str, Any], key: str, path: Path) -> Mapping[str, Any]:
    value = table.get(key, {})
    if not isinstance(value, Mapping):
        raise UsageError(f"{path}: {key} must be a table of named remotes")
    return value


# -- editing (fixture-store remote add / remove) ------------------------------------------------
def add(path: Path, spec: RemoteSpec, *, project: bool, default: bool) -> None:
    """Declare ``spec`` in ``path`` (the project's pyproject.toml, or the user's file)."""
    prefix = "tool.fixture-store." if project else ""
    text = _text(path)
    before = tomllib.loads(text)
    section = _section(before, ("tool", "fixture-store") if project else (), path)
    if spec.name in _table(section, "remotes", path):
        raise UsageError(
            f"{path} already declares the remote {spec.name!r}",
            fix=f"fixture-store remote remove {spec.name}{' --project' if project else ''} first",
        )
    lines = [f"[{prefix}remotes.{spec.name}]"]
    lines += [f"{key} = {_value(value)}" for key, value in spec.to_json().items()]
    edited = text + ("\n" if text and not text.endswith("\n") else "")
    edited += ("\n" if edited else "") + "\n".join(lines) + "\n"
    if default:
        edited = _set_default(edited, spec.name, project=project)
    _write_checked(path, edited, _expected_add(before, spec, project, default))


def remove(path: Path, name: str, *, project: bool) -> None:
    """Remove the remote ``name`` (its table, and the default if it named it) from ``path``,
    and the headers of the tables that leaves empty; every other line stays as it was."""
    prefix = "tool.fixture-store." if project else ""
    text = _text(path)
    before = tomllib.loads(text)
    section = _section(before, ("tool", "fixture-store") if project else (), path)
    if name not in _table(section, "remotes", path):
        raise UsageError(f"{path} declares no remote {name!r}", fix="fixture-store remote list")
    header = f"[{prefix}remotes.{name}]"
    kept: list[str] = []
    table = None  # the header of the table the line is in (None: the top of the file)
    drops_default = section.get("default-remote") == name
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if stripped.startswith("["):
            table = stripped
        elif (
            drops_default
            and table == ("[tool.fixture-store]" if project else None)
            and re.fullmatch(r"default-remote\s*=\s*\S+", stripped)
        ):
            continue  # the section's default, not another table's key of that name
        if table != header:
            kept.append(line)
    expected = _thaw(before)
    target = expected
    for key in ("tool", "fixture-store") if project else ():
        target = target[key]
    del target["remotes"][name]
    if target.get("default-remote") == name:
        del target["default-remote"]
    emptied = [] if target["remotes"] else [f"[{prefix}remotes]"]
    if project and set(target) == {"remotes"} and not target["remotes"]:
        emptied.append("[tool.fixture-store]")  # last: dropping [..remotes] may leave it blank
    edited = _drop_blank_tables("".join(kept), emptied)
    # Whether an emptied table is left as a header or goes with it, the configuration is the same.
    keys = ("tool", "fixture-store", "remotes") if project else ("remotes",)
    _write_checked(path, edited.rstrip("\n") + "\n", expected, empty_ok=keys)


def _drop_blank_tables(text: str, headers: list[str]) -> str:
    """``text`` without each table among ``headers`` (in turn) whose header line is followed
    by nothing but blank lines up to the next table or the end; a table holding a comment stays."""
    for header in headers:
        lines = text.splitlines(keepends=True)
        for i, line in enumerate(lines):
            if line.strip() != header:
                continue
            end = i + 1
            while end < len(lines) and not lines[end].strip():
                end += 1
            if end == len(lines) or lines[end].lstrip().startswith("["):
                text = "".join(lines[:i] + lines[end:])
            break
    return text


def _without_empty(doc: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """``doc`` without the tables along ``keys`` that are empty, the deepest first."""
    if not keys or not isinstance(doc.get(keys[0]), dict):
        return doc
    inner = _without_empty(doc[keys[0]], keys[1:])
    rest = {k: v for k, v in doc.items() if k != keys[0]}
    return {**rest, keys[0]: inner} if inner else rest


def _set_default(text: str, name: str, *, project: bool) -> str:
    """Set ``default-remote``: on its own line if one is there, else after the table's header
    (or, for the user's file, at the top)."""
    line = f"default-remote = {_string(name)}"
    pattern = re.compile(r"^default-remote\s*=.*$", re.MULTILINE)
    if pattern.search(text):
        return pattern.sub(line, text, count=1)
    if not project:
        return f"{line}\n{text}"
    header = re.compile(r"^\[tool\.fixture-store\][ \t]*$", re.MULTILINE)
    match = header.search(text)
    if match is None:
        return f"{text}\n[tool.fixture-store]\n{line}\n"
    return f"{text[: match.end()]}\n{line}{text[match.end() :]}"


def _expected_add(
    before: dict[str, Any], spec: RemoteSpec, project: bool, default: bool
) -> dict[str, Any]:
    expected = _thaw(before)
    target: dict[str, Any] = expected
    for key in ("tool", "fixture-store") if project else ():
        target = target.setdefault(key, {})
    target.setdefault("remotes", {})[spec.name] = spec.to_json()
    if default:
        target["default-remote"] = spec.name
    return expected


def _write_checked(
    path: Path, text: str, expected: dict[str, Any], *, empty_ok: tuple[str, ...] = ()
) -> None:
    """Write ``text`` atomically if it parses to ``expected``: an edit never changes anything
    but what it says, whatever the file's formatting; otherwise the file is left untouched.
    Along the keys ``empty_ok``, an empty table and none are the same."""
    try:
        parsed: dict[str, Any] | None = _without_empty(tomllib.loads(text), empty_ok)
    except tomllib.TOMLDecodeError:
        parsed = None
    if parsed != _without_empty(expected, empty_ok):
        raise UsageError(
            f"cannot edit {path} safely (its layout is not one this command rewrites); "
            "it was left untouched",
            fix=f"edit {path} by hand (see docs/remotes.md)",
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""


def _value(value: str | int) -> str:
    return str(value) if isinstance(value, int) else _string(value)


def _string(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    if any(not c.isprintable() for c in escaped):
        raise UsageError(f"control characters are not allowed in {display.url(value)!r}")
    return f'"{escaped}"'


def _thaw(doc: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _thaw(v) if isinstance(v, Mapping) else v for k, v in doc.items()}
