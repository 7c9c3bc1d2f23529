"""The run's child process: both platforms of one simulation in one asyncio loop.

    python engine/sim/run/child/main.py <simulation folder>   (with the repository on PYTHONPATH)

It reads ``run_spec.json`` and ``simulation_config.json`` from the folder, speaks JSON lines (see
``engine.sim.run.protocol``) on stdin/stdout, and writes (see ``engine.sim.run.output``) per
platform ``<platform>/actions.jsonl``, ``<platform>/<platform>.db`` and, after each round, a
checkpoint (database copy, agent memories, rounds done) from which a later run resumes and the
round's fork point (``engine.sim.run.fork_points``); ``usage.jsonl`` gets its LLM usage after every
request, and it stops at the end of the round in which that usage reaches a budget cap given in the
spec. Libraries print to stdout (oasis prints the database path, camel logs prompts), so the real
stdout is kept for the protocol alone and file descriptor 1 is pointed at stderr, which the parent
sends to ``run.log``; both pass through a secret mask on the way (``masked_output``).

An agent step whose tool call is unusable (broken arguments or an unknown tool) is tried once
more; a step that still gives nothing usable, or whose request failed, is skipped: a ``step_skipped`` line in
``actions.jsonl`` says whose and why. A round fails the run only when most of its steps were
skipped; failures are worded by ``engine.llm.failures`` (one sentence, no raw dict).

Actions are logged as they happen: after each agent step (and each round's scheduled posts) the
trace rows oasis wrote meanwhile become ``action`` lines, flushed at once, so a running
simulation's log is current to its last step and each line's ``ts`` is within that step.

Events injected into the run (``injections.json``) are published at the start of their round
and shown to the agents by ``injector.Injector``; each gives an ``injected`` line in
``actions.jsonl`` and an ``injected`` event.

The child knows no chat language: the reasons it gives for a restart or a stop are English msgids
(``N_``), which the parent translates into the job's language (engine.sim.run.service).
"""
from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import sqlite3
import sys
import time
import traceback
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any, BinaryIO

if __name__ == "__main__":  # started as a script: its folder must not shadow other modules
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from engine.datadir import private_files
from engine.i18n import N_
from engine.llm.failures import describe
from engine.redact import Redactor
from engine.sim.environment.models import CONFIG_FILE, SimulationConfig
from engine.sim.run import fork_points
from engine.sim.run.child import oasis_import, oasis_setup
from engine.sim.run.child.injector import Injector
from engine.sim.run.child.masked_output import mask_output
from engine.sim.run.output import (
    ACTION,
    ACTIONS_LOG,
    CHECKPOINT,
    CHECKPOINT_DB,
    INTERVIEW,
    MEMORY_FILE,
    ROUND_END,
    ROUND_START,
    SETUP,
    SIMULATION_END,
    STEP_SKIPPED,
    WORDS,
    is_action,
    platform_db,
    platform_dir,
)
from engine.sim.run.protocol import SPEC_FILE, RunSpec, encode
from engine.sim.run.schedule import active_steps, follow_edges, on_platform, scheduled_posts
from engine.sim.run.usage_log import UsageLog, crossed

USAGE_EVERY_S = 1.0  # usage events between round ends, at most this often


class Fatal(Exception):
    """The run cannot go on (the LLM fails most steps of a round, a file is unusable)."""


# What an unusable tool call raises inside oasis (arguments that are not JSON, an unknown tool).
# Only these are tried again: a failed request was already retried by the client, and asking
# again at once after one left the platform's database busy at the end of the round.
UNUSABLE_TOOL_CALL = (json.JSONDecodeError, KeyError)


def step_failure(err: BaseException, endpoint: str, timeout_s: float | None = None) -> str:
    """Why an agent step gave nothing usable, in one sentence."""
    if isinstance(err, json.JSONDecodeError):
        return f"the model's tool call had arguments that are not JSON ({err.msg}, character {err.pos})"
    if isinstance(err, KeyError):
        return f"the model called a tool that does not exist ({err.args[0] if err.args else '?'})"
    return describe(err, endpoint, timeout_s=timeout_s)


