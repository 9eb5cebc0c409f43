"""DVC: the ``outs`` of ``.dvc`` files and of ``dvc.lock`` stages.

DVC addresses bytes by md5. An out's md5 is kept as DVC's own check (the bytes must match it
before they are accepted); the SHA-256 the record gets is computed from those same bytes, read
from the workspace or, if the file is absent there, from the DVC cache. A directory out (md5
ending in ``.dir``) is expanded into its files from the listing in the cache, whose own md5 is
checked first. Paths are relative to the manifest's folder, as DVC writes them.
"""

from __future__ import annotations

import configparser
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from fixture_store._extras import require
from fixture_store.importers import fields
from fixture_store.importers.entry import (
    ExpectedDigest,
    ManifestEntry,
    ManifestError,
    check_path,
    check_values,
    load_json,
    read_manifest,
    refuse_duplicates,
)
from fixture_store.registry import nesting

FORMAT = "dvc"
LOCK_NAME = "dvc.lock"
_DIR = ".dir"


class _Lined(dict[str, Any]):
    """A YAML mapping that remembers the line it starts on."""

    line: int = 0


def parse(text: str, shown: str) -> tuple[ManifestEntry, ...]:
    doc = _load_yaml(text, shown)
    cache = _Cache.near(Path(shown))
    outs = _lock_outs(doc, shown) if Path(shown).name == LOCK_NAME else _file_outs(doc, shown)
    entries: list[ManifestEntry] = []
    for at, out in outs:
        entries.extend(_entries(out, at, shown, cache))
    return refuse_duplicates(entries)


def looks_like(_text: str, shown: str) -> bool:
    return shown.endswith(".dvc") or Path(shown).name == LOCK_NAME


def _load_yaml(text: str, shown: str) -> Any:
    require("regenerate", for_what="importing DVC files", modules=["yaml"])
    import yaml

    class Loader(yaml.SafeLoader):
        def compose_node(self, parent: Any, index: Any) -> Any:
            # DVC never writes an alias; one (or a chain of them) would make the document
            # a graph walked as a tree, as large as its expansion.
            if self.check_event(yaml.AliasEvent):
                line = self.peek_event().start_mark.line + 1  # type: ignore[no-untyped-call]
                raise ManifestError(
                    f"{shown} line {line}", "a YAML alias (*name): DVC files hold plain data"
                )
            return super().compose_node(parent, index)

    def mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> _Lined:
        out = _Lined()
        out.line = node.start_mark.line + 1
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            where = f"{shown} line {key_node.start_mark.line + 1}"
            if not isinstance(key, str):
                raise ManifestError(where, f"a key must be a string, not {key!r}")
            if key in out:
                raise ManifestError(where, f"duplicate key {key!r}")
            out[key] = loader.construct_object(value_node, deep=True)
        return out

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    try:
        doc = yaml.load(text, Loader=Loader)  # a SafeLoader subclass: plain data only
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{shown} line {mark.line + 1}" if mark is not None else shown
        raise ManifestError(where, f"not valid YAML: {getattr(e, 'problem', e)}") from e
    except RecursionError:  # the parser and composer recurse per level
        raise ManifestError(shown, f"nested more than {nesting.MAX_DEPTH} levels deep") from None
    except ValueError as e:  # an integer past Python's own digit limit
        raise ManifestError(shown, f"a value YAML cannot hold here: {e}") from None
    check_values(doc, shown)
    return doc


def _file_outs(doc: Any, shown: str) -> list[tuple[str, _Lined]]:
    if not isinstance(doc, Mapping) or not isinstance(doc.get("outs"), list):
        raise ManifestError(shown, "a .dvc file needs an 'outs' list", fix="dvc add PATH")
    return _checked_outs(doc["outs"], shown, "/outs")


def _lock_outs(doc: Any, shown: str) -> list[tuple[str, _Lined]]:
    stages = doc.get("stages") if isinstance(doc, Mapping) else None
    if not isinstance(stages, Mapping):
        raise ManifestError(shown, "dvc.lock needs a 'stages' mapping", fix="dvc repro")
    outs: list[tuple[str, _Lined]] = []
    for name, stage in stages.items():
        if not isinstance(stage, Mapping) or not isinstance(stage.get("outs", []), list):
            raise ManifestError(f"{shown} stage {name!r}", "outs must be a list")
        at = fields.pointer(fields.pointer("/stages", str(name)), "outs")
        outs.extend(_checked_outs(stage.get("outs", []), shown, at))
    return outs


