"""`python -m bot import` then `worlds --json`, end to end in subprocesses with the real model."""
from __future__ import annotations

import json

from tests.helpers.bot_process import run_cli
from tests.helpers.config import MINILM, write_config
from tests.helpers.memory import Chat, close_engine, open_engine

COOKING = [
    "How long should I boil fresh pasta?",
    "Fresh pasta only needs two or three minutes in salted boiling water.",
    "I add olive oil and garlic to the pasta sauce.",
    "A tomato sauce with basil and parmesan is my favourite recipe.",
]
FOOTBALL = [
    "Did you watch the football match last night?",
    "The striker scored two goals in the second half.",
    "Our goalkeeper saved a penalty in the final minute.",
    "The league table looks tight after this weekend's games.",
]


def write_history(path) -> list[str]:
    rows = []
    for i, text in enumerate(COOKING + ["ok"] + FOOTBALL):
        rows.append({"id": f"m{i}", "channel": "general", "author": "ann" if i % 2 else "bob",
                     "ts": f"2024-06-01T10:{i:02d}:00Z", "text": text})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return [r["id"] for r in rows]


def test_import_then_worlds_json(tmp_path):
    (tmp_path / "config.toml").write_text(f'[bot]\ndata_dir = "{tmp_path / "data"}"\n', encoding="utf-8")
    history = tmp_path / "chat.jsonl"
    ids = write_history(history)

    done = run_cli(tmp_path, "import", str(history))
    assert done.returncode == 0, done.stderr
    assert "imported 9 messages" in done.stdout and "scope import:chat" in done.stdout

    listed = run_cli(tmp_path, "worlds", "--scope", "import:chat", "--json")
    assert listed.returncode == 0, listed.stderr
    worlds = json.loads(listed.stdout)
    held = [mid for w in worlds for mid in w["messages"]]
    assert sorted(held) == sorted(ids)  # every message in exactly one world
    for w in worlds:
        assert set(w) >= {"id", "topic", "maturity", "access_count", "messages"}
        assert len(w["id"]) == 8 and w["topic"]
        assert w["access_count"] == len(w["messages"])
    world_of = {mid: w["id"] for w in worlds for mid in w["messages"]}
    cooking = {world_of[f"m{i}"] for i in range(len(COOKING))}
    football = {world_of[f"m{i}"] for i in range(len(COOKING) + 1, len(ids))}
    assert not cooking & football  # the two topics never share a world
    assert world_of["m4"] in cooking  # "ok" follows the world the channel was talking in
    topics = {w["id"]: w["topic"] for w in worlds}
    assert all(t[0].isupper() and "·" not in t for t in topics.values()), topics  # a phrase, not a list
    assert any("pasta" in topics[w].lower().split() for w in cooking), topics

    again = run_cli(tmp_path, "import", str(history))
    assert again.returncode == 0 and "9 already stored, skipped" in again.stdout


def test_import_bad_file_is_one_clear_error(tmp_path):
    (tmp_path / "config.toml").write_text(f'[bot]\ndata_dir = "{tmp_path / "data"}"\n', encoding="utf-8")
    bad = tmp_path / "broken.jsonl"
    bad.write_text('{"id": "1", "channel": "c", "author": "a", "ts": "2024-01-01T00:00:00Z", "text": "hi"}\n'
                   '{"id": "2", "channel": "c", "author": "a", "ts": "2024-01-01T00:01:00Z", "text": \n',
                   encoding="utf-8")
    done = run_cli(tmp_path, "import", str(bad))
    assert done.returncode == 2
    assert "broken.jsonl: line 2: not valid JSON" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").iterdir())


async def test_running_engine_sees_import_and_merge_from_the_command_line(tmp_path):
    """The bot's engine keeps each scope's index in memory; a CLI import or merge in another
    process must show up in its routing and recall without a restart."""
    data = tmp_path / "data"
    # the engine here is helpers.memory's MiniLM: the command-line processes use its vectors too
    write_config(tmp_path, MINILM)
    assert run_cli(tmp_path, "db", "upgrade").returncode == 0
    db, engine = await open_engine(data / "bot.sqlite3")
    try:
        chat = Chat(scope="import:chat")
        await engine.ingest(chat.msg("my sourdough bread did not rise in the oven"))
        assert len(await engine.worlds(chat.scope)) == 1

        history = tmp_path / "chat.jsonl"
        write_history(history)
        done = run_cli(tmp_path, "import", str(history), "--scope", chat.scope)
        assert done.returncode == 0, done.stderr
        imported = {w.id for w in await engine.worlds(chat.scope)}
        assert len(imported) >= 2
        # Routing and recall use the imported worlds: no twin football world is born.
        goal = await engine.ingest(chat.msg("what a goal from the striker in that football match"))
        assert goal.action == "absorb" and goal.world_id in imported
        found = await engine.recall(chat.scope, "penalty saved by the goalkeeper")
        assert found.world is not None and found.world.id == goal.world_id

        # A merge from the command line deletes worlds; the engine must not route into them.
        write_config(tmp_path, {**MINILM, "memory": {"merge_threshold": 0.0}})
        merged = run_cli(tmp_path, "merge", "--scope", chat.scope)
        assert merged.returncode == 0, merged.stderr
        left = {w.id for w in await engine.worlds(chat.scope)}
        assert len(left) == 1
        for text in ("the goalkeeper and the striker trained together", "bake the bread for forty minutes"):
            routed = await engine.ingest(chat.msg(text))
            assert routed.action == "birth" or routed.world_id in left
    finally:
        await close_engine(db, engine)
