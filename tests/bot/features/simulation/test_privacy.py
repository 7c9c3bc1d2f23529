"""A private channel's simulations stay in it, through the real discord.py against the fake Discord.

#private is a channel @everyone cannot view (a permission overwrite; staff can). Two simulations
live there: one started there by /simulate (its audience recorded at creation) and the sample run
with a written report. A hostile member in #general tries every path to them: /sims, /sim
status|stop|resume|inject|fork, /report, /report ask, /report export, /interview, /compare (with
a public simulation), /recall, /worlds and /world --sim, /jobs, /cancel and /resume of the
simulation's job, a reply to the report's message, and the digest. Each answer must be exactly the
answer about an id that does not exist (so nothing says the simulation is there), no report-agent
request is made for them, and nothing about the simulations is posted into #general: the
progress, the report, its charts and files go only to #private, where the same commands work.

A simulation seeded from memory follows the same rule: #private's world, named by id or by topic,
cannot seed one asked for in #general (the answer is the one about a world that does not exist),
and #general's --from-chat holds none of #private's words; in #private it seeds one that belongs
to #private, as does a brief drafted there from the question alone.
"""
from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest

from bot.adapters import discord_adapter
from tests.bot.adapters.test_discord_audience import commands_running, digest_in
from tests.engine.sim.report.test_chat import prepare
from tests.fakes.discord_server import ADMIN_ROLE, APP_ID, CHANNEL, GUILD, STAFF_ROLE, FakeDiscord, private_to
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.reportchat_responder import ReportChatResponder
from tests.fakes.sim_responder import brief as draft_brief, kind_of
from tests.helpers.chat import make_app, serving
from tests.helpers.discord import wait_for_texts
from tests.helpers.simdata import sample_simulation
from tests.helpers.wait import until

pytestmark = pytest.mark.timeout(300)
SCOPE = f"discord:{GUILD}"
NOSUCH = "feedbeef"      # no simulation and no job has this id
STAFF, HOSTILE = "6001", "6002"
QUESTION = "How did commuters react to the fare hike?"


class Responder:
    """The report agent's part (ReportChatResponder), topic names for memory, a drafted brief;
    anything else (the pipeline's ontology step) gets text that is no JSON, so the pipeline stops
    there."""

    def __init__(self):
        self.report_chat = ReportChatResponder()

    def __call__(self, body: dict):
        system = body["messages"][0].get("content") or ""
        if system.startswith("You are the report agent") or "taking part in a social-media simulation" in system:
            return self.report_chat(body)
        if "name chat topics" in system:
            return json.dumps({"name": "topic"})
        if kind_of(body) == "brief":   # a brief drafted from the question alone
            return json.dumps(draft_brief(body))
        return "no JSON here"


@pytest.fixture
def llm_server():
    with FakeOpenAI(Responder()) as server:
        yield server


@pytest.fixture
async def fake():
    server = FakeDiscord()
    server.private = server.add_channel("private", private_to(STAFF_ROLE))
    await server.start()
    yield server
    await server.stop()


async def discord_app(tmp_path, monkeypatch, fake, llm_server, **simulation):
    """The bot of the operator's own server (not a guest) on the fake Discord, simulations started
    without /confirm; ``fake.asked`` collects the interactions' tokens by channel."""
    monkeypatch.setenv("DISCORD_TEST_TOKEN", "fake-token")
    fake.asked = {}
    return await make_app(tmp_path, discord={"token_env": "DISCORD_TEST_TOKEN", "api_base": fake.api_base,
                                             "gateway_url": fake.gateway_url, "message_content": True,
                                             "admin_role": ADMIN_ROLE},
                          llm={"base_url": llm_server.base_url, "model": "fake-model", "max_retries": 0},
                          memory={"extract_every_n": 1000, "extract_every_s": 600},
                          simulation={"confirm_above_usd": 0, "confirm_above_tokens": 0, **simulation},
                          bot={"allowed_scopes": [SCOPE]})


