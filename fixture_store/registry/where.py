"""Where a registry value is read, so that a refusal names the file, the record and the field."""

from __future__ import annotations

from dataclasses import dataclass

from fixture_store.errors import RegistryError


@dataclass(frozen=True)
class Where:
    """The file and record a value comes from (either may be unknown)."""

    file: str | None = None
    record: str | None = None

    def fail(self, field: str, message: str, fix: str | None = None) -> RegistryError:
        """The error to raise for ``field``: it names the file, the record and the field."""
        return RegistryError(message, file=self.file, record=self.record, field=field, fix=fix)
