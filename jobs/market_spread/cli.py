"""`market-spread`: the command-line entry point.

Each command lives in its own module exposing `configure(parser)` and `run(args) -> int`; modules
import Spark and friends inside `run`, so `--help` and argument errors answer at once.
Every flag may also come from the environment: `--max-spread-ratio` from
`MARKET_SPREAD_MAX_SPREAD_RATIO`, and so on. Bad arguments exit 2 with a one-line reason.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any, Sequence

COMMANDS: dict[str, tuple[str, str]] = {
    "stream": ("market_spread.streaming", "run the streaming job over a landing folder into a lake"),
    "generate": ("market_spread.generate", "write synthetic quote and order feeds into a landing folder"),
    "replay": ("market_spread.replay", "convert Wallaroo fixish/FIX files into landing files"),
    "validate": ("market_spread.quality", "run the Great Expectations suites on the lake"),
    "sql": ("market_spread.query", "query the lake's tables by name"),
    "maintain": ("market_spread.maintenance", "compact and vacuum the lake's tables"),
    "bench": ("market_spread.bench", "measure throughput, latency and scaling"),
    "broker": ("market_spread.broker", "run a single-node Kafka broker (KRaft) on 127.0.0.1 in the foreground"),
}

TRUE_WORDS = {"1", "true", "yes", "on"}


def env_name(flag: str) -> str:
    return "MARKET_SPREAD_" + flag.lstrip("-").replace("-", "_").upper()


class Parser(argparse.ArgumentParser):
    """argparse with environment defaults and one-line errors."""

    def add_argument(self, *names: str, **kwargs: Any):  # type: ignore[override]
        long = next((n for n in names if n.startswith("--")), None)
        if long and long not in ("--help",):
            value = os.environ.get(env_name(long))
            if value is not None and value != "":
                action = kwargs.get("action")
                if action == "store_true":
                    kwargs["default"] = value.strip().lower() in TRUE_WORDS
                elif kwargs.get("nargs") in ("+", "*"):
                    kwargs["default"] = [kwargs.get("type", str)(v) for v in value.split(os.pathsep) if v]
                else:
                    kwargs["default"] = value
                kwargs["required"] = False
            help_text = kwargs.get("help")
            if help_text is not None and help_text is not argparse.SUPPRESS:
                kwargs["help"] = f"{help_text} [env {env_name(long)}]"
        return super().add_argument(*names, **kwargs)

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
    from market_spread.cli import main as package_main

    raise SystemExit(package_main())
