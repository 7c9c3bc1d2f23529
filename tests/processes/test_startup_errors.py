"""Configuration and data-folder problems, as a user meets them: `python -m bot` in a subprocess
ends with exit code 2 and one line naming the key or path, never a traceback."""
import shutil
import subprocess

import pytest

from tests.conftest import bot_command, bot_env


def bot(tmp_path, *args, config_text=None, stdin="hello\n"):
    if config_text is not None:
        (tmp_path / "config.toml").write_text(config_text)
    return subprocess.run(bot_command(*args), input=stdin, capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env=bot_env())


def one_line_error(out, *needles):
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert "Traceback" not in out.stderr and "Traceback" not in out.stdout
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def test_config_that_is_a_folder(tmp_path):
    (tmp_path / "conf").mkdir()
    one_line_error(bot(tmp_path, "--config", "conf", "run"), "--config conf is a folder", "conf/config.toml")


def test_data_dir_that_is_a_file(tmp_path):
    (tmp_path / "notes").write_text("mine")
    line = one_line_error(bot(tmp_path, "--config", "config.toml", config_text='[bot]\ndata_dir = "notes"\n'),
                          "bot.data_dir", "is a file, not a folder")
    assert (tmp_path / "notes").read_text() == "mine"  # left intact
    assert str(tmp_path / "notes") in line


def test_data_dir_under_a_file(tmp_path):
    # Tests run as root, who may write anywhere a permission bit forbids: a path below a file is
    # a folder nobody can create, root included.
    (tmp_path / "notes").write_text("mine")
    one_line_error(bot(tmp_path, "--config", "config.toml", config_text='[bot]\ndata_dir = "notes/data"\n'),
                   "bot.data_dir", "part of")


def _immutable(path, on: bool) -> bool:
    if shutil.which("chattr") is None:
        return False
    return subprocess.run(["chattr", "+i" if on else "-i", str(path)], capture_output=True).returncode == 0


def test_data_dir_nobody_can_write(tmp_path):
    # Root ignores permission bits, so the folder is made immutable (chattr +i): even root
    # cannot create a file in it, as on a read-only file system.
    data = tmp_path / "data"
    data.mkdir()
    if not _immutable(data, True):
        pytest.skip("chattr +i is not available on this file system")
    try:
        one_line_error(bot(tmp_path, "--config", "config.toml", config_text='[bot]\ndata_dir = "data"\n'),
                       "bot.data_dir", "cannot write in", str(data))
    finally:
        _immutable(data, False)


def test_read_only_database(tmp_path):
    cfg = '[bot]\ndata_dir = "data"\n'
    assert bot(tmp_path, "--config", "config.toml", "db", "upgrade", config_text=cfg).returncode == 0
    db = tmp_path / "data" / "bot.sqlite3"
    if not _immutable(db, True):
        pytest.skip("chattr +i is not available on this file system")
    try:
        one_line_error(bot(tmp_path, "--config", "config.toml"), "cannot write the database", str(db),
                       "readonly")
        # reading still works: `db current` does not write
        out = bot(tmp_path, "--config", "config.toml", "db", "current")
        assert out.returncode == 0 and out.stdout.strip().isdigit(), out.stderr
    finally:
        _immutable(db, False)


@pytest.mark.parametrize("section, needles", [
    ("[simulation]\nchunk_chars = 500\nchunk_overlap = 600\n",
     ("simulation.chunk_overlap", "600 must be smaller than chunk_chars (500)")),
    ("[simulation]\nactivity_by_hour = [-1" + ", 1" * 23 + "]\n",
     ("simulation.activity_by_hour.0", "greater than or equal to 0")),
    ("[simulation]\nactivity_by_hour = [1, 1]\n", ("simulation.activity_by_hour", "at least 24")),
    ("[simulation]\nactivity_by_hour = [0" + ", 0" * 23 + "]\n", ("simulation.activity_by_hour", "above 0")),
    ("[simulation]\nstart_hour = 24\n", ("simulation.start_hour",)),
])
def test_cross_field_checks_refuse_at_start(tmp_path, section, needles):
    one_line_error(bot(tmp_path, "--config", "config.toml", config_text='[bot]\ndata_dir = "data"\n' + section),
                   *needles)


def test_embedder_model_that_cannot_load_fails_at_start(tmp_path):
    (tmp_path / "empty_model").mkdir()
    for model, needle in (("/nonexistent", "no such folder"), ("empty_model", "holds no model")):
        out = bot(tmp_path, "--config", "config.toml",
                  config_text=f'[bot]\ndata_dir = "data"\n[embedder]\nmodel = "{model}"\n')
        one_line_error(out, "embedder.model", model, needle)


def test_config_after_the_command(tmp_path):
    cfg = tmp_path / "elsewhere.toml"
    cfg.write_text('[bot]\ndata_dir = "other"\n')
    out = bot(tmp_path, "db", "upgrade", "--config", str(cfg))
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "other" / "bot.sqlite3").exists()
    out = bot(tmp_path, "db", "--config", str(cfg), "current")
    assert out.returncode == 0 and out.stdout.strip().isdigit(), out.stderr
    out = bot(tmp_path, "run", "--config", str(cfg), "--no-console", "--wait")
    assert "unrecognized arguments" not in out.stderr


def test_database_path_that_is_a_folder(tmp_path):
    (tmp_path / "store").mkdir()
    one_line_error(bot(tmp_path, "--config", "config.toml", config_text='[database]\npath = "store"\n'),
                   "database.path", "is a folder")


def test_cli_simulate_names_a_missing_file_and_a_folder(tmp_path):
    (tmp_path / "papers").mkdir()
    cfg = '[bot]\ndata_dir = "data"\n[llm]\nbase_url = "http://127.0.0.1:9/v1"\n'
    out = bot(tmp_path, "--config", "config.toml", "simulate", "nothere.pdf", "-r", "what next?", config_text=cfg)
    one_line_error(out, "nothere.pdf: no such file")
    out = bot(tmp_path, "--config", "config.toml", "simulate", "papers", "-r", "what next?")
    one_line_error(out, "papers is a folder; name the documents inside it")


def test_database_path_naming_a_file_that_is_no_database(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes, not a database")
    notes.chmod(0o644)   # readable by others: the bot must not take it over as its database
    one_line_error(bot(tmp_path, "--config", "config.toml", config_text='[database]\npath = "notes.txt"\n'),
                   "notes.txt: file is not a database", "database.path must name an SQLite database")
    assert notes.read_text() == "my notes, not a database"
    assert notes.stat().st_mode & 0o777 == 0o644


def test_embedder_model_folder_that_cannot_load_stops_the_start(tmp_path):
    (tmp_path / "broken_model").mkdir()
    (tmp_path / "broken_model" / "config.json").write_text("{}")
    out = bot(tmp_path, "--config", "config.toml",
              config_text='[bot]\ndata_dir = "data"\n[embedder]\nmodel = "broken_model"\n')
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    errors = [line for line in out.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "embedder.model = 'broken_model' cannot be loaded" in errors[0], out.stderr
    assert "huggingface.co" not in out.stderr   # no model hub is asked
    assert "you>" not in out.stdout and not out.stdout.strip()  # the console never opened
