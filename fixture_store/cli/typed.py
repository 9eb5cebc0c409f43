"""Errors about values typed on the command line blame the option that carried them.

A command that parses record fields from its options (``add --tolerance``, ``--upstream``,
``--metadata``, ``--source``...) gives the parsers the location :data:`COMMAND_LINE`; a
:class:`~fixture_store.errors.RegistryError` raised there (or later, when the record built from
those values is checked) names the field it refuses. :class:`Typed` maps that field back to the
option and the value the user typed, so the message reads ``--tolerance mean_abs:x: field
'tolerance': ...`` and its fix says to correct that option, never to edit a registry file that
was not involved. An error raised while an option is parsed by a parser that knows no fields
(the ``--source`` forms) is blamed on that option the same way (:meth:`Typed.parsing`).
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from fixture_store.errors import FixtureStoreError, RegistryError, UsageError

COMMAND_LINE = "the command line"


@dataclass(frozen=True)
class Typed:
    """The options a command was given, keyed by the record field each one states.

    ``options`` maps a field (``tolerance``, ``upstream``...) to the options typed for it, each
    as ``(option, value)``; a repeatable option appears once per value."""

    options: Mapping[str, Sequence[tuple[str, str]]]
    command: str = "fixture-store add"

    def blame(self, error: RegistryError) -> FixtureStoreError:
        """``error`` relocated to the option that typed its field (itself when it is about a
        registry file, or about a field no option states)."""
        if error.file != COMMAND_LINE:
            return error
        parts = (error.field or "").split("[", 1)[0].split(".")
        prefixes = (".".join(parts[:n]) for n in range(len(parts), 0, -1))
        typed = next((self.options[p] for p in prefixes if p in self.options), None)
        if not typed:
            return error
        fix = error.fix if error.fix != f"edit {COMMAND_LINE}" else None
        return RegistryError(
            error.reason,
            file=self._label(typed, error.reason),
            record=error.record,
            field=error.field,
            fix=fix or self._fix(typed),
        )

    def _label(self, typed: Sequence[tuple[str, str]], reason: str) -> str:
        """The option and the value typed (of a repeated option, the value the reason quotes,
        else every value)."""
        quoted = [(o, v) for o, v in typed if v in reason]
        shown = quoted[:1] if quoted and len(typed) > 1 else typed
        return ", ".join(f"{option} {shlex.quote(value)}" for option, value in shown)

    def _fix(self, typed: Sequence[tuple[str, str]]) -> str:
        names = sorted({option for option, _ in typed})
        return f"correct {' / '.join(names)} (`{self.command} --help` shows the forms it takes)"

    @contextlib.contextmanager
    def blaming(self) -> Iterator[None]:
        """Relocate every command-line RegistryError raised inside to its option."""
        try:
            yield
        except RegistryError as e:
            raise self.blame(e) from None

    @contextlib.contextmanager
    def parsing(self, option: str, value: str) -> Iterator[None]:
        """Blame any refusal raised inside on ``option value``."""
        try:
            yield
        except FixtureStoreError as e:
            if isinstance(e, RegistryError) and e.file == COMMAND_LINE:
                raise self.blame(e) from None
            prefix = f"{option} {shlex.quote(value)}: "
            message = e.message if e.message.startswith(prefix) else prefix + e.message
            raise UsageError(message, fix=e.fix or self._fix([(option, value)])) from None


def of(*given: tuple[str, str, Sequence[object]]) -> Typed:
    """A :class:`Typed` from ``(field, option, values)`` triples: the values typed for
    ``option`` (``None`` and empty ones are options not given)."""
    options: dict[str, list[tuple[str, str]]] = {}
    for field, option, values in given:
        for value in values:
            if value is not None:
                options.setdefault(field, []).append((option, str(value)))
    return Typed(options)
