"""Token usage and estimated cost per job and per scope, persisted, with budget caps.

Counters live in memory for speed and in ``llm_usage`` for durability: a resumed job starts
from what it had already spent. A cap is checked before each request, so concurrent calls of
one job may overshoot it by at most the requests already in flight. Work done elsewhere (a
simulation run's child process) is recorded in batches and learns what it may still spend from
``allowances``.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime, timezone

from engine.config import LLMSection
from engine.db import Database
from engine.llm.errors import BudgetExceeded


@dataclass(frozen=True)
class Allowance:
    """What one cap still allows: ``left`` tokens or dollars under the config key ``cap``."""
    cap: str
    unit: str      # "tokens" or "usd"
    left: float


@dataclass
class Usage:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, other: "Usage") -> None:
        self.calls += other.calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cost_usd += other.cost_usd


def today() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d")


class UsageLedger:
    def __init__(self, config: LLMSection, db: Database | None = None):
        self.config = config
        self.db = db
        self._jobs: dict[str, Usage] = {}
        self._scopes: dict[tuple[str, str], Usage] = {}  # (scope, day)
        self.total = Usage()
        self._lock = asyncio.Lock()

    def cost(self, model: str, prompt_tokens: int, completion_tokens: int) -> float:
        price = self.config.prices.get(model)
        if price is None:
            return 0.0
        return (prompt_tokens * price.input + completion_tokens * price.output) / 1_000_000

    async def _job(self, job: str) -> Usage:
        if job not in self._jobs:
            usage = Usage()
            if self.db is not None:
                row = await self.db.fetchone(
                    "SELECT coalesce(sum(calls),0), coalesce(sum(prompt_tokens),0),"
                    " coalesce(sum(completion_tokens),0), coalesce(sum(cost_usd),0)"
                    " FROM llm_usage WHERE job=?", (job,))
                usage = Usage(row[0], row[1], row[2], row[3])
            self._jobs[job] = usage
        return self._jobs[job]

    async def _scope(self, scope: str, day: str) -> Usage:
        key = (scope, day)
        if key not in self._scopes:
            usage = Usage()
            if self.db is not None:
                row = await self.db.fetchone(
                    "SELECT coalesce(sum(calls),0), coalesce(sum(prompt_tokens),0),"
                    " coalesce(sum(completion_tokens),0), coalesce(sum(cost_usd),0)"
                    " FROM llm_usage WHERE scope=? AND day=?", (scope, day))
                usage = Usage(row[0], row[1], row[2], row[3])
            self._scopes[key] = usage
        return self._scopes[key]

    async def check(self, job: str | None, scope: str | None) -> None:
        """Raise BudgetExceeded when the job or scope has no budget left."""
        cfg = self.config
        async with self._lock:
            if job and (cfg.job_budget_usd or cfg.job_budget_tokens):
                used = await self._job(job)
                if cfg.job_budget_usd and used.cost_usd >= cfg.job_budget_usd:
                    raise BudgetExceeded(
                        f"this job reached its LLM budget (${used.cost_usd:.4f} of ${cfg.job_budget_usd:.4f}); "
                        "raise llm.job_budget_usd to let it continue")
                if cfg.job_budget_tokens and used.tokens >= cfg.job_budget_tokens:
                    raise BudgetExceeded(
                        f"this job reached its LLM budget ({used.tokens} of {cfg.job_budget_tokens} tokens); "
                        "raise llm.job_budget_tokens to let it continue")
            if scope and cfg.scope_budget_usd_per_day:
                used = await self._scope(scope, today())
                if used.cost_usd >= cfg.scope_budget_usd_per_day:
                    raise BudgetExceeded(
                        f"this server or chat reached today's LLM budget (${used.cost_usd:.4f} of "
                        f"${cfg.scope_budget_usd_per_day:.4f}); it resets at midnight UTC, or raise "
                        "llm.scope_budget_usd_per_day")

    async def allowances(self, job: str | None, scope: str | None) -> list[Allowance]:
        """What each configured cap of the job and scope still allows (never below zero)."""
        cfg = self.config
        out = []
        async with self._lock:
            if job and cfg.job_budget_usd:
                used = await self._job(job)
                out.append(Allowance("llm.job_budget_usd", "usd", max(0.0, cfg.job_budget_usd - used.cost_usd)))
            if job and cfg.job_budget_tokens:
                used = await self._job(job)
                out.append(Allowance("llm.job_budget_tokens", "tokens", max(0, cfg.job_budget_tokens - used.tokens)))
            if scope and cfg.scope_budget_usd_per_day:
                used = await self._scope(scope, today())
                out.append(Allowance("llm.scope_budget_usd_per_day", "usd",
                                     max(0.0, cfg.scope_budget_usd_per_day - used.cost_usd)))
        return out

    async def record(self, model: str, prompt_tokens: int, completion_tokens: int,
                     job: str | None, scope: str | None, calls: int = 1,
                     mark: tuple[str, tuple] | None = None) -> Usage:
        """``calls`` > 1 records a batch made elsewhere (a simulation run's agents); ``mark`` is
        one more statement written in the same transaction, so the batch's source can note what
        it has recorded and a crash never records a batch twice or loses it."""
        spent = Usage(calls, prompt_tokens, completion_tokens, self.cost(model, prompt_tokens, completion_tokens))
        day = today()
        async with self._lock:
            # the counters are loaded before the write, which they must not count twice
            counters = [self.total]
            if job:
                counters.append(await self._job(job))
            if scope:
                counters.append(await self._scope(scope, day))
            if self.db is not None:
                async with self.db.transaction() as conn:
                    await conn.execute(
                        "INSERT INTO llm_usage(day, job, scope, model, calls, prompt_tokens, completion_tokens,"
                        " cost_usd) VALUES (?,?,?,?,?,?,?,?) ON CONFLICT(day, job, scope, model) DO UPDATE SET"
                        " calls=llm_usage.calls+excluded.calls,"
                        " prompt_tokens=llm_usage.prompt_tokens+excluded.prompt_tokens,"
                        " completion_tokens=llm_usage.completion_tokens+excluded.completion_tokens,"
                        " cost_usd=llm_usage.cost_usd+excluded.cost_usd",
                        (day, job or "", scope or "", model, spent.calls, spent.prompt_tokens,
                         spent.completion_tokens, spent.cost_usd))
                    if mark is not None:
                        await conn.execute(*mark)
            for counter in counters:
                counter.add(spent)
        return spent

    async def for_job(self, job: str) -> Usage:
        async with self._lock:
            found = await self._job(job)
            return Usage(found.calls, found.prompt_tokens, found.completion_tokens, found.cost_usd)
