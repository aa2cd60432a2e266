"""`market-spread`: the command-line entry point.

The commands are click commands, one module each in market_spread.cli.commands (found by name here,
so this layer does not import the features). Every flag may also come from the environment:
`--max-spread-ratio` from `MARKET_SPREAD_STREAM_MAX_SPREAD_RATIO` (the command's own name) or
`MARKET_SPREAD_MAX_SPREAD_RATIO` (shared by every command, except for flags that differ between
commands: see AMBIGUOUS_FLAGS), and so on. Values from the environment are checked as flags are.
Bad arguments exit 2 with a one-line reason.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import sys
from collections.abc import Sequence
from typing import NoReturn

import click
from click.core import ParameterSource

from market_spread.errors import UsageError

# The variable names stay importable from here (they live in runtime.envnames).
from market_spread.runtime.envnames import AMBIGUOUS_FLAGS, env_name, env_names
from market_spread.runtime.settings import check_for

__all__ = [
    "AMBIGUOUS_FLAGS",
    "COMMANDS",
    "UsageError",
    "commands",
    "env_name",
    "env_names",
    "main",
    "parse",
    "parse_args",
]

PROG = "market-spread"
HELP = (
    "Catch the orders to reject because the market for their symbol is too wide or unknown. "
    "Every flag can also be set by its environment variable (shown in each command's --help)."
)
HELP_OPTIONS = ["-h", "--help"]  # as argparse had them


# name -> (module, one-line help). `bench` is a developer tool, offered only where it is installed.
COMMANDS: dict[str, tuple[str, str]] = {
    "stream": ("market_spread.cli.commands.stream", "run the streaming job over a landing folder into a lake"),
    "generate": ("market_spread.cli.commands.generate", "write synthetic quote and order feeds into a landing folder"),
    "replay": ("market_spread.cli.commands.replay", "convert Wallaroo fixish/FIX files into landing files"),
    "validate": ("market_spread.cli.commands.validate", "run the Great Expectations suites on the lake"),
    "sql": ("market_spread.cli.commands.sql", "query the lake's tables by name"),
    "maintain": ("market_spread.cli.commands.maintain", "compact and vacuum the lake's tables"),
    "bench": ("market_spread_tools.bench_command", "measure throughput, latency and scaling"),
    "broker": (
        "market_spread.cli.commands.broker",
        "run a single-node Kafka broker (KRaft) on 127.0.0.1 in the foreground",
    ),
    "object-store": (
        "market_spread.cli.commands.object_store",
        "run an S3-compatible server (s3proxy) on 127.0.0.1 in the foreground",
    ),
}


def commands() -> dict[str, click.Command]:
    """The commands on offer (a developer tool that is not installed is simply not offered)."""
    found: dict[str, click.Command] = {}
    for name, (module_name, help_text) in COMMANDS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if not module_name.startswith(exc.name or "\0"):
                raise
            continue
        details = inspect.getdoc(module.command.callback)  # e.g. what sql's QUERY argument is
        module.command.help = help_text + (f"\n\n{details}" if details else "")
        module.command.short_help = help_text
        found[name] = module.command
    return found


class _Commands(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)  # in COMMANDS' order, not sorted


def build_cli() -> click.Group:
    return _Commands(PROG, commands=commands(), help=HELP, context_settings={"help_option_names": HELP_OPTIONS})


def _fail(prog: str, message: str) -> NoReturn:
    sys.stderr.write(f"{prog}: error: {message}\n")
    raise SystemExit(2)


def _one_line(exc: click.ClickException) -> str:
    """click's message on one line, naming the environment variable when the bad value came from one."""
    ctx, param = getattr(exc, "ctx", None), getattr(exc, "param", None)
    if isinstance(exc, click.BadParameter) and ctx is not None and param is not None:
        found = ctx.meta.get(f"env:{param.name}")
        if found and ctx.get_parameter_source(param.name) in (ParameterSource.ENVIRONMENT, None):
            return f"environment variable {found[0]}={found[1]!r}: {exc.message}"
    return " ".join(exc.format_message().split())


def parse(argv: Sequence[str] | None = None) -> tuple[click.Context, click.Command]:
    """The command's context with every value parsed and checked (exit 2 with one line if not)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    group = build_cli()
    prog = PROG
    try:
        if not argv:
            _fail(prog, f"a command is required (choose from {', '.join(group.commands)}; --help for more)")
        if argv[0] in HELP_OPTIONS:
            group.make_context(PROG, ["--help"])  # prints the help, then raises Exit
        name = argv[0]
        command = group.commands.get(name)
        if command is None:
            _fail(prog, f"unknown command {name!r} (choose from {', '.join(group.commands)})")
        prog = f"{PROG} {name}"
        parent = click.Context(group, info_name=PROG, help_option_names=HELP_OPTIONS)
        return command.make_context(name, argv[1:], parent=parent), command
    except click.exceptions.Exit as done:
        raise SystemExit(done.exit_code) from None
    except click.ClickException as exc:
        _fail(prog, _one_line(exc))
    raise AssertionError("unreachable")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The parsed values of a command line, as the command's function receives them (no run)."""
    ctx, command = parse(argv)
    return argparse.Namespace(command=command.name, **ctx.params)


def main(argv: Sequence[str] | None = None) -> int:
    ctx, command = parse(argv)
    prog = f"{PROG} {command.name}"
    assert command.name is not None  # a group's commands are added by name
    try:
        check_for(command.name)
        with ctx:
            return int(command.invoke(ctx) or 0)
    except UsageError as exc:
        sys.stderr.write(f"{prog}: error: {exc}\n")
        return 2
    except click.ClickException as exc:  # a command that checks a value itself, click's way
        sys.stderr.write(f"{prog}: error: {_one_line(exc)}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
