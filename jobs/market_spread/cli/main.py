"""`market-spread`: the command-line entry point.

Each command lives in its own module exposing `configure(parser)` and `run(args) -> int`; modules
import Spark and friends inside `run`, so `--help` and argument errors answer at once.
Every flag may also come from the environment: `--max-spread-ratio` from
`MARKET_SPREAD_STREAM_MAX_SPREAD_RATIO` (the command's own name) or `MARKET_SPREAD_MAX_SPREAD_RATIO`
(shared by every command, except for flags that differ between commands: see AMBIGUOUS_FLAGS), and
so on. Values from the environment are checked as flags are. Bad arguments exit 2 with a one-line
reason.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any, Sequence

from market_spread.runtime.env import ENV_PREFIX, FALSE_WORDS, TRUE_WORDS

COMMANDS: dict[str, tuple[str, str]] = {
    "stream": ("market_spread.stream.job", "run the streaming job over a landing folder into a lake"),
    "generate": ("market_spread.feeds.generate", "write synthetic quote and order feeds into a landing folder"),
    "replay": ("market_spread.feeds.replay", "convert Wallaroo fixish/FIX files into landing files"),
    "validate": ("market_spread.quality.command", "run the Great Expectations suites on the lake"),
    "sql": ("market_spread.lake.query", "query the lake's tables by name"),
    "maintain": ("market_spread.lake.maintenance", "compact and vacuum the lake's tables"),
    "bench": ("market_spread_tools.bench", "measure throughput, latency and scaling"),
    "broker": ("market_spread.feeds.broker", "run a single-node Kafka broker (KRaft) on 127.0.0.1 in the foreground"),
}

# Flags that mean different things in different commands (`generate --orders N` is a count,
# `replay --orders FILE...` a file list): only the command's own variable is read for them
# (MARKET_SPREAD_GENERATE_ORDERS, MARKET_SPREAD_REPLAY_ORDERS); the shared name is refused.
AMBIGUOUS_FLAGS = frozenset({"--orders"})
_FROM_ENV = object()  # the default while parsing of a flag whose variable is set


def env_name(flag: str, command: str | None = None) -> str:
    """MARKET_SPREAD_<FLAG>, or MARKET_SPREAD_<COMMAND>_<FLAG> for a command's own name."""
    stem = flag.lstrip("-").replace("-", "_").upper()
    return ENV_PREFIX + (f"{command.upper()}_" if command else "") + stem


def env_names(flag: str, command: str | None) -> list[str]:
    """The variables a flag is read from, first match wins: the command's own name, then the shared
    one unless the flag is ambiguous across commands."""
    names = [env_name(flag, command)] if command else []
    if not (command and flag in AMBIGUOUS_FLAGS):
        names.append(env_name(flag))
    return names


class Parser(argparse.ArgumentParser):
    """argparse with settings from the environment and one-line errors.

    Each flag comes from the command line, else from its environment variable, else from its
    default; a value from the environment goes through the same checks as on the command line (the
    flag's type converter, its choices, true/false for switches, mutually exclusive groups) and a bad
    one exits 2 naming the variable.
    """

    command: str | None = None  # set by build_parser on each command's parser

    def _add_action(self, action: argparse.Action) -> argparse.Action:
        # Every flag passes here, also those added through a (mutually exclusive) group.
        long = next((n for n in action.option_strings if n.startswith("--")), None)
        if long and long != "--help":
            action.env_flag = long  # type: ignore[attr-defined]
            if action.help is not None and action.help is not argparse.SUPPRESS:
                action.help = f"{action.help} [env {' or '.join(env_names(long, self.command))}]"
        return super()._add_action(action)

    def _env_value(self, action: argparse.Action) -> tuple[str, str] | None:
        flag = getattr(action, "env_flag", None)
        if flag is None:
            return None
        if self.command and flag in AMBIGUOUS_FLAGS:
            shared = os.environ.get(env_name(flag), "")
            if shared.strip() and not os.environ.get(env_name(flag, self.command), "").strip():
                self.error(f"environment variable {env_name(flag)} is ambiguous ({flag} differs between "
                           f"commands): set {env_name(flag, self.command)} instead")
        for name in env_names(flag, self.command):
            value = os.environ.get(name)
            if value is not None and value.strip() != "":
                return name, value
        return None

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        from_env = {a: found for a in self._actions if (found := self._env_value(a)) is not None}
        saved = {a: (a.default, a.required) for a in from_env}
        for a in from_env:
            a.default, a.required = _FROM_ENV, False
        try:
            namespace, extras = super().parse_known_args(args, namespace)
        finally:
            for a, (default, required) in saved.items():
                a.default, a.required = default, required
        filled = []
        for a, (name, raw) in from_env.items():
            if getattr(namespace, a.dest, None) is _FROM_ENV:
                setattr(namespace, a.dest, self._convert_env(a, name, raw))
                filled.append(a)
        given = {a for a in self._actions if a not in from_env and getattr(namespace, a.dest, None) is not a.default}
        given |= {a for a in from_env if a not in filled}
        for group in self._mutually_exclusive_groups:
            chosen = [a for a in group._group_actions
                      if a in given or (a in filled and getattr(namespace, a.dest) not in (False, None))]
            if len(chosen) > 1:
                def where(a: argparse.Action) -> str:
                    return f"environment variable {from_env[a][0]}" if a in filled else a.option_strings[-1]
                self.error(f"{where(chosen[0])} and {where(chosen[1])} cannot be used together")
        return namespace, extras

    def _convert_env(self, action: argparse.Action, name: str, raw: str) -> Any:
        def bad(reason: str) -> None:
            self.error(f"environment variable {name}={raw!r}: {reason}")

        if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
            word = raw.strip().lower()
            if word not in TRUE_WORDS | FALSE_WORDS:
                bad("not a boolean (use true or false)")
            on = word in TRUE_WORDS
            return on if isinstance(action, argparse._StoreTrueAction) else not on
        if isinstance(action, argparse._CountAction):
            try:
                return int(raw)
            except ValueError:
                bad("not a whole number")
        if action.nargs in ("+", "*"):
            items = [self._convert_one(action, v, bad) for v in raw.split(os.pathsep) if v]
            if action.nargs == "+" and not items:
                bad("expected at least one value")
            return items
        return self._convert_one(action, raw, bad)

    @staticmethod
    def _convert_one(action: argparse.Action, text: str, bad) -> Any:
        value: Any = text
        if action.type is not None:
            try:
                value = action.type(text)
            except (argparse.ArgumentTypeError, ValueError, TypeError) as exc:
                bad(str(exc) or f"invalid {getattr(action.type, '__name__', 'value')}")
        if action.choices is not None and value not in action.choices:
            bad(f"not one of {', '.join(map(str, action.choices))}")
        return value

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(2)


def build_parser() -> Parser:
    parser = Parser(prog="market-spread", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for name, (module_name, help_text) in COMMANDS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue  # a command not built yet is simply not offered
        cmd = sub.add_parser(name, help=help_text, description=help_text)
        cmd.command = name  # before configure: the flags' variable names depend on it
        module.configure(cmd)
        cmd.set_defaults(_run=module.run, _prog=cmd.prog)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except UsageError as exc:
        sys.stderr.write(f"{args._prog}: error: {exc}\n")
        return 2
    except KeyboardInterrupt:
        return 130


class UsageError(Exception):
    """A bad argument found after parsing (e.g. a missing file): exit 2 with this one line."""


if __name__ == "__main__":
    # Run through the imported module, so `python -m` and the console script share one UsageError.
    from market_spread.cli.main import main as package_main

    raise SystemExit(package_main())
