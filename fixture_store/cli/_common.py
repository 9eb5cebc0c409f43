"""What every command module shares: the context, the consoles, errors, progress, exit codes,
the colours of outcomes and the stderr lines naming failures.

Command modules import this module, never ``app``: the root group loads them, so an import
of ``app`` from a command would be a cycle.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import os
import sys
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from fixture_store import display
from fixture_store import registry as registry_mod
from fixture_store.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, FixtureStoreError, UsageError
from fixture_store.objects.outputs import Target
from fixture_store.objects.store import Store
from fixture_store.verifying.results import Status

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

    from fixture_store.registry import Registry

F = TypeVar("F", bound=Callable[..., Any])


# Markup is off on both consoles, so every string that reaches them (a record name, a path, a
# message quoting the registry) prints as it is, '[...]' and all: colour comes only from
# ``styled`` and ``line``, as Text, never from parsing text that may hold a user's brackets.
# And every character of text they print passes through display.escape (line breaks kept) and
# display.redact, so a name's control characters are shown escaped, never sent to the terminal,
# and a URL's credentials are never shown: see
# ``_escaping_console``. ``out`` and ``err`` are made on first use, as module attributes
# (``__getattr__``): rich costs a warm 'verify --json', which prints through neither, a tenth of
# its time.
@functools.cache
def _console(name: str) -> Console:
    return _escaping_console()(stderr=name == "err", highlight=False, soft_wrap=True, markup=False)


@functools.cache
def _escaping_console() -> type[Console]:
    """A rich console that escapes the text of every segment it writes (tables, progress bars,
    errors and plain lines alike) and redacts the credentials of every URL in it, leaving only
    its own control sequences (colours, cursor moves) as they are: the one place where text
    reaches the terminal."""
    from rich.console import Console, ConsoleDimensions
    from rich.segment import Segment

    class EscapingConsole(Console):
        def _render_buffer(self, buffer: Iterable[Segment]) -> str:
            return super()._render_buffer(
                seg if seg.control else Segment(display.text(seg.text, keep="\n"), seg.style)
                for seg in buffer
            )

        # Not a terminal (a pipe, a log, a file): no width to fit, so a table is as wide as its
        # rows and never splits a name or a digest over lines (rich would wrap at 80 columns).
        @property
        def size(self) -> ConsoleDimensions:
            size = Console.size.fget(self)  # type: ignore[attr-defined]
            return size if self.is_terminal else ConsoleDimensions(UNWRAPPED_WIDTH, size.height)

        @size.setter
        def size(self, new_size: tuple[int, int]) -> None:
            Console.size.fset(self, new_size)  # type: ignore[attr-defined]

    return EscapingConsole


# The width of a console that is not a terminal: wider than any row a table prints.
UNWRAPPED_WIDTH = 100_000


def __getattr__(name: str) -> Console:
    if name in ("out", "err"):
        return _console(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class Context:
    """The global options, resolved when a command asks for the store or the registry."""

    store_flag: str | None
    registry_flag: str | None

    @property
    def store(self) -> Store:
        return Store.at(self.store_flag)

    def registry(self, *, cached: bool = True) -> Registry:
        """The project's registry; ``cached``: with the parsed-registry cache."""
        return registry_mod.load(self.registry_flag, cached=cached)

    def project(self) -> Path:
        """The folder holding ``provenance/``: the flag, else the nearest parent with one."""
        return registry_mod.project_root(self.registry_flag)


def check_store_flag(flag: str, *, creates: bool) -> None:
    """Refuse (exit 2, with the fix) a ``--store`` that is not a folder, or that does not exist
    for a command that only reads the store (it would look empty): the flag is named as the
    problem, not the objects it seems to lack."""
    path = Path(flag).expanduser()
    try:
        exists, folder = path.exists(), path.is_dir()
    except OSError:  # an unreadable parent: the store's own error says more when it is used
        return
    if exists and not folder:
        handle_errors(_refuse)(
            UsageError(
                f"--store {flag}: not a folder (a store is a folder holding objects/sha256/)",
                fix="pass the store's folder with --store, or leave it out for the default store",
            )
        )
    if not exists and not creates:
        handle_errors(_refuse)(
            UsageError(
                f"--store {flag}: no such folder (the store would be empty, so every object "
                "would look missing)",
                fix=f"check the path, or create the store there: fixture-store --store {flag} init",
            )
        )


def _refuse(error: UsageError) -> NoReturn:
    raise error


