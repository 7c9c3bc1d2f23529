import pytest

from engine.config import CALIBRATED, E5_MODEL, MINILM_MODEL, ConfigError, MemorySection, load_config, parse_config


def test_defaults_without_a_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = load_config()
    assert cfg.jobs.max_concurrent == 2
    assert cfg.db_path == tmp_path / "data" / "bot.sqlite3"


def test_shipped_config_toml_is_valid_and_matches_defaults():
    from tests.conftest import REPO
    shipped = load_config(REPO / "config.toml")
    defaults = parse_config({})
    # the shipped file documents every key with its default value
    assert shipped.model_dump(exclude={"source"}) == defaults.model_dump(exclude={"source"})


def test_bad_value_names_the_key(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("[jobs]\nmax_concurrent = 0\n")
    with pytest.raises(ConfigError, match=r"jobs\.max_concurrent") as err:
        load_config(path)
    assert "0" in str(err.value)


def test_wrong_type_and_unknown_key(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[bot]\nlog_level = "LOUD"\n[jobs]\nmax_concurent = 3\n')
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert "bot.log_level" in str(err.value)
    assert "jobs.max_concurent: unknown key" in str(err.value)


def test_invalid_toml_and_missing_file(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("[bot\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(path)
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.toml")


def test_relative_paths_resolve_against_the_config_file(tmp_path):
    (tmp_path / "sub").mkdir()
    path = tmp_path / "sub" / "c.toml"
    path.write_text('[database]\npath = "db/x.sqlite3"\n')
    assert load_config(path).db_path == tmp_path / "sub" / "db" / "x.sqlite3"


def test_the_discord_admin_role_is_an_id_not_a_name(tmp_path):
    """A role name would match any role so named, made by anyone who may manage roles, in any server."""
    assert parse_config({"discord": {"admin_role": " 1234567890 "}}).discord.admin_role == "1234567890"
    with pytest.raises(ConfigError, match="discord.admin_role: .*must be a role id, not a name"):
        parse_config({"discord": {"admin_role": "botadmin"}})


def test_switching_the_model_switches_its_thresholds():
    e5 = parse_config({})
    minilm = parse_config({"embedder": {"model": MINILM_MODEL}})
    assert e5.embedder.model == E5_MODEL
    for cfg, model in ((e5, E5_MODEL), (minilm, MINILM_MODEL)):
        for key, value in CALIBRATED[model]["memory"].items():
            assert getattr(cfg.memory, key) == value
        assert cfg.simulation.entity_merge_similarity == CALIBRATED[model]["simulation"]["entity_merge_similarity"]
    assert e5.memory.recall_floor != minilm.memory.recall_floor
    assert e5.memory.routing_centre != minilm.memory.routing_centre
    pinned = parse_config({"embedder": {"model": MINILM_MODEL}, "memory": {"base_threshold": 0.5}})
    assert pinned.memory.base_threshold == 0.5 and pinned.memory.merge_threshold == minilm.memory.merge_threshold
    assert MemorySection().base_threshold == CALIBRATED[E5_MODEL]["memory"]["base_threshold"]
