"""`python -m bot [--config PATH] <command>`: run the bot, manage the database, and more.

Each module in COMMANDS adds its sub-command with ``register(subparsers)`` and sets
``func``: an async function ``(args, config) -> int`` (the exit status).
"""
from __future__ import annotations

import argparse
import asyncio
import importlib
import sys

from engine.config import ConfigError, load_config
from engine.db import SchemaTooNew
from engine.logsetup import setup_logging

COMMANDS = [
    "bot.cli.run",
    "bot.cli.db",
    "bot.cli.simulate",
    "bot.cli.discord",
    "bot.cli.memory",
    "bot.cli.recall",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bot",
        description="A chat bot that remembers conversations in topic worlds and simulates how events unfold.")
    parser.add_argument("--config", metavar="PATH", help="configuration file (default: ./config.toml)")
    sub = parser.add_subparsers(dest="command", metavar="<command>")
    for name in COMMANDS:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:  # `run` is the default
        args = parser.parse_args([*(argv if argv is not None else sys.argv[1:]), "run"])
    try:
        config = load_config(args.config)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    setup_logging(config)
    try:
        return asyncio.run(args.func(args, config)) or 0
    except (ConfigError, SchemaTooNew) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
