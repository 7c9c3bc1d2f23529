"""What a simulation will cost before it starts: LLM calls, tokens and, with prices, dollars.

The per-step figures come from bench/bench_pipeline_llm.py and bench/bench_run.py: one
extraction call per chunk of about 980 tokens, about 260 tokens per persona in calls of 15,
one request per active agent-step, and a report of a few dozen tool-calling turns.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from engine.config import Config

TOKENS_PER_CHUNK = 980          # chunk text + the ontology in the extraction prompt
ONTOLOGY_BASE_TOKENS = 1_300
PERSONA_TOKENS = 260
PERSONA_CALL_TOKENS = 1_500
AGENT_STEP_TOKENS = 1_800       # persona, feed and memory of one agent's request
REPORT_CALLS_PER_SECTION = 6
REPORT_CALL_TOKENS = 4_000
COMPLETION_SHARE = 0.15         # of all tokens, what the model writes


@dataclass
class Estimate:
    calls: int
    tokens: int
    usd: float | None           # None when the model has no price in [llm.prices]

    def describe(self) -> str:
        cost = f"≈ ${self.usd:.2f}" if self.usd is not None else "cost unknown (no price for the model)"
        return f"about {self.calls:,} LLM calls and {self.tokens:,} tokens, {cost}"


def estimate(config: Config, doc_chars: int, agents: int, rounds: int) -> Estimate:
    sim = config.simulation
    stride = max(1, sim.chunk_chars - sim.chunk_overlap)
    chunks = max(1, math.ceil(doc_chars / stride))
    ontology = ONTOLOGY_BASE_TOKENS + min(doc_chars, sim.ontology_input_chars) // 4
    persona_calls = math.ceil(agents / sim.persona_batch)
    activity = sum(sim.activity_by_hour) / 24           # average multiplier of the time-zone profile
    agent_steps = math.ceil(agents * rounds * 2 * min(1.0, 0.5 * activity))  # two platforms
    report_calls = config.report.max_sections * REPORT_CALLS_PER_SECTION
    calls = 1 + chunks + persona_calls + 1 + agent_steps + report_calls
    tokens = (ontology + chunks * TOKENS_PER_CHUNK + agents * PERSONA_TOKENS
              + (persona_calls + 1) * PERSONA_CALL_TOKENS + agent_steps * AGENT_STEP_TOKENS
              + report_calls * REPORT_CALL_TOKENS)
    price = config.llm.prices.get(config.llm.model)
    usd = None
    if price is not None:
        out = tokens * COMPLETION_SHARE
        usd = ((tokens - out) * price.input + out * price.output) / 1_000_000
    return Estimate(calls, tokens, usd)
