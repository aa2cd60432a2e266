"""One configuration path: flags, then the environment, then defaults, checked alike (no Spark)."""

from __future__ import annotations

import argparse
import os

import pytest

from market_spread.cli import main as cli
from market_spread.cli.params import EnvOption
from market_spread.orchestration import jobs
from market_spread.orchestration.settings import Settings


def parse(monkeypatch, env: dict[str, str], argv: list[str]) -> argparse.Namespace:
    for name in [n for n in os.environ if n.startswith("MARKET_SPREAD_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return cli.parse_args(argv)


def refused(monkeypatch, capsys, env: dict[str, str], argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        parse(monkeypatch, env, argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


STREAM = ["stream", "--landing", "L", "--lake", "K"]


def test_environment_values_are_checked_like_flags(monkeypatch, capsys):
    err = refused(monkeypatch, capsys, {"MARKET_SPREAD_AVAILABLE_NOW": "maybe"}, STREAM)
    assert "MARKET_SPREAD_AVAILABLE_NOW" in err and "not a boolean" in err
    err = refused(monkeypatch, capsys, {"MARKET_SPREAD_INTERVAL": "soon"}, STREAM)
    assert "MARKET_SPREAD_INTERVAL='soon'" in err
    err = refused(monkeypatch, capsys, {"MARKET_SPREAD_MAX_SPREAD": "-1"}, STREAM)  # the type converter's check
    assert "MARKET_SPREAD_MAX_SPREAD" in err and "must be" in err
    err = refused(monkeypatch, capsys, {"MARKET_SPREAD_FORMAT": "xml"}, ["sql", "--lake", "K", "SELECT 1"])
    assert "MARKET_SPREAD_FORMAT='xml'" in err and "not one of table, json, csv" in err
    err = refused(monkeypatch, capsys, {"MARKET_SPREAD_GENERATE_QUOTES": "-3"}, ["generate", "--landing", "L"])
    assert "MARKET_SPREAD_GENERATE_QUOTES" in err
    # Mutually exclusive, whichever side the values come from.
    err = refused(monkeypatch, capsys, {"MARKET_SPREAD_AVAILABLE_NOW": "true"}, [*STREAM, "--interval", "3"])
    assert "MARKET_SPREAD_AVAILABLE_NOW" in err and "--interval" in err and "cannot be used together" in err
    err = refused(
        monkeypatch, capsys, {"MARKET_SPREAD_AVAILABLE_NOW": "yes", "MARKET_SPREAD_STREAM_INTERVAL": "3"}, STREAM
    )
    assert "MARKET_SPREAD_STREAM_INTERVAL" in err

    args = parse(monkeypatch, {"MARKET_SPREAD_AVAILABLE_NOW": "false"}, [*STREAM, "--interval", "3"])
    assert args.available_now is False and args.interval == 3.0
    args = parse(monkeypatch, {"MARKET_SPREAD_AVAILABLE_NOW": "on", "MARKET_SPREAD_MAX_FILES_PER_BATCH": "4"}, STREAM)
    assert args.available_now is True and args.max_files_per_batch == 4  # converted, not the text "4"


def test_precedence_and_per_command_names(monkeypatch, capsys):
    # Required flags may come from the environment; the command's own name beats the shared one; a flag beats both.
    args = parse(monkeypatch, {"MARKET_SPREAD_LAKE": "/shared", "MARKET_SPREAD_LANDING": "/in"}, ["stream"])
    assert (args.lake, args.landing, args.interval) == ("/shared", "/in", None)
    args = parse(monkeypatch, {"MARKET_SPREAD_LAKE": "/shared", "MARKET_SPREAD_VALIDATE_LAKE": "/mine"}, ["validate"])
    assert args.lake == "/mine"
    args = parse(monkeypatch, {"MARKET_SPREAD_VALIDATE_LAKE": "/mine"}, ["validate", "--lake", "/flag"])
    assert args.lake == "/flag"

    # --orders is a count for generate and a file list for replay: each reads its own variable only.
    args = parse(monkeypatch, {"MARKET_SPREAD_GENERATE_ORDERS": "7"}, ["generate", "--landing", "L"])
    assert args.orders == 7
    args = parse(
        monkeypatch, {"MARKET_SPREAD_REPLAY_ORDERS": os.pathsep.join(["a.msg", "b.msg"])}, ["replay", "--landing", "L"]
    )
    assert args.orders == ["a.msg", "b.msg"]
    err = refused(monkeypatch, capsys, {"MARKET_SPREAD_ORDERS": "5"}, ["generate", "--landing", "L"])
    assert "MARKET_SPREAD_ORDERS is ambiguous" in err and "MARKET_SPREAD_GENERATE_ORDERS" in err
    err = refused(monkeypatch, capsys, {"MARKET_SPREAD_ORDERS": "x.msg"}, ["replay", "--landing", "L"])
    assert "MARKET_SPREAD_REPLAY_ORDERS" in err


def test_lists_take_several_values_after_one_flag_and_errors_stay_one_line(monkeypatch, capsys):
    args = parse(
        monkeypatch, {}, ["replay", "--landing", "L", "--nbbo", "a.msg", "b.msg", "--orders", "c.msg", "--strict"]
    )
    assert (args.nbbo, args.orders, args.strict) == (["a.msg", "b.msg"], ["c.msg"], True)
    args = parse(monkeypatch, {}, ["maintain", "--lake", "K", "--tables", "alerts", "--tables", "quotes"])
    assert args.tables == ["alerts", "quotes"]
    args = parse(monkeypatch, {}, ["maintain", "--lake", "K"])
    assert args.tables is None and args.retain_hours == 168  # as argparse gave: None, not []
    assert "--lake" in refused(monkeypatch, capsys, {}, ["stream", "--landing", "L"])
    assert "--max-spread" in refused(monkeypatch, capsys, {}, [*STREAM, "--max-spread", "wide"])
    assert "a command is required" in refused(monkeypatch, capsys, {}, [])
    assert "unknown command 'strem'" in refused(monkeypatch, capsys, {}, ["strem"])


def _flags(command) -> dict[str, object]:
    return {p.flag: p for p in command.params if isinstance(p, EnvOption)}


def test_ambiguous_flags_and_the_dag_commands_flags_are_up_to_date():
    commands = cli.commands()
    meaning: dict[str, set] = {}
    for command in commands.values():
        for flag, option in _flags(command).items():
            meaning.setdefault(flag, set()).add((option.is_flag, option.multiple, option.type.name))
    assert {f for f, m in meaning.items() if len(m) > 1} == set(cli.AMBIGUOUS_FLAGS)
    for command, flags in jobs.COMMAND_FLAGS.items():
        assert set(flags) == set(_flags(commands[command])), command


def test_airflow_jobs_get_only_the_settings_they_need():
    environ = {
        "PATH": "/usr/bin",
        "HOME": "/home/a",
        "JAVA_HOME": "/jdk",
        "LC_ALL": "C.UTF-8",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": "postgresql://airflow:secret@db/airflow",
        "AIRFLOW__CORE__FERNET_KEY": "secret",
        "AWS_SECRET_ACCESS_KEY": "secret",
        "MARKET_SPREAD_LAKE": "/lake",
        "MARKET_SPREAD_GENERATE_ORDERS": "9",
        "MARKET_SPREAD_VALIDATE_FULL": "true",
        "MARKET_SPREAD_RUN_ID": "run-1",
        "MARKET_SPREAD_JARS": "/jars",
        "MARKET_SPREAD_FEED_RATE": "20",
    }
    settings = Settings(master="spark://m:7077")
    env = jobs.child_env(settings, "validate", environ)
    assert env == {
        "PATH": "/usr/bin",
        "HOME": "/home/a",
        "JAVA_HOME": "/jdk",
        "LC_ALL": "C.UTF-8",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "MARKET_SPREAD_LAKE": "/lake",
        "MARKET_SPREAD_VALIDATE_FULL": "true",
        "MARKET_SPREAD_RUN_ID": "run-1",
        "MARKET_SPREAD_JARS": "/jars",
        "MARKET_SPREAD_MASTER": "spark://m:7077",
        # An s3:// lake needs the store's credentials in every job (contract 3c); Airflow's own secrets stay out.
        "AWS_SECRET_ACCESS_KEY": "secret",
    }
    env = jobs.child_env(Settings(), "generate", environ)
    assert env["MARKET_SPREAD_GENERATE_ORDERS"] == "9" and "MARKET_SPREAD_VALIDATE_FULL" not in env
    assert not any(k.startswith("AIRFLOW") for k in env) and "MARKET_SPREAD_MASTER" not in env
    assert env["AWS_SECRET_ACCESS_KEY"] == "secret"


def test_help_answers_without_spark_and_bench_is_offered_only_with_the_tools(monkeypatch, capsys):
    import subprocess
    import sys

    for argv in (["-h"], ["stream", "-h"], ["sql", "--help"]):
        with pytest.raises(SystemExit) as exit_info:
            cli.main(argv)
        assert exit_info.value.code == 0 and "Usage: market-spread" in capsys.readouterr().out
    # Parsing every command's options loads no Spark (a child process: this one may have it already).
    code = (
        "import sys; from market_spread.cli.main import parse_args; parse_args(['stream', '--lake', 'K']); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j', 'great_expectations')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr
    assert "bench" in cli.commands()
    monkeypatch.setitem(sys.modules, "market_spread_tools.bench_command", None)  # as if not installed
    assert "bench" not in cli.commands() and "stream" in cli.commands()
