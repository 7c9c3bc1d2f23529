"""The embedded default: a console chat with the same commands as Discord and Telegram.

On a terminal it is interactive (prompt_toolkit: history, a clear prompt, colours). With
stdin piped it reads lines until EOF, prints the answers and returns, so it scripts well.
Attachments are file paths: ``/simulate notes.pdf what happens next?``. The person at the
console runs the bot, so they are its administrator.
"""
from __future__ import annotations

import asyncio
import getpass
import sys
import time
from pathlib import Path

from bot.adapters.base import Adapter
from bot.app import App
from bot.neutral import Conventions, Incoming, Reply, Sent
from engine.i18n import N_, _

SCOPE, CHANNEL = "console:local", "console"


class ConsoleOut:
    """Prints answers: coloured through prompt_toolkit on a terminal, plain otherwise."""

    def __init__(self, colour: bool):
        self.colour = colour

    def print(self, text: str, style: str = "") -> None:
        if self.colour:
            from prompt_toolkit import print_formatted_text
            from prompt_toolkit.formatted_text import FormattedText
            print_formatted_text(FormattedText([(style, text)]))
        else:
            print(text, flush=True)


class ConsoleSent(Sent):
    def __init__(self, out: ConsoleOut):
        self.out = out

    async def edit(self, text: str) -> None:
        self.out.print(f"  ↻ {text}", "ansibrightblack")


class ConsoleReply(Reply):
    max_len = 100_000
    copies_uploads = False   # an "upload" names the file on this machine

    def __init__(self, out: ConsoleOut):
        self.out = out

    async def _send_one(self, text: str) -> Sent:
        self.out.print(text, "ansicyan")
        return ConsoleSent(self.out)

    async def error(self, text: str) -> None:
        self.out.print(f"⚠ {text}", "ansired bold")

    async def _show_typing(self, stop: asyncio.Event) -> None:
        self.out.print(_("… thinking"), "ansibrightblack")

    def privately(self) -> Reply:
        return self   # only the person at the console reads it

    async def upload(self, path: Path, caption: str = "", image: bool = False) -> Sent:
        kind = "image" if image else "file"
        self.out.print(f"[{kind}] {Path(path).resolve()}" + (f" — {caption}" if caption else ""), "ansigreen")
        return ConsoleSent(self.out)


class Console(Adapter):
    platform = "console"
    conventions = Conventions(admins=N_("the person running the bot"), paths_attach=True,
                              attach_hint=N_("give the file's path"))

    def __init__(self, app: App, interactive: bool | None = None, wait: bool = False):
        self.app = app
        self.interactive = sys.stdin.isatty() and sys.stdout.isatty() if interactive is None else interactive
        self.wait = wait  # after the last input line, wait for the jobs this console started and memory
        self.out = ConsoleOut(colour=self.interactive)
        self.reply = ConsoleReply(self.out)
        self.user = getpass.getuser()
        self.started_jobs: set[str] = set()
        # Message ids must stay unique across sessions (memory skips ids it already holds).
        self._session = f"{time.time_ns():x}"
        self._seq = 0
        self._unsubscribe = app.jobs.subscribe(self._on_job_event)

    def reply_to(self, scope: str, channel: str) -> Reply | None:
        return self.reply

    def _on_job_event(self, event) -> None:
        # Remember the jobs this console started, for --wait.
        if event.job.scope == SCOPE and event.kind == "state" and event.job.state == "queued":
            self.started_jobs.add(event.job.id)

    def incoming(self, line: str) -> Incoming:
        self._seq += 1
        return Incoming(platform="console", scope=SCOPE, channel=CHANNEL, author_id=self.user,
                        author_name=self.user, text=line, message_id=f"console-{self._session}-{self._seq}",
                        is_admin=True, is_owner=True, conventions=self.conventions)

    async def handle_line(self, line: str) -> None:
        line = line.strip()
        if line:
            await self.app.dispatch(self.incoming(line), self.reply)

    async def connect(self) -> None:
        await self.app.platform_ready(self.platform)

    async def run(self, stop: asyncio.Event) -> None:
        """Read lines until the input ends (or ``stop`` is set); with ``wait``, then wait for
        the jobs this console started."""
        reading = asyncio.create_task(self._interactive() if self.interactive else self._piped())
        stopper = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait([reading, stopper], return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopper.cancel()
            if not reading.done():
                reading.cancel()
        if reading.done() and not reading.cancelled():
            reading.result()
            if self.wait:
                await self.wait_for_jobs()

    async def stop(self) -> None:
        self._unsubscribe()

    async def wait_for_jobs(self) -> None:
        for job_id in list(self.started_jobs):
            await self.app.jobs.wait(job_id)
        while self.app.background:  # let the followers post their final notes
            await asyncio.wait(list(self.app.background))
        await self.app.finished()  # the messages piped in, stored and their beliefs extracted

    async def _piped(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if not line:
                return
            await self.handle_line(line)

    async def _interactive(self) -> None:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import FileHistory
        from prompt_toolkit.patch_stdout import patch_stdout

        history = self.app.config.data_dir / self.app.config.console.history_file
        history.parent.mkdir(parents=True, exist_ok=True)
        session: PromptSession = PromptSession(history=FileHistory(str(history)))
        self.out.print(_("Console chat. Plain lines are remembered; /help lists commands; Ctrl-D quits."),
                       "ansiyellow")
        with patch_stdout():
            while True:
                try:
                    line = await session.prompt_async([("ansigreen bold", f"{self.user}> ")])
                except KeyboardInterrupt:
                    continue
                except EOFError:
                    return
                await self.handle_line(line)
