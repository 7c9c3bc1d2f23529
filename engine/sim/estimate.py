"""What a simulation will cost before it starts: LLM calls, tokens and, with prices, dollars.

The counts come from the code the steps run, not from separate numbers:

- ontology: one call whose prompt is ``ontology.messages`` over the documents;
- graph: one extraction call per chunk of ``chunking.chunk_documents`` (the same chunks);
- environment: ``personas.batch_members`` persona calls plus one event-plan call;
- run: for each round and platform, the agents the schedule makes active
  (``schedule.activity_chance`` on the round's hour of ``activity_by_hour``, the hours a persona
  is awake in from ``environment.active_hours``, ``schedule.steps_when_active``), for a typical
  persona; each step's prompt grows with the steps the agent remembers
  (``agent_memory_rounds``);
- stance (with ``track_stances``): per round and platform, one call per ``stance_batch`` of the
  agents the same schedule makes active, each shown with what it did in its steps
  (``stance_prompt``); counted within the run step's usage, shown apart in ``describe``;
- report: an outline, per section a few tool-calling turns, one query split and the agents the
  interview tool asks by default, then a summary.

``report_question`` is what one question to the report agent costs (report chat: not part of a
simulation's estimate, since it is asked later or never; /report's help shows it).

What the model will write, the size of the ontology it will propose and the personas it will
invent are unknown before the run: those are the constants below, measured on runs against a
fake endpoint that reports about 4 characters per token (tests/test_sim_estimate.py checks the
whole estimate against such runs of three sizes, within 30%).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from engine.config import Config
from engine.sim import ontology, personas, stance_prompt
from engine.sim.chunking import chunk_documents
from engine.sim.environment import EVENTS_SYSTEM, active_hours, time_config
from engine.sim.graph import extraction_prompt
from engine.sim.report.tools import InterviewAgentsArgs
from engine.sim.run.schedule import activity_chance, expected_steps_when_active
from engine.sim.sizing import Sizes

CHARS_PER_TOKEN = 4
COMPLETION_SHARE = 0.15           # of all tokens, what the model writes (for the price)
STRUCTURED_OVERHEAD_TOKENS = 60   # the answer's JSON keys and format hints per structured call
ONTOLOGY_ANSWER_TOKENS = 320      # types, attributes and relations the model proposes
ONTOLOGY_PROMPT_EXTRA_TOKENS = 200  # the proposed ontology's types and relations in every extraction prompt
EXTRACTION_ANSWER_RATIO = 5.0     # answer tokens per chunk token: entities, summaries, facts
PERSONA_LINE_TOKENS = 175         # an entity's line in a persona request: summary and facts
PERSONA_ANSWER_TOKENS = 110
EVENTS_LINE_TOKENS = 12           # an agent's line in the event-plan request
EVENTS_ANSWER_TOKENS = 200
# Typical personas (the ranges the persona prompt asks for): activity levels spread over 0-1,
# one agent in four at each level; one or two posts an hour; a round's delay before reacting.
TYPICAL_ACTIVITY_LEVELS = (0.2, 0.4, 0.6, 0.8)
TYPICAL_POSTS_PER_HOUR = 1.5
TYPICAL_DELAY_ROUNDS = 1
AGENT_STEP_TOKENS = 1_800         # tool schemas, persona and feed of one agent request
AGENT_MEMORY_TOKENS = 530         # added by each step the agent remembers
REPORT_TURNS = 3                  # a section: gather, follow up, write
REPORT_TURN_TOKENS = 1_000        # system, brief and tool schemas of one report turn
REPORT_TOOL_RESULT_TOKENS = 550   # one tool result carried into the next turns
REPORT_SMALL_CALL_TOKENS = 250    # outline, query split, summary
INTERVIEW_TOKENS = 300            # an agent's persona and memory, the question and its answer
# Stance requests (bench/stance_calls.py: about 34 tokens per classified agent, 186 per call)
STANCE_AGENT_TOKENS = 14          # an agent's header line in a stance request
STANCE_DEED_TOKENS = 12           # one thing it did, quoted
STANCE_ANSWER_TOKENS = 8          # its id and score in the answer
STANCE_SPEAKING_SHARE = 0.7       # of active agents, those whose steps said something (the rest carry)
CHAT_TURNS = 2                    # a question to the report agent: gather with the tools, then answer
CHAT_EXCHANGE_TOKENS = 350        # an earlier question and answer carried in a report chat prompt


@dataclass
class Estimate:
    calls: int
    tokens: int
    usd: float | None           # None when the model has no price in [llm.prices]
    steps: dict[str, tuple[int, int]] = field(default_factory=dict)   # step -> (calls, tokens)

    def describe(self) -> str:
        cost = f"≈ ${self.usd:.2f}" if self.usd is not None else "cost unknown (no price for the model)"
        beliefs = ""
        if (stance := self.steps.get("stance")) and stance[0]:
            beliefs = f" (beliefs per round: {stance[0]:,} calls, {stance[1]:,} tokens)"
        return f"about {self.calls:,} LLM calls and {self.tokens:,} tokens{beliefs}, {cost}"


def _tokens(text_chars: int) -> int:
    return text_chars // CHARS_PER_TOKEN


def _ontology_step(config: Config, documents: list, requirement: str) -> tuple[int, int]:
    prompt = ontology.messages(documents, requirement, config.simulation.ontology_input_chars)
    return 1, _tokens(sum(len(m["content"]) for m in prompt)) + STRUCTURED_OVERHEAD_TOKENS + ONTOLOGY_ANSWER_TOKENS


def _graph_step(config: Config, documents: list) -> tuple[int, int]:
    sim = config.simulation
    chunks = chunk_documents([(d.name, d.text) for d in documents], sim.chunk_chars, sim.chunk_overlap)
    system = _tokens(len(extraction_prompt(ontology.normalise(None)))) + ONTOLOGY_PROMPT_EXTRA_TOKENS
    tokens = 0
    for chunk in chunks:
        text = _tokens(len(chunk.text) + len(chunk.document))
        tokens += system + text + STRUCTURED_OVERHEAD_TOKENS + math.ceil(text * EXTRACTION_ANSWER_RATIO)
    return len(chunks), tokens


def _environment_step(config: Config, agents: int) -> tuple[int, int]:
    batches = personas.batch_members(agents, config.simulation.persona_batch)
    tokens = sum(_tokens(len(personas.SYSTEM)) + STRUCTURED_OVERHEAD_TOKENS
                 + len(b) * (PERSONA_LINE_TOKENS + PERSONA_ANSWER_TOKENS) for b in batches)
    tokens += (_tokens(len(EVENTS_SYSTEM)) + STRUCTURED_OVERHEAD_TOKENS + min(agents, 40) * EVENTS_LINE_TOKENS
               + EVENTS_ANSWER_TOKENS)
    return len(batches) + 1, tokens


def _run_step(config: Config, agents: int, rounds: int) -> tuple[int, int]:
    """Expected agent steps on both platforms, round by round, with the prompt growing as an
    agent's memory fills up to ``agent_memory_rounds`` steps."""
    sim = config.simulation
    time = time_config(sim, rounds)
    awake = set(active_hours(time.activity_by_hour))
    per_active = expected_steps_when_active(TYPICAL_POSTS_PER_HOUR, time.minutes_per_round,
                                            sim.max_steps_per_round)
    steps = tokens = 0.0
    share = agents / len(TYPICAL_ACTIVITY_LEVELS)
    for level in TYPICAL_ACTIVITY_LEVELS:
        remembered = 0.0   # steps one agent of this level has taken so far (on one platform)
        for round_no in range(TYPICAL_DELAY_ROUNDS, time.rounds):
            hour = time.hour_of_round(round_no)
            if hour not in awake:
                continue
            taken = activity_chance(level, time.activity_by_hour[hour]) * per_active
            memory = min(remembered + taken / 2, sim.agent_memory_rounds)
            steps += 2 * share * taken                         # two platforms
            tokens += 2 * share * taken * (AGENT_STEP_TOKENS + AGENT_MEMORY_TOKENS * memory)
            remembered += taken
    return math.ceil(steps), math.ceil(tokens)