def _checked_outs(outs: list[Any], shown: str, at: str) -> list[tuple[str, _Lined]]:
    for out in outs:
        if not isinstance(out, _Lined) or not isinstance(out.get("path"), str):
            raise ManifestError(shown, "every out needs a 'path'")
    return [(fields.pointer(at, str(i)), out) for i, out in enumerate(outs)]


def _entries(out: _Lined, at: str, shown: str, cache: _Cache) -> Iterator[ManifestEntry]:
    where = f"{shown} line {out.line}"
    path = check_path(out["path"].removesuffix("/"), where)
    # DVC's own fields are read; any other (desc, meta, labels, remote, ...) is kept verbatim.
    found = fields.Fields()
    found.read(out, fields.DVC_OUT, at)

    md5 = out.get("md5")
    if not isinstance(md5, str):
        raise ManifestError(where, f"out {path!r} has no md5", fix=f"dvc commit {path}")
    legacy = out.get("hash") != "md5"  # DVC 2 files: the cache has no files/md5/ level
    size = out.get("size")
    if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 0):
        raise ManifestError(where, f"out {path!r}: size must be a non-negative integer")
    if md5.endswith(_DIR):
        listing = md5.removesuffix(_DIR)
        yield from _dir_entries(
            path, listing, where, cache, legacy=legacy, unknown=found.unknown, at=at
        )
        return
    digest = ExpectedDigest.parse("md5", md5, where, weak_ok=True)
    yield ManifestEntry(
        path,
        (digest,),
        where,
        size=size,
        cached_at=cache.object(digest.hex, legacy),
        unknown=found.unknown,
        pointer=at,
    )


def _dir_entries(
    path: str,
    md5: str,
    where: str,
    cache: _Cache,
    *,
    legacy: bool,
    unknown: Mapping[str, Any],
    at: str,
) -> Iterator[ManifestEntry]:
    """The files of a directory out, from its listing in the cache (whose md5 is checked)."""
    listing_digest = ExpectedDigest.parse("md5", md5, where, weak_ok=True)
    located = cache.object(listing_digest.hex + _DIR, legacy)
    if located is None:
        raise ManifestError(
            where,
            f"directory out {path!r}: its listing {md5}{_DIR} is not in the DVC cache",
            fix=f"dvc fetch {path}  (or dvc pull), then import again",
        )
    data = read_manifest(located, f"{where} ({path}{_DIR})")
    hasher = listing_digest.hasher()
    hasher.update(data)
    if hasher.hexdigest() != listing_digest.hex:
        raise ManifestError(
            where, f"directory out {path!r}: the cached listing does not match its md5 {md5}"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ManifestError(where, f"directory out {path!r}: the listing is not UTF-8") from e
    items = load_json(text, f"{where} ({path}{_DIR})")
    if not isinstance(items, list):
        raise ManifestError(where, f"directory out {path!r}: the listing is not a list")
    for item in items:
        if not isinstance(item, Mapping) or not isinstance(item.get("relpath"), str):
            raise ManifestError(where, f"directory out {path!r}: a listing item has no relpath")
        rel = check_path(item["relpath"], f"{where} ({path}{_DIR})")
        digest = ExpectedDigest.parse("md5", str(item.get("md5")), where, weak_ok=True)
        yield ManifestEntry(
            f"{path}/{rel}",
            (digest,),
            where,
            cached_at=cache.object(digest.hex, legacy),
            unknown=unknown,
            pointer=at,
        )


class _Cache:
    """The DVC cache of the repository holding a manifest: ``.dvc/cache`` unless its config
    names another folder; objects under ``files/md5/`` (DVC 3) or directly (DVC 2)."""

    def __init__(self, root: Path | None) -> None:
        self.root = root

    @classmethod
    def near(cls, manifest: Path) -> _Cache:
        for folder in manifest.absolute().parents:
            dvc_dir = folder / ".dvc"
            if dvc_dir.is_dir():
                return cls(_cache_dir(dvc_dir))
        return cls(None)

    def object(self, hexpart: str, legacy: bool) -> str | None:
        if self.root is None:
            return None
        base = self.root if legacy else self.root / "files" / "md5"
        path = base / hexpart[:2] / hexpart[2:]
        return str(path) if path.is_file() else None


def _cache_dir(dvc_dir: Path) -> Path:
    config = configparser.ConfigParser(strict=False, interpolation=None)
    try:
        config.read(dvc_dir / "config", encoding="utf-8")
    except configparser.Error:
        return dvc_dir / "cache"
    named = config.get("cache", "dir", fallback=None)
    return (dvc_dir / named).resolve() if named else dvc_dir / "cache"
