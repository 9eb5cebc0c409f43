"""One exception hierarchy: each error says what is wrong, which artifact, and the fix."""

from __future__ import annotations

from fixture_store import display

# Exit codes the CLI maps errors to; CI reads them.
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


class FixtureStoreError(Exception):
    """Base of every error the library raises on purpose.

    ``fix`` is the command or action that repairs the situation; the CLI prints it below.
    """

    exit_code = EXIT_FAILED

    def __init__(self, message: str, *, fix: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def about(self, artifact: str) -> str:  # noqa: ARG002 - ArtifactError's override uses it
        """The message as a line that names ``artifact`` already prints it: a failure report
        (``failed: NAME: ...``) adds the name itself, so an error about that artifact gives its
        message without the name in front; any other error gives its whole message."""
        return self.message

    def __str__(self) -> str:
        """The message and its fix, escaped and with every URL's credentials redacted
        (:mod:`fixture_store.display`): wherever it is printed (a pytest report, a log), a name
        quoted in it cannot drive a terminal and a URL quoted in it shows no secret."""
        text = f"{self.message}\n  fix: {self.fix}" if self.fix else self.message
        return display.text(text, keep="\n")


class UsageError(FixtureStoreError):
    """The caller asked for something that cannot be done as asked."""

    exit_code = EXIT_USAGE


class DigestFormatError(FixtureStoreError):
    """A digest string or size is malformed."""

    exit_code = EXIT_USAGE


class RegistryError(FixtureStoreError):
    """The provenance registry (a file or a record in it) is invalid."""

    exit_code = EXIT_USAGE

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        record: str | None = None,
        field: str | None = None,
        fix: str | None = None,
    ) -> None:
        if fix is None and file is not None:
            fix = f"edit {file}"  # a registry file is reviewed text: editing it is the repair
        self.file = file
        self.record = record
        self.field = field
        self.reason = message
        super().__init__(self._located(record), fix=fix)

    def _located(self, record: str | None) -> str:
        """The reason behind its location: the file, ``record`` (unless None) and the field."""
        where = ": ".join(
            part
            for part in (
                self.file,
                f"record {record!r}" if record is not None else None,
                f"field {self.field!r}" if self.field is not None else None,
            )
            if part
        )
        return f"{where}: {self.reason}" if where else self.reason

    def about(self, artifact: str) -> str:
        """The message without ``record 'ARTIFACT'`` when the record is ``artifact``: the line
        names it already; the file and field stay, they say where to edit."""
        return self._located(None) if artifact == self.record else self.message


class StoreError(FixtureStoreError):
    """The object store cannot do what was asked (I/O, permissions, disk full)."""


class IntegrityError(StoreError):
    """Bytes did not match the digest they were expected to have; nothing was stored."""


class AttestationError(FixtureStoreError):
    """A signed parity certificate does not verify: its signature, or it is no certificate."""


class ArtifactError(FixtureStoreError):
    """An artifact cannot be handed out: the base of every refusal by verification.

    Its message names the artifact (``NAME: what is wrong``), as an error raised on its own
    must; :meth:`about` gives what is wrong alone, for a line that names the artifact itself.
    """

    status = "error"

    def __init__(self, artifact: str, message: str, *, fix: str | None = None) -> None:
        super().__init__(f"{artifact}: {message}", fix=fix)
        self.artifact = artifact
        self.detail = message

    def about(self, artifact: str) -> str:
        return self.detail if artifact == self.artifact else self.message


class UnknownArtifactError(ArtifactError):
    """The name has no record in the registry: nothing without a record is trusted."""

    status = "unknown"
    exit_code = EXIT_USAGE


class MissingObjectError(ArtifactError):
    """The record is valid but its object is not in the store."""

    status = "missing"


class DigestMismatchError(ArtifactError):
    """The object in the store does not have the record's digest or size."""

    status = "mismatch"


class InvalidRecordError(ArtifactError):
    """The artifact's record failed validation."""

    status = "invalid-record"
    exit_code = EXIT_USAGE


class GapError(ArtifactError):
    """The artifact is a declared gap: expected by the project, not available yet."""

    status = "gap"

    def __init__(self, artifact: str, reason: str) -> None:
        super().__init__(artifact, f"declared gap: {reason}")
        self.reason = reason


class UnsafeContentError(ArtifactError):
    """The content matched its digest but failed its safety profile or manifest."""

    status = "unsafe"


class HostileContentError(UnsafeContentError):
    """Content broke one rule of its limits profile or manifest; ``rule`` names which one.

    Raised by the archive and tensor readers before anything is allocated or written outside
    staging, so a refusal never leaves partial output behind.
    """

    def __init__(self, artifact: str, rule: str, message: str, *, fix: str | None = None) -> None:
        super().__init__(artifact, f"{message} [{rule}]", fix=fix)
        self.rule = rule
        self.reason = message


class UnsafeArchiveError(HostileContentError):
    """An archive (tar, tar.lz4, tar.zst, zip) was refused."""


class UnsafeArrayError(HostileContentError):
    """A tensor file (NPY, NPZ) or its metadata JSON was refused."""
