"""Token usage and estimated cost, persisted, with the budget caps that stop spending.

Every request is recorded in ``llm_usage`` per day, job, scope, person and model. Before each
request ``check`` raises BudgetExceeded when one of these caps is reached (0 turns a cap off):

- **the job** (``[llm] job_budget_usd``, ``job_budget_tokens``): everything one background job
  (a simulation, a report, a comparison) ever spent, so a resumed job starts from what it had
  spent. Work that is not a job (memory's answers, extraction and topic names) passes no job:
  it is filed under its ``activity`` ('memory.ask', with the scope in its own column) and
  capped per scope and day instead, never by a lifetime cap shared by every server;
- **the scope, today** (``scope_budget_usd_per_day``, ``scope_budget_tokens_per_day``; the token
  cap is the one that holds for a model without a price);
- **a guest scope, today** (``guest_budget_usd_per_day``, ``guest_budget_tokens_per_day``): a
  server, group or direct message the operator has not allowed (engine.trust);
- **the person, today** (``user_budget_usd_per_day``, ``user_budget_tokens_per_day``; owners
  have none): the person is whoever the work is done for, ``spending_as(user)`` around a
  command (engine.trust ``user_key``); tasks started inside it (a job it submits) inherit it;
- **everything, today** (``daily_budget_usd``, ``daily_budget_tokens``).

A scope where nothing may be spent (a stranger's direct message, engine.trust ``spends_in``)
is refused every request.

Days are UTC; a refusal says which cap, what it allows, when it resets and which key raises it, in
the language of the chat that asked (engine.i18n: the parts of a cap are msgids, worded when refused).
Counters live in memory for speed; those of a day are read again from the database every
``RELOAD_S`` seconds, so what other bot processes spent on the same database counts too. A cap
is checked before each request, so concurrent calls may overshoot it by at most the requests
already in flight. Work done elsewhere (a simulation run's child process) is recorded in batches
and learns what it may still spend from ``allowances``.
"""
from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from engine.config import LLMSection
from engine.db import Database
from engine.i18n import N_, _
from engine.llm.errors import BudgetExceeded
from engine.trust import Trust

RELOAD_S = 5.0  # how stale a day's counter may get when other processes spend too

_SPENDER: contextvars.ContextVar[str] = contextvars.ContextVar("llm_spender", default="")


@contextlib.contextmanager
def spending_as(user: str):
    """Requests made inside this block (and in tasks started from it) are ``user``'s."""
    token = _SPENDER.set(user)
    try:
        yield
    finally:
        _SPENDER.reset(token)


def spender() -> str:
    """Whom the current work is done for ('' when nobody in particular)."""
    return _SPENDER.get()


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