def _stance_step(config: Config, agents: int, rounds: int, requirement: str) -> tuple[int, int]:
    """Stance classification after each round: the active agents of the run step's schedule in
    batches of ``stance_batch`` per platform and round (at least one call for a round in which
    an agent is likely active)."""
    sim = config.simulation
    if not sim.track_stances:
        return 0, 0
    time = time_config(sim, rounds)
    awake = set(active_hours(time.activity_by_hour))
    per_active = expected_steps_when_active(TYPICAL_POSTS_PER_HOUR, time.minutes_per_round,
                                            sim.max_steps_per_round)
    share = agents / len(TYPICAL_ACTIVITY_LEVELS)
    system = _tokens(len(stance_prompt.SYSTEM) + len(requirement)) + STRUCTURED_OVERHEAD_TOKENS
    per_agent = (STANCE_AGENT_TOKENS + STANCE_ANSWER_TOKENS
                 + min(per_active, stance_prompt.DEEDS_PER_AGENT) * STANCE_DEED_TOKENS)
    calls = tokens = 0.0
    for round_no in range(TYPICAL_DELAY_ROUNDS, time.rounds):
        hour = time.hour_of_round(round_no)
        if hour not in awake:
            continue
        active = STANCE_SPEAKING_SHARE * share * sum(activity_chance(level, time.activity_by_hour[hour])
                                                     for level in TYPICAL_ACTIVITY_LEVELS)
        batches = max(active / sim.stance_batch, min(1.0, active))
        calls += 2 * batches                               # two platforms
        tokens += 2 * (batches * system + active * per_agent)
    return math.ceil(calls), math.ceil(tokens)


