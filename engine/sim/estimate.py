"""What a simulation will cost before it starts: LLM calls, tokens and, with prices, dollars.

The counts come from the code the steps run, not from separate numbers:

- ontology: one call whose prompt is ``ontology.messages`` over the documents;
- graph: one extraction call per chunk of ``graph.chunking.chunk_documents`` (the same chunks);
- environment: ``environment.personas.batch_members`` persona calls plus one event-plan call;
- run: for each round and platform, the agents the schedule makes active
  (``run.schedule.activity_chance`` on the round's hour of ``activity_by_hour``, the hours a persona
  is awake in from ``environment.step.active_hours``, ``run.schedule.steps_when_active``), for a typical
  persona; each step's prompt grows with the steps the agent remembers
  (``agent_memory_rounds``);
- stance (with ``track_stances``): per round and platform, one call per ``stance_batch`` of the
  agents the same schedule makes active, each shown with what it did in its steps
  (``stance.prompt``); counted within the run step's usage, shown apart in ``describe``;
- report: an outline, per section a few tool-calling turns, one query split, one choice of
  interviewees and the agents the interview tool asks by default, then a summary;
- brief (a simulation started without a document, its brief drafted by the LLM): the one call
  ``seed.draft.messages`` makes, with the answer it gave (the brief is drafted before the estimate
  is shown, and it is part of what the simulation costs).

An ensemble (``sizes.runs`` runs) counts steps 1-3 and the report once, and the run and its
stances once per run: its runs share the prepared environment and each costs what one run does.

``report_question`` is what one question to the report agent costs (report chat: not part of a
simulation's estimate, since it is asked later or never; /report's help shows it).

What the model will write, the size of the ontology it will propose and the personas it will
invent are unknown before the run: those are the constants below, measured on runs against a
fake endpoint that reports about 4 characters per token (tests/engine/sim/test_estimate.py checks the
whole estimate against such runs of three sizes, within 30%).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from engine import language
from engine.config import Config
from engine.i18n import _, number
from engine.sim import ontology
from engine.sim.environment import personas
from engine.sim.environment.sizing import Sizes
from engine.sim.environment.step import EVENTS_SYSTEM, active_hours, time_config
from engine.sim.graph.chunking import chunk_documents
from engine.sim.graph.step import extraction_prompt
from engine.sim.report.tools import PLAN_ROSTER, PLAN_SYSTEM, InterviewAgentsArgs
from engine.sim.run.schedule import activity_chance, expected_steps_when_active
from engine.sim.seed import draft
from engine.sim.stance import prompt as stance_prompt
from engine.words import plural

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
INTERVIEW_ROSTER_LINE_TOKENS = 55  # an agent's line where the interviewees are chosen
INTERVIEW_PICK_TOKENS = 45        # one choice in the answer: username, reason and question
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
    steps: dict[str, tuple[int, int]] = field(default_factory=dict)   # step -> (calls, tokens), all runs
    runs: int = 1

    def describe(self) -> str:
        """The estimate in the current language: "about 1,200 LLM calls and 3,400,000 tokens, ≈ $2.10"."""
        cost = f"≈ ${self.usd:.2f}" if self.usd is not None else _("cost unknown (no price for the model)")
        parts = []
        if (brief := self.steps.get("brief")) and brief[0]:
            parts.append(_("the brief: {calls}, {tokens}, already spent",
                           calls=plural(brief[0], "{n} call", "{n} calls"),
                           tokens=plural(brief[1], "{n} token", "{n} tokens")))
        if (stance := self.steps.get("stance")) and stance[0]:
            parts.append(_("beliefs per round: {calls} calls, {tokens} tokens", calls=number(stance[0]),
                           tokens=number(stance[1])))
        details = f" ({'; '.join(parts)})" if parts else ""
        runs = ""
        if self.runs > 1:
            calls, tokens = self.steps["run"]
            runs = _(" for {runs} runs (each run about {calls} calls and {tokens} tokens; steps 1-3 and the report "
                     "once)", runs=number(self.runs), calls=number(calls // self.runs),
                     tokens=number(tokens // self.runs))
        return _("about {calls} LLM calls and {tokens} tokens{runs}{details}, {cost}", calls=number(self.calls),
                 tokens=number(self.tokens), runs=runs, details=details, cost=cost)


def _tokens(text_chars: int) -> int:
    return text_chars // CHARS_PER_TOKEN


def _ontology_step(config: Config, documents: list, requirement: str) -> tuple[int, int]:
    prompt = ontology.messages(documents, requirement, config.simulation.ontology_input_chars, language.DEFAULT)
    return 1, _tokens(sum(len(m["content"]) for m in prompt)) + STRUCTURED_OVERHEAD_TOKENS + ONTOLOGY_ANSWER_TOKENS


def _graph_step(config: Config, documents: list) -> tuple[int, int]:
    sim = config.simulation
    chunks = chunk_documents([(d.name, d.text) for d in documents], sim.chunk_chars, sim.chunk_overlap)
    system = _tokens(len(extraction_prompt(ontology.normalise(None), language.DEFAULT))) + ONTOLOGY_PROMPT_EXTRA_TOKENS
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
    # the interviewees, their reasons and questions chosen in one call (report.tools: PLAN_SYSTEM)
    choice = (_tokens(len(PLAN_SYSTEM)) + STRUCTURED_OVERHEAD_TOKENS
              + min(agents, PLAN_ROSTER) * INTERVIEW_ROSTER_LINE_TOKENS + interviews * INTERVIEW_PICK_TOKENS)
    per_section += REPORT_SMALL_CALL_TOKENS + choice + interviews * INTERVIEW_TOKENS
    calls = 2 + sections * (turns + 2 + interviews)
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


def brief_call(requirement: str, answer_chars: int) -> tuple[int, int]:
    """(calls, tokens) of drafting a brief from ``requirement`` that came out ``answer_chars`` long."""
    prompt = draft.messages(requirement)
    return 1, _tokens(sum(len(m["content"]) for m in prompt) + answer_chars) + STRUCTURED_OVERHEAD_TOKENS


def estimate(config: Config, documents: list, requirement: str, sizes: Sizes,
             brief: tuple[int, int] | None = None) -> Estimate:
    """The estimate for ``documents`` (engine.documents.Document: name, text) and resolved sizes;
    ``brief``: the (calls, tokens) of drafting the brief the documents are (``brief_call``)."""
    def per_run(counts: tuple[int, int]) -> tuple[int, int]:
        return counts[0] * sizes.runs, counts[1] * sizes.runs

    steps = {**({"brief": brief} if brief else {}),
             "ontology": _ontology_step(config, documents, requirement),
             "graph": _graph_step(config, documents),
             "environment": _environment_step(config, sizes.agents),
             "run": per_run(_run_step(config, sizes.agents, sizes.rounds)),
             "stance": per_run(_stance_step(config, sizes.agents, sizes.rounds, requirement)),
             "report": _report_step(config, sizes.agents)}
    calls = sum(c for c, _ in steps.values())
    tokens = sum(t for _, t in steps.values())
    price = config.llm.prices.get(config.llm.model)
    usd = None
    if price is not None:
        out = tokens * COMPLETION_SHARE
        usd = ((tokens - out) * price.input + out * price.output) / 1_000_000
    return Estimate(calls, tokens, usd, steps, sizes.runs)