async def connected(app, fake) -> None:
    await asyncio.wait_for(fake.identified.wait(), 10)
    await until(lambda: app.reply_to(SCOPE, CHANNEL) is not None, 30, "the Discord adapter to connect")


def report_requests(llm_server) -> int:
    return sum(1 for r in llm_server.requests if r["messages"][0]["content"].startswith("You are the report agent"))


async def ask(fake: Any, who: str, channel: str, name: str, /, **options) -> str:  # a FakeDiscord, with .asked
    """Run a slash command as member ``who`` in ``channel``: everything it answered, a refusal before
    it ran (the interaction's callback) and its follow-ups, in order."""
    member = fake.member(STAFF, roles=(STAFF_ROLE, ADMIN_ROLE)) if who == STAFF else fake.member(who)
    payload = await fake.interaction(
        name, [{"name": k, "type": 5 if isinstance(v, bool) else 4 if isinstance(v, int) else 3, "value": v}
               for k, v in options.items()],
        member=member, channel=channel)
    callback = await fake.wait_for("POST", f"/{payload['token']}/callback")
    await until(lambda: not commands_running(), 30, "the commands under way to end")
    said = [(callback.json.get("data") or {}).get("content") or ""]
    said += [c.content for c in fake.calls_to("POST", f"/webhooks/{APP_ID}/{payload['token']}")]
    fake.asked.setdefault(channel, []).append(payload["token"])
    return "\n".join(s for s in said if s)


def probes(sim: str, public: str) -> list[tuple[str, dict]]:
    """Every command that names a simulation, with ``sim`` where it goes."""
    return [
        ("sim", {"action": "status", "id": sim}),
        ("sim", {"action": "stop", "id": sim}),
        ("sim", {"action": "resume", "id": sim}),
        ("sim", {"action": "inject", "id": sim, "text": "The board resigns"}),
        ("sim", {"action": "fork", "id": sim, "from_round": 1}),
        ("report", {"sim": sim}),
        ("report", {"sim": sim, "action": "ask", "question": QUESTION}),
        ("report", {"sim": sim, "action": "export"}),
        ("interview", {"sim": sim, "agent": "all", "question": "Will you keep taking the bus?"}),
        ("compare", {"sim_a": public, "sim_b": sim}),
        ("compare", {"sim_a": sim, "sim_b": public}),
        ("recall", {"query": "fare hike", "sim": sim}),
        ("worlds", {"sim": sim}),
        ("world", {"name": "fare", "sim": sim}),
    ]