def handle_errors(fn: F) -> F:
    """Turn library errors into a message on stderr and an exit code: never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except FixtureStoreError as e:
            _console("err").print(line(("error:", "bold red"), " ", e.message))
            if e.fix:
                _console("err").print(f"  fix: {e.fix}")
            sys.exit(e.exit_code)
        except KeyboardInterrupt:
            _console("err").print("interrupted; nothing partial was left in the store")
            sys.exit(130)

    return wrapper  # type: ignore[return-value]


@contextlib.contextmanager
def progress(total: int, label: str, *, enabled: bool) -> Iterator[Callable[[object], None]]:
    """A transient bar on stderr, hidden for ``--json``, for fewer than two items and when stderr
    is no terminal (a log, such as a pipeline's, would keep only the blank line it leaves);
    yields the ``on_result`` callback that advances it by one."""
    if not enabled or total <= 1 or not _may_be_terminal():
        yield lambda _result: None  # no bar: rich is not even imported (a warm verify's start-up)
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = _console("err")
    bar = Progress(
        TextColumn(label, markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not enabled or total <= 1 or not console.is_terminal,
    )
    with bar:
        task = bar.add_task(label, total=total)
        yield lambda _result: bar.advance(task)


def _may_be_terminal() -> bool:
    """Whether stderr may be a terminal as rich decides it: a TTY, or one of the variables by
    which rich is told to treat it as one. When in doubt, yes: rich then decides."""
    return sys.stderr.isatty() or any(
        os.environ.get(v) for v in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")
    )


def echo_lines(lines: Iterable[str]) -> None:
    """Plain lines on stdout, each escaped and redacted as the consoles do (:func:`display.text`),
    without making a console: a summary with no table or colour needs no rich."""
    sys.stdout.write("".join(display.text(line, keep="\n") + "\n" for line in lines))
    sys.stdout.flush()


workers_option = click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=None,
    help="Parallel hashing workers (default: number of CPUs).",
)


def selection_options(command: F) -> F:
    """NAMES, ``--all`` and ``--family``: what a command acts on (see :func:`check_selection`)."""
    command = click.option("--family", "families", multiple=True, help="Every artifact of FAMILY.")(
        command
    )
    command = click.option("--all", "all_", is_flag=True, help="Every artifact of the registry.")(
        command
    )
    return click.argument("names", nargs=-1)(command)


def check_selection(
    verb: str, names: Collection[str], families: Collection[str], all_: bool
) -> None:
    """Refuse a selection that names nothing, or ``--all`` with names or families."""
    if not (names or families or all_):
        raise UsageError(
            f"say what to {verb}: NAMES, --family FAMILY or --all",
            fix=f"fixture-store {verb} --all",
        )
    if all_ and (names or families):
        raise UsageError("--all cannot be combined with NAMES or --family")


# -- exit codes ---------------------------------------------------------------------------------
# Outcomes that mean the registry or the request is wrong rather than the bytes.
# Outcomes a command reports per artifact that are usage errors (exit 2) as they are when one
# command raises them: an invalid record, an unknown name, an extra this environment lacks.
USAGE_OUTCOMES = frozenset({"invalid-record", "unknown", "needs-extra"})
VERIFIED_OUTCOMES = frozenset({str(Status.VERIFIED), str(Status.GAP)})


def leave(code: int) -> NoReturn:
    """Exit with ``code``, leaving the heap to the operating system: ``gc.freeze`` spares the
    interpreter's collections at exit, which walk every object of every module loaded (20 ms
    of a 0.23 s warm verify, measured). For a command that has closed all it wrote: an object
    in a reference cycle is not finalized then, so a file left open in one would not be
    flushed (the consoles are: the interpreter flushes stdout and stderr itself)."""
    gc.freeze()
    sys.exit(code)


def exit_code(outcomes: Iterable[str], *, ok: Collection[str] = VERIFIED_OUTCOMES) -> int:
    """2 if any outcome is a registry or usage error, 1 if any other is not in ``ok``, else 0."""
    seen = {str(o) for o in set(outcomes)}  # each distinct outcome once: 10^5 are common
    if seen & USAGE_OUTCOMES:
        return EXIT_USAGE
    if seen - {str(o) for o in ok}:
        return EXIT_FAILED
    return EXIT_OK


# -- outcomes -----------------------------------------------------------------------------------
# One colour per outcome word, whichever command prints it (verify, fetch, compare, regenerate).
STYLE = {
    "verified": "green",
    "present": "green",
    "fetched": "green",
    "pushed": "green",
    "pulled": "green",
    "pass": "green",
    "bit-identical": "green",
    "missing": "yellow",
    "within-tolerance": "yellow",
    "not-implemented": "yellow",
    "gap": "cyan",
    "known-failure": "cyan",
    "new": "cyan",
    "orphan": "yellow",
    "error": "red",
    "timeout": "red",
    "mismatch": "bold red",
    "invalid-record": "bold red",
    "unsafe": "bold red",
    "unknown": "bold red",
    "failed": "bold red",
    "needs-extra": "bold red",
    "refused": "bold red",
    "crash": "bold red",
    "drift": "bold red",
    "unavailable": "bold red",
}


def styled(outcome: str, text: str | None = None) -> Text:
    """``text`` (default: the outcome itself) in the outcome's colour."""
    from rich.text import Text

    return Text(str(outcome) if text is None else text, style=STYLE.get(str(outcome), ""))


