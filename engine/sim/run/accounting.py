"""What a run's child processes spend on the LLM, recorded once against the run's job and scope,
and the budget caps that hold a run.

Every figure a child reports (events, interview replies, its ``usage.jsonl`` read after a crash)
is a cumulative total of one child process. ``sim_run_usage`` keeps, per simulation and process,
the totals already recorded; a report adds only the difference to the shared ``UsageLedger``,
in the same transaction as the ledger's row, so no call is counted twice and none is lost to a
crash between two writes. The job and scope come from the run's row in ``sim_runs``
(engine.sim.run.service, which owns that table).
"""
from __future__ import annotations

import asyncio
from pathlib import Path

from engine.db import Database
from engine.llm.errors import BudgetExceeded
from engine.llm.usage import Allowance, UsageLedger
from engine.offload import run_cpu
from engine.sim.run.service import job_and_scope
from engine.sim.run.usage_log import USAGE_KEYS, read_totals


class RunUsage:
    def __init__(self, db: Database, ledger: UsageLedger, model: str):
        self.db = db
        self.ledger = ledger
        self.model = model
        self._locks: dict[str, asyncio.Lock] = {}

    async def owner(self, sim_id: str) -> tuple[str | None, str | None]:
        """The job and the scope the run's usage counts for."""
        return await job_and_scope(self.db, sim_id)

    async def saw(self, sim_id: str, usage: dict | None) -> None:
        """A child's cumulative usage (``{"process", "calls", ...}``): record what is new."""
        if not usage or not usage.get("process"):
            return
        process = str(usage["process"])
        async with self._locks.setdefault(sim_id, asyncio.Lock()):
            row = await self.db.fetchone(
                "SELECT calls, prompt_tokens, completion_tokens FROM sim_run_usage WHERE sim_id = ? AND process = ?",
                (sim_id, process))
            before = {k: row[k] if row is not None else 0 for k in USAGE_KEYS}
            total = {k: max(int(usage.get(k, 0)), before[k]) for k in USAGE_KEYS}
            delta = {k: total[k] - before[k] for k in USAGE_KEYS}
            if not any(delta.values()):
                return
            job, scope = await self.owner(sim_id)
            mark = ("INSERT INTO sim_run_usage(sim_id, process, calls, prompt_tokens, completion_tokens)"
                    " VALUES (?,?,?,?,?) ON CONFLICT(sim_id, process) DO UPDATE SET calls=excluded.calls,"
                    " prompt_tokens=excluded.prompt_tokens, completion_tokens=excluded.completion_tokens",
                    (sim_id, process, total["calls"], total["prompt_tokens"], total["completion_tokens"]))
            await self.ledger.record(self.model, delta["prompt_tokens"], delta["completion_tokens"], job, scope,
                                     calls=delta["calls"], mark=mark)

    async def reconcile(self, sim_id: str, folder: Path) -> None:
        """Add what the children logged in the folder and was not recorded yet (after a crash)."""
        for process, totals in (await run_cpu(read_totals, Path(folder))).items():
            await self.saw(sim_id, {"process": process, **totals})

    async def spent(self, sim_id: str) -> tuple[int, int]:
        """(calls, tokens) the run's processes have recorded so far."""
        row = await self.db.fetchone(
            "SELECT coalesce(sum(calls), 0) AS calls, coalesce(sum(prompt_tokens + completion_tokens), 0) AS tokens"
            " FROM sim_run_usage WHERE sim_id = ?", (sim_id,))
        return int(row["calls"]), int(row["tokens"])

    async def over_budget(self, job: str | None, scope: str | None) -> str:
        """The message of the cap the job or scope has reached, or ''."""
        try:
            await self.ledger.check(job, scope)
        except BudgetExceeded as err:
            return str(err)
        return ""

    async def allowances(self, job: str | None, scope: str | None) -> list[Allowance]:
        return await self.ledger.allowances(job, scope)

    def price(self) -> list[float]:
        price = self.ledger.config.prices.get(self.model)
        return [price.input, price.output] if price is not None else [0.0, 0.0]
