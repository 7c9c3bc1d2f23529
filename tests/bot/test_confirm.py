"""The cost estimate shown before a simulation, and /confirm when it is above the threshold."""
from __future__ import annotations

from bot.adapters.console import Console
from bot.app import App
from engine.config import load_config, parse_config
from engine.documents import Document
from engine.sim import pipeline
from engine.sim.environment.sizing import Sizes
from engine.sim.estimate import estimate
from tests.fakes.sim_responder import SimResponder
from tests.helpers.llm_fixtures import embedder, fake_openai, openai_server  # noqa: F401
from tests.helpers.sim import SAMPLE


def test_estimate_grows_with_document_agents_and_rounds_and_prices_the_model():
    cfg = parse_config({"llm": {"model": "m", "prices": {"m": {"input": 1.0, "output": 2.0}}}})
    short, long = [Document("a.txt", "word " * 600)], [Document("a.txt", "word " * 6_000)]
    base = estimate(cfg, short, "what next?", Sizes(10, 4))
    assert estimate(cfg, long, "what next?", Sizes(10, 4)).tokens > base.tokens
    assert estimate(cfg, short, "what next?", Sizes(40, 4)).calls > base.calls
    assert estimate(cfg, short, "what next?", Sizes(10, 40)).tokens > base.tokens
    assert base.usd is not None and 0 < base.usd < base.tokens * 2.0 / 1e6
    assert estimate(parse_config({}), short, "what next?", Sizes(10, 4)).usd is None
    assert "cost unknown" in estimate(parse_config({}), short, "what next?", Sizes(10, 4)).describe()


async def test_costly_simulation_waits_for_confirm_from_an_administrator(openai_server, embedder, tmp_path, capsys):
    openai_server.responder = SimResponder()
    path = tmp_path / "config.toml"
    path.write_text(f'[bot]\ndata_dir = "data"\n[llm]\nbase_url = "{openai_server.base_url}"\nmodel = "m"\n'
                    '[llm.prices.m]\ninput = 100.0\noutput = 100.0\n[simulation]\nconfirm_above_usd = 0.5\n')
    app = await App.create(load_config(path), ["bot.features.core", "bot.features.simulation"])
    app.sims.steps = pipeline.STEPS[:3]  # steps 1-3: the confirmed job finishes before the run
    console = app.adapters.add(Console(app, interactive=False))
    await app.start()
    try:
        await console.handle_line(f"/simulate {SAMPLE} How will the strike end? --agents 3 --rounds 2")
        out = capsys.readouterr().out
        assert "would take about" in out and "≈ $" in out
        assert "3 agents (the actors the documents name, then members of the public), 2 rounds" in out
        assert await app.jobs.list() == [] and not openai_server.requests  # nothing started yet
        code = out.split("/confirm ", 1)[1].split()[0]
        await console.handle_line("/confirm nope")
        assert "nothing waits for code nope" in capsys.readouterr().out
        # a member who administers nothing cannot confirm it
        other = console.incoming(f"/confirm {code}")
        other.author_id, other.is_admin, other.is_owner = "someone-else", False, False
        await app.dispatch(other, console.reply)
        assert "only the person running the bot may confirm it" in capsys.readouterr().out
        await console.handle_line(f"/confirm {code}")
        started = capsys.readouterr().out
        assert "Simulation `" in started and "estimated about" in started
        [job] = await app.jobs.list()
        done = await app.jobs.wait(job.id)
        assert done.state == "done"
        assert "tokens used" in done.message and done.message.startswith(f"{done.result['llm_calls']:,} LLM calls")
        await console.handle_line(f"/confirm {code}")  # a code works once
        assert "nothing waits for code" in capsys.readouterr().out
    finally:
        await app.close()
