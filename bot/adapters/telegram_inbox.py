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
(memory skips a message it already holds). Commands are the exception: each row is the update's
``Delivery`` (``InboxDelivery``), its ``command`` column marked 'started' before the command does
anything and 'done' when it ended, so a command handed over again is not run twice (bot/once.py).

Order: updates are handed over one at a time, in update order, and a plain message's handler
returns once the message is queued, so memory stores each chat's messages in order. Commands
(what ``command_of(update)`` reads, once, and hands to the handler with the update) run in tasks
of their own, so a slow one never holds up polling; so
does a plain message that asks something (a reply to a report): its handler returns the task
that answers it, and the row stays until that task ended, so a crash mid-answer asks again.
Backpressure: when memory's queue is full the handler waits, the loop stops fetching and the
updates stay with Telegram until there is room.

An update at or below the stored highest id (sent again by Telegram) is not stored twice.

A database that cannot be reached (a PostgreSQL restart: ``Database.unreachable``) stops nothing:
every write of the inbox waits for it (``Database.outlasting``, one warning per wait), the batch
fetched meanwhile stays unconfirmed until it is stored, and polling goes on once it is back. Any
other failure of the loop ends it, as before.

Crash loops: a row counts how often its update was handed to the bot (``attempts``, written
before the update is handed over). What a previous run left is handled with care: one update
at a time in update order (consecutive plain messages together, then stored), a command or an
answer alone, the next one handed over once it ended or ``RECOVERY_WAIT_S`` passed. So an
update left over twice was, the second time, the one in flight when the bot died again: at
the next start it is set aside instead (``MAX_ATTEMPTS``): its row is deleted, its chat gets
``SET_ASIDE_NOTE`` in reply, and the log names the update and its command, not its text. A
handler that raises is logged and its update done with: only a crash repeats an update.

The two marks work together. A command handed over again after one crash is not run: finished
('done') it is skipped in silence, cut off ('started') it is announced once and marked done.
What can come back twice is what at-most-once lets run again (a question to a report cut off
before its answer, a plain message) or a command that crashed the bot while being announced:
left over twice, it is set aside. An update whose command is marked 'done' is never set aside:
it was handled, and is skipped.
"""
from __future__ import annotations

import asyncio
import json
import logging
import warnings
from datetime import datetime, timezone
from functools import partial
from typing import Awaitable, Callable, Sequence

from telegram import Bot, ReplyParameters, Update
from telegram.error import InvalidToken, TelegramError
from telegram.warnings import PTBUserWarning

from bot.commands.registry import CommandText
from bot.neutral import Delivery
from engine.db import Database
from engine.i18n import N_, _, using

log = logging.getLogger(__name__)
# The raw getUpdates call (see TelegramInbox._fetch) is deliberate: PTB's advice to use
# Bot.get_updates instead would cost two conversions of every update.
warnings.filterwarnings("ignore", message=r"Please use 'Bot\.getUpdates'", category=PTBUserWarning)

BATCH_LIMIT = 100          # updates per getUpdates (the Bot API's maximum)
# Longest wait between failed getUpdates calls. Short: a command sent the moment Telegram is back
# waits for the next try (with 30 s, commands sent after a 20 s outage waited up to 12 s in the
# soak), and a try costs one request.
RETRY_MAX_S = 2.0
MAX_ATTEMPTS = 2           # an update handed over this often without its handling ending is set aside
RECOVERY_WAIT_S = 30.0     # at start-up, how long a left-over command runs alone before the next update
# said in the sender's app language (the inbox reaches no chat setting: engine.i18n)
SET_ASIDE_NOTE = N_("This message could not be handled and was set aside: the bot stopped twice while "
                    "handling it.")

Row = tuple[int, str, "str | None"]   # update_id, payload, command mark
LeftOver = tuple[int, str, int, "str | None"]   # update_id, payload, attempts, command mark


class InboxDelivery(Delivery):
    """An update's inbox row as the record of its command (column ``command``)."""

    def __init__(self, db: Database, bot_id: int, update_id: int, mark: str | None):
        self.db, self.bot_id, self.update_id = db, bot_id, update_id
        self.mark = mark   # as read with the row: not None when a previous run began its command

    async def begin(self) -> str | None:
        return await self.db.outlasting(self._begin, "a telegram command")

    async def _begin(self) -> str | None:
        async with self.db.transaction() as conn:
            async with conn.execute("SELECT command FROM telegram_inbox WHERE bot_id=? AND update_id=?",
                                    (self.bot_id, self.update_id)) as cur:
                row = await cur.fetchone()
            earlier = row[0] if row is not None else None
            if earlier is None:
                await conn.execute("UPDATE telegram_inbox SET command=? WHERE bot_id=? AND update_id=?",
                                   (self.STARTED, self.bot_id, self.update_id))
        self.mark = earlier or self.STARTED
        return earlier

    async def end(self) -> None:
        await self.db.outlasting(lambda: self.db.execute(
            "UPDATE telegram_inbox SET command=? WHERE bot_id=? AND update_id=?",
            (self.DONE, self.bot_id, self.update_id)), "a telegram command")
        self.mark = self.DONE


