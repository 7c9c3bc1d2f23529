"""The soak: the real bot for a set time under chat traffic and faults, on SQLite and PostgreSQL.

One command runs ``python -m bot run`` as a subprocess against the local fakes
(tests/fakes/: Discord REST + gateway, the Telegram Bot API, an OpenAI-compatible LLM), for
``--minutes`` per backend, on the platforms ``--platform`` names (``both``: one bot process on
both fakes, the traffic shared between them), and reports what a server admin would judge after
a month:

Traffic (seeded, the same on both backends): ``--rate`` messages/s (20) sustained, with a burst
of ``--burst-rate`` (100) for ``--burst-s`` seconds every ``--burst-every`` seconds, spread over
the channels of every platform: on Discord 20 channels in 3 servers, one channel of the first
server private to a staff role; on Telegram 20 group chats, one of them a private group of staff
(Telegram has no private channel inside a group). The private place now and then hears a secret
phrase. Users' messages reach the platform whether the bot is connected or not (Discord keeps them
in the channel's history, which the bot reads back; Telegram keeps an update until the bot
confirms it). Commands are mixed in: ``/recall``, ``/ask``, ``/worlds``, ``/digest now`` (Discord's
slash commands; Telegram's command messages).

Two simulations are started by the bot's owner (4 agents, 3 rounds; with both platforms, one on
each) and the first is forked from round 1; a job left interrupted or failed is resumed with
``/resume``, as its owner would. The owner asks for a simulation, the fork or a resume only while
the bot is connected, and asks again when a minute passed with no answer and none made (an
interaction sent to an app that is offline fails on Discord: nothing would ever answer it).

Faults on a schedule (fractions of the run): the bot process is killed with SIGKILL every
``--kill-every`` minutes (15; a run shorter than two intervals kills once, at 70% of its length)
and started again; the chat connection drops (15%, 62%: Discord's gateway closes it, Telegram's
getUpdates answers 502 Bad Gateway for 20 s); the LLM endpoint fails for ``--llm-fault-s``
seconds at a time (60, at most 8% of the run): HTTP 500s (20%), answers slower than the bot's
timeout (30%), garbage (55%); a simulation run's child is killed with SIGKILL (6%, or as soon as
one runs after that: the simulations start at 5% and 10%, so their owner has one to resume);
PostgreSQL is stopped for 10 s and started again (45%). The bot's ``[llm] timeout_s`` is 15 s (an
operator's choice; 120 by default).

Figures, per backend (messages and commands also per platform):
  - messages sent / stored / duplicated (stored more than once), lost (sent, not stored after
    the final drain) and acknowledged-but-lost (Discord: sent while the bot's gateway connection
    was open; Telegram: its update confirmed by the bot's getUpdates);
  - send-to-stored p50/p99 (seen stored by a 0.25 s poll), all and outside fault windows;
  - command answer times p50/p99 outside fault windows (Discord: interaction to the bot's first
    follow-up; Telegram: command message to the bot's next message in that chat, the commands of
    a chat answered in the order they were sent, so the mix sends a command only into a chat with
    none waiting; a command counts as outside when no fault window meets the 30 s after it), and
    commands never answered outside fault windows;
  - resident memory of the bot per life: at ``--warm`` s (180, or 40% of a shorter life) after
    its start and at its end, and the growth between them, with the messages stored by its
    warm-up (recall holds each one's vector in memory). Each of the two is the median of the
    samples (every 5 s) over ``RSS_WINDOW_S``: the bot gives free pages back to the system once a
    minute (engine.allocator), so its memory is a saw of about 90 MB and one sample would say
    where in the saw it fell rather than what the bot holds. Of PostgreSQL and of the run
    children (lowest and highest over the run);
  - disk growth per hour of the data folder (and the PostgreSQL database);
  - jobs by final state and jobs left 'running' whose owner is not the live bot; simulations
    finished and resumes sent;
  - privacy probes: a member who cannot read the private place runs /recall and /ask for the
    secret phrase elsewhere (it must never appear: on Telegram in no message the bot sends to any
    chat but the private group), and a staff member in the private place does the same (it
    should: the probe can see a leak);
  - errors in the bot's log (tracebacks, ERROR lines), by first line.

Not a test: ``tests/`` keeps the suite short; run it by hand (figures in bench/RESULTS.md).

    python -m bench.soak [--minutes 60] [--backend sqlite|postgresql|both]
                         [--platform discord|telegram|both] [--json out.json] [--keep]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil  # noqa: E402

from bench.corpus import chat_stream, load_corpus  # noqa: E402
from engine.db import Database, open_database  # noqa: E402
from tests.conftest import REPO, bot_command, bot_env  # noqa: E402
from tests.fakes.discord_server import (  # noqa: E402
    ADMIN_ROLE,
    CHANNEL,
    EVERYONE_PERMS,
    GUILD,
    MANAGE_GUILD,
    OWNER,
    STAFF_ROLE,
    FakeDiscord,
    private_to,
)
from tests.fakes.openai_server import FakeOpenAI, Raw, completion  # noqa: E402
from tests.fakes.report_responder import PipelineResponder, ReportWriter, _schema_props  # noqa: E402
from tests.fakes.sim_responder import kind_of  # noqa: E402
from tests.fakes.stance_responder import StanceResponder  # noqa: E402
from tests.fakes.telegram_server import FakeTelegram  # noqa: E402
from tests.helpers.config import llm, write_config  # noqa: E402
from tests.helpers.sim import SAMPLE  # noqa: E402

TOKEN_ENV = "SOAK_DISCORD_TOKEN"
TELEGRAM_TOKEN_ENV = "SOAK_TELEGRAM_TOKEN"
GUILD_B, GUILD_C = str(3 << 22), str(5 << 22)
SECRET = "quartz-heron-7713"
SECRET_LINE = f"staff only: the vault code is {SECRET}"
PROBE_QUERY = "vault code quartz heron"
OUTSIDER, STAFFER, ADMIN = "7001", "7002", "6002"
TELEGRAM_OWNER = "7000"
LLM_TIMEOUT_S = 15.0
AFTER = 30.0   # seconds after a command in which a fault makes it a command inside a fault window
DROP_S = 20.0  # how long a connection drop counts as a fault window (Telegram: getUpdates fails as long)
# after a kill -9 on Telegram the bot polls again only once it handled the updates the dead one
# had stored but not finished (bot/adapters/telegram_inbox.py): minutes, with a backlog
RESTART_WAIT_S = 900.0
RSS_WINDOW_S = 120.0  # the bot's memory at warm-up and at a life's end: the median over two minutely trims
PATIENCE_S = 60.0   # the owner asks again for a simulation, fork or resume after this long with no answer
SIM_REQUIREMENT = "What happens in the port next week?"
# which option each positional word of a command is (Discord sends options, Telegram the words)
POSITIONAL = {"recall": ["query"], "ask": ["question"], "digest": ["action"], "resume": ["job"],
              "sim": ["action", "id"], "simulate": ["requirement"]}


class SoakLLM:
    """The fake LLM's answers: beliefs for memory's extraction, the pipeline's for simulations,
    and a sentence for the rest (/ask, digests) that repeats the secret phrase when the request
    holds it, so a leak shows in the answer. ``fault``: "" (none), "500", "timeout" (answers
    after the bot's timeout) or "garbage" (a 200 that is no completion)."""

    def __init__(self):
        self.pipeline = PipelineResponder()
        self.fault = ""
        self.counts: Counter[str] = Counter()

    def __call__(self, body: dict):
        self.counts[self.fault or "ok"] += 1
        if self.fault == "500":
            return Raw(500, {"error": {"message": "soak: the model is down", "type": "server_error"}})
        if self.fault == "timeout":
            return Raw(200, completion("too late"), delay=LLM_TIMEOUT_S + 5)
        if self.fault == "garbage":
            return Raw(200, "<html><body>502 Bad Gateway</body></html>{\"choices\": [")
        props = _schema_props(body)
        if props == {"name"}:   # a world's topic name
            return completion(json.dumps({"name": "the harbour and its ferries"}))
        if "beliefs" in props:
            return completion(json.dumps({"beliefs": [{"subject": "the harbour", "predicate": "is discussed in",
                                                       "object": "this channel", "confidence": 0.6,
                                                       "sources": [1]}]}))
        if (StanceResponder.handles(body) or ReportWriter.handles(body) or kind_of(body) != "chat"
                or body.get("tools")):
            return self.pipeline(body)
        seen = SECRET in json.dumps(body.get("messages"))
        return completion(f"From what was said here: {SECRET if seen else 'the ferry leaves at noon'}.")


class SoakDiscord(FakeDiscord):
    """The fake Discord, timing the bot's answers: when each interaction (by token) got its first
    follow-up, what its answers said, and how often each interaction was acknowledged."""

    def __init__(self):
        super().__init__()
        self.answered: dict[str, float] = {}
        self.answers: dict[str, list[str]] = defaultdict(list)
        self.acks: Counter[str] = Counter()   # interaction id -> callbacks (more than one: run twice)

    def _answer(self, call):
        parts = call.path.strip("/").split("/")
        now = time.monotonic()
        if parts[0] == "webhooks" and len(parts) >= 3:
            self.answered.setdefault(parts[2], now)
            if call.content:
                self.answers[parts[2]].append(call.content)
        elif parts[0] == "interactions" and len(parts) >= 4:
            self.acks[parts[1]] += 1
            body = call.json or {}
            if body.get("type") == 4:   # answered at once, without a follow-up (a refusal)
                self.answered.setdefault(parts[2], now)
                self.answers[parts[2]].append((body.get("data") or {}).get("content") or "")
        return super()._answer(call)




class SoakTelegram(FakeTelegram):
    """The fake Telegram Bot API, timing the bot's answers: a command's answer is the bot's next
    message (text, document, photo) into the command's chat, the commands waiting in a chat answered
    in the order they were sent. Every text and caption the bot sends or edits is kept per chat
    (``said``), so a leak shows wherever it went. A dropped connection: the fake's ``down``."""

    def __init__(self, token: str):
        super().__init__(token)
        self.answered: dict[str, float] = {}
        self.answers: dict[str, list[str]] = defaultdict(list)
        self.waiting: dict[int, deque[str]] = defaultdict(deque)   # chat -> tokens of unanswered commands
        self.said: dict[int, list[str]] = defaultdict(list)

    def _heard(self, params: dict, text: str, answer: bool = True) -> None:
        chat = int(params["chat_id"])
        self.said[chat].append(text)
        if answer and self.waiting[chat]:
            token = self.waiting[chat].popleft()
            self.answered[token] = time.monotonic()
            self.answers[token].append(text)

    async def _m_sendMessage(self, params, files):
        self._heard(params, str(params.get("text", "")))
        return await super()._m_sendMessage(params, files)

    async def _m_editMessageText(self, params, files):
        self._heard(params, str(params.get("text", "")), answer=False)
        return await super()._m_editMessageText(params, files)

    async def _sent_file(self, params, files, kind):
        self._heard(params, str(params.get("caption", "")))
        return await super()._sent_file(params, files, kind)


class DiscordSide:
    """The soak on Discord: 20 channels in 3 servers, one private to a staff role; slash commands."""
    name = "discord"

    def __init__(self):
        self.fake = SoakDiscord()
        fake = self.fake
        fake.add_guild(GUILD_B, "Second Server")
        fake.add_guild(GUILD_C, "Third Server")
        self.private = fake.add_channel("staff-room", private_to(STAFF_ROLE))
        self.servers = {GUILD: [CHANNEL] + [fake.add_channel(f"a-{i}") for i in range(6)] + [self.private],
                        GUILD_B: [c for c, v in fake.channels.items() if v["guild_id"] == GUILD_B]
                        + [fake.add_channel(f"b-{i}", guild=GUILD_B) for i in range(6)],
                        GUILD_C: [c for c, v in fake.channels.items() if v["guild_id"] == GUILD_C]
                        + [fake.add_channel(f"c-{i}", guild=GUILD_C) for i in range(4)]}
        self.channels = [c for chans in self.servers.values() for c in chans]
        assert len(self.channels) == 20 and len(self.servers) == 3
        self.public_probe = CHANNEL
        self.sim_channels = [self.servers[GUILD][1], self.servers[GUILD_B][1]]
        self.answered, self.answers = self.fake.answered, self.fake.answers

    async def start(self) -> None:
        await self.fake.start()

    async def stop(self) -> None:
        await self.fake.stop()

    def config(self) -> tuple[dict, list[str], list[str], dict]:
        """(its config table, owner ids, allowed scopes, environment)."""
        return ({"token_env": TOKEN_ENV, "api_base": self.fake.api_base, "gateway_url": self.fake.gateway_url,
                 "message_content": True, "admin_role": ADMIN_ROLE},
                [f"discord:{OWNER}"], [f"discord:{g}" for g in self.servers], {TOKEN_ENV: "soak-token"})

    def ready(self, lives: int, since: float) -> bool:
        """Whether the bot of the ``lives``-th life serves every server."""
        return len(self.fake.identified_shards) >= lives and all(self.fake.listening(g) for g in self.servers)

    def listening(self, channel: str) -> bool:
        return self.fake.listening(self.fake.guild_of(channel))

    def scope(self, channel: str) -> str:
        return f"discord:{self.fake.guild_of(channel)}"

    async def say(self, channel: str, text: str, author: str) -> tuple[str, bool]:
        """A user's message: (its key in memory, whether the bot was listening)."""
        listening = self.listening(channel)
        msg = await self.fake.message(text, author_id=author, channel=channel)
        return f"{self.scope(channel)} {msg['id']}", listening

    def acknowledged(self, key: str, listening: bool) -> bool:
        return listening

    def member(self, who: str) -> dict:
        fake = self.fake
        if who == "owner":
            return fake.member(OWNER)
        if who == "admin":
            return fake.member(ADMIN, permissions=EVERYONE_PERMS | MANAGE_GUILD)
        if who == "staff":
            return fake.member(STAFFER, roles=(STAFF_ROLE,))
        return fake.member(who)

    async def command(self, name: str, words: list[str], options: dict[str, Any], channel: str, who: str,
                      document: tuple[str, bytes] | None = None) -> str:
        """Send /name (its positional ``words`` and ``options``) as ``who`` (a user id, "owner",
        "admin", "staff"); its token."""
        opts: list[dict] = [_opt(key, value) for key, value in zip(POSITIONAL.get(name, []), words)]
        opts += [{"name": key, "type": 4 if isinstance(value, int) else 3, "value": value}
                 for key, value in options.items()]
        atts = []
        if document:
            att = self.fake.add_attachment(*document)
            atts.append(att)
            opts.insert(0, {"name": "files", "type": 11, "value": att["id"]})
        payload = await self.fake.interaction(name, opts, member=self.member(who), channel=channel, attachments=atts)
        return payload["token"]

    def pick(self, rng: random.Random) -> str:
        """A channel for the command mix: any but the private one."""
        guild = rng.choice(list(self.servers))
        return rng.choice([c for c in self.servers[guild] if c != self.private])

    async def drop(self) -> None:
        await self.fake.drop_connections()

    def leaked(self, token: str) -> bool:
        return SECRET in " ".join(self.fake.answers[token])

    def said_elsewhere(self) -> int | None:
        return None   # the interactions' answers are what the probes read

    def run_twice(self) -> int:
        return sum(1 for n in self.fake.acks.values() if n > 1)


class TelegramSide:
    """The soak on Telegram: 20 group chats, one of them a private group of staff; command messages."""
    name = "telegram"

    def __init__(self):
        self.fake = SoakTelegram("424242:SOAK")
        self.chats = [-1001000 - i for i in range(20)]
        self.channels = [str(c) for c in self.chats]
        self.private = self.channels[-1]
        self.public_probe = self.channels[0]
        self.sim_channels = self.channels[1:3]
        self.answered, self.answers = self.fake.answered, self.fake.answers
        # the owner starts simulations, which take a group's administrator on Telegram
        self.fake.admins.update((c, int(user)) for c in self.chats for user in (ADMIN, TELEGRAM_OWNER))

    async def start(self) -> None:
        await self.fake.start()

    async def stop(self) -> None:
        await self.fake.stop()

    def config(self) -> tuple[dict, list[str], list[str], dict]:
        return ({"token_env": TELEGRAM_TOKEN_ENV, "base_url": self.fake.base_url,
                 "base_file_url": self.fake.base_file_url, "poll_timeout_s": 1.0},
                [f"telegram:{TELEGRAM_OWNER}"], [f"telegram:{c}" for c in self.chats],
                {TELEGRAM_TOKEN_ENV: self.fake.token})

    def ready(self, lives: int, since: float) -> bool:
        """Whether a bot started at ``since`` (monotonic) polls."""
        return self.fake.polled > since

    def listening(self, channel: str) -> bool:
        return not self.fake.down and time.monotonic() - self.fake.polled < 5

    def scope(self, channel: str) -> str:
        return f"telegram:{channel}"

    async def say(self, channel: str, text: str, author: str) -> tuple[str, bool]:
        msg = self.fake.push_message(int(channel), text, user_id=int(author), chat_type="supergroup")
        return f"telegram:{channel} {msg['message_id']}", False

    def acknowledged(self, key: str, listening: bool) -> bool:
        if not hasattr(self, "_confirmed"):   # read once, at the report
            self._confirmed = {f"telegram:{u['message']['chat']['id']} {u['message']['message_id']}"
                               for u in self.fake.confirmed if "message" in u}
        return key in self._confirmed

    async def command(self, name: str, words: list[str], options: dict[str, Any], channel: str, who: str,
                      document: tuple[str, bytes] | None = None) -> str:
        user = {"owner": TELEGRAM_OWNER, "admin": ADMIN, "staff": STAFFER}.get(who, who)
        text = " ".join([f"/{name}", *words, *(f"--{k.replace('_', '-')} {v}" for k, v in options.items())])
        doc = None
        if document:
            file_id = f"soak-doc-{len(self.fake.files)}"
            self.fake.add_file(file_id, *document)
            doc = {"file_id": file_id, "file_name": document[0], "file_size": len(document[1])}
        msg = self.fake.push_message(int(channel), text, user_id=int(user), chat_type="supergroup", document=doc)
        token = f"tg-{msg['message_id']}"
        self.fake.waiting[int(channel)].append(token)
        return token

    def pick(self, rng: random.Random) -> str:
        """A chat for the command mix: a public one, no simulation's, with no command waiting."""
        free = [c for c in self.channels if c != self.private and c not in self.sim_channels
                and not self.fake.waiting[int(c)]]
        return rng.choice(free or self.channels[3:-1])

    async def drop(self) -> None:
        self.fake.down = True
        asyncio.get_running_loop().call_later(DROP_S, setattr, self.fake, "down", False)

    def leaked(self, token: str) -> bool:
        return SECRET in " ".join(self.fake.answers[token])

    def said_elsewhere(self) -> int:
        """The bot's messages with the secret in any chat but the private group, whatever they answered."""
        return sum(SECRET in text for chat, texts in self.fake.said.items() if str(chat) != self.private
                   for text in texts)

    def run_twice(self) -> int | None:
        return None   # Telegram has no acknowledgement to count; bot/once.py is tested on its own


@dataclass
class Plan:
    minutes: float
    rate: float = 20.0
    burst_rate: float = 100.0
    burst_every: float = 120.0
    burst_s: float = 5.0
    kill_every: float = 15.0   # minutes
    command_every: float = 2.0
    probe_every: float = 30.0
    warm: float = 180.0
    llm_fault_s: float = 60.0
    seed: int = 1

    @property
    def seconds(self) -> float:
        return self.minutes * 60

    def kills(self) -> list[float]:
        """Seconds into the run at which the bot is killed."""
        every = self.kill_every * 60
        times = [every * k for k in range(1, int(self.seconds // every) + 1) if every * k < self.seconds - 30]
        return times or [0.7 * self.seconds]

    def faults(self, backend: str) -> list[tuple[float, str]]:
        """(seconds into the run, fault) in order."""
        at = [(0.15, "connection drop"), (0.20, "llm 500"), (0.30, "llm timeout"), (0.06, "kill a run's child"),
              (0.55, "llm garbage"), (0.62, "connection drop")]
        if backend == "postgresql":
            at.append((0.45, "postgresql restart"))
        return sorted([(f * self.seconds, what) for f, what in at] + [(k, "kill -9") for k in self.kills()])

    @property
    def llm_fault_len(self) -> float:
        return min(self.llm_fault_s, 0.08 * self.seconds)

    def rate_at(self, t: float) -> float:
        return self.burst_rate if t % self.burst_every >= self.burst_every - self.burst_s else self.rate


@dataclass
class Life:
    pid: int
    started: float
    ready: float | None = None
    ended: float | None = None
    how: str = ""
    rss: list[tuple[float, int]] = field(default_factory=list)



@dataclass
class Command:
    name: str
    token: str
    sent: float
    side: str
    probe: str = ""   # "outsider" / "staff" for privacy probes


SIDES: dict[str, type[DiscordSide] | type[TelegramSide]] = {"discord": DiscordSide, "telegram": TelegramSide}


class Soak:
    def __init__(self, plan: Plan, backend: str, folder: Path, pg=None, platforms: Sequence[str] = ("discord",)):
        self.plan, self.backend, self.folder, self.pg = plan, backend, folder, pg
        self.rng = random.Random(plan.seed)
        self.sides: list[DiscordSide | TelegramSide] = [SIDES[p]() for p in platforms]
        self.sent: dict[str, tuple[float, str, bool]] = {}   # message key -> (sent at, side, bot listening)
        self.stored: dict[str, float] = {}                   # message key ("scope id") -> first seen stored
        self.commands: list[Command] = []
        self.lives: list[Life] = []
        self.windows: list[tuple[float, float, str]] = []   # fault windows (start, end, what)
        self.proc: subprocess.Popen    # the bot of the current life (start_bot)
        self.t0 = 0.0
        self.db: Database                # the soak's own connection, opened once the bot is ready
        self.url = ""
        self.lines = [line.text for line in chat_stream(load_corpus("chatterbot"), seed=plan.seed)]
        self.pg_rss: list[int] = []
        self.child_rss: list[int] = []
        self.llm = SoakLLM()
        self.llm_server: FakeOpenAI | None = None
        self.resumes: Counter[str] = Counter()   # job id -> /resume sent
        self.forks: list[tuple[float, str]] = []  # (sent at, token) of each /sim fork asked
        self.child_killed = ""
        self.soak_errors: list[str] = []
        self.asked: dict[str, tuple[float, str]] = {}   # job id -> (sent at, token) of the last /resume sent for it
        self.channels = [(side, c) for side in self.sides for c in side.channels]

    def side(self, name: str):
        return next(s for s in self.sides if s.name == name)

    def side_of_scope(self, scope: str):
        return self.side(scope.split(":", 1)[0])

    def config(self) -> Path:
        tables: dict[str, dict] = {}
        owners: list[str] = []
        scopes: list[str] = []
        self.env: dict[str, str] = {}
        for side in self.sides:
            table, side_owners, side_scopes, env = side.config()
            tables[side.name] = table
            owners += side_owners
            scopes += side_scopes
            self.env.update(env)
        return write_config(self.folder, {
            "bot": {"log_level": "WARNING", "owner_ids": owners, "costly_per_hour": 0, "allowed_scopes": scopes},
            "database": {"url": self.url},
            "console": {"enabled": "off"},
            **tables,
            "llm": llm(self.llm_server, timeout_s=LLM_TIMEOUT_S),
            "jobs": {"progress_interval_s": 5.0},
        })

    # -- the bot process ---------------------------------------------------------------------

    def start_bot(self) -> None:
        log = open(self.folder / f"bot-{len(self.lives) + 1}.log", "ab")
        self.proc = subprocess.Popen(
            bot_command("--config", str(self.folder / "config.toml"), "run", "--no-console"),
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=REPO, env=bot_env(**self.env),
            start_new_session=True)
        log.close()
        self.lives.append(Life(self.proc.pid, self.now()))

    async def wait_ready(self, timeout: float = 180) -> None:
        """Until the bot's connections serve every server and chat again (RuntimeError when it
        exits or ``timeout`` passes: the soak reports it and goes on to its report and cleanup)."""
        life = self.lives[-1]
        deadline = time.monotonic() + timeout
        while not all(side.ready(len(self.lives), self.t0 + life.started) for side in self.sides):
            if self.proc.poll() is not None:
                raise RuntimeError(f"the bot exited ({self.proc.returncode}); "
                                   f"see {self.folder}/bot-{len(self.lives)}.log")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the bot did not connect within {timeout} s")
            await asyncio.sleep(0.1)
        life.ready = self.now()

    def kill_bot(self, how: str = "kill -9") -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        self.lives[-1].ended, self.lives[-1].how = self.now(), how

    def stop_bot(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
            how = f"SIGTERM (exit {self.proc.returncode})"
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            how = "SIGTERM ignored for 60 s: killed"
        self.lives[-1].ended, self.lives[-1].how = self.now(), how

    def now(self) -> float:
        return time.monotonic() - self.t0

    # -- traffic -----------------------------------------------------------------------------

    async def traffic(self, until: float) -> None:
        """Messages at the plan's rate (bursts included) until ``until`` s into the run."""
        due, n = 0.0, 0
        last = self.now()
        while (now := self.now()) < until:
            due += (now - last) * self.plan.rate_at(now)
            last = now
            while due >= 1:
                due -= 1
                n += 1
                side, channel = self.rng.choice(self.channels)
                if channel == side.private:
                    text = SECRET_LINE if n % 7 == 0 else self.lines[n % len(self.lines)]
                    author = STAFFER
                else:
                    text, author = self.lines[n % len(self.lines)], str(6100 + self.rng.randrange(40))
                key, listening = await side.say(channel, text, author)
                self.sent[key] = (self.now(), side.name, listening)
            await asyncio.sleep(0.05)

    async def command(self, side, name: str, words: list[str], channel: str, who: str,
                      options: dict[str, Any] | None = None, probe: str = "",
                      document: tuple[str, bytes] | None = None) -> str:
        token = await side.command(name, words, options or {}, channel, who, document)
        self.commands.append(Command(name, token, self.now(), side.name, probe))
        return token

    async def command_mix(self, until: float) -> None:
        """A command every ``command_every`` s, the platforms in turn; privacy probes every
        ``probe_every`` s on each platform."""
        n = 0
        next_probe = self.plan.probe_every
        while self.now() < until:
            await asyncio.sleep(self.plan.command_every)
            n += 1
            side = self.sides[n % len(self.sides)]
            channel = side.pick(self.rng)
            member = str(6100 + self.rng.randrange(40))
            kind = ("recall", "worlds", "recall", "ask", "worlds", "recall", "ask", "digest")[n % 8]
            if kind in ("recall", "ask"):
                await self.command(side, kind, [self.rng.choice(self.lines)], channel, member)
            elif kind == "worlds":
                await self.command(side, "worlds", [], channel, member)
            else:
                await self.command(side, "digest", ["now"], channel, "admin")
            if self.now() >= next_probe:
                next_probe += self.plan.probe_every
                for probed in self.sides:
                    for name in ("recall", "ask"):
                        await self.command(probed, name, [PROBE_QUERY], probed.public_probe, OUTSIDER,
                                           probe="outsider")
                        await self.command(probed, name, [PROBE_QUERY], probed.private, "staff", probe="staff")

    # -- watching ----------------------------------------------------------------------------

    async def watch_stored(self, stop: asyncio.Event) -> None:
        last = 0
        while not stop.is_set():
            await self.poll_stored(last)
            last = max(0, self.max_row - 500)   # rows committed out of id order (PostgreSQL) are seen too
            await asyncio.sleep(0.25)

    max_row = 0

    async def poll_stored(self, after: int) -> None:
        try:
            rows = await self.db.fetchall("SELECT id, scope, message_id FROM memory_messages WHERE id > ? "
                                          "ORDER BY id", (after,))
        except Exception:   # the database restarting, say: the next poll sees them
            await self.reopen()
            return
        now = self.now()
        for row in rows:
            self.stored.setdefault(f"{row['scope']} {row['message_id']}", now)
            self.max_row = max(self.max_row, row["id"])

    async def reopen(self) -> None:
        try:
            await self.db.close()
        except Exception:
            pass
        try:
            self.db = await open_database(self.url, upgrade=False)
        except Exception:
            await asyncio.sleep(1)

    async def watch_memory(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            life = self.lives[-1] if self.lives else None
            if life and life.ended is None:
                try:
                    bot = psutil.Process(life.pid)
                    life.rss.append((self.now(), bot.memory_info().rss))
                    children = sum(c.memory_info().rss for c in bot.children(recursive=True))
                    if children:
                        self.child_rss.append(children)
                except psutil.Error:
                    pass
            if self.pg is not None and (rss := self.pg.rss()):
                self.pg_rss.append(rss)
            await asyncio.sleep(5)

    def disk(self) -> int:
        return sum(p.stat().st_size for p in (self.folder / "data").rglob("*") if p.is_file())

    async def db_size(self) -> int:
        if self.backend != "postgresql":
            return 0
        return await self.db.fetchval("SELECT pg_database_size(current_database())")


    # -- the run -----------------------------------------------------------------------------

    async def faults(self, end: float) -> None:
        for at, what in self.plan.faults(self.backend):
            await asyncio.sleep(max(0.0, at - self.now()))
            if self.now() >= end:
                return
            start = self.now()
            if what == "kill -9":
                self.kill_bot()
                self.start_bot()
                await self.wait_ready(RESTART_WAIT_S)
                self.windows.append((start, self.now() + 20, what))
            elif what == "connection drop":
                for side in self.sides:
                    await side.drop()
                self.windows.append((start, start + DROP_S, what))
            elif what.startswith("llm "):
                self.llm.fault = what.split()[1]
                asyncio.get_running_loop().call_later(self.plan.llm_fault_len, setattr, self.llm, "fault", "")
                self.windows.append((start, start + self.plan.llm_fault_len + 2 * LLM_TIMEOUT_S, what))
            elif what == "postgresql restart":
                await asyncio.to_thread(self.pg.restart, 10.0)
                self.windows.append((start, self.now() + 30, what))
            elif what == "kill a run's child":
                asyncio.create_task(self.kill_a_child(end - 60))

    async def kill_a_child(self, until: float) -> None:
        """SIGKILL to a running simulation's child, once, as soon as one runs."""
        while self.now() < until:
            try:
                rows = await self.db.fetchall("SELECT sim_id, pid FROM sim_runs WHERE status = 'running'")
            except Exception:
                rows = []
            for row in rows:
                if row["pid"] and psutil.pid_exists(row["pid"]):
                    os.kill(row["pid"], signal.SIGKILL)
                    self.child_killed = f"{row['sim_id']} (pid {row['pid']}) at {self.now():.0f} s"
                    self.windows.append((self.now(), self.now() + 20, "kill a run's child"))
                    return
            await asyncio.sleep(2)
        self.child_killed = "no run was running"

    # -- simulations, as their owner drives them ---------------------------------------------

    async def simulations(self, until: float) -> None:
        starts: list[tuple[Any, str, list[tuple[float, str]]]] = []   # (side, channel, its /simulate asks)
        for i, at in enumerate((0.05, 0.10)):   # with two platforms, one on each
            await asyncio.sleep(max(0.0, at * self.plan.seconds - self.now()))
            side = self.sides[i % len(self.sides)]
            channel = side.sim_channels[i]
            while not side.listening(channel) and self.now() < until:
                await asyncio.sleep(0.5)
            starts.append((side, channel, [await self.simulate(side, channel)]))
        while self.now() < until:
            await asyncio.sleep(5)
            try:
                jobs = await self.db.fetchall("SELECT id, state, scope, channel, params, updated_at FROM jobs "
                                              "WHERE kind = 'simulation' ORDER BY created_at")
                runs = {r["sim_id"]: r["rounds_done"] for r in await self.db.fetchall(
                    "SELECT sim_id, rounds_done FROM sim_runs")}
            except Exception:
                continue
            for side, channel, asks in starts:   # a /simulate the bot never heard of is asked again
                if len(asks) < 3 and self.unanswered(side, asks) and side.listening(channel) and not any(
                        j["scope"] == side.scope(channel) and j["channel"] == channel for j in jobs):
                    asks.append(await self.simulate(side, channel))
            for job in jobs:   # one /resume at a time per job, once the last one was answered or went unanswered
                side = self.side_of_scope(job["scope"])
                last = self.asked.get(job["id"])
                if job["state"] in ("interrupted", "failed") and self.resumes[job["id"]] < 5 \
                        and side.listening(job["channel"]) and (
                            last is None or last[1] in side.answered or self.unanswered(side, [last])):
                    self.resumes[job["id"]] += 1
                    self.asked[job["id"]] = (self.now(), await self.command(side, "resume", [job["id"]],
                                                                            job["channel"], "owner"))
            if jobs:
                await self.fork(jobs[0], runs)

    async def simulate(self, side, channel: str) -> tuple[float, str]:
        token = await self.command(side, "simulate", [SIM_REQUIREMENT], channel, "owner",
                                   options={"agents": 4, "rounds": 3},
                                   document=("harbour_strike.md", SAMPLE.read_bytes()))
        return self.now(), token

    def unanswered(self, side, asks: list[tuple[float, str]]) -> bool:
        """Whether the last of the owner's ``asks`` ((sent at, token)) went ``PATIENCE_S`` unanswered."""
        sent, token = asks[-1]
        return token not in side.answered and self.now() - sent >= PATIENCE_S

    async def fork(self, job, runs: dict) -> None:
        """/sim fork of the first simulation from round 1, once it completed round 1, asked while the
        bot is connected; asked again when ``PATIENCE_S`` passed with no answer and no fork."""
        side = self.side_of_scope(job["scope"])
        sim_id = json.loads(job["params"]).get("sim_id")
        done = json.loads(runs.get(sim_id) or "{}")
        if not done or min(done.values()) < 1 or not side.listening(job["channel"]) or len(self.forks) >= 3:
            return
        if self.forks and (not self.unanswered(side, self.forks) or await self.db.fetchval(
                "SELECT count(*) FROM simulations WHERE parent_id = ?", (sim_id,))):
            return
        token = await self.command(side, "sim", ["fork", sim_id], job["channel"], "owner", options={"from_round": 1})
        self.forks.append((self.now(), token))

    async def run(self) -> dict:
        for side in self.sides:
            await side.start()
        self.llm_server = FakeOpenAI(self.llm).start()
        self.url = await self.pg.fresh_database() if self.pg else f"sqlite:///{self.folder / 'data' / 'bot.sqlite3'}"
        self.config()
        self.t0 = time.monotonic()
        self.start_bot()
        try:
            await self.wait_ready()
        except BaseException:
            if self.proc.poll() is None:
                self.kill_bot("never connected")
            raise
        self.db = await open_database(self.url, upgrade=False)
        disk0, db0, t_disk0 = self.disk(), await self.db_size(), self.now()
        stop = asyncio.Event()
        watchers = [asyncio.create_task(self.watch_stored(stop)), asyncio.create_task(self.watch_memory(stop))]
        end = self.plan.seconds
        try:
            await asyncio.gather(self.traffic(end), *(self.guarded(job) for job in (
                self.command_mix(end - 10), self.faults(end), self.simulations(end - 10))))
            drained = await self.drain()
            disk1, db1, t_disk1 = self.disk(), await self.db_size(), self.now()
            jobs = await self.jobs()
        finally:
            stop.set()
            await asyncio.gather(*watchers)
            if self.proc.poll() is None:
                self.stop_bot()
            for side in self.sides:
                await side.stop()
            self.llm_server.stop()
        await self.poll_stored(0)
        dupes = await self.db.fetchall("SELECT scope, channel, message_id, count(*) AS n FROM memory_messages "
                                       "WHERE message_id <> '' GROUP BY scope, channel, message_id HAVING count(*) > 1")
        await self.db.close()
        hours = max(t_disk1 - t_disk0, 1) / 3600
        return self.report(drained, dupes, jobs, ((disk1 - disk0) / hours, (db1 - db0) / hours))

    async def guarded(self, job) -> None:
        """A driver of the soak that fails is reported; the traffic and the report go on."""
        try:
            await job
        except Exception as err:
            import traceback
            traceback.print_exc()
            self.soak_errors.append(f"{type(err).__name__}: {err}")

    async def drain(self, quiet: float = 90) -> float:
        """After the traffic: until every message is stored, or none more for ``quiet`` s."""
        start = self.now()
        seen, since = len(self.stored), self.now()
        while len(set(self.sent) - set(self.stored)) and self.now() - since < quiet:
            await asyncio.sleep(1)
            if len(self.stored) != seen:
                seen, since = len(self.stored), self.now()
        return self.now() - start


    async def jobs(self) -> dict:
        states = {r["state"]: r["n"] for r in await self.db.fetchall(
            "SELECT state, count(*) AS n FROM jobs GROUP BY state")}
        running = await self.db.fetchall("SELECT id, owner FROM jobs WHERE state = 'running'")
        live = f":{self.proc.pid}:" if self.proc.poll() is None else None
        orphans = [r["id"] for r in running if not (live and live in (r["owner"] or ""))]
        sims = await self.db.fetchall("SELECT id, state FROM jobs WHERE kind = 'simulation' ORDER BY created_at")
        return {"states": states, "orphans": orphans,
                "simulations": {"started": len(sims), "done": sum(1 for r in sims if r["state"] == "done"),
                                "states": [r["state"] for r in sims],
                                "resumes_sent": sum(self.resumes.values()), "fork_asks": len(self.forks),
                                "child_killed": self.child_killed,
                                "answers": [f"{c.side} /{c.name}@{c.sent:.0f}s: " + " | ".join(
                                    a[:150] for a in self.side(c.side).answers[c.token]) for c in self.commands
                                    if c.name in ("simulate", "resume", "sim")]}}

    # -- the report ----------------------------------------------------------------------------

    def in_window(self, t: float) -> bool:
        return any(a <= t <= b for a, b, _ in self.windows)

    def messages(self, keys: list[str]) -> dict:
        """Sent, stored, lost and acknowledged-but-lost of the messages ``keys``."""
        sent = self.sent
        lost = [m for m in keys if m not in self.stored]
        acked = {m for m in keys if self.side(sent[m][1]).acknowledged(m, sent[m][2])}
        return {"sent": len(keys), "stored": len(keys) - len(lost), "lost": len(lost),
                "acknowledged_lost": sum(1 for m in lost if m in acked), "lost_ids": lost[:20],
                "acknowledged": len(acked)}

    def answer_s(self, c: Command) -> float | None:
        answered = self.side(c.side).answered
        return answered[c.token] - self.t0 - c.sent if c.token in answered else None

    def report(self, drained: float, dupes, jobs: dict, disk: tuple[float, float]) -> dict:
        sent = self.sent
        stored = [m for m in sent if m in self.stored]
        lat = [self.stored[m] - sent[m][0] for m in stored]
        lat_calm = [self.stored[m] - sent[m][0] for m in stored if not self.in_window(sent[m][0])
                    and not self.in_window(self.stored[m])]
        calm = [c for c in self.commands if not c.probe and c.name in ("recall", "ask", "worlds", "digest")
                and not any(a <= c.sent + AFTER and c.sent <= b for a, b, _ in self.windows)]
        timed = [(s, c) for c in calm if (s := self.answer_s(c)) is not None]
        answer = [s for s, _ in timed]
        by_kind: dict[str, list[float]] = defaultdict(list)
        for s, c in timed:
            by_kind[c.name if len(self.sides) == 1 else f"{c.side} {c.name}"].append(s)
        slowest = sorted(timed, key=lambda sc: -sc[0])
        probes = [c for c in self.commands if c.probe]
        leaks = [c for c in probes if c.probe == "outsider" and self.side(c.side).leaked(c.token)]
        staff_found = [c for c in probes if c.probe == "staff" and self.side(c.side).leaked(c.token)]
        elsewhere = [n for side in self.sides if (n := side.said_elsewhere()) is not None]
        lives = []
        for life in self.lives:
            warm_at = life.started + min(self.plan.warm, 0.4 * ((life.ended or self.now()) - life.started))
            window = min(RSS_WINDOW_S, 0.2 * ((life.ended or self.now()) - life.started))
            after = [(t, r) for t, r in life.rss if t >= warm_at]
            warm = [r for t, r in after if t < warm_at + window]
            end = [r for t, r in after if t > after[-1][0] - window] if after else []
            warm_mb, end_mb = (statistics.median(warm) / 2**20 if warm else None,
                               statistics.median(end) / 2**20 if end else None)
            lives.append({"pid": life.pid, "start_s": round(life.started), "ready_s": round(life.ready or -1, 1),
                          "end_s": round(life.ended or -1), "end": life.how,
                          "rss_warm_mb": round(warm_mb) if warm_mb else None,
                          "messages_at_warm": sum(1 for t in self.stored.values() if t <= warm_at),
                          "rss_end_mb": round(end_mb) if end_mb else None,
                          "growth_pct": round(100 * (end_mb - warm_mb) / warm_mb, 1) if warm_mb and end_mb else None,
                          "rss_peak_mb": round(max(r for _, r in life.rss) / 2**20) if life.rss else None})
        twice = [n for side in self.sides if (n := side.run_twice()) is not None]
        return {
            "backend": self.backend, "platforms": [s.name for s in self.sides], "minutes": self.plan.minutes,
            "folder": str(self.folder),
            "messages": {**self.messages(list(sent)), "duplicated": sum(r["n"] - 1 for r in dupes),
                         "drain_s": round(drained, 1),
                         "by_platform": {s.name: self.messages([m for m in sent if sent[m][1] == s.name])
                                         for s in self.sides}},
            "send_to_stored_s": {"all": _pcts(lat), "outside_faults": _pcts(lat_calm)},
            "commands": {"sent": len(self.commands), "outside_faults": len(calm),
                         "answer_s": _pcts(answer), "by_kind": {k: _pcts(v) for k, v in sorted(by_kind.items())},
                         "slowest": [f"{c.side} {c.name}@{c.sent:.0f}s {s:.1f}s" for s, c in slowest[:12]],
                         "unanswered_outside_faults": [f"{c.side} {c.name}@{c.sent:.0f}s" for c in calm
                                                       if self.answer_s(c) is None],
                         "run_twice": sum(twice) if twice else None},
            "privacy": {"probes": sum(1 for c in probes if c.probe == "outsider"), "leaked": len(leaks),
                        "staff_probes": sum(1 for c in probes if c.probe == "staff"),
                        "staff_found": len(staff_found),
                        "secret_said_elsewhere": sum(elsewhere) if elsewhere else None},
            "lives": lives,
            "disk_growth_mb_per_h": {"data_folder": round(disk[0] / 2**20, 1), "database": round(disk[1] / 2**20, 1)},
            "pg_rss_mb": ([round(min(self.pg_rss) / 2**20), round(max(self.pg_rss) / 2**20)] if self.pg_rss else None),
            "children_rss_mb": ([round(min(self.child_rss) / 2**20), round(max(self.child_rss) / 2**20)]
                                if self.child_rss else None),
            "llm_requests": dict(self.llm.counts),
            "load_average": os.getloadavg(),
            "jobs": jobs,
            "windows": [(round(a), round(b), what) for a, b, what in self.windows],
            "log_errors": log_errors(self.folder),
            "soak_errors": self.soak_errors,
        }


def _opt(name: str, value: str) -> dict:
    return {"name": name, "type": 3, "value": value}


def _pcts(values: list[float]) -> dict:
    if not values:
        return {"n": 0}
    values = sorted(values)
    return {"n": len(values), "p50": round(statistics.median(values), 3),
            "p99": round(values[min(len(values) - 1, int(len(values) * 0.99))], 3), "max": round(values[-1], 3)}


def log_errors(folder: Path) -> dict[str, int]:
    """Tracebacks' last lines and ERROR lines of every life's log, counted."""
    found: Counter[str] = Counter()
    for log in sorted(folder.glob("bot-*.log")):
        lines = log.read_text(errors="replace").splitlines()
        for i, line in enumerate(lines):
            if " ERROR " in line or line.startswith("ERROR"):
                found[re.sub(r"\d{3,}", "N", line.split(" ERROR ", 1)[-1])[:160]] += 1
            elif line.startswith("Traceback"):
                end = next((j for j in range(i + 1, len(lines)) if lines[j] and not lines[j].startswith(" ")), i)
                found["Traceback: " + re.sub(r"\d{3,}", "N", lines[end])[:150]] += 1
    return dict(found.most_common(15))




def render(r: dict) -> str:
    m, c, p = r["messages"], r["commands"], r["privacy"]

    def said(m: dict) -> str:
        return (f"sent {m['sent']} (acknowledged by the bot {m['acknowledged']}), stored {m['stored']}, "
                f"lost {m['lost']}, acknowledged-but-lost {m['acknowledged_lost']}")
    lines = [f"## {r['backend']} on {'+'.join(r['platforms'])}, {r['minutes']} min ({r['folder']})",
             f"messages: {said(m)}, duplicated {m['duplicated']} (drain {m['drain_s']} s)",
             *(f"  {name}: {said(v)}" for name, v in m["by_platform"].items() if len(m["by_platform"]) > 1),
             f"send-to-stored s: all {r['send_to_stored_s']['all']}; "
             f"outside faults {r['send_to_stored_s']['outside_faults']}",
             f"commands: {c['sent']} sent, {c['outside_faults']} outside fault windows; answer s {c['answer_s']}; "
             f"unanswered outside faults {len(c['unanswered_outside_faults'])} {c['unanswered_outside_faults'][:5]}; "
             f"run twice {c['run_twice']}",
             "  by kind: " + "; ".join(f"{k} {v}" for k, v in c["by_kind"].items()),
             f"privacy: {p['leaked']} leaked of {p['probes']} outsider probes; staff found it in {p['staff_found']} "
             f"of {p['staff_probes']}"
             + (f"; the secret in {p['secret_said_elsewhere']} of the bot's Telegram messages outside the private "
                "group" if p["secret_said_elsewhere"] is not None else ""),
             f"jobs: {r['jobs']['states']}; running without a live owner: {r['jobs']['orphans']}",
             f"simulations: { {k: v for k, v in r['jobs']['simulations'].items() if k != 'answers'} }",
             *(f"  {a}" for a in r["jobs"]["simulations"]["answers"]),
             f"disk growth MB/h: {r['disk_growth_mb_per_h']}; RSS MB min/max: PostgreSQL {r['pg_rss_mb']}, "
             f"run children {r['children_rss_mb']}",
             f"LLM requests by fault: {r['llm_requests']}; load average at the end {r['load_average']}",
             "lives (s from start; RSS MB at warm-up end, at the end, growth %):"]
    lines += [f"  pid {lf['pid']}: {lf['start_s']}-{lf['end_s']} ready {lf['ready_s']} ({lf['end']}): "
              f"{lf['rss_warm_mb']} -> {lf['rss_end_mb']} MB ({lf['growth_pct']}%), peak {lf['rss_peak_mb']}, "
              f"{lf['messages_at_warm']} messages stored at warm-up"
              for lf in r["lives"]]
    lines.append(f"fault windows: {r['windows']}")
    if r["soak_errors"]:
        lines.append(f"THE SOAK ITSELF FAILED: {r['soak_errors']}")
    lines.append("log errors: " + (json.dumps(r["log_errors"], indent=1) if r["log_errors"] else "none"))
    return "\n".join(lines)


async def soak(plan: Plan, backend: str, folder: Path, pg=None, platforms: Sequence[str] = ("discord",)) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    return await Soak(plan, backend, folder, pg, platforms).run()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=60.0, help="per backend (5: the short mode)")
    ap.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="both")
    ap.add_argument("--platform", choices=("discord", "telegram", "both"), default="both",
                    help="the chat fakes the bot runs on (both: one bot on both, the traffic shared)")
    ap.add_argument("--rate", type=float, default=20.0)
    ap.add_argument("--burst-rate", type=float, default=100.0)
    ap.add_argument("--burst-every", type=float, default=120.0)
    ap.add_argument("--burst-s", type=float, default=5.0)
    ap.add_argument("--kill-every", type=float, default=15.0, help="minutes between two kill -9 of the bot")
    ap.add_argument("--llm-fault-s", type=float, default=60.0, help="seconds each LLM outage lasts")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--keep", action="store_true", help="keep the run folders (logs, databases)")
    args = ap.parse_args()
    plan = Plan(args.minutes, args.rate, args.burst_rate, args.burst_every, args.burst_s, args.kill_every,
                llm_fault_s=args.llm_fault_s, seed=args.seed)
    backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    platforms = ["discord", "telegram"] if args.platform == "both" else [args.platform]
    root = Path(tempfile.mkdtemp(prefix="worldbot-soak-"))
    results = []
    try:
        for backend in backends:
            print(f"{backend} on {'+'.join(platforms)}: {args.minutes} min, faults at "
                  f"{[(round(t), w) for t, w in plan.faults(backend)]}", flush=True)
            if backend == "postgresql":
                from tests.helpers.pg_server import PgServer
                pg = PgServer()
                try:
                    result = asyncio.run(soak(plan, backend, root / backend, pg, platforms))
                finally:
                    pg.stop()
            else:
                result = asyncio.run(soak(plan, backend, root / backend, None, platforms))
            results.append(result)
            print(render(result), flush=True)
    finally:
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1))
        if not args.keep:
            import shutil
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
