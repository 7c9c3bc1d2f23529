"""The ``/sim <action> <id>`` command, built from the actions the simulation modules add.

Each module adds its actions (status, stop, resume, ...) with ``actions.add(...)`` in its
``setup(app, actions)``; the package registers ``/sim`` once all of them are in, with one choice per
action, each action's own permission rule and any extra arguments an action takes (given after
the id; another action given one is refused). A handler gets the simulation, found in this scope.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Awaitable, Callable

from bot.commands.registry import Arg, CommandContext, UsageError
from bot.features.simulation.access import find_sim
from bot.permissions import EVERYONE, ByAction, Permission
from engine.i18n import N_, _
from engine.sim.simulations import SimRecord

SUMMARY = N_("One simulation: its status or agents, or stop or resume its run")
ActionHandler = Callable[[CommandContext, SimRecord], Awaitable[None]]


@dataclass
class SimAction:
    name: str
    help: str                          # how the action reads in the help of /sim's first argument (a msgid)
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
        def described() -> str:
            helps = [_(a.help) for a in actions]
            return helps[0] if len(helps) == 1 else _("{some} or {last}", some=", ".join(helps[:-1]), last=helps[-1])

        extra: dict[str, Arg] = {}
        for action in actions:
            for arg in action.args:
                if arg.name in extra:   # two actions' argument of one name: its help tells both
                    extra[arg.name] = replace(extra[arg.name],
                                              description=f"{extra[arg.name].description}; {arg.description}")
                    continue
                extra[arg.name] = Arg(arg.name, arg.description, arg.type, False, arg.choices, arg.option,
                                      arg.multiple)
        rules = {a.name: a.permission for a in actions if a.permission is not EVERYONE}

        @app.commands.command("sim", SUMMARY, [
            Arg("action", described, type="choice", choices=tuple(self.actions)),
            Arg("id", N_("simulation id")), *extra.values()], group="simulation",
            permission=ByAction("action", rules))
        async def sim(ctx: CommandContext) -> None:
            action = self.actions[ctx.args["action"]]
            own = {arg.name for arg in action.args}
            if given := [name for name in extra if name not in own and ctx.args.get(name) is not None]:
                raise UsageError(_("/sim {action} takes no {args}: only a simulation id", action=action.name,
                                   args=", ".join(given)))
            found = await find_sim(ctx, ctx.args["id"])
            await action.handler(ctx, found)