async def test_a_private_channels_simulations_are_invisible_from_general_by_every_path(
        tmp_path, tmp_path_factory, monkeypatch, fake, llm_server):
    app = await discord_app(tmp_path, monkeypatch, fake, llm_server)
    await prepare(app, sample_simulation(tmp_path_factory, tmp_path), SCOPE, fake.private)   # sim1, with a report
    await app.db.execute("UPDATE simulations SET audience=? WHERE id='sim1'", (fake.private,))
    await app.db.execute("INSERT INTO simulations(id, scope, channel, requirement, spec, folder, created_at)"
                         " VALUES ('pub1', ?, ?, 'open to all', '{}', ?, '2026-01-01')",
                         (SCOPE, CHANNEL, str(tmp_path / "pub1")))
    async with serving(app, discord_adapter.DiscordAdapter):
        await connected(app, fake)

        # Staff start a simulation in #private: it belongs to #private's audience.
        att = fake.add_attachment("layoff-plan.txt", b"The warehouse closes in May; the staff are not told.")
        payload = await fake.interaction("simulate", [{"name": "files", "type": 11, "value": att["id"]},
                                                      {"name": "requirement", "type": 3, "value": "reactions?"}],
                                         member=fake.member(STAFF, roles=(STAFF_ROLE, ADMIN_ROLE)),
                                         attachments=[att], channel=fake.private)
        started = await fake.wait_for("POST", f"/webhooks/{APP_ID}/{payload['token']}",
                                      lambda c: c.content.startswith("Simulation `"))
        made, job = re.match(r"Simulation `(\w+)` started \(job `(\w+)`\)", started.content).groups()
        await fake.wait_for("POST", f"/channels/{fake.private}/messages",
                            lambda c: job in c.content and ("failed" in c.content or "finished" in c.content), 60)
        assert await app.db.fetchval("SELECT audience FROM simulations WHERE id=?", (made,)) == fake.private

        # #private reads them: /sims, /jobs, status, export, --sim, and the report posted there.
        listing = await ask(fake, STAFF, fake.private, "sims")
        assert all(f"`{s}`" in listing for s in (made, "sim1", "pub1")), listing
        assert job in await ask(fake, STAFF, fake.private, "jobs")
        assert "Simulation `sim1`" in await ask(fake, STAFF, fake.private, "sim", action="status", id="sim1")
        assert "Exports of simulation `sim1`" in await ask(fake, STAFF, fake.private, "report", sim="sim1",
                                                            action="export")
        assert "no simulation" not in await ask(fake, STAFF, fake.private, "worlds", sim="sim1")
        assert "📊 Report of simulation `sim1`" in await ask(fake, STAFF, fake.private, "report", sim="sim1")
        await until(lambda: app.db.fetchval("SELECT count(*) FROM report_messages WHERE sim_id='sim1'"), 30,
                    "the report's messages to be recorded")
        report_message = await app.db.fetchval("SELECT message_id FROM report_messages WHERE sim_id='sim1'")
        asked_before = report_requests(llm_server)

        # #general: every path answers exactly as for a simulation that does not exist.
        for sim in ("sim1", made):
            for name, options in probes(sim, "pub1"):
                hidden = await ask(fake, HOSTILE, CHANNEL, name, **options)
                unknown = await ask(fake, HOSTILE, CHANNEL, name,
                                    **{k: NOSUCH if v == sim else v for k, v in options.items()})
                assert f"no simulation {NOSUCH} here" in unknown, (name, options, unknown)
                assert hidden.replace(sim, NOSUCH) == unknown, (name, options, hidden)
        for name in ("cancel", "resume"):
            hidden = await ask(fake, HOSTILE, CHANNEL, name, job=job)
            assert hidden.replace(job, NOSUCH) == await ask(fake, HOSTILE, CHANNEL, name, job=NOSUCH), hidden
        listing = await ask(fake, HOSTILE, CHANNEL, "sims")
        assert "`pub1`" in listing and made not in listing and "sim1" not in listing, listing
        assert job not in await ask(fake, HOSTILE, CHANNEL, "jobs")
        assert made not in await digest_in(fake, CHANNEL)

        # A reply from #general to the report's message asks nothing; the same reply in #private does.
        await fake.message(QUESTION, author_id=HOSTILE, channel=CHANNEL, reply_to=report_message)
        await fake.message("And the union?", author_id=STAFF, channel=fake.private, reply_to=report_message)
        await fake.wait_for("POST", f"/channels/{fake.private}/messages",
                            lambda c: c.content.startswith("💬 Report agent of `sim1`"), 60)
        await until(lambda: not app.in_flight, 30, "the commands under way to end")
        assert llm_server.responder.report_chat.questions == ["And the union?"]
        assert report_requests(llm_server) > asked_before

        # Nothing about them was posted into #general, as a message or a file.
        general = [c for c in fake.calls if c.method in ("POST", "PATCH") and (
            c.path.startswith(f"/channels/{CHANNEL}/")
            or any(token in c.path for token in fake.asked.get(CHANNEL, [])))]
        assert not [c for c in general if c.files], [c.path for c in general if c.files]
        posted = [c.content for c in general if c.path.startswith(f"/channels/{CHANNEL}/")]
        assert not [text for text in posted if made in text or "sim1" in text or job in text], posted
        assert not any("Report agent" in text for text in posted)


