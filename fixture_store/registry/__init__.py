"""The provenance registry: reviewed text records in ``provenance/`` (DESIGN decision 3).

Every name below loads on first use, as the package's own names do (see :mod:`fixture_store`):
``from fixture_store.registry import raw_files`` costs that module alone, so that a warm
``fixture-store verify``, which reads the registry's bytes and parses none of them, does not
import the record parsers.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fixture_store.registry.files import (
        FORMAT_VERSION,
        FamilyFile,
        Fill,
        Registry,
        Transaction,
        dumps,
        load,
        load_file,
        record_fills,
        transaction,
        write_family,
    )
    from fixture_store.registry.known_failures import (
        KnownFailure,
    )
    from fixture_store.registry.raw_files import (
        family_of,
        find_root,
        project_root,
    )
    from fixture_store.registry.records import (
        FORMAT_MEDIA_TYPES,
        KINDS,
        MEDIA_TYPE_FORMATS,
        TREE_KINDS,
        Annotations,
        Content,
        Gap,
        Kind,
        ObjectRef,
        Record,
        check_name,
        check_record,
        content_of,
        parse_kind,
        parse_record,
    )
    from fixture_store.registry.sources import (
        GeneratorSource,
        HubRepo,
        HubSource,
        LocalSource,
        NoSource,
        PackageSource,
        Source,
        UrlSource,
        parse_source,
    )
    from fixture_store.registry.tolerance import (
        ArrayTolerance,
        Metric,
        Tolerance,
    )
    from fixture_store.registry.upstream import (
        GitUpstream,
        HubUpstream,
        PackageUpstream,
        Upstream,
        UrlUpstream,
    )
    from fixture_store.registry.where import (
        Where,
    )

__all__ = [
    "FORMAT_MEDIA_TYPES",
    "FORMAT_VERSION",
    "KINDS",
    "MEDIA_TYPE_FORMATS",
    "TREE_KINDS",
    "Annotations",
    "ArrayTolerance",
    "Content",
    "FamilyFile",
    "Fill",
    "Gap",
    "GeneratorSource",
    "GitUpstream",
    "HubRepo",
    "HubSource",
    "HubUpstream",
    "Kind",
    "KnownFailure",
    "LocalSource",
    "Metric",
    "NoSource",
    "ObjectRef",
    "PackageSource",
    "PackageUpstream",
    "Record",
    "Registry",
    "Source",
    "Tolerance",
    "Transaction",
    "Upstream",
    "UrlSource",
    "UrlUpstream",
    "Where",
    "check_name",
    "check_record",
    "content_of",
    "dumps",
    "family_of",
    "find_root",
    "load",
    "load_file",
    "parse_kind",
    "parse_record",
    "parse_source",
    "project_root",
    "record_fills",
    "transaction",
    "write_family",
]
_LAZY = {
    "Annotations": "fixture_store.registry.records",
    "ArrayTolerance": "fixture_store.registry.tolerance",
    "Content": "fixture_store.registry.records",
    "FORMAT_MEDIA_TYPES": "fixture_store.registry.records",
    "FORMAT_VERSION": "fixture_store.registry.files",
    "FamilyFile": "fixture_store.registry.files",
    "Fill": "fixture_store.registry.files",
    "Gap": "fixture_store.registry.records",
    "GeneratorSource": "fixture_store.registry.sources",
    "GitUpstream": "fixture_store.registry.upstream",
    "HubRepo": "fixture_store.registry.sources",
    "HubSource": "fixture_store.registry.sources",
    "HubUpstream": "fixture_store.registry.upstream",
    "KINDS": "fixture_store.registry.records",
    "Kind": "fixture_store.registry.records",
    "KnownFailure": "fixture_store.registry.known_failures",
    "LocalSource": "fixture_store.registry.sources",
    "MEDIA_TYPE_FORMATS": "fixture_store.registry.records",
    "Metric": "fixture_store.registry.tolerance",
    "NoSource": "fixture_store.registry.sources",
    "ObjectRef": "fixture_store.registry.records",
    "PackageSource": "fixture_store.registry.sources",
    "PackageUpstream": "fixture_store.registry.upstream",
    "Record": "fixture_store.registry.records",
    "Registry": "fixture_store.registry.files",
    "Source": "fixture_store.registry.sources",
    "TREE_KINDS": "fixture_store.registry.records",
    "Tolerance": "fixture_store.registry.tolerance",
    "Transaction": "fixture_store.registry.files",
    "Upstream": "fixture_store.registry.upstream",
    "UrlSource": "fixture_store.registry.sources",
    "UrlUpstream": "fixture_store.registry.upstream",
    "Where": "fixture_store.registry.where",
    "check_name": "fixture_store.registry.records",
    "check_record": "fixture_store.registry.records",
    "content_of": "fixture_store.registry.records",
    "dumps": "fixture_store.registry.files",
    "family_of": "fixture_store.registry.raw_files",
    "find_root": "fixture_store.registry.raw_files",
    "load": "fixture_store.registry.files",
    "load_file": "fixture_store.registry.files",
    "parse_kind": "fixture_store.registry.records",
    "parse_record": "fixture_store.registry.records",
    "parse_source": "fixture_store.registry.sources",
    "project_root": "fixture_store.registry.raw_files",
    "record_fills": "fixture_store.registry.files",
    "transaction": "fixture_store.registry.files",
    "write_family": "fixture_store.registry.files",
}


def __getattr__(name: str) -> Any:
    """A name of ``__all__`` from its module; a submodule (``registry.tolerance``) imported as the
    eager package had imported it before its first use."""
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    else:
        try:
            value = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value  # the next use is a plain lookup
    return value
