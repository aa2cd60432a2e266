"""click plumbing shared by the commands: options that also read the environment, value types
built from plain converter functions, and commands with mutually exclusive options and lists that
take several values after one flag.

Every option reads MARKET_SPREAD_<COMMAND>_<FLAG>, then MARKET_SPREAD_<FLAG> (see envnames). click
converts a value from the environment with the option's own type, so it is checked as a flag
is; the error names the variable (cli.main formats it on one line)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import click
from click.core import ParameterSource

from market_spread.cli.envnames import AMBIGUOUS_FLAGS, env_name, env_names
from market_spread.runtime.env import FALSE_WORDS, TRUE_WORDS


class Converted(click.ParamType):
    """A click type from a function `text -> value` that raises ValueError with the reason."""

    def __init__(self, convert: Callable[[str], Any], name: str | None = None, metavar: str | None = None) -> None:
        self._convert = convert
        self.name = name or getattr(convert, "__name__", "value").strip("_")
        self._metavar = metavar

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str | None:
        return self._metavar

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value  # a default, already converted
        try:
            return self._convert(value)
        except (ValueError, TypeError) as exc:
            self.fail(str(exc) or f"invalid {self.name}: {value!r}", param, ctx)


def choice(*values: str) -> Converted:
    def one_of(text: str) -> str:
        if text not in values:
            raise ValueError(f"not one of {', '.join(values)}")
        return text

    return Converted(one_of, "choice", "[" + "|".join(values) + "]")


def number(kind: type) -> Converted:
    def convert(text: str) -> Any:
        try:
            return kind(text)
        except ValueError:
            raise ValueError(f"not a {'whole number' if kind is int else 'number'}: {text!r}") from None

    return Converted(convert, kind.__name__)


class EnvOption(click.Option):
    """An option that also reads its command's and the shared environment variable."""

    envvar: Sequence[str]  # always given (__init__)

    def __init__(self, param_decls: Sequence[str], *, command: str, **kwargs: Any) -> None:
        self.flag = next(d for d in param_decls if d.startswith("--"))
        self.command = command
        names = env_names(self.flag, command)
        if kwargs.get("help"):
            kwargs["help"] = f"{kwargs['help']} [env {' or '.join(names)}]"
        super().__init__(param_decls, envvar=names, **kwargs)

    def process_value(self, ctx: click.Context, value: Any) -> Any:
        value = super().process_value(ctx, value)
        return list(value) if self.multiple and value is not None else value  # lists, as argparse gave

    def resolve_envvar_value(self, ctx: click.Context) -> str | None:
        if self.flag in AMBIGUOUS_FLAGS:
            shared, own = env_name(self.flag), env_name(self.flag, self.command)
            if os.environ.get(shared, "").strip() and not os.environ.get(own, "").strip():
                raise click.UsageError(
                    f"environment variable {shared} is ambiguous ({self.flag} differs between "
                    f"commands): set {own} instead",
                    ctx,
                )
        for name in self.envvar:
            raw = os.environ.get(name)
            if raw is not None and raw.strip() != "":
                ctx.meta[f"env:{self.name}"] = (name, raw)  # for the error message (cli.main reads it too)
                return raw
        return None

    def value_from_envvar(self, ctx: click.Context) -> Any:
        raw = self.resolve_envvar_value(ctx)
        if raw is None:
            return None
        if self.is_flag:
            word = raw.strip().lower()
            if word not in TRUE_WORDS | FALSE_WORDS:
                raise click.BadParameter("not a boolean (use true or false)", ctx, self)
            return word in TRUE_WORDS
        if self.multiple:
            items = [v for v in raw.split(os.pathsep) if v]
            if not items:
                raise click.BadParameter("expected at least one value", ctx, self)
            return items
        return raw


def options(command: str) -> Callable[..., Callable]:
    """`opt = options("stream")`, then `@opt("--lake", required=True, help=...)`."""

    def opt(*decls: str, **kwargs: Any) -> Callable:
        return click.option(*decls, cls=EnvOption, command=command, **kwargs)

    return opt


class EnvCommand(click.Command):
    """A command of EnvOptions: a list option takes several values after one flag, as argparse's
    nargs="+" did (`--nbbo a.msg b.msg`), and each group of `exclusive` options is refused when more
    than one of them is set, whether by flag or by variable."""

    def __init__(self, *args: Any, exclusive: Iterable[tuple[str, ...]] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.exclusive = tuple(exclusive)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        lists = {p.flag for p in self.params if isinstance(p, EnvOption) and p.multiple}
        rest = super().parse_args(ctx, expand_lists(args, lists))
        for names in self.exclusive:
            exclusive(ctx, *names)
        return rest


def env_command(name: str, **kwargs: Any) -> Callable[[Callable], EnvCommand]:
    """`@env_command("stream", exclusive=[("available_now", "interval")])` over a function of the options."""
    return click.command(name, cls=EnvCommand, **kwargs)


def given(ctx: click.Context, name: str) -> bool:
    """Whether the user set an option (flag or variable; a switch only counts when on)."""
    source = ctx.get_parameter_source(name)
    if source not in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT):
        return False
    value = ctx.params.get(name)
    return value not in (False, None) if source is ParameterSource.ENVIRONMENT else True


def exclusive(ctx: click.Context, *names: str) -> None:
    """Refuse two of these options at once, naming where each came from."""
    chosen = [n for n in names if given(ctx, n)]
    if len(chosen) > 1:

        def where(name: str) -> str:
            if ctx.get_parameter_source(name) is ParameterSource.ENVIRONMENT:
                return f"environment variable {ctx.meta[f'env:{name}'][0]}"
            param = next(p for p in ctx.command.params if p.name == name)
            return param.opts[-1]

        raise click.UsageError(f"{where(chosen[0])} and {where(chosen[1])} cannot be used together", ctx)


def expand_lists(argv: Iterable[str], list_flags: set[str]) -> list[str]:
    """`--tables a b c` (as users type it, and as argparse took it) into `--tables a --tables b
    --tables c`, since click options take one value per occurrence."""
    out: list[str] = []
    argv = list(argv)
    i = 0
    while i < len(argv):
        token = argv[i]
        out.append(token)
        i += 1
        if token == "--":  # the rest are arguments, not options
            out.extend(argv[i:])
            break
        if token in list_flags:
            values = []
            while i < len(argv) and not (argv[i].startswith("-") and argv[i] != "-"):
                values.append(argv[i])
                i += 1
            if values:
                out[-1:] = [x for v in values for x in (token, v)]
    return out