async def test_a_private_channels_world_seeds_a_simulation_only_there(tmp_path, monkeypatch, fake, llm_server):
    app = await discord_app(tmp_path, monkeypatch, fake, llm_server, max_active_per_user=0, max_active_per_scope=0)
    secrets = ["The warehouse in Dunmore closes in May and the staff are not told yet.",
               "Dunmore warehouse staff will be offered transfers to the Leith depot.",
               "Keep the Dunmore warehouse closure quiet until the board meets in April."]
    async with serving(app, discord_adapter.DiscordAdapter):
        await connected(app, fake)
        for text in secrets:
            await fake.message(text, author_id=STAFF, channel=fake.private)
        await fake.message("The Dunmore bus timetable changes next week.", author_id=HOSTILE, channel=CHANNEL)
        await wait_for_texts(app, 3, channel=fake.private)
        await wait_for_texts(app, 1, channel=CHANNEL)
        await app.memory.embedded()   # stored first, routed after: the world they went to
        world = await app.db.fetchval("SELECT world_id FROM memory_messages WHERE channel=?", (fake.private,))
        topic = await app.db.fetchval("SELECT topic FROM worlds WHERE id=?", (world,))

        # #general, even for an administrator: the private world is a world that does not exist
        for named in (world, topic):
            hidden = await ask(fake, STAFF, CHANNEL, "simulate", requirement=QUESTION, world=named)
            unknown = await ask(fake, STAFF, CHANNEL, "simulate", requirement=QUESTION, world="nosuchworld")
            assert "no world matches 'nosuchworld'" in unknown, unknown
            assert hidden.replace(named, "nosuchworld") == unknown, hidden
        # (the times of the fake's messages are read from their small ids: 2015-01-01)
        general = await ask(fake, STAFF, CHANNEL, "simulate", requirement=QUESTION, from_chat=True, since="2014-12-01")
        public = re.search(r"Simulation `(\w+)` started", general)
        assert public, general
        public = public.group(1)
        brief = (app.config.data_dir / "sims" / public / "documents" / "brief.md").read_text()
        assert "bus timetable" in brief and not any(text in brief for text in secrets)
        assert await app.db.fetchval("SELECT audience FROM simulations WHERE id=?", (public,)) == ""

        # #private: it seeds one, which belongs to #private
        inside = await ask(fake, STAFF, fake.private, "simulate", requirement=QUESTION, world=world)
        made = re.search(r"Simulation `(\w+)` started", inside).group(1)
        assert "taken from this chat's memory of the world" in inside and "3 messages" in inside
        brief = (app.config.data_dir / "sims" / made / "documents" / "brief.md").read_text()
        assert all(text in brief for text in secrets) and "bus timetable" not in brief
        assert await app.db.fetchval("SELECT audience FROM simulations WHERE id=?", (made,)) == fake.private
        # and with no document at all, the LLM's brief is drafted and shown where it was asked
        drafted = await ask(fake, STAFF, fake.private, "simulate", requirement=QUESTION)
        assert "📝 No document given" in drafted and "Valmora Port Faces a Strike Vote" in drafted
        alone = re.search(r"Simulation `(\w+)` started \(job `\w+`\) from its brief brief.md, drafted by the LLM",
                          drafted).group(1)
        assert await app.db.fetchval("SELECT audience FROM simulations WHERE id=?", (alone,)) == fake.private
        listing = await ask(fake, HOSTILE, CHANNEL, "sims")
        assert made not in listing and alone not in listing
        assert all(made not in text and alone not in text for text in await posted_in(fake, CHANNEL))


async def posted_in(fake: FakeDiscord, channel: str) -> list[str]:
    return [c.content for c in fake.calls
            if c.method in ("POST", "PATCH") and c.path.startswith(f"/channels/{channel}/")]
