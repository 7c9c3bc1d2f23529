"""Files as a user gives them: text in many encodings, a PDF with a damaged header, a missing
path or a folder at the console, and a simulation whose document is corrupt (no resume hint,
and /report says why there is no report)."""
from __future__ import annotations

import subprocess

import pytest

from bot.adapters.console import Console
from bot.app import App
from bot.cli import main
from engine.config import DocumentsSection, load_config
from engine.db import open_database
from engine.documents import load_document
from tests.conftest import bot_command, bot_env
from tests.engine.test_documents import pdf_bytes
from tests.helpers.llm_fixtures import fake_openai, openai_server  # noqa: F401

SPANISH = "Señor Peña visitó la ciudad. El niño comió piñas y jamón con su familia el año pasado."
TEXTS = [
    ("utf-8", SPANISH + " 東京, Привет"),
    ("utf-8-sig", SPANISH),
    ("utf-16", SPANISH + " 東京"),          # with a byte-order mark
    ("utf-16-le", SPANISH),                  # without one
    ("utf-16-be", SPANISH),
    ("latin-1", SPANISH),
    ("latin-1", "Señor Peña"),
    ("cp1252", "The “quoted” words — the € price… Señor Peña’s café."),
    ("shift_jis", "東京は日本の首都です。今日は晴れています。私は学生です。"),
    ("gb18030", "北京是中国的首都。今天天气很好。我们去公园散步吧。"),
    ("cp1251", "Привет, как дела? Сегодня хорошая погода, и мы идём гулять в парк."),
]


@pytest.mark.parametrize("encoding, text", TEXTS)
def test_text_files_in_each_encoding_read_back_exactly(tmp_path, encoding, text):
    path = tmp_path / "notes.txt"
    path.write_bytes(text.encode(encoding))
    assert load_document(path, DocumentsSection()).text == text


def console(tmp_path, stdin: str, extra: str = "", bot: str = "") -> subprocess.CompletedProcess:
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[bot]\ndata_dir = "data"\n{bot}{extra}')
    return subprocess.run(bot_command("--config", str(cfg)), input=stdin, capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env=bot_env())


def test_missing_path_and_folder_are_named_at_the_console(tmp_path):
    (tmp_path / "papers").mkdir()
    out = console(tmp_path, "/simulate nothere.pdf what happens next?\n/simulate papers what happens next?\n")
    assert out.returncode == 0, out.stderr
    assert f"nothere.pdf: no such file (a relative path starts from {tmp_path})" in out.stdout
    assert "papers is a folder; name the files inside it" in out.stdout
    assert "give the file's path" not in out.stdout


def test_pdf_library_warnings_stay_out_of_the_chat(tmp_path, openai_server):
    (tmp_path / "minutes.pdf").write_bytes(b"junk before the header\n" + pdf_bytes(["The council voted."]))
    extra = (f'[llm]\nbase_url = "{openai_server.base_url}"\n'
             "[simulation]\nconfirm_above_usd = 0.0\nconfirm_above_tokens = 1\n")
    out = console(tmp_path, "/simulate minutes.pdf what happens next?\n", extra)
    assert out.returncode == 0, out.stderr
    assert "/confirm" in out.stdout  # the document was read: its estimate asks for confirmation
    assert "invalid pdf header" not in out.stdout + out.stderr
    # the note is in the log when the log shows notes
    out = console(tmp_path, "/simulate minutes.pdf what happens next?\n", extra, bot='log_level = "INFO"\n')
    assert "INFO pypdf._reader: invalid pdf header" in out.stderr
    assert "invalid pdf header" not in out.stdout


async def test_a_corrupt_document_is_refused_before_anything_starts(tmp_path, openai_server, capsys):
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[bot]\ndata_dir = "data"\n[llm]\nbase_url = "{openai_server.base_url}"\n')
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4\n garbage garbage")
    code = await _cli(["--config", str(cfg), "simulate", str(broken), "-r", "What happens next?"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.strip() == "error: broken.pdf: the PDF is corrupt and cannot be read"   # no --resume hint
    db = await open_database(tmp_path / "data" / "worldbot.db")
    try:
        assert not await db.fetchval("SELECT count(*) FROM simulations")
        assert not openai_server.requests
    finally:
        await db.close()


async def test_report_on_a_failed_simulation_says_why(tmp_path, capsys):
    cfg = tmp_path / "config.toml"
    cfg.write_text('[bot]\ndata_dir = "data"\n[llm]\nbase_url = "http://127.0.0.1:9/v1"\n'
                   "retry_max_wait_s = 0.05\nmax_retries = 0\n")
    doc = tmp_path / "minutes.txt"
    doc.write_text("The council votes on the new tram line next week. Shops on the route object.")
    code = await _cli(["--config", str(cfg), "simulate", str(doc), "-r", "What happens next?"])
    err = capsys.readouterr().err
    assert code == 1, err
    sim_id = err.split("simulation ", 1)[1].split(" ", 1)[0]

    app = await App.create(load_config(cfg))
    console_ = app.adapters.add(Console(app, interactive=False))
    await app.start()
    try:
        await console_.handle_line(f"/report {sim_id}")
        out = capsys.readouterr().out
        assert f"Simulation `{sim_id}` has no report: its run did not finish" in out
        assert not await app.db.fetchval("SELECT count(*) FROM jobs WHERE kind='report'")
    finally:
        await app.close()


async def _cli(argv: list[str]) -> int:
    import asyncio
    return await asyncio.to_thread(main, argv)
