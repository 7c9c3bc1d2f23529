"""Who may do what: every command declares one rule here, and ``App.dispatch`` enforces it.

Rules are checked in two phases, both before the command runs. ``refuse_early`` looks only at
who is asking, before any argument is parsed or attachment downloaded, so a refused member
never sees usage help or "missing files". ``refuse`` may read the parsed arguments: whether
``/digest on`` or ``/digest status`` was asked, or who started the job ``/cancel <job>`` names.
A refusal is one line, in the chat's language, that says who may do it; platforms word "an
administrator" their own way (``Conventions.admins``). The parts a rule is made with (``who``,
``verb``) are English msgids, translated when the refusal is written.

Jobs record the author who started them (``Job.started_by``); a job the bot started itself
(or one from before starters were recorded) has no starter, so only administrators act on it.

Who administers a direct message with the bot is decided by engine.trust (the bot's owners, or
everyone with ``[bot] dm_admins = "everyone"``); adapters set ``Incoming.is_admin`` from it.

A command that spends on the operator's LLM key wraps its rule in ``costly(app, rule)``: in a
direct message only that DM's administrators may use it (by default the owners: a stranger's DM
spends nothing), and a person who is not an owner may use such commands at most
``[bot] costly_per_hour`` times in any hour (engine.rates). Every command that calls the LLM for
the person asking is costly: /simulate, /confirm, /sim fork, /compare, /report ask (and replies
to a report), /interview, /ask with an LLM configured; a new one (a /catchup) takes the same
wrapper. What they may spend is capped apart from who may ask (engine.llm.usage).
"""
from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import TYPE_CHECKING, Awaitable, Callable, Mapping

from bot.neutral import Incoming
from engine.i18n import N_, _, describe
from engine.trust import is_direct, user_key
from engine.words import plural

if TYPE_CHECKING:
    from bot.commands.registry import CommandContext

# The author id of whoever started what the arguments name; None when they name nothing here
# (the command itself then says so).
FindStarter = Callable[["CommandContext"], Awaitable[str | None]]


class Permission(abc.ABC):
    def refuse_early(self, msg: Incoming, label: str) -> str | None:
        """A refusal decided by who asks alone, or None. ``label`` is what was typed: '/memory'."""
        return None

    async def refuse(self, ctx: "CommandContext", label: str) -> str | None:
        """A refusal that depends on the arguments, or None."""
        return None

    @abc.abstractmethod
    def describe(self) -> str:
        """Who may use the command, for /help ('' when everyone may)."""


class Everyone(Permission):
    def describe(self) -> str:
        return ""


class AdminOnly(Permission):
    def refuse_early(self, msg: Incoming, label: str) -> str | None:
        return None if msg.is_admin else _("only {admins} may use {command}.",
                                           admins=describe(msg.conventions.admins), command=label)

    def describe(self) -> str:
        return _("administrators only")


EVERYONE: Permission = Everyone()
ADMIN: Permission = AdminOnly()


@dataclass(frozen=True, eq=False)
class ByAction(Permission):
    """A rule per value of one argument (``/digest on`` admins, ``/digest status`` everyone)."""

    arg: str
    rules: Mapping[str, Permission]
    default: Permission = EVERYONE  # for other values, and when the argument is left out

    def _rule(self, ctx: "CommandContext", label: str) -> tuple[Permission, str]:
        action = ctx.args.get(self.arg)
        rule = self.rules.get(str(action).lower(), self.default) if action is not None else self.default
        return rule, f"{label} {action}" if action is not None else label

    async def refuse(self, ctx: "CommandContext", label: str) -> str | None:
        rule, label = self._rule(ctx, label)
        return rule.refuse_early(ctx.message, label) or await rule.refuse(ctx, label)

    def describe(self) -> str:
        everyone = _("everyone")
        default = self.default.describe() or everyone
        actions: dict[str, list[str]] = {}  # who may -> the actions they may
        for action, rule in self.rules.items():
            actions.setdefault(rule.describe() or everyone, []).append(action)
        parts = [f"{', '.join(names)}: {who}" for who, names in actions.items() if who != default]
        return "; ".join(parts + ([_("otherwise {who}", who=default)] if default != everyone else []))


