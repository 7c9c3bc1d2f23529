"""Telegram polling that stores every update before confirming it: nothing confirmed is lost.

Telegram forgets an update once a later ``getUpdates`` asks for an offset past it.
python-telegram-bot's Updater asks for the next offset as soon as it has queued an update in
memory, so a crash loses every update it had queued but not handled. This loop polls with
``bot.get_updates`` itself and, for each batch, first writes the updates into the
``telegram_inbox`` table (one transaction, together with the highest update id stored), then
hands them to the bot, and only then asks for the next offset. A row is deleted once its
update is handled: its plain message stored in memory (``settled``: memory stores messages in
batches, after the handler returned) and its command handler finished. At start-up the rows a
previous run left are handled first, so a crash repeats work at worst and never loses it
(memory skips a message it already holds; a command interrupted by a crash runs again).

Order: updates are handed over one at a time, in update order, and a plain message's handler
returns once the message is queued, so memory stores each chat's messages in order. Commands
(``background(update)``) run in tasks of their own, so a slow one never holds up polling; so
does a plain message that asks something (a reply to a report): its handler returns the task
that answers it, and the row stays until that task ended, so a crash mid-answer asks again.
Backpressure: when memory's queue is full the handler waits, the loop stops fetching and the
updates stay with Telegram until there is room.

An update at or below the stored highest id (sent again by Telegram) is not stored twice.
"""
from __future__ import annotations

import asyncio
import json
import logging
import warnings
from datetime import datetime, timezone
from typing import Awaitable, Callable, Sequence

from telegram import Bot, Update
from telegram.error import InvalidToken, TelegramError
from telegram.warnings import PTBUserWarning

from engine.db import Database

log = logging.getLogger(__name__)
# The raw getUpdates call (see TelegramInbox._fetch) is deliberate: PTB's advice to use
# Bot.get_updates instead would cost two conversions of every update.
warnings.filterwarnings("ignore", message=r"Please use 'Bot\.getUpdates'", category=PTBUserWarning)

BATCH_LIMIT = 100          # updates per getUpdates (the Bot API's maximum)
RETRY_MAX_S = 30.0         # longest wait between failed getUpdates calls

Handler = Callable[[Update], Awaitable["asyncio.Task | None"]]  # a task the update's row waits on