def resets_in() -> str:
    """Time left until midnight UTC, when the daily caps reset: '3 h 12 min'."""
    now = datetime.now(timezone.utc)
    left = int((datetime(now.year, now.month, now.day, tzinfo=timezone.utc) + timedelta(days=1) - now)
               .total_seconds() // 60) + 1
    return _("{h} h {m} min", h=left // 60, m=left % 60) if left >= 60 else _("{m} min", m=left)


@dataclass(frozen=True)
class _Cap:
    """One configured cap over one counter."""
    key: str        # the config key, 'llm.daily_budget_usd'
    unit: str       # 'usd' or 'tokens'
    limit: float
    whose: str      # who reached it, for the refusal: 'this job', 'this server or chat', ... (a msgid)
    daily: bool
    raise_hint: str  # who lifts it, besides waiting for the reset (a msgid; {key}: the config key)

    def used(self, usage: Usage) -> float:
        return usage.cost_usd if self.unit == "usd" else usage.tokens

    def _amount(self, value: float) -> str:
        return f"${value:.4f}" if self.unit == "usd" else _("{n} tokens", n=f"{int(value):,}")

    def _until(self) -> str:
        hint = _(self.raise_hint, key=self.key.removeprefix("llm."))
        return _("it resets at midnight UTC (in {left}), or {hint}", left=resets_in(), hint=hint) if self.daily \
            else hint

    def refusal(self, used: float) -> str:
        spent = (_("${used} of ${limit}", used=f"{used:.4f}", limit=f"{self.limit:.4f}") if self.unit == "usd"
                 else _("{used} of {limit} tokens", used=f"{int(used):,}", limit=f"{int(self.limit):,}"))
        if self.daily:
            return _("{whose} reached today's LLM budget ({spent}); {until}", whose=_(self.whose), spent=spent,
                     until=self._until())
        return _("{whose} reached its LLM budget ({spent}); {until}", whose=_(self.whose), spent=spent,
                 until=self._until())

    def too_little(self, need: float, left: float) -> str:
        return _("that needs about {need}, and {whose} may spend only {left} more{period} ([llm] {key} is {limit}); "
                 "{until}", need=self._amount(need), whose=_(self.whose), left=self._amount(left),
                 period=_(" today") if self.daily else "", key=self.key.removeprefix("llm."),
                 limit=self._amount(self.limit), until=self._until())


class UsageLedger:
    def __init__(self, config: LLMSection, db: Database | None = None, trust: Trust | None = None):
        self.config = config
        self.db = db
        self.trust = trust   # None: every scope allowed, nobody an owner
        self._jobs: dict[str | None, Usage] = {}
        self._daily: dict[tuple[str, str, str], tuple[float, Usage]] = {}  # (column, value, day) -> (loaded, usage)
        self.total = Usage()
        self._lock = asyncio.Lock()

    def cost(self, model: str, prompt_tokens: int, completion_tokens: int) -> float:
        price = self.config.prices.get(model)
        if price is None:
            return 0.0
        return (prompt_tokens * price.input + completion_tokens * price.output) / 1_000_000

    # -- counters ------------------------------------------------------------------------

    async def _sum(self, where: str, args: tuple) -> Usage:
        if self.db is None:
            return Usage()
        row = await self.db.fetchone(
            "SELECT coalesce(sum(calls),0), coalesce(sum(prompt_tokens),0),"
            " coalesce(sum(completion_tokens),0), coalesce(sum(cost_usd),0) FROM llm_usage WHERE " + where, args)
        return Usage(row[0], row[1], row[2], row[3])

    async def _job(self, job: str | None) -> Usage:
        if job not in self._jobs:
            self._jobs[job] = await self._sum("job=?", (job,))
        return self._jobs[job]

    async def _day(self, column: str, value: str, day: str) -> Usage:
        """Today's usage of one scope (column 'scope'), person ('spender') or of all ('' / '')."""
        key = (column, value, day)
        if self._daily and next(iter(self._daily))[2] != day:
            self._daily.clear()   # a new day: yesterday's counters are of no more use
        found = self._daily.get(key)
        if found is None or time.monotonic() - found[0] > RELOAD_S:
            usage = await self._sum(f"{column}=? AND day=?" if column else "day=?",
                                    (value, day) if column else (day,))
            found = self._daily[key] = (time.monotonic(), usage)
        return found[1]

    def _caps(self, job: str | None, scope: str | None, user: str) -> list[tuple[_Cap, tuple[str, str | None]]]:
        """The caps that hold for a request, each with its counter: ('job', job) or (column, value)."""
        cfg, trust = self.config, self.trust
        caps: list[tuple[_Cap, tuple[str, str | None]]] = []

        def add(key: str, unit: str, limit: float, whose: str, counter: tuple[str, str | None], daily: bool = True,
                hint: str = "") -> None:
            if limit:
                caps.append((_Cap(f"llm.{key}", unit, limit, whose, daily,
                                  hint or N_("the bot's operator raises [llm] {key}")), counter))

        if job:
            hint = N_("raise llm.{key} to let it continue")
            add("job_budget_usd", "usd", cfg.job_budget_usd, N_("this job"), ("job", job), False, hint)
            add("job_budget_tokens", "tokens", cfg.job_budget_tokens, N_("this job"), ("job", job), False, hint)
        if scope:
            here = N_("this server or chat")
            add("scope_budget_usd_per_day", "usd", cfg.scope_budget_usd_per_day, here, ("scope", scope))
            add("scope_budget_tokens_per_day", "tokens", cfg.scope_budget_tokens_per_day, here, ("scope", scope))
            if trust is not None and trust.is_guest(scope):
                guest = N_("the bot's operator adds it to [bot] allowed_scopes (this server or chat is not on the "
                           "bot's allow-list)")
                add("guest_budget_usd_per_day", "usd", cfg.guest_budget_usd_per_day, here, ("scope", scope),
                    hint=guest)
                add("guest_budget_tokens_per_day", "tokens", cfg.guest_budget_tokens_per_day, here,
                    ("scope", scope), hint=guest)
        if user and not (trust is not None and trust.is_owner(user)):
            add("user_budget_usd_per_day", "usd", cfg.user_budget_usd_per_day, N_("you"), ("spender", user))
            add("user_budget_tokens_per_day", "tokens", cfg.user_budget_tokens_per_day, N_("you"), ("spender", user))
        everyone = N_("the bot (everyone together)")
        add("daily_budget_usd", "usd", cfg.daily_budget_usd, everyone, ("", None))
        add("daily_budget_tokens", "tokens", cfg.daily_budget_tokens, everyone, ("", None))
        return caps

    async def _used(self, counter: tuple[str, str | None], day: str) -> Usage:
        column, value = counter
        return await self._job(value) if column == "job" else await self._day(column, value or "", day)

    # -- the caps ------------------------------------------------------------------------

    def spends_in(self, scope: str | None) -> bool:
        """Whether anything may be spent for ``scope`` (engine.trust)."""
        return scope is None or self.trust is None or self.trust.spends_in(scope)

    def _closed(self, scope: str | None) -> str | None:
        if self.spends_in(scope):
            return None
        return _("nothing is spent on the LLM in this direct message: only the bot's owners' direct messages "
                 "spend ([bot] owner_ids, dm_admins)")

    async def check(self, job: str | None, scope: str | None) -> None:
        """Raise BudgetExceeded when the job, scope, person (``spender``) or the bot as a whole has
        no budget left."""
        if (closed := self._closed(scope)) is not None:
            raise BudgetExceeded(closed)
        day = today()
        async with self._lock:
            for cap, counter in self._caps(job, scope, spender()):
                used = cap.used(await self._used(counter, day))
                if used >= cap.limit:
                    raise BudgetExceeded(cap.refusal(used))

    async def allowances(self, job: str | None, scope: str | None) -> list[Allowance]:
        """What each cap of the job, scope, person and bot still allows (never below zero)."""
        if self._closed(scope) is not None:
            return [Allowance("bot.dm_admins", "tokens", 0)]
        day = today()
        out = []
        async with self._lock:
            for cap, counter in self._caps(job, scope, spender()):
                used = cap.used(await self._used(counter, day))
                out.append(Allowance(cap.key, cap.unit, max(0.0, cap.limit - used) if cap.unit == "usd"
                                     else max(0, int(cap.limit - used))))
        return out

    async def short_of(self, job: str | None, scope: str | None, tokens: int, usd: float | None) -> str | None:
        """Why work estimated at ``tokens`` (and ``usd``, None without a price) cannot be done
        within what the caps still allow; None when it fits. Said before it starts."""
        if (closed := self._closed(scope)) is not None:
            return closed
        day = today()
        async with self._lock:
            for cap, counter in self._caps(job, scope, spender()):
                need = usd if cap.unit == "usd" else tokens
                if need is None:
                    continue
                left = max(0.0, cap.limit - cap.used(await self._used(counter, day)))
                if need > left:
                    return cap.too_little(need, left)
        return None

    async def record(self, model: str, prompt_tokens: int, completion_tokens: int,
                     job: str | None, scope: str | None, calls: int = 1,
                     mark: tuple[str, tuple] | None = None, activity: str | None = None) -> Usage:
        """``calls`` > 1 records a batch made elsewhere (a simulation run's agents); ``mark`` is
        one more statement written in the same transaction, so the batch's source can note what
        it has recorded and a crash never records a batch twice or loses it. ``activity``: what
        work that is not a job is filed under ('memory.ask')."""
        spent = Usage(calls, prompt_tokens, completion_tokens, self.cost(model, prompt_tokens, completion_tokens))
        day, user = today(), spender()
        async with self._lock:
            # the counters are loaded before the write, which they must not count twice
            counters = [self.total, await self._day("", "", day)]
            if job or activity:   # what ``for_job`` reports; only a job's own caps read it
                counters.append(await self._job(job or activity))
            if scope:
                counters.append(await self._day("scope", scope, day))
            if user:
                counters.append(await self._day("spender", user, day))
            if self.db is not None:
                async with self.db.transaction() as conn:
                    await conn.execute(
                        "INSERT INTO llm_usage(day, job, scope, spender, model, calls, prompt_tokens,"
                        " completion_tokens, cost_usd) VALUES (?,?,?,?,?,?,?,?,?)"
                        " ON CONFLICT(day, job, scope, spender, model) DO UPDATE SET"
                        " calls=llm_usage.calls+excluded.calls,"
                        " prompt_tokens=llm_usage.prompt_tokens+excluded.prompt_tokens,"
                        " completion_tokens=llm_usage.completion_tokens+excluded.completion_tokens,"
                        " cost_usd=llm_usage.cost_usd+excluded.cost_usd",
                        (day, job or activity or "", scope or "", user, model, spent.calls, spent.prompt_tokens,
                         spent.completion_tokens, spent.cost_usd))
                    if mark is not None:
                        await conn.execute(*mark)
            for counter in counters:
                counter.add(spent)
        return spent

    async def for_job(self, job: str | None) -> Usage:
        async with self._lock:
            found = await self._job(job)
            return Usage(found.calls, found.prompt_tokens, found.completion_tokens, found.cost_usd)
