"""The ``/sim <action> <id>`` command, built from the actions the simulation modules add.

Each module adds its actions (status, stop, resume, ...) with ``sim_actions(app).add(...)`` in
its ``setup(app)``; the package registers ``/sim`` once all of them are in, with one choice per
action, each action's own permission rule and any extra arguments an action takes (given after
the id, optional for the other actions). A handler gets the simulation, found in this scope.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Awaitable, Callable

from bot.commands.registry import Arg, CommandContext
from bot.permissions import EVERYONE, ByAction, Permission
from bot.features.simulation.access import find_sim
from engine.sim.records import SimRecord

SUMMARY = "One simulation: its status, or stop or resume its run"
ActionHandler = Callable[[CommandContext, SimRecord], Awaitable[None]]


@dataclass
class SimAction:
    name: str
    help: str                          # how the action reads in the help of /sim's first argument
    handler: ActionHandler
    permission: Permission = EVERYONE
    args: list[Arg] = field(default_factory=list)   # extra arguments, after the id


class SimActions:
    def __init__(self) -> None:
        self.actions: dict[str, SimAction] = {}

    def add(self, action: SimAction) -> None:
        if action.name in self.actions:
            raise ValueError(f"/sim {action.name} defined twice")
        self.actions[action.name] = action

    def register(self, app) -> None:
        """Register ``/sim`` with the actions added so far."""
        actions = list(self.actions.values())
        helps = [a.help for a in actions]
        described = helps[0] if len(helps) == 1 else ", ".join(helps[:-1]) + " or " + helps[-1]
        extra: dict[str, Arg] = {}
        for action in actions:
            for arg in action.args:
                extra.setdefault(arg.name, Arg(arg.name, arg.description, arg.type, False, arg.choices, arg.option,
                                               arg.multiple))
        rules = {a.name: a.permission for a in actions if a.permission is not EVERYONE}

        @app.commands.command("sim", SUMMARY, [
            Arg("action", described, type="choice", choices=tuple(self.actions)),
            Arg("id", "simulation id"), *extra.values()], group="simulation",
            permission=ByAction("action", rules))
        async def sim(ctx: CommandContext) -> None:
            found = await find_sim(ctx, ctx.args["id"])
            await self.actions[ctx.args["action"]].handler(ctx, found)


_KEY = "sim_actions"


def sim_actions(app) -> SimActions:
    """The ``/sim`` actions of this app, added to by each simulation module's setup."""
    return app.services.setdefault(_KEY, SimActions())
