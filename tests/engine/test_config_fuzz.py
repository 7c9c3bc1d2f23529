"""config.toml, fuzzed: every key of the shipped file given values of the wrong type or range (text
with control characters and NUL, 100 kB strings, numbers past 64 bits, nan and inf, lists,
tables), unknown keys and sections, a key given twice, bytes that are no TOML, UTF-16. Reading
it and the start-up checks (the data folder, the database file, the embedding model) give a
configuration or one short ConfigError line; the command line turns that line into
"error: ..." and exit status 2, never a traceback (checked through a real process)."""
from __future__ import annotations

import json
import math
import tomllib

from hypothesis import example, given, strategies as st

from engine.config import ConfigError, load_config
from engine.datadir import check_storage
from engine.embedder import check_model
from tests.conftest import REPO
from tests.helpers.bot_process import run_cli
from tests.helpers.fuzz import fuzz, hostile_text

SHIPPED = tomllib.loads((REPO / "config.toml").read_text(encoding="utf-8"))
KEYS = sorted((section, key) for section, table in SHIPPED.items() if isinstance(table, dict) for key in table)
LONGEST_ERROR = 1000   # a few keys, what each must be and a short quote of what it is


def toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return json.dumps(value)   # JSON's escapes are TOML's (a lone surrogate makes it invalid TOML)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    return str(value)


SCALARS = st.one_of(st.booleans(), st.integers(-2**70, 2**70), st.integers(-5, 5), st.floats(),
                    hostile_text(), st.sampled_from(["", ".", "/", "~nobody/x", "/dev/null", "/proc/1", "-1",
                                                     "postgresql://u:secret@127.0.0.1:1/x", "sqlite:///",
                                                     "x" * 5000]))
VALUES = st.one_of(SCALARS, SCALARS, st.lists(SCALARS, max_size=3),
                   st.dictionaries(st.sampled_from(["a", "b"]), SCALARS, max_size=2))


@st.composite
def config_files(draw, folder: str) -> bytes:
    if draw(st.integers(0, 9)) == 0:
        return draw(st.one_of(st.binary(max_size=100), hostile_text().map(lambda t: t.encode("utf-8", "replace"))))
    tables: dict[str, dict[str, str]] = {"bot": {"data_dir": json.dumps(folder)}}
    for section, key in draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=3)):
        tables.setdefault(section, {})[key] = toml_value(draw(VALUES))
    if draw(st.integers(0, 4)) == 0:
        tables.setdefault(draw(st.sampled_from(["bot", "memory", "nosuch"])), {})[draw(hostile_text(8, False))
                                                                                 or "x"] = "1"
    lines = [f"[{s}]\n" + "".join(f"{json.dumps(k)} = {v}\n" for k, v in t.items()) for s, t in tables.items()]
    if draw(st.integers(0, 9)) == 0:   # a key given twice
        lines.append('[bot]\ndata_dir = "again"\n')
    return "".join(lines).encode(draw(st.sampled_from(["utf-8", "utf-8", "utf-16"])), errors="surrogatepass")


def start_checks(path):
    config = load_config(path)
    check_storage(config)
    check_model(config.embedder.model)
    return config


@fuzz(150)
@given(data=st.data())
@example(data=b'[bot]\ndata_dir = "' + b"d" * 100_000 + b'"\n')
@example(data=b'[memory]\nroute_threshold = nan\n')
@example(data=b'[jobs]\nmax_concurrent = 1180591620717411303424\n')
@example(data=b'[database]\npath = "a\\u0000b"\n')
def test_any_config_gives_a_configuration_or_one_short_line(tmp_path, data):
    content = data if isinstance(data, bytes) else data.draw(config_files(str(tmp_path / "data")), label="config")
    path = tmp_path / "config.toml"
    path.write_bytes(content)
    try:
        start_checks(path)
    except ConfigError as err:
        text = str(err)
        assert "\n" not in text and 0 < len(text) <= LONGEST_ERROR, text[:1500]
        assert "secret" not in text   # a database URL's password never shows


def test_the_command_line_says_error_in_one_line_and_exits_2(tmp_path):
    (tmp_path / "config.toml").write_bytes(b'[bot]\ndata_dir = "' + b"d" * 100_000 + b'"\n')
    out = run_cli(tmp_path, "db", "current")
    assert out.returncode == 2, (out.returncode, out.stdout[-500:], out.stderr[-2000:])
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and len(lines[0]) <= LONGEST_ERROR, out.stderr[:1500]
