"""The provenance registry: reviewed text records in ``provenance/`` (DESIGN decision 3)."""

from fixture_store.registry.files import (
    FORMAT_VERSION,
    Registry,
    dumps,
    find_root,
    load,
    load_file,
    write_family,
)
from fixture_store.registry.records import Record, Source, check_name, family_of, parse_record

__all__ = [
    "FORMAT_VERSION",
    "Record",
    "Registry",
    "Source",
    "check_name",
    "dumps",
    "family_of",
    "find_root",
    "load",
    "load_file",
    "parse_record",
    "write_family",
]
