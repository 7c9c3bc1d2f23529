"""Configuration: one TOML file, validated at start-up; secrets only from the environment.

Every key has a default here and is documented in config.toml. A bad value raises
ConfigError naming the key (for example ``memory.base_threshold``).
"""
from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator


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


class DiscordSection(Section):
    token_env: str = "DISCORD_TOKEN"
    message_content: bool = False     # privileged intent: ingest plain messages into memory
    admin_role: str = ""              # role name or id allowed admin commands (besides Manage Server)
    sync_guild: str = ""              # `discord sync` target guild id; empty: global commands
    owner_ids: list[str] = []         # users allowed the !sync owner command; empty: the app owner
    max_upload_mb: float = Field(10.0, gt=0)
    max_download_mb: float = Field(25.0, gt=0)
    api_base: str = ""                # REST base override (a local fake in tests)
    gateway_url: str = ""             # gateway override (a local fake in tests)


class TelegramSection(Section):
    token_env: str = "TELEGRAM_BOT_TOKEN"
    base_url: str = ""                # e.g. a local Bot API server: http://127.0.0.1:8081/bot
    base_file_url: str = ""           # e.g. http://127.0.0.1:8081/file/bot
    max_download_mb: float = Field(20.0, gt=0)
    max_upload_mb: float = Field(50.0, gt=0)
    poll_timeout_s: float = Field(10.0, ge=0)
    overall_max_rate: float = Field(30.0, gt=0)   # messages per second over all chats
    group_max_rate: float = Field(20.0, gt=0)     # messages per minute into one group
    max_retries: int = Field(2, ge=0, le=10)      # retries after a flood-wait answer (429 only)


class SchedulerSection(Section):
    timezone: str = "UTC"
    merge_time: str = Field("04:00", pattern=r"^([01]\d|2[0-3]):[0-5]\d$")
    digest_time: str = Field("09:00", pattern=r"^([01]\d|2[0-3]):[0-5]\d$")
    missed: Literal["skip", "run_once"] = "run_once"
    misfire_grace_s: int = Field(3600, ge=1)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {value!r} (use an IANA name like Europe/Berlin)") from None
        return value


class Config(Section):
    bot: BotSection = BotSection()
    database: DatabaseSection = DatabaseSection()
    jobs: JobsSection = JobsSection()
    console: ConsoleSection = ConsoleSection()
    discord: DiscordSection = DiscordSection()
    telegram: TelegramSection = TelegramSection()
    scheduler: SchedulerSection = SchedulerSection()

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
