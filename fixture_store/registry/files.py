"""Reading and writing registry files: one ``provenance/<family>.json`` per family, its records
in shards ``provenance/<family>/<ab>.json`` once it grows large (see :mod:`.shards`).

This module is the registry files' public face; the work is split by job:

- :mod:`.documents`: parsing a document (bounds, duplicate keys, each record, the schema
  backstop) and its one stable text form (:func:`dumps`);
- :mod:`.family`: the loaded registry (:class:`FamilyFile`, :class:`Registry`);
- :mod:`.reading`: loading a project's files, and their digests without parsing them;
- :mod:`.writing`: writing a family atomically, shard by shard;
- :mod:`.transactions`: the registry lock and read-modify-write (DESIGN decision 10).
"""

from __future__ import annotations

from fixture_store.registry.documents import (
    FORMAT_VERSION,
    LOCK_NAME,
    LOCKS_DIRNAME,
    MAX_DEPTH,
    MAX_INTEGER_DIGITS,
    dumps,
    schema,
)
from fixture_store.registry.family import FamilyFile, Registry
from fixture_store.registry.raw_files import (
    DIRNAME,
    ENV_VAR,
    create_directory,
    family_digest,
    family_digests,
    find_root,
    project_root,
    read_bytes,
    read_text,
)
from fixture_store.registry.reading import (
    family_names,
    load,
    load_family,
    load_file,
)
from fixture_store.registry.transactions import (
    Fill,
    Transaction,
    record_fills,
    transaction,
    write_family,
)
from fixture_store.registry.writing import reads_back

__all__ = [
    "DIRNAME",
    "ENV_VAR",
    "FORMAT_VERSION",
    "LOCKS_DIRNAME",
    "LOCK_NAME",
    "MAX_DEPTH",
    "MAX_INTEGER_DIGITS",
    "FamilyFile",
    "Fill",
    "Registry",
    "Transaction",
    "create_directory",
    "dumps",
    "family_digest",
    "family_digests",
    "family_names",
    "find_root",
    "load",
    "load_family",
    "load_file",
    "project_root",
    "read_bytes",
    "read_text",
    "reads_back",
    "record_fills",
    "schema",
    "transaction",
    "write_family",
]
