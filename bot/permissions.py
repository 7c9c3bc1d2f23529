"""Who may do what: every command declares one rule here, and ``App.dispatch`` enforces it.

Rules are checked in two phases, both before the command runs. ``refuse_early`` looks only at
who is asking, before any argument is parsed or attachment downloaded, so a refused member
never sees usage help or "missing files". ``refuse`` may read the parsed arguments: whether
``/digest on`` or ``/digest status`` was asked, or who started the job ``/cancel <job>`` names.
A refusal is one line that says who may do it; platforms word "an administrator" their own
way (``Conventions.admins``).

Jobs record the author who started them (``Job.started_by``); a job the bot started itself
(or one from before starters were recorded) has no starter, so only administrators act on it.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import TYPE_CHECKING, Awaitable, Callable, Mapping

from bot.neutral import Incoming

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
        return None if msg.is_admin else f"only {msg.conventions.admins} may use {label}."

    def describe(self) -> str:
        return "administrators only"


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
        default = self.default.describe() or "everyone"
        actions: dict[str, list[str]] = {}  # who may -> the actions they may
        for action, rule in self.rules.items():
            actions.setdefault(rule.describe() or "everyone", []).append(action)
        parts = [f"{', '.join(names)}: {who}" for who, names in actions.items() if who != default]
        return "; ".join(parts + ([f"otherwise {default}"] if default != "everyone" else []))


@dataclass(frozen=True, eq=False)
class StarterOrAdmin(Permission):
    """Only the person who started the job (or asked for the action) named by the arguments,
    or an administrator."""

    find_starter: FindStarter
    who: str = "the person who started this job"
    verb: str = "do that"

    async def refuse(self, ctx: "CommandContext", label: str) -> str | None:
        msg = ctx.message
        if msg.is_admin:
            return None
        starter = await self.find_starter(ctx)
        if starter is None or (starter and starter == msg.author_id):
            return None
        return f"only {self.who} or {msg.conventions.admins} may {self.verb}."

    def describe(self) -> str:
        return f"{self.who} or an administrator"


async def starter_of_job(ctx: "CommandContext") -> str | None:
    """The starter of the job named by the argument ``job``, if that job is in this scope."""
    job = await ctx.app.jobs.get(str(ctx.args.get("job", "")))
    return job.started_by if job is not None and job.scope == ctx.scope else None


def job_starter_or_admin(verb: str) -> Permission:
    """For commands whose argument ``job`` names a job: its starter, or an administrator."""
    return StarterOrAdmin(starter_of_job, verb=verb)

