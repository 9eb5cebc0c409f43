"""The provenance registry: reviewed text records in ``provenance/`` (DESIGN decision 3)."""

from fixture_store.registry.files import (
    FORMAT_VERSION,
    FamilyFile,
    Registry,
    dumps,
    find_root,
    load,
    load_file,
    write_family,
)
from fixture_store.registry.known_failures import KnownFailure
from fixture_store.registry.records import (
    KINDS,
    TREE_KINDS,
    Annotations,
    Gap,
    Kind,
    ObjectRef,
    Record,
    check_name,
    check_record,
    family_of,
    parse_kind,
    parse_record,
)
from fixture_store.registry.sources import (
    GeneratorSource,
    HubSource,
    LocalSource,
    PackageSource,
    Source,
    UrlSource,
    parse_source,
)
from fixture_store.registry.tolerance import ArrayTolerance, Metric, Tolerance
from fixture_store.registry.where import Where

__all__ = [
    "FORMAT_VERSION",
    "KINDS",
    "TREE_KINDS",
    "Annotations",
    "ArrayTolerance",
    "FamilyFile",
    "Gap",
    "GeneratorSource",
    "HubSource",
    "Kind",
    "KnownFailure",
    "LocalSource",
    "Metric",
    "ObjectRef",
    "PackageSource",
    "Record",
    "Registry",
    "Source",
    "Tolerance",
    "UrlSource",
    "Where",
    "check_name",
    "check_record",
    "dumps",
    "family_of",
    "find_root",
    "load",
    "load_file",
    "parse_kind",
    "parse_record",
    "parse_source",
    "write_family",
]
