"""The ``fixture-store`` command: the root group, its global options, and where each command is.

Exit codes: 0 everything asked for is verified, 1 something failed verification, 2 a usage or
registry error. Tables go to stdout for people, ``--json`` for machines, errors to stderr.
"""

from __future__ import annotations

import difflib
import importlib

import click

from fixture_store.objects.store import ENV_VAR

# Every command, as "module:attribute" under fixture_store.cli. A module is imported only when
# its command runs (or --help lists it): they pull in rich, numpy, onnx, yaml and
# huggingface_hub, which a plain 'verify' or 'import fixture_store.cli' should not pay for.
COMMANDS: dict[str, str] = {
    "add": "store:add",
    "attest": "attest:attest",
    "check": "review:check",
    "compare": "compare:compare_cmd",
    "diff": "review:diff",
    "expectations": "expectations:expectations",
    "fetch": "fetch:fetch",
    "gc": "store:gc",
    "import": "imports:import_cmd",
    "init": "store:init",
    "list": "registry:list_",
    "migrate": "registry:migrate",
    "path": "verify:path",
    "provenance": "provenance:provenance",
    "pull": "remotes:pull",
    "push": "remotes:push",
    "regenerate": "regenerate:regenerate_cmd",
    "regenerate-summary": "regenerate:regenerate_summary_cmd",
    "rehash": "store:rehash",
    "report": "provenance:report",
    "remote": "remotes:remote",
    "show": "registry:show",
    "status": "registry:status",
    "tolerance": "tolerance:tolerance",
    "verify": "verify:verify",
    "verify-attestation": "attest:verify_attestation",
}


# The commands whose answer is what the store holds: at a --store that does not exist they would
# report every object missing, so they are told the flag is wrong instead. The others create
# the store there (fetch, pull, add, init) or do not depend on what it holds.
READ_THE_STORE = frozenset(
    {"attest", "compare", "gc", "path", "push", "rehash", "status", "verify"}
)


def load_command(name: str) -> click.Command:
    module, _, attr = COMMANDS[name].partition(":")
    command: click.Command = getattr(importlib.import_module(f"{__package__}.{module}"), attr)
    return command


class LazyGroup(click.Group):
    """A group that imports a command's module the first time the command is asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in COMMANDS and cmd_name not in self.commands:
            self.add_command(load_command(cmd_name), cmd_name)
        return super().get_command(ctx, cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """The command ``args`` name; a mistyped one is refused with the closest names."""
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as e:
            typed = args[0] if args else ""
            close = difflib.get_close_matches(typed, self.list_commands(ctx), n=3, cutoff=0.6)
            if not close or typed.startswith("-"):
                raise
            names = " or ".join(repr(c) for c in close)
            raise click.UsageError(f"{e.message} Did you mean {names}?", ctx=e.ctx) from None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--store",
    "store_flag",
    metavar="DIR",
    envvar=None,
    help=f"Object store location (default: ${ENV_VAR}, else a per-user cache dir).",
)
@click.option(
    "--registry",
    "registry_flag",
    metavar="DIR",
    help="Project folder holding provenance/ (default: nearest parent with one, "
    "or $FIXTURE_STORE_REGISTRY).",
)
@click.version_option(package_name="fixture-store")
@click.pass_context
def main(ctx: click.Context, store_flag: str | None, registry_flag: str | None) -> None:
    """Content-addressed fixture store and provenance registry for ML parity tests.

    Every artifact is a record in provenance/ (digest, size, pinned source, lineage, tolerance);
    bytes live in a content-addressed store and are handed out only after verification.
    """
    from fixture_store.cli._common import Context, check_store_flag  # with the consoles

    if store_flag is not None:
        check_store_flag(store_flag, creates=ctx.invoked_subcommand not in READ_THE_STORE)
    ctx.obj = Context(store_flag, registry_flag)