class TelegramInbox:
    def __init__(self, db: Database, bot: Bot, handle: Handler, background: Callable[[Update], bool],
                 settled: Callable[[], Awaitable[None]], poll_timeout: int, allowed_updates: Sequence[str]):
        self.db, self.bot = db, bot
        self.handle = handle              # handles one update; returns once a plain message is queued
        self.background = background      # True: run this update's handler in a task of its own
        self.settled = settled            # returns once every message queued so far is stored
        self.poll_timeout = poll_timeout
        self.allowed_updates = list(allowed_updates)
        self._tasks: set[asyncio.Task] = set()

    @property
    def bot_id(self) -> int:
        return self.bot.id

    async def run(self, stop: asyncio.Event) -> None:
        """Handle what a previous run left, then poll until ``stop`` is set."""
        await self.bot.delete_webhook()  # getUpdates is refused while a webhook is set
        await self._handle_rows(await self._left_over())
        offset = await self.db.fetchval("SELECT last_update_id + 1 FROM telegram_offsets WHERE bot_id=?",
                                        (self.bot_id,))
        failures = 0
        while not stop.is_set():
            fetch = asyncio.ensure_future(self._fetch(offset))
            stopper = asyncio.ensure_future(stop.wait())
            await asyncio.wait([fetch, stopper], return_when=asyncio.FIRST_COMPLETED)
            stopper.cancel()
            if not fetch.done():  # stopping: an unconfirmed fetch is simply fetched again next time
                fetch.cancel()
                await asyncio.gather(fetch, return_exceptions=True)
                break
            try:
                updates = fetch.result()
            except InvalidToken:
                raise
            except TelegramError as err:
                failures += 1
                wait = min(RETRY_MAX_S, 0.5 * 2 ** min(failures, 6))
                log.warning("telegram: getUpdates failed (%s); again in %.1f s", err, wait)
                try:
                    await asyncio.wait_for(stop.wait(), wait)
                except asyncio.TimeoutError:
                    pass
                continue
            failures = 0
            if not updates:
                continue
            rows = await self._store(updates)
            offset = max(u["update_id"] for u in updates) + 1  # the next call confirms them: they are stored
            await self._handle_rows(rows)
        await self.close()

    async def _fetch(self, offset: int | None) -> list[dict]:
        """One getUpdates long poll, as the Bot API's JSON: stored as received and parsed once, when
        handled (``bot.get_updates`` would parse every update, and storing it would serialise it again)."""
        params = {"limit": BATCH_LIMIT, "timeout": self.poll_timeout, "allowed_updates": self.allowed_updates}
        if offset is not None:
            params["offset"] = offset
        return await self.bot.do_api_request("getUpdates", api_kwargs=params, read_timeout=self.poll_timeout + 10)

    async def close(self) -> None:
        """Wait for the handlers still running (their rows are deleted when they finish)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _left_over(self) -> list[tuple[int, str]]:
        rows = await self.db.fetchall("SELECT update_id, payload FROM telegram_inbox WHERE bot_id=? "
                                      "ORDER BY update_id", (self.bot_id,))
        if rows:
            log.info("telegram: handling %d updates stored before the last stop", len(rows))
        return [(r["update_id"], r["payload"]) for r in rows]

    async def _store(self, updates: list[dict]) -> list[tuple[int, str]]:
        """Write the updates not stored before into the inbox, in one transaction; returns them."""
        now = datetime.now(timezone.utc).isoformat()
        async with self.db.transaction() as conn:
            async with conn.execute("SELECT last_update_id FROM telegram_offsets WHERE bot_id=?",
                                    (self.bot_id,)) as cur:
                row = await cur.fetchone()
            last = row[0] if row else -1
            fresh = sorted((u for u in updates if u["update_id"] > last), key=lambda u: u["update_id"])
            rows = [(u["update_id"], json.dumps(u)) for u in fresh]
            await conn.executemany(
                "INSERT INTO telegram_inbox(bot_id, update_id, payload, received_at) VALUES (?,?,?,?)"
                " ON CONFLICT DO NOTHING",
                [(self.bot_id, uid, payload, now) for uid, payload in rows])
            if rows:
                await conn.execute(
                    "INSERT INTO telegram_offsets(bot_id, last_update_id) VALUES (?, ?) ON CONFLICT(bot_id) "
                    "DO UPDATE SET last_update_id=CASE WHEN excluded.last_update_id > telegram_offsets.last_update_id "
                    "THEN excluded.last_update_id ELSE telegram_offsets.last_update_id END",
                    (self.bot_id, rows[-1][0]))
        return rows

    async def _handle_rows(self, rows: list[tuple[int, str]]) -> None:
        """Hand the updates over in order; their rows go once memory stored them and commands ended."""
        if not rows:
            return
        commands: list[asyncio.Task] = []
        for update_id, payload in rows:
            try:
                update = Update.de_json(json.loads(payload), self.bot)
            except (ValueError, TypeError, KeyError):
                log.exception("telegram: update %d cannot be read; dropped", update_id)
                continue
            if self.background(update):
                commands.append(self._spawn(self._handle_one(update)))
            elif (answering := await self._handle_one(update)) is not None:
                commands.append(answering)
        self._spawn(self._delete_when_done([uid for uid, _ in rows], commands))

    async def _handle_one(self, update: Update) -> asyncio.Task | None:
        try:
            return await self.handle(update)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("telegram: update %d failed", update.update_id)
            return None

    async def _delete_when_done(self, update_ids: list[int], commands: list[asyncio.Task]) -> None:
        await self.settled()
        if commands:
            await asyncio.gather(*commands, return_exceptions=True)
        async with self.db.transaction() as conn:
            for i in range(0, len(update_ids), 500):
                part = update_ids[i:i + 500]
                await conn.execute(f"DELETE FROM telegram_inbox WHERE bot_id=? AND update_id IN "
                                   f"({','.join('?' * len(part))})", (self.bot_id, *part))

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task
