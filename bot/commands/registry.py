"""Command definitions, the text parser shared by the console and Telegram, and the check of typed options.

A message's text is read for a command once, by ``parse_command``: in ``App.dispatch`` for the
adapters that hand over raw text (the console), or by the adapter itself where it must know
before handing the message over (Telegram: whom the command is addressed to, whether it runs in
a task of its own), which then hands ``App.dispatch`` the parsed command (``Incoming.command``
and ``Incoming.args_text``).

A command is defined once with its arguments, who may use it (a rule from bot.permissions),
whether its answers go to the asker alone (``private``: App.dispatch hands it ``Reply.privately``)
and, optionally, a message action (``MessageAction``: the command applied to a message chosen from
a menu, as if it replied to it). Discord renders the same definition as an app command with
typed options, and a message action as a message context-menu command.

Names stay English on every platform (they are typed, and stable); descriptions and message-action
labels are English msgids marked with ``N_`` (or callables giving translated text) and shown translated
(``engine.i18n.describe``): /help in the chat's language, Discord's descriptions per locale, the
Telegram menu per language.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Literal

from bot.neutral import Attachment, Incoming, Reply
from bot.permissions import EVERYONE, Permission
from engine.docparse import SUPPORTED
from engine.i18n import N_, Text, _, describe

if TYPE_CHECKING:
    from bot.app import App
    from engine.memory.audience import Viewer

ArgType = Literal["str", "text", "int", "float", "attachment", "choice", "flag"]


@dataclass
class Arg:
    name: str
    description: Text              # a msgid, or a callable giving the translated text
    type: ArgType = "str"          # 'text' takes the rest of the line
    required: bool = True
    choices: tuple[str, ...] = ()
    option: bool = False           # given as --name value in text form ('flag': --name alone)
    multiple: bool = False         # attachments: one or more

    @property
    def flag(self) -> str:
        """How the option is typed: ``--from-chat`` for ``from_chat``."""
        return self.name.replace("_", "-")


@dataclass(frozen=True)
class MessageAction:
    """A command applied to one message picked from the platform's message menu (Discord's "Apps"
    menu): it runs with ``args`` and the picked message as ``Incoming.reply_to``, exactly as the
    command typed in reply to that message."""
    label: str                    # the menu entry, a msgid: "Forget this message" (Discord: at most 32 characters)
    args: dict[str, Any] = field(default_factory=dict)


@dataclass
class CommandContext:
    app: "App"
    message: Incoming
    args: dict[str, Any]
    reply: Reply

    @property
    def scope(self) -> str:
        return self.message.scope

    @property
    def viewer(self) -> "Viewer":
        return self.message.viewer


Handler = Callable[[CommandContext], Awaitable[None]]
# Whether a command's answers (given its parsed arguments) are for the asker alone.
Private = bool | Callable[[CommandContext], bool]


@dataclass
class Command:
    name: str
    description: Text
    handler: Handler
    args: list[Arg] = field(default_factory=list)
    permission: Permission = EVERYONE
    group: str = "general"
    private: Private = False
    message_action: MessageAction | None = None

    def answers_privately(self, ctx: CommandContext) -> bool:
        return self.private(ctx) if callable(self.private) else self.private

    def usage(self) -> str:
        parts = [f"/{self.name}"]
        for a in self.args:
            if a.option and a.type == "flag":
                label = f"--{a.flag}"
            elif a.option:
                value = "|".join(a.choices) if a.choices else ("N" if a.type in ("int", "float") else f"<{a.name}>")
                label = f"--{a.flag} {value}"
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

    def command(self, name: str, description: Text, args: list[Arg] | None = None,
                permission: Permission = EVERYONE, group: str = "general", private: Private = False,
                message_action: MessageAction | None = None):
        def deco(fn: Handler) -> Handler:
            self.add(Command(name, description, fn, args or [], permission, group, private, message_action))
            return fn
        return deco

    def get(self, name: str) -> Command | None:
        return self.commands.get(name.lower())


@dataclass(frozen=True)
class CommandText:
    """A command typed as text: '/name@addressee rest'."""
    name: str        # lower case; '' for a slash with no name after it (a mistyped command)
    rest: str        # its arguments, as typed
    addressee: str | None = None   # the bot named after '@' (Telegram groups); None when none is


def parse_command(text: str) -> CommandText | None:
    """'/name@botname args' -> CommandText('name', 'args', 'botname'); None for a plain message. A
    slash with no name after it ('/', '/ recall x') gives the name '': a mistyped command, not a
    message."""
    text = text.strip()
    if not text.startswith("/"):
        return None
    if len(text) < 2 or text[1].isspace():
        return CommandText("", text[1:].strip())
    head, _, rest = text[1:].partition(" ")
    _, at, addressee = text[1:].split(maxsplit=1)[0].partition("@")
    return CommandText(head.split("@", 1)[0].lower(), rest.strip(), addressee if at else None)


def shown(text: str, limit: int = 60, quote: bool = True) -> str:
    """What someone typed, for a message: quoted with control characters and direction marks
    escaped (repr), and at most ``limit`` characters of it, so an answer stays one short line
    whatever was typed (100 kB, a newline, a right-to-left override). ``quote=False``: printable
    text that fits is shown as it is."""
    if not quote and len(text) <= limit and text.isprintable():
        return text
    return repr(text if len(text) <= limit else text[:limit] + "…")


def _convert(arg: Arg, value: str) -> Any:
    if arg.type == "int":
        try:
            return int(value)
        except ValueError:
            raise UsageError(_("{arg} must be a whole number, not {value}", arg=arg.name, value=shown(value))) from None
    if arg.type == "float":
        try:
            return float(value)
        except ValueError:
            raise UsageError(_("{arg} must be a number, not {value}", arg=arg.name, value=shown(value))) from None
    if arg.type == "choice" and value.lower() not in arg.choices:
        raise UsageError(_("{arg} must be one of {choices}", arg=arg.name, choices=", ".join(arg.choices)))
    return value.lower() if arg.type == "choice" else value


# What an option looks like; in a command that takes options, an unknown one is an error rather
# than words of its text (``/simulate f.txt what next --bogus 3`` would end up in the requirement).
_OPTION = re.compile(r"--[A-Za-z][A-Za-z0-9_-]*")


def _local_file(token: str) -> Path | None:
    """The file ``token`` names on this machine, or None: it names none, or none could exist (a
    name too long for the file system, a NUL, the home folder of a user who does not exist)."""
    try:
        path = Path(token).expanduser()
        return path if path.is_file() else None
    except (OSError, ValueError, RuntimeError):
        return None


def _path_problem(token: str) -> str | None:
    """Why ``token``, given where a file path belongs (the console), names no file; None when it
    does not look like a path at all (then the file was simply left out)."""
    try:
        if Path(token).expanduser().is_dir():
            return _("{path} is a folder; name the files inside it", path=shown(token, quote=False))
    except (OSError, ValueError, RuntimeError):
        pass
    if Path(token).suffix or "/" in token or token.startswith("~"):
        return _("{path}: no such file (a relative path starts from {folder})", path=shown(token, quote=False),
                 folder=Path.cwd())
    return None


_OPTION_TYPES: dict[str, tuple[type, ...]] = {"str": (str,), "text": (str,), "choice": (str,), "int": (int,),
                                              "float": (int, float), "attachment": (Attachment,), "flag": (bool,)}


def check_options(command: Command, options: dict[str, Any]) -> dict[str, Any]:
    """Typed options from a platform that sends them so (Discord's slash commands), checked as
    the text parser checks its words: an unknown name or a value of the wrong type is a
    UsageError. Discord sends the declared types, but python-telegram-bot and discord.py pass
    on whatever arrives, and a value of the wrong type would fail deep inside a command."""
    args = {arg.name: arg for arg in command.args}
    for name, value in options.items():
        arg = args.get(name)
        if arg is None:
            raise UsageError(_("/{command} takes no {option}. Usage: {usage}", command=command.name,
                               option=shown(str(name), quote=False), usage=command.usage()))
        values = value if arg.type == "attachment" and arg.multiple and isinstance(value, list) else [value]
        if not values or any(not isinstance(v, _OPTION_TYPES[arg.type]) or isinstance(v, bool) != (arg.type == "flag")
                             for v in values):
            raise UsageError(_("{arg} must be {kind}. Usage: {usage}", arg=arg.name, kind=_(_KIND[arg.type]),
                               usage=command.usage()))
        if arg.type == "choice" and value.lower() not in arg.choices:
            raise UsageError(_("{arg} must be one of {choices}", arg=arg.name, choices=", ".join(arg.choices)))
    return dict(options)


_KIND = {"str": N_("a word"), "text": N_("text"), "choice": N_("a word"), "int": N_("a whole number"),
         "float": N_("a number"), "attachment": N_("a file"), "flag": N_("true or false")}


def _names_a_document(token: str) -> bool:
    """Whether ``token`` reads as a document's path (``notes.pdf``, ``~/a``, ``./a``, a folder):
    where files are optional, such a first word that names no file is a mistyped path, not the text."""
    if Path(token).suffix.lower() in SUPPORTED or token.startswith(("/", "~", "./", "../")):
        return True
    try:   # a folder named where documents go: its files were meant
        return Path(token).is_dir()
    except (OSError, ValueError):
        return False


def parse_text_args(command: Command, text: str, attachments: list[Attachment],
                    files_from_text: bool = False, attach_hint: Text = "") -> dict[str, Any]:
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
            if arg.type == "flag":
                values[arg.name] = True
                i += 1
                continue
            if i + 1 >= len(tokens):
                raise UsageError(_("--{option} needs a value. Usage: {usage}", option=arg.flag, usage=command.usage()))
            if arg.name in values:
                raise UsageError(_("--{option} given twice; give it once. Usage: {usage}", option=arg.flag,
                                   usage=command.usage()))
            values[arg.name] = _convert(arg, tokens[i + 1])
            i += 2
            continue
        if options and _OPTION.fullmatch(tok):
            valid = ", ".join(f"--{arg.flag}" for arg in options.values())
            raise UsageError(_("unknown option {option}; /{command} takes {valid}. Usage: {usage}",
                               option=shown(tok, quote=False), command=command.name, valid=valid,
                               usage=command.usage()))
        rest.append(tok)
        i += 1
    for arg in command.args:
        if arg.option:
            continue
        if arg.type == "attachment":
            found = list(attachments)
            if files_from_text:
                while rest and (local := _local_file(rest[0])) is not None:
                    rest.pop(0)
                    p = local.resolve()
                    found.append(Attachment(p.name, p, p.stat().st_size))
                    if not arg.multiple:
                        break
                if not found and rest and (arg.required or _names_a_document(rest[0])) and (
                        problem := _path_problem(rest[0])):
                    raise UsageError(_("{problem}. Usage: {usage}", problem=problem, usage=command.usage()))
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
            raise UsageError(_("/{command} needs a document: {hint}. Usage: {usage}", command=command.name,
                               hint=describe(attach_hint), usage=command.usage()))
        raise UsageError(_("missing {args}. Usage: {usage}", args=", ".join(missing), usage=command.usage()))
    if rest:
        raise UsageError(_("unexpected {words}. Usage: {usage}", words=shown(" ".join(rest)), usage=command.usage()))
    return values