# Handles an update (the command its text types, read once, or None; its row as its InboxDelivery);
# returns a task the update's row waits on, or None.
Handler = Callable[[Update, CommandText | None, InboxDelivery], Awaitable["asyncio.Task | None"]]


class TelegramInbox:
    def __init__(self, db: Database, bot: Bot, handle: Handler,
                 command_of: Callable[[Update], CommandText | None], settled: Callable[[], Awaitable[None]],
                 poll_timeout: int, allowed_updates: Sequence[str]):
        self.db, self.bot = db, bot
        self.handle = handle              # handles one update; returns once a plain message is queued
        self.command_of = command_of      # the update's command (its handler runs in a task of its own) or None
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
        await self._recover(await self.db.outlasting(self._left_over, "telegram polling"))
        offset = await self.db.outlasting(lambda: self.db.fetchval(
            "SELECT last_update_id + 1 FROM telegram_offsets WHERE bot_id=?", (self.bot_id,)), "telegram polling")
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
                if failures & (failures - 1) == 0:   # the 1st, 2nd, 4th, 8th... failure in a row
                    log.warning("telegram: getUpdates failed %d time(s) in a row (%s); trying every %.1f s",
                                failures, err, wait)
                try:
                    await asyncio.wait_for(stop.wait(), wait)
                except asyncio.TimeoutError:
                    pass
                continue
            if failures:
                log.warning("telegram: getUpdates works again after %d failed tries", failures)
            failures = 0
            if not updates:
                continue
            # not confirmed yet: while the database is away the batch waits for it, polling with it
            rows = await self.db.outlasting(partial(self._store, updates), f"telegram: {len(updates)} updates")
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

    async def _left_over(self) -> list[LeftOver]:
        rows = await self.db.fetchall("SELECT update_id, payload, attempts, command FROM telegram_inbox "
                                      "WHERE bot_id=? ORDER BY update_id", (self.bot_id,))
        if rows:
            log.info("telegram: handling %d updates stored before the last stop", len(rows))
        return [(r["update_id"], r["payload"], r["attempts"], r["command"]) for r in rows]

    async def _recover(self, rows: list[LeftOver]) -> None:
        """Hand over what a previous run left, one update in flight at a time (plain messages
        together, up to the next command); set aside an update left over twice, unless its
        command finished (then it is handed over to be skipped: bot/once.py)."""
        plain: list[int] = []  # handed over, their rows deleted once memory stored them
        for update_id, payload, attempts, mark in rows:
            read = self._read(update_id, payload)
            if read is not None and attempts >= MAX_ATTEMPTS and mark != Delivery.DONE:
                await self._set_aside(read[0], attempts)
                read = None
            if read is None:
                await self._delete([update_id])
                continue
            update, command = read
            if command is not None and plain:  # stored first: the command runs alone
                await self._delete_when_done(plain, [])
                plain = []
            await self.db.outlasting(partial(
                self.db.execute, "UPDATE telegram_inbox SET attempts = attempts + 1 WHERE bot_id=? AND update_id=?",
                (self.bot_id, update_id)), "telegram polling")
            delivery = InboxDelivery(self.db, self.bot_id, update_id, mark)
            work: asyncio.Task | None
            if command is not None:
                work = self._spawn(self._handle_one(update, command, delivery))
            else:
                work = await self._handle_one(update, None, delivery)
            if work is None:
                plain.append(update_id)
                continue
            if plain:  # a message that became an answer: the messages before it are stored first
                await self._delete_when_done(plain, [])
                plain = []
            finishing = self._spawn(self._delete_when_done([update_id], [work]))
            await asyncio.wait([finishing], timeout=RECOVERY_WAIT_S)
        if plain:
            await self._delete_when_done(plain, [])

    async def _set_aside(self, update: Update, attempts: int) -> None:
        message = update.effective_message
        what = "an update"
        if message is not None:
            text = (message.text or message.caption or "").strip()
            what = (text.split()[0][:40] if text.startswith("/") else "a message") + f" in chat {message.chat_id}"
        log.warning("telegram: update %d (%s) was handed to the bot %d times and the bot stopped each time "
                    "before it was handled; set aside", update.update_id, what, attempts)
        if message is None:
            return
        with using(message.from_user.language_code if message.from_user else None):
            note = _(SET_ASIDE_NOTE)
        try:
            await self.bot.send_message(
                message.chat_id, note,
                reply_parameters=ReplyParameters(message.message_id, allow_sending_without_reply=True),
                message_thread_id=message.message_thread_id if message.is_topic_message else None)
        except TelegramError as err:
            log.warning("telegram: could not tell chat %s that update %d was set aside: %s",
                        message.chat_id, update.update_id, err)

    async def _store(self, updates: list[dict]) -> list[Row]:
        """Write the updates not stored before into the inbox, in one transaction; returns them."""
        now = datetime.now(timezone.utc).isoformat()
        async with self.db.transaction() as conn:
            async with conn.execute("SELECT last_update_id FROM telegram_offsets WHERE bot_id=?",
                                    (self.bot_id,)) as cur:
                row = await cur.fetchone()
            last = row[0] if row else -1
            fresh = sorted((u for u in updates if u["update_id"] > last), key=lambda u: u["update_id"])
            rows: list[Row] = [(u["update_id"], json.dumps(u), None) for u in fresh]
            await conn.executemany(
                "INSERT INTO telegram_inbox(bot_id, update_id, payload, received_at, attempts) VALUES (?,?,?,?,1)"
                " ON CONFLICT DO NOTHING",  # handed over right after: the attempt counts from here
                [(self.bot_id, uid, payload, now) for uid, payload, _ in rows])
            if rows:
                await conn.execute(
                    "INSERT INTO telegram_offsets(bot_id, last_update_id) VALUES (?, ?) ON CONFLICT(bot_id) "
                    "DO UPDATE SET last_update_id=CASE WHEN excluded.last_update_id > telegram_offsets.last_update_id "
                    "THEN excluded.last_update_id ELSE telegram_offsets.last_update_id END",
                    (self.bot_id, rows[-1][0]))
        return rows

    async def _handle_rows(self, rows: list[Row]) -> None:
        """Hand the updates over in order; their rows go once memory stored them and commands ended."""
        if not rows:
            return
        commands: list[asyncio.Task] = []
        for update_id, payload, mark in rows:
            if (read := self._read(update_id, payload)) is None:
                continue
            update, command = read
            delivery = InboxDelivery(self.db, self.bot_id, update_id, mark)
            if command is not None:
                commands.append(self._spawn(self._handle_one(update, command, delivery)))
            elif (answering := await self._handle_one(update, None, delivery)) is not None:
                commands.append(answering)
        self._spawn(self._delete_when_done([uid for uid, _, _ in rows], commands))

    def _read(self, update_id: int, payload: str) -> tuple[Update, CommandText | None] | None:
        """The update and the command it types (``command_of``: its handler runs apart), or None
        when it cannot be read: a
        field missing or of the wrong type (python-telegram-bot checks no types). Such an update is
        dropped with one log line, not a traceback: it would fail the same way every time, and
        must not stop the polling loop (nor, left in the inbox, every start after)."""
        try:
            update = Update.de_json(json.loads(payload), self.bot)
            return update, self.command_of(update)
        except Exception as err:
            log.warning("telegram: update %d cannot be read (%s: %r); dropped", update_id, type(err).__name__,
                        str(err)[:100])
            return None

    async def _handle_one(self, update: Update, command: CommandText | None,
                          delivery: InboxDelivery) -> asyncio.Task | None:
        try:
            return await self.handle(update, command, delivery)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("telegram: update %d failed", update.update_id)
            return None

    async def _delete_when_done(self, update_ids: list[int], commands: list[asyncio.Task]) -> None:
        await self.settled()
        if commands:
            await asyncio.gather(*commands, return_exceptions=True)
        await self._delete(update_ids)

    async def _delete(self, update_ids: list[int]) -> None:
        await self.db.outlasting(lambda: self._delete_now(update_ids), "telegram: handled updates")

    async def _delete_now(self, update_ids: list[int]) -> None:
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
