"""`python -m bot [--config PATH] <command>`: run the bot, manage the database, and more.

``--config`` may also follow the command (or a sub-command such as `db current`).

Each module in COMMANDS adds its sub-command with ``register(subparsers)`` and sets
``func``: an async function ``(args, config) -> int`` (the exit status).
"""
from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import sys
from typing import Mapping

from engine.config import ConfigError, load_config
from engine.datadir import check_storage, make_private, private_files
from engine.db import DatabaseUnusable, SchemaTooNew
from engine.embedder import check_model
from engine.logsetup import setup_logging

log = logging.getLogger(__name__)

COMMANDS = [
    "bot.cli.run",
    "bot.cli.db",
    "bot.cli.simulate",
    "bot.cli.discord",
    "bot.cli.memory",
    "bot.cli.recall",
    "bot.cli.export",
]


CONFIG_HELP = "configuration file (default: ./config.toml)"


def _accept_global_options(parser: argparse.ArgumentParser) -> None:
    """Let every sub-command (and theirs) take ``--config`` too, so it may follow the command:
    `python -m bot run --config x.toml` works like `python -m bot --config x.toml run`."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                # SUPPRESS: a sub-command that was not given --config leaves the global value alone
                child.add_argument("--config", metavar="PATH", default=argparse.SUPPRESS, help=CONFIG_HELP)
                _accept_global_options(child)


class Parser(argparse.ArgumentParser):
    subcommands: Mapping[str, argparse.ArgumentParser]   # name -> its parser, whose usage lists its options


def build_parser() -> Parser:
    parser = Parser(
        prog="python -m bot",
        description="A chat bot that remembers conversations in topic worlds and simulates how events unfold.")
    parser.add_argument("--config", metavar="PATH", help=CONFIG_HELP)
    sub = parser.add_subparsers(dest="command", metavar="<command>")
    for name in COMMANDS:
        importlib.import_module(name).register(sub)
    parser.subcommands = sub.choices  # name -> its parser, whose usage lists its options
    _accept_global_options(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # the sub-command's usage lists the options it does take
        parser.subcommands.get(args.command, parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command is None:  # `run` is the default
        args = parser.parse_args([*(argv if argv is not None else sys.argv[1:]), "run"])
    private_files()   # chat memory, documents and simulations: the bot's user's only
    try:
        config = load_config(args.config)
        check_storage(config)
        check_model(config.embedder.model, config.embedder.backend)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    setup_logging(config)
    for path in make_private(config):
        log.warning("%s was readable by other users; now it is this user's only", path)
    try:
        return asyncio.run(args.func(args, config)) or 0
    except (ConfigError, SchemaTooNew, DatabaseUnusable) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
