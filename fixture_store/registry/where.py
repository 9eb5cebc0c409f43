"""Where a registry value is read, so that a refusal names the file, the record and the field."""

from __future__ import annotations

from dataclasses import dataclass

from fixture_store import display
from fixture_store.errors import RegistryError


@dataclass(frozen=True)
class Where:
    """The file and record a value comes from (either may be unknown)."""

    file: str | None = None
    record: str | None = None

    def fail(self, field: str, message: str, fix: str | None = None) -> RegistryError:
        """The error to raise for ``field``: it names the file, the record and the field."""
        return RegistryError(message, file=self.file, record=self.record, field=field, fix=fix)


def check_no_credential(where: Where, field: str, url: str) -> None:
    """Refuse a URL field that carries a credential (user information, or a query parameter
    holding a signature, a token or a key): a registry is committed, so a secret in it is
    published; the refusal shows the URL redacted (DESIGN decision 15)."""
    found = display.credential_in(url)
    if found is not None:
        raise where.fail(
            field,
            f"{display.url(url)!r} carries a credential ({found}); it is not shown",
            fix="remove it from the URL (and revoke it: the file may have been shared); a "
            "source that needs a credential reads it from the environment, never the registry",
        )