def _report_step(config: Config, agents: int) -> tuple[int, int]:
    report = config.report
    sections = math.ceil((2 + report.max_sections) / 2)    # the outline asks for 2..max_sections
    turns = min(REPORT_TURNS, report.tool_turns + 1)
    interviews = min(agents, InterviewAgentsArgs.model_fields["count"].default)
    results = min(REPORT_TOOL_RESULT_TOKENS, _tokens(report.tool_result_chars))
    # turn k carries the results of the tools called in the turns before it (about 1.5 per turn)
    per_section = sum(REPORT_TURN_TOKENS + math.ceil(1.5 * k) * results for k in range(turns))
    per_section += REPORT_SMALL_CALL_TOKENS + interviews * INTERVIEW_TOKENS
    calls = 2 + sections * (turns + 1 + interviews)
    return calls, 2 * REPORT_SMALL_CALL_TOKENS + sections * per_section


def report_question(config: Config) -> tuple[int, int]:
    """(calls, tokens) of one question to the report agent with a full history: its turns, each
    carrying the report and the channel's earlier questions, and one interview or query split."""
    report = config.report
    turns = min(CHAT_TURNS, report.chat_max_tool_turns + 1)
    results = min(REPORT_TOOL_RESULT_TOKENS, _tokens(report.tool_result_chars))
    context = _tokens(report.chat_report_chars) + report.chat_history * CHAT_EXCHANGE_TOKENS
    tokens = sum(REPORT_TURN_TOKENS + context + math.ceil(1.5 * k) * results for k in range(turns))
    return turns + 1, tokens + INTERVIEW_TOKENS


def estimate(config: Config, documents: list, requirement: str, sizes: Sizes) -> Estimate:
    """The estimate for ``documents`` (engine.documents.Document: name, text) and resolved sizes."""
    steps = {"ontology": _ontology_step(config, documents, requirement),
             "graph": _graph_step(config, documents),
             "environment": _environment_step(config, sizes.agents),
             "run": _run_step(config, sizes.agents, sizes.rounds),
             "stance": _stance_step(config, sizes.agents, sizes.rounds, requirement),
             "report": _report_step(config, sizes.agents)}
    calls = sum(c for c, _ in steps.values())
    tokens = sum(t for _, t in steps.values())
    price = config.llm.prices.get(config.llm.model)
    usd = None
    if price is not None:
        out = tokens * COMPLETION_SHARE
        usd = ((tokens - out) * price.input + out * price.output) / 1_000_000
    return Estimate(calls, tokens, usd, steps)