def line(*parts: str | Text | tuple[str, str]) -> Text:
    """One printed line from plain strings, styled Text and ``(text, style)`` pairs; no part
    is parsed as markup."""
    from rich.text import Text

    return Text.assemble(*parts)


def counts_text(counts: Iterable[tuple[str, int]]) -> str:
    """``"3 verified, 1 missing"``: the non-zero counts, in the order given."""
    return ", ".join(f"{n} {outcome}" for outcome, n in counts if n)


def verbose_option(command: F) -> F:
    """``--verbose``: a row per artifact, not only for those that are not fine."""
    return click.option(
        "--verbose",
        "-v",
        is_flag=True,
        help="A row for every artifact (default: a line per family, and a row for each "
        "artifact that is not fine).",
    )(command)


def family_lines(outcomes: Iterable[tuple[str, str]], order: Iterable[str]) -> list[str]:
    """A line per family of the ``(name, outcome)`` pairs: its artifacts counted by outcome,
    in ``order`` (``"  onnx-node: 1765 present"``): what a pipeline's log shows of a run that
    went well."""
    from collections import Counter, defaultdict

    order = [str(o) for o in order]
    families: dict[str, Counter[str]] = defaultdict(Counter)
    for name, outcome in outcomes:
        families[registry_mod.family_of(name)][str(outcome)] += 1
    return [
        f"  {family}: {counts_text((o, c[o]) for o in order)}"
        for family, c in sorted(families.items())
    ]


@dataclass(frozen=True)
class Failure:
    """One artifact that did not come out right, as a stderr line names it."""

    outcome: str
    name: str
    message: str
    fix: str | None = None


def report_failures(failures: Iterable[Failure], *, limit: int | None = None) -> None:
    """One stderr line per failure (and its fix, if given), the first ``limit``, then how many
    more."""
    failed = list(failures)
    if not failed:
        return
    err = _console("err")
    for f in failed[:limit]:
        err.print(f"{f.outcome}: {f.name}: {f.message}", markup=False)
        if f.fix:
            err.print(f"  fix: {f.fix}", markup=False)
    if limit is not None and len(failed) > limit:
        err.print(f"… and {len(failed) - limit:,} more failures (use --json for all)")


# -- JSON ---------------------------------------------------------------------------------------
# JSON is escaped by json.dumps (every control and non-ASCII character as \uXXXX); what it
# still needs is the redaction of a URL's credentials (a remote's error quoting its endpoint).
def print_json(doc: Any, *, sort_keys: bool = False) -> None:
    """``--json``'s document: indented for a person at a terminal, on one line for a program
    reading a pipe or a file (as ``gh`` prints it): only then can json's C encoder write it,
    five times faster, which at 10^5 results is seconds (``jq .`` indents it again)."""
    if sys.stdout.isatty():
        text = json.dumps(doc, indent=2, sort_keys=sort_keys)
    else:
        text = json.dumps(doc, separators=(",", ":"), sort_keys=sort_keys)
    click.echo(display.redact(text))


def write_json(target: Target, doc: Any, *, sort_keys: bool = False) -> None:
    """A report file (for DVC): indented, ending in a newline, its folder created; written
    by the output primitive."""
    target.write_text(display.redact(json.dumps(doc, indent=2, sort_keys=sort_keys)) + "\n")


def write_parts(target: Target, value: Any, *, sort_keys: bool = False) -> None:
    """A report value for DVC: its tracked part at ``target`` (the same on every machine that
    passes) and its run part in the run report beside it (``parts.run_path``), which no stage
    tracks."""
    from fixture_store.parity import parts

    write_json(target, value.to_json(parts.Part.TRACKED), sort_keys=sort_keys)
    run = target.beside(parts.run_path(target.path))
    write_json(run, value.to_json(parts.Part.RUN), sort_keys=sort_keys)


# -- paths a command writes ---------------------------------------------------------------------
class OutputPath(click.Path):
    """A path a command writes (a file, or with ``folder`` a folder of files): converted to an
    :class:`~fixture_store.objects.outputs.Target` that stays out of the store the command runs
    with (``--store``), so every such option is written by the one output primitive (DESIGN
    18). Every path option of a command is either one of these or read only (see
    ``tests/cli/test_outputs_walk.py``)."""

    def __init__(self, *, folder: bool = False, what: str = "output") -> None:
        super().__init__(file_okay=not folder, dir_okay=folder, path_type=Path)
        self.what = what

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, Target):
            return value
        path = super().convert(value, param, ctx)
        obj = ctx.find_object(Context) if ctx is not None else None
        store = obj.store if obj is not None else Store.at(None)
        return Target(Path(os.fsdecode(path)), (store.root,), self.what)