@dataclass(frozen=True, eq=False)
class StarterOrAdmin(Permission):
    """Only the person who started the job (or asked for the action) named by the arguments,
    or an administrator."""

    find_starter: FindStarter
    who: str = N_("the person who started this job")   # msgids
    verb: str = N_("do that")

    async def refuse(self, ctx: "CommandContext", label: str) -> str | None:
        msg = ctx.message
        if msg.is_admin:
            return None
        starter = await self.find_starter(ctx)
        if starter is None or (starter and starter == msg.author_id):
            return None
        return _("only {who} or {admins} may {verb}.", who=_(self.who), admins=describe(msg.conventions.admins),
                 verb=_(self.verb))

    def describe(self) -> str:
        return _("{who} or an administrator", who=_(self.who))


@dataclass(frozen=True, eq=False)
class Costly(Permission):
    """A command that spends on the operator's LLM key (see the module's docstring); ``rule`` is
    who may use it otherwise."""

    rule: Permission
    dm_admins: str            # [bot] dm_admins: who may use it in a direct message
    per_hour: int             # [bot] costly_per_hour

    def refuse_early(self, msg: Incoming, label: str) -> str | None:
        if is_direct(msg.scope) and not msg.is_admin:
            return _("in a direct message only the bot's owners may use {command}: it spends on the operator's "
                     "LLM key. Use it in a server or group the bot is in.", command=label)
        return self.rule.refuse_early(msg, label)

    async def refuse(self, ctx: "CommandContext", label: str) -> str | None:
        if (refusal := await self.rule.refuse(ctx, label)) is not None:
            return refusal
        msg = ctx.message
        if msg.is_owner:
            return None
        wait = await ctx.app.rates.take(user_key(msg.platform, msg.author_id), label)
        if wait is None:
            return None
        return _("you have used {used} that spend on the LLM in the last hour, the most one person may ([bot] "
                 "costly_per_hour; the bot's owners have no limit); {command} is allowed again in {minutes} min.",
                 used=plural(self.per_hour, "{n} command", "{n} commands"), command=label,
                 minutes=max(1, round(wait / 60)))

    def describe(self) -> str:
        who = self.rule.describe() or _("everyone")
        dm = _("the bot's owners") if self.dm_admins == "owners" else _("the person")
        limit = _("; at most {n} such commands a person an hour (owners: no limit)", n=self.per_hour) \
            if self.per_hour else ""
        return _("{who}; it spends on the LLM, so in a direct message only {dm}{limit}", who=who, dm=dm, limit=limit)


def costly(app, rule: Permission = EVERYONE) -> Permission:
    """``rule`` for a command that spends on the operator's LLM key (the module's docstring)."""
    return Costly(rule, app.config.bot.dm_admins, app.config.bot.costly_per_hour)


class ServerAdmin(Permission):
    """Only an administrator of a server or group, or one of the bot's owners: never someone who
    administers only their own direct message (with ``[bot] dm_admins = "everyone"``). Spending
    above ``[simulation] confirm_above_usd`` is confirmed by such a person (``/confirm``)."""

    def __init__(self, verb: str):
        self.verb = verb   # a msgid

    def refuse_early(self, msg: Incoming, label: str) -> str | None:
        if msg.is_owner or (msg.is_admin and not is_direct(msg.scope)):
            return None
        if is_direct(msg.scope):
            return _("in a direct message only the bot's owners may {verb}: it spends above the confirmation "
                     "threshold.", verb=_(self.verb))
        return _("only {admins} may {verb}.", admins=describe(msg.conventions.admins), verb=_(self.verb))

    def describe(self) -> str:
        return _("an administrator of the server or group, or the bot's owners")


async def starter_of_job(ctx: "CommandContext") -> str | None:
    """The starter of the job named by the argument ``job``, if this channel may see that job
    (``App.sees_job``); one it may not see passes here and is refused as unknown by the command."""
    job = await ctx.app.jobs.get(str(ctx.args.get("job", "")))
    return job.started_by if job is not None and await ctx.app.sees_job(ctx.viewer, job) else None


def job_starter_or_admin(verb: str) -> Permission:
    """For commands whose argument ``job`` names a job: its starter, or an administrator."""
    return StarterOrAdmin(starter_of_job, verb=verb)   # verb: a msgid

