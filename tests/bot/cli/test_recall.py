"""`python -m bot recall`, end to end in subprocesses with the real model: one query, a JSONL
file of queries with --json, and bad input (one clear line, exit 2, nothing run)."""
from __future__ import annotations

import json

import pytest

from tests.bot.cli.test_memory import COOKING, FOOTBALL, write_history
from tests.helpers.bot_process import run_cli


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """A database holding the cooking/football chat in scope import:chat; (folder, message ids)."""
    tmp = tmp_path_factory.mktemp("recall_cli")
    (tmp / "config.toml").write_text(f'[bot]\ndata_dir = "{tmp / "data"}"\n', encoding="utf-8")
    history = tmp / "chat.jsonl"
    ids = write_history(history)
    done = run_cli(tmp, "import", str(history))
    assert done.returncode == 0, done.stderr
    return tmp, ids


def test_queries_file_prints_one_json_line_per_query(imported):
    tmp, ids = imported
    queries = tmp / "queries.jsonl"
    queries.write_text(json.dumps({"id": "q-pasta", "query": "how long do I boil fresh pasta?"}) + "\n\n"
                       + json.dumps({"id": 7, "query": "who saved the penalty in the football match"}) + "\n",
                       encoding="utf-8")
    done = run_cli(tmp, "recall", "--scope", "import:chat", "--k", "3", "--json", "--queries", str(queries))
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["id"] for r in rows] == ["q-pasta", 7]
    cooking = {ids[i] for i in range(len(COOKING))}
    football = {ids[i] for i in range(len(COOKING) + 1, len(ids))}
    for row, wanted in zip(rows, (cooking, football)):
        assert row["found"] is True and row["ms"] > 0
        assert 1 <= len(row["messages"]) <= 3
        returned = [m["message_id"] for m in row["messages"]]
        assert set(returned) <= set(ids) and len(set(returned)) == len(returned)
        assert set(returned) & wanted  # the topic asked about is among what came back
        for m in row["messages"]:
            assert m["channel"] == "general" and len(m["world_id"]) == 8
            assert isinstance(m["score"], float) and isinstance(m["neighbour"], bool)
            assert m["neighbour_of"] is None or m["neighbour_of"] in returned
            assert m["world_id"] in row["worlds"]
        assert isinstance(row["beliefs"], list)  # no LLM here: no beliefs extracted


def test_one_query_prints_a_readable_list(imported):
    tmp, _ = imported
    done = run_cli(tmp, "recall", "--scope", "import:chat", "the", "striker", "scored", "goals")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("the striker scored goals")
    assert any("#general m" in line and "[world " in line for line in lines[1:])
    assert any(FOOTBALL[1] in line for line in lines)


@pytest.mark.parametrize("case", ["missing file", "bad json line", "no query", "unknown scope", "query and file"])
def test_bad_input_is_one_clear_line(imported, case):
    tmp, _ = imported
    args = ["recall", "--scope", "import:chat"]
    bad = tmp / "bad.jsonl"
    expected = ""
    if case == "missing file":
        args += ["--queries", str(tmp / "absent.jsonl")]
        expected = "absent.jsonl: cannot read"
    elif case == "bad json line":
        bad.write_text('{"id": 1, "query": "pasta"}\n{"id": 2, "query": \n', encoding="utf-8")
        args += ["--queries", str(bad)]
        expected = "bad.jsonl: line 2: not valid JSON"
    elif case == "no query":
        bad.write_text('{"id": 1, "query": "pasta"}\n{"id": 2}\n', encoding="utf-8")
        args += ["--queries", str(bad)]
        expected = 'bad.jsonl: line 2: "query" must be non-empty text'
    elif case == "unknown scope":
        args = ["recall", "--scope", "import:nothing", "pasta"]
        expected = "scope 'import:nothing' holds no memory (scopes with memory: import:chat)"
    else:
        bad.write_text('{"id": 1, "query": "pasta"}\n', encoding="utf-8")
        args += ["--queries", str(bad), "pasta"]
        expected = "give either a QUERY or --queries FILE.jsonl"
    done = run_cli(tmp, *args)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], done.stderr
    assert done.stdout == ""