def _write_json_atomic(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, ensure_ascii=False, default=str), encoding="utf-8")
    os.replace(tmp, path)


class PlatformRunner:
    """One oasis environment: rounds, logs, checkpoints and interviews on one platform."""

    def __init__(self, child: "Child", name: str, cfg: SimulationConfig, model):
        self.child, self.name, self.cfg, self.spec = child, name, cfg, child.spec
        self.dir = platform_dir(child.folder, name)
        self.db_path = platform_db(child.folder, name)
        self.model = model
        self.rounds_done = 0
        self.rounds_started = 0
        self.injector = Injector(child.folder, name)
        self.restored_reason = ""
        self.actions_total = 0
        self.round_actions: list[dict] = []   # the action lines of the round under way
        self.llm_steps = self.llm_errors = 0   # errors: steps skipped after their second try
        self.last_error = ""
        self.trace_rowid = 0
        self.env: Any = None        # camel-oasis's environment, agent graph and platform (untyped)
        self.graph: Any = None
        self.platform: Any = None
        self.log: Any = None
        # held while an agent takes a step: an interview waits for it, so it never sees the
        # step's tool call without its result (an API rejects such a conversation)
        self._busy: dict[int, asyncio.Lock] = defaultdict(asyncio.Lock)

    # -- opening ----------------------------------------------------------------------

    def _checkpoint(self) -> dict | None:
        path = self.dir / CHECKPOINT
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def _fresh(self) -> None:
        for name in (self.db_path.name, ACTIONS_LOG, CHECKPOINT, CHECKPOINT_DB, MEMORY_FILE):
            (self.dir / name).unlink(missing_ok=True)
        fork_points.clear(self.child.folder, self.name)
        self.rounds_done = 0

    def _restore_files(self) -> dict | None:
        """Put the database and the actions log back as they were at the last checkpoint.

        Returns the saved agent memories, or None (with ``restored_reason``) when the
        checkpoint is missing or incomplete and the run must start over."""
        ck = self._checkpoint()
        if not ck or ck.get("rounds_done", 0) <= 0:
            self.restored_reason = N_("no completed round was checkpointed")
            return None
        memory_path, db_copy = self.dir / MEMORY_FILE, self.dir / CHECKPOINT_DB
        try:
            memory = json.loads(memory_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            self.restored_reason = N_("the agents' memory checkpoint is missing or unreadable")
            return None
        if memory.get("rounds_done") != ck["rounds_done"] or not db_copy.exists():
            self.restored_reason = N_("the database and memory checkpoints do not match")
            return None
        shutil.copyfile(db_copy, self.db_path)
        self.rounds_done = ck["rounds_done"]
        self._truncate_log(self.rounds_done)
        return memory["agents"]

    def _truncate_log(self, rounds_done: int) -> None:
        """Drop log lines written after the checkpointed round (a round cut short by a crash)."""
        path = self.dir / ACTIONS_LOG
        if not path.exists():
            return
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        keep = 0
        for i, line in enumerate(lines):
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("type") == ROUND_END and event.get("round") == rounds_done - 1:
                keep = i + 1
        path.write_text("".join(lines[:keep]), encoding="utf-8")

    async def open(self, mode: str) -> None:
        from oasis import make

        self.dir.mkdir(parents=True, exist_ok=True)
        memories = None
        if mode == "start":
            self._fresh()
        elif mode == "resume":
            memories = self._restore_files()
            if memories is None:
                self._fresh()
        elif mode == "reopen":
            if not self.db_path.exists():
                raise Fatal(f"{self.name}: no database to reopen at {self.db_path}")
            ck = self._checkpoint() or {}
            self.rounds_done = ck.get("rounds_done", 0)
            try:
                memories = json.loads((self.dir / MEMORY_FILE).read_text(encoding="utf-8"))["agents"]
            except (OSError, ValueError, KeyError):
                memories = None
        pcfg = getattr(self.cfg, self.name)
        self.platform = oasis_setup.make_platform(self.name, pcfg, self.db_path, self.cfg)
        self.graph = oasis_setup.make_agent_graph(self.cfg, self.child.folder, self.name, self.model)
        self.env = make(agent_graph=self.graph, platform=self.platform, database_path=str(self.db_path),
                        semaphore=self.spec.llm_concurrency)
        self._count_llm_steps()
        await self.env.reset()  # starts the platform loop; sign-ups of restored users fail harmlessly
        if memories is not None:
            oasis_setup.restore_memories(self.graph, memories)
        self.actions_total = self._count_logged_actions()
        self.rounds_started = self.rounds_done
        self.injector.load_published()
        self.injector.install(self.graph)
        self.log = open(self.dir / ACTIONS_LOG, "a", encoding="utf-8")
        if mode != "reopen" and self.rounds_done == 0:
            self._seed_follows()
        self.trace_rowid = self._max_rowid()  # the seeded follows are set-up, not round actions

    def _count_llm_steps(self) -> None:
        perform = self.env._perform_llm_action  # oasis swallows LLM errors; count them here

        async def counted(agent):
            async with self._busy[agent.social_agent_id]:
                result = await perform(agent)
                if isinstance(result, UNUSABLE_TOOL_CALL):  # a bad tool call is often a one-off: once more
                    result = await perform(agent)
            self.llm_steps += 1
            if isinstance(result, Exception):
                self.llm_errors += 1
                self.last_error = step_failure(result, self.spec.base_url, self.spec.timeout_s)
                self.write({"type": STEP_SKIPPED, "round": self.rounds_done, "agent_id": agent.social_agent_id,
                            "reason": self.last_error})
            self._log_new_actions()
            return result

        self.env._perform_llm_action = counted

    def _seed_follows(self) -> None:
        edges = follow_edges(self.cfg, self.name, self.spec.follow_density)
        self.write({"type": SETUP, "follows": oasis_setup.seed_follows(self.platform, edges)})

    def _max_rowid(self) -> int:
        return self.platform.db.execute("SELECT coalesce(max(rowid), 0) FROM trace").fetchone()[0]

    def _count_logged_actions(self) -> int:
        path = self.dir / ACTIONS_LOG
        if not path.exists():
            return 0
        return sum(1 for line in path.open(encoding="utf-8") if f'"type": "{ACTION}"' in line)

    # -- rounds -----------------------------------------------------------------------

    def write(self, event: dict) -> None:
        event = {"type": event.pop("type"), "platform": self.name, **event, "ts": round(time.time(), 3)}
        if self.log is not None:
            self.log.write(json.dumps(event, ensure_ascii=False, default=str) + "\n")

    async def run(self, total_rounds: int) -> None:
        from oasis import ActionType, LLMAction, ManualAction

        clock = self.platform.sandbox_clock
        while self.rounds_done < total_rounds and not self.child.stopping.is_set():
            r = self.rounds_done
            steps = active_steps(self.cfg, self.name, r, self.spec.max_steps_per_round, self._news_rounds(r))
            posts = scheduled_posts(self.cfg, self.name, r)
            start_event = {"type": ROUND_START, "round": r, "hour": self.cfg.time.hour_of_round(r),
                           "active_agents": len(steps), "scheduled_posts": len(posts)}
            self.write(dict(start_event))
            self.child.emit({**start_event, "platform": self.name, "rounds": total_rounds})
            self.rounds_started = r + 1
            self.round_actions = []
            await self._publish_injected(r)
            steps_before, errors_before = self.llm_steps, self.llm_errors
            if posts:
                manual: dict[Any, list] = {}
                for post in posts:
                    manual.setdefault(self.graph.get_agent(post.agent_id), []).append(
                        ManualAction(ActionType.CREATE_POST, {"content": post.content}))
                clock.at(r, 0)
                await self._step(manual)
                self._log_new_actions()
            # An agent with several steps takes them one after another (each sees a fresh feed).
            for k in range(max(steps.values(), default=0)):
                clock.at(r, k + 1)
                await self._step({self.graph.get_agent(a): LLMAction() for a, n in steps.items() if n > k})
            self._log_new_actions()   # anything the platform wrote after the last step's end
            new = self.round_actions
            for _, agent in self.graph.get_agents():
                oasis_setup.trim_memory(agent, self.spec.memory_rounds)
            round_steps, round_errors = self.llm_steps - steps_before, self.llm_errors - errors_before
            self.rounds_done = r + 1
            self._save_checkpoint()
            end_event = {"type": ROUND_END, "round": r, "rounds": total_rounds, "actions": len(new),
                         "actions_total": self.actions_total, "llm_steps": round_steps,
                         "llm_errors": round_errors, "posts": self._notable(new)}
            self.write(dict(end_event))
            self.log.flush()
            fork_points.keep(self.child.folder, self.name, self.rounds_done, self.actions_total, self.trace_rowid,
                             self.spec.fork_points_mb)
            self.child.emit({**end_event, "platform": self.name, "usage": self.child.usage_now()})
            if round_errors * 2 > round_steps:
                raise Fatal(f"{self.name}: {round_errors} of {round_steps} agent steps of round {r} failed, "
                            f"so the run stops. {self.last_error}")
        self.write({"type": SIMULATION_END, "rounds_done": self.rounds_done,
                    "stopped": self.rounds_done < total_rounds})
        self.log.flush()
        self.child.emit({"type": "simulation_end", "platform": self.name, "rounds_done": self.rounds_done,
                         "rounds": total_rounds, "stopped": self.rounds_done < total_rounds})

    def _news_rounds(self, r: int) -> tuple[int, ...]:
        """The rounds injected events went out in, this one included if one is due now (a
        response delay holds agents back after each)."""
        self.injector.reload()
        published = [int(line["round"]) for line in self.injector.published]
        return tuple(published + ([r] if self.injector.due(r) else []))

    async def _publish_injected(self, r: int) -> None:
        lines = await self.injector.publish(self.platform, self.platform.sandbox_clock, r)
        if not lines:
            return
        self.trace_rowid = self._max_rowid()  # the source account's posts are no agent's actions
        for line in lines:
            self.write(dict(line))
            self.child.emit({**line, "platform": self.name})
        self.log.flush()

    async def _step(self, actions: dict) -> None:
        """``env.step``, unless oasis's platform loop dies meanwhile (an uncaught error there
        would leave every agent waiting on the channel forever)."""
        step = asyncio.ensure_future(self.env.step(actions))
        platform = self.env.platform_task
        await asyncio.wait([step, platform], return_when=asyncio.FIRST_COMPLETED)
        if not step.done():
            step.cancel()
            error = platform.exception() if not platform.cancelled() else None
            raise Fatal(f"{self.name}: the oasis platform stopped: {error!r}")
        step.result()

    def _log_new_actions(self) -> None:
        """Log the trace rows written since the last call as the round's action lines, and flush."""
        rows = self.platform.db.execute(
            "SELECT rowid, user_id, action, info FROM trace WHERE rowid > ? ORDER BY rowid",
            (self.trace_rowid,)).fetchall()
        new = []
        for rowid, user_id, action, info in rows:
            self.trace_rowid = max(self.trace_rowid, rowid)
            if not is_action(action):   # oasis's bookkeeping, no choice of the agent
                continue
            try:
                parsed = json.loads(info) if info else {}
            except ValueError:
                parsed = {"raw": info}
            event = {"type": ACTION, "round": self.rounds_done, "agent_id": user_id, "action": action,
                     "info": parsed}
            self.write(dict(event))
            new.append(event)
        self.actions_total += len(new)
        self.round_actions += new
        self.log.flush()   # with the step's step_skipped line, if any

    def _notable(self, new: list[dict], limit: int = 3) -> list[dict]:
        names = {a.agent_id: a.name for a in self.cfg.agents}
        posts = [{"agent_id": e["agent_id"], "name": names.get(e["agent_id"], str(e["agent_id"])),
                  "action": e["action"], "content": str(e["info"].get("content", ""))[:280]}
                 for e in new if e["action"] in WORDS and e["info"].get("content")]
        return posts[-limit:]

    def _save_checkpoint(self) -> None:
        """Database copy, memories, then the rounds count: the last file written commits."""
        tmp = self.dir / (CHECKPOINT_DB + ".tmp")
        tmp.unlink(missing_ok=True)
        if self.platform.db.in_transaction:
            # sqlite's backup waits without end while its source connection holds a write
            # transaction open: a resumed run's sign-ups, refused for users it restored, leave
            # one open until an action commits, and a round without actions commits none.
            self.platform.db.commit()
        dst = sqlite3.connect(tmp)
        with dst:
            self.platform.db.backup(dst)
        dst.close()
        os.replace(tmp, self.dir / CHECKPOINT_DB)
        _write_json_atomic(self.dir / MEMORY_FILE, {"rounds_done": self.rounds_done,
                                                    "agents": oasis_setup.dump_memories(self.graph)})
        _write_json_atomic(self.dir / CHECKPOINT, {"rounds_done": self.rounds_done,
                                                   "trace_rowid": self.trace_rowid})

    # -- interviews and closing -----------------------------------------------------------

    async def interview(self, agent_ids: list[int] | None, question: str) -> list[dict]:
        from oasis import ActionType, ManualAction

        members = [a.agent_id for a in self.cfg.agents if on_platform(a, self.name)]
        ids = members if agent_ids is None else [i for i in agent_ids if i in members]
        action = ManualAction(ActionType.INTERVIEW, {"prompt": question})
        return list(await asyncio.gather(*(self._ask(aid, action) for aid in ids)))

    async def _ask(self, agent_id: int, action) -> dict:
        # Dispatched as OasisEnv.step dispatches an INTERVIEW ManualAction, without the step's
        # recommender refresh and clock tick, so a question asked mid-round leaves the round as is.
        agent = self.graph.get_agent(agent_id)
        name = next((a.name for a in self.cfg.agents if a.agent_id == agent_id), str(agent_id))
        answer: dict[str, Any] = {"platform": self.name, "agent_id": agent_id, "name": name,
                                  "round": self.rounds_done}
        try:
            async with self._busy[agent_id]:
                result = await self.env._perform_interview_action(agent, action.action_args["prompt"])
            answer["answer"] = result["content"] or ""
        except Exception as err:  # one agent's failure must not sink the others' answers
            answer["error"] = describe(err, self.spec.base_url, timeout_s=self.spec.timeout_s)
        if self.log is not None:
            self.write({"type": INTERVIEW, "round": self.rounds_done, "agent_id": agent_id,
                        "question": action.action_args["prompt"], "answer": answer.get("answer"),
                        "error": answer.get("error")})
            self.log.flush()
        return answer

    async def close(self) -> None:
        if self.env is not None:
            await self.env.close()
        if self.log is not None:
            self.log.close()


class Child:
    def __init__(self, folder: Path, spec: RunSpec, channel: BinaryIO, redactor: Redactor | None = None):
        self.folder, self.spec, self.channel = folder, spec, channel
        self.redactor = redactor or Redactor([])  # an error or answer may quote the LLM key
        self.runners: dict[str, PlatformRunner] = {}
        self.stopping = asyncio.Event()   # finish the current round, then end
        self.closing = asyncio.Event()    # end the idle time
        self.ready = asyncio.Event()      # platforms open: interviews can be served
        self.stop_reason = ""
        self.last_activity = time.monotonic()
        self.tasks: set[asyncio.Task] = set()
        self.usage: oasis_setup.UsageMeter | None = None
        self.process = uuid.uuid4().hex[:12]   # names this process's cumulative usage figures
        self.usage_log: UsageLog | None = None
        self._usage_sent = 0.0

    def usage_now(self) -> dict[str, Any]:
        return {"process": self.process, **self.usage.snapshot()} if self.usage else {}

    def _counted(self, totals: dict[str, int]) -> None:
        """After each answered LLM request: log the totals, hold the budget, tell the parent."""
        usage = {"process": self.process, **totals}
        if self.usage_log is not None:
            self.usage_log.append({**usage, "ts": round(time.time(), 3)})
        cap = crossed(self.spec.caps, self.spec.price, totals)
        if cap and not self.stopping.is_set():
            self.stop_reason = f"at its LLM budget ({cap})"
            self.stopping.set()   # the rounds in progress end; no new one starts
            self.closing.set()
        now = time.monotonic()
        if now - self._usage_sent >= USAGE_EVERY_S:
            self._usage_sent = now
            self.emit({"type": "usage", "usage": usage})

    def emit(self, event: dict) -> None:
        try:
            self.channel.write(self.redactor.mask(encode(event).decode("utf-8")).encode("utf-8"))
        except (BrokenPipeError, OSError):  # nobody listens any more: wind down
            self.stop_reason = self.stop_reason or N_("its parent process went away")
            self.stopping.set()
            self.closing.set()

    async def _read_commands(self) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=1 << 22)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        while line := await reader.readline():
            try:
                request = json.loads(line)
            except ValueError:
                self.emit({"type": "error", "message": f"unreadable request: {line[:200]!r}"})
                continue
            task = asyncio.create_task(self._handle(request))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        if not self.stopping.is_set():
            self.stop_reason = N_("its parent process went away")
        self.stopping.set()
        self.closing.set()

    async def _handle(self, request: dict) -> None:
        rid, kind = request.get("id"), request.get("type")
        self.last_activity = time.monotonic()
        try:
            if kind == "interview":
                await self.ready.wait()
                names = [n for n in request.get("platforms") or list(self.runners) if n in self.runners]
                per_platform = await asyncio.gather(*(
                    self.runners[n].interview(request.get("agent_ids"), str(request["question"])) for n in names))
                answers = [a for found in per_platform for a in found]
                if not answers:
                    raise ValueError("no such agent on the requested platforms")
                self.emit({"type": "reply", "id": rid, "ok": True, "answers": answers, "usage": self.usage_now()})
            elif kind == "stop":
                self.stop_reason = self.stop_reason or str(request.get("reason") or "on request")
                self.stopping.set()
                self.closing.set()
                self.emit({"type": "reply", "id": rid, "ok": True})
            elif kind == "close":
                self.closing.set()
                self.emit({"type": "reply", "id": rid, "ok": True})
            elif kind == "inject":  # injections.json changed: read it now, say which events missed their round
                for runner in self.runners.values():
                    runner.injector.reload()
                self.emit({"type": "reply", "id": rid, "ok": True,
                           "late": {n: [e.id for e in r.injector.due(r.rounds_started - 1)]
                                    for n, r in self.runners.items()}})
            elif kind == "ping":
                self.emit({"type": "reply", "id": rid, "ok": True,
                           "rounds_done": {n: r.rounds_done for n, r in self.runners.items()}})
            else:
                raise ValueError(f"unknown request type {kind!r}")
        except Exception as err:
            self.emit({"type": "reply", "id": rid, "ok": False, "error": f"{type(err).__name__}: {err}"})
        self.last_activity = time.monotonic()

    async def _idle(self) -> None:
        self.emit({"type": "idle", "seconds": self.spec.idle_s})
        self.last_activity = time.monotonic()
        while not self.closing.is_set():
            remaining = self.last_activity + self.spec.idle_s - time.monotonic()
            if remaining <= 0 and not self.tasks:
                return
            try:
                await asyncio.wait_for(self.closing.wait(), max(remaining, 0.5))
            except asyncio.TimeoutError:
                pass

    async def main(self) -> int:
        cfg = SimulationConfig.model_validate_json((self.folder / CONFIG_FILE).read_text(encoding="utf-8"))
        random.seed(cfg.seed)  # oasis's recommenders and feeds draw from the global generator
        oasis_import.load_oasis()  # creates ./log here, in the simulation folder
        oasis_setup.quiet_oasis_loggers(self.spec.log_level)
        reader = asyncio.create_task(self._read_commands())
        status, code = "completed", 0
        try:
            api_key = os.environ.get(self.spec.api_key_env, "") if self.spec.api_key_env else ""
            model = oasis_setup.make_model(self.spec.base_url, self.spec.model, api_key or "not-needed",
                                           self.spec.timeout_s, self.spec.context_tokens, seed=cfg.seed)
            self.usage_log = UsageLog(self.folder)
            self.usage = oasis_setup.UsageMeter(model, self._counted)
            names = [p for p in self.spec.platforms if getattr(cfg, p).enabled]
            runners = [PlatformRunner(self, name, cfg, model) for name in names]
            self.runners = {r.name: r for r in runners}
            await asyncio.gather(*(r.open(self.spec.mode) for r in runners))
            self.ready.set()
            total = min(cfg.time.rounds, self.spec.max_rounds or cfg.time.rounds)
            self.emit({"type": "ready", "mode": self.spec.mode, "rounds": total,
                       "rounds_done": {n: r.rounds_done for n, r in self.runners.items()},
                       "restart_reason": {n: r.restored_reason for n, r in self.runners.items()
                                          if r.restored_reason}})
            if self.spec.mode != "reopen":
                await asyncio.gather(*(r.run(total) for r in self.runners.values()))
                if any(r.rounds_done < total for r in self.runners.values()):
                    status = "stopped"
            if status == "completed" and not self.stopping.is_set():
                await self._idle()
        except Exception as err:  # reported to the parent, with the traceback in run.log
            status, code = "failed", 3
            traceback.print_exc()
            message = str(err) if isinstance(err, Fatal) else f"{type(err).__name__}: {err}"
            self.emit({"type": "error", "message": message})
        finally:
            self.ready.set()
            reader.cancel()
            for runner in self.runners.values():
                try:
                    await runner.close()
                except Exception as err:
                    print(f"closing {runner.name}: {err}", file=sys.stderr)
        self.emit({"type": "done", "status": status, "usage": self.usage_now(), "stop_reason": self.stop_reason,
                   "rounds_done": {n: r.rounds_done for n, r in self.runners.items()}})
        if self.usage_log is not None:
            self.usage_log.close()
        return code


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python engine/sim/run/child/main.py <simulation folder>", file=sys.stderr)
        return 2
    folder = Path(argv[0]).resolve()
    private_files()   # the run's databases, logs and checkpoints: the bot's user's only
    channel = os.fdopen(os.dup(1), "wb", buffering=0)  # the protocol's own stdout
    os.dup2(2, 1)                                      # library prints go to stderr
    sys.stdout = open(1, "w", buffering=1, encoding="utf-8", closefd=False)
    spec = RunSpec.from_json((folder / SPEC_FILE).read_text(encoding="utf-8"))
    redactor = Redactor.from_environ(extra_names=[spec.api_key_env] if spec.api_key_env else [])
    mask_output(redactor)
    os.chdir(folder)  # oasis creates ./log on import
    oasis_setup.quiet_logging(spec.log_level)
    # oasis 0.2.5 reads follower counts from OASIS_DB_PATH for a prompt field it never shows;
    # setting it keeps oasis from creating a database inside site-packages.
    os.environ["OASIS_DB_PATH"] = str(platform_db(folder, spec.platforms[0]))
    return asyncio.run(Child(folder, spec, channel, redactor).main())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
