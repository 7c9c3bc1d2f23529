"""Command definitions and the text parser shared by the console and Telegram.

A command is defined once with its arguments and who may use it (a rule from bot.permissions);
Discord renders the same definition as an app command with typed options.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Literal

from bot.neutral import Attachment, Incoming, Reply
from bot.permissions import EVERYONE, Permission

if TYPE_CHECKING:
    from bot.app import App

ArgType = Literal["str", "text", "int", "float", "attachment", "choice"]


@dataclass
class Arg:
    name: str
    description: str
    type: ArgType = "str"          # 'text' takes the rest of the line
    required: bool = True
    choices: tuple[str, ...] = ()
    option: bool = False           # given as --name value in text form
    multiple: bool = False         # attachments: one or more


@dataclass
class CommandContext:
    app: "App"
    message: Incoming
    args: dict[str, Any]
    reply: Reply

    @property
    def scope(self) -> str:
        return self.message.scope


Handler = Callable[[CommandContext], Awaitable[None]]


@dataclass
class Command:
    name: str
    description: str
    handler: Handler
    args: list[Arg] = field(default_factory=list)
    permission: Permission = EVERYONE
    group: str = "general"

    def usage(self) -> str:
        parts = [f"/{self.name}"]
        for a in self.args:
            if a.option:
                value = "|".join(a.choices) if a.choices else ("N" if a.type in ("int", "float") else f"<{a.name}>")
                label = f"--{a.name} {value}"
            else:
                label = f"<{a.name}…>" if a.type == "text" else f"<{a.name}>"
            if a.type == "attachment":
                label = "<file…>" if a.multiple else "<file>"
            elif a.choices and not a.option:
                label = "|".join(a.choices)
            parts.append(label if a.required else f"[{label}]")
        return " ".join(parts)


class UsageError(Exception):
    """The user typed the command wrong; the message says how to type it."""


class Registry:
    def __init__(self) -> None:
        self.commands: dict[str, Command] = {}

    def add(self, command: Command) -> Command:
        if command.name in self.commands:
            raise ValueError(f"command /{command.name} defined twice")
        if command.name != command.name.lower() or not command.name.isidentifier():
            raise ValueError(f"command names are lowercase identifiers: {command.name}")
        self.commands[command.name] = command
        return command

    def command(self, name: str, description: str, args: list[Arg] | None = None,
                permission: Permission = EVERYONE, group: str = "general"):
        def deco(fn: Handler) -> Handler:
            self.add(Command(name, description, fn, args or [], permission, group))
            return fn
        return deco

    def get(self, name: str) -> Command | None:
        return self.commands.get(name.lower())


def _convert(arg: Arg, value: str) -> Any:
    if arg.type == "int":
        try:
            return int(value)
        except ValueError:
            raise UsageError(f"{arg.name} must be a whole number, not {value!r}") from None
    if arg.type == "float":
        try:
            return float(value)
        except ValueError:
            raise UsageError(f"{arg.name} must be a number, not {value!r}") from None
    if arg.type == "choice" and value.lower() not in arg.choices:
        raise UsageError(f"{arg.name} must be one of {', '.join(arg.choices)}")
    return value.lower() if arg.type == "choice" else value


# What an option looks like; in a command that takes options, an unknown one is an error rather
# than words of its text (``/simulate f.txt what next --bogus 3`` would end up in the requirement).
_OPTION = re.compile(r"--[A-Za-z][A-Za-z0-9_-]*")


def parse_text_args(command: Command, text: str, attachments: list[Attachment],
                    files_from_text: bool = False, attach_hint: str = "") -> dict[str, Any]:
    """Parse '/name args…' text. ``files_from_text``: leading tokens naming files are attachments
    (the console's way of attaching); ``attach_hint`` says how to attach one when it is missing."""
    try:
        tokens = shlex.split(text)
    except ValueError:
        tokens = text.split()
    values: dict[str, Any] = {}
    options = {a.name: a for a in command.args if a.option}
    rest: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.startswith("--") and tok[2:].replace("-", "_") in options:
            arg = options[tok[2:].replace("-", "_")]
            if i + 1 >= len(tokens):
                raise UsageError(f"--{arg.name} needs a value. Usage: {command.usage()}")
            values[arg.name] = _convert(arg, tokens[i + 1])
            i += 2
            continue
        if options and _OPTION.fullmatch(tok):
            valid = ", ".join(f"--{name}" for name in options)
            raise UsageError(f"unknown option {tok}; /{command.name} takes {valid}. Usage: {command.usage()}")
        rest.append(tok)
        i += 1
    for arg in command.args:
        if arg.option:
            continue
        if arg.type == "attachment":
            found = list(attachments)
            if files_from_text:
                while rest and Path(rest[0]).expanduser().is_file():
                    p = Path(rest.pop(0)).expanduser().resolve()
                    found.append(Attachment(p.name, p, p.stat().st_size))
                    if not arg.multiple:
                        break
            if found:
                values[arg.name] = found if arg.multiple else found[0]
        elif arg.type == "text":
            if rest:
                values[arg.name] = " ".join(rest)
                rest = []
        elif rest:
            values[arg.name] = _convert(arg, rest.pop(0))
    missing = [a.name for a in command.args if a.required and a.name not in values]
    if missing:
        files = any(a.type == "attachment" and a.name in missing for a in command.args)
        if files and attach_hint:
            raise UsageError(f"/{command.name} needs a document: {attach_hint}. Usage: {command.usage()}")
        raise UsageError(f"missing {', '.join(missing)}. Usage: {command.usage()}")
    if rest:
        raise UsageError(f"unexpected {' '.join(rest)!r}. Usage: {command.usage()}")
    return values
