"""Step 2's graph building without an LLM: what an entity's summary keeps."""
from __future__ import annotations

from engine.sim.graph.step import SUMMARY_CHARS, ExtractedEntity, Extraction, build_graph, collect_nodes
from engine.sim.ontology import normalise


def _entities(summaries: dict[str, list[str]]):
    extractions = [(i, Extraction(entities=[ExtractedEntity(name=name, type="Person", summary=said[i])
                                            for name, said in summaries.items() if i < len(said)]))
                   for i in range(max(len(s) for s in summaries.values()))]
    ontology = normalise(None)
    entities, _, _ = build_graph(extractions, ontology, collect_nodes(extractions, ontology), None, 0.86)
    return {e.name: e.summary for e in entities}


def test_a_summary_is_cut_at_a_word_within_the_designs_300_characters():
    chunk_says = [f"In part {i} Teresa Okafor speaks for the dockers about the harbour toll." for i in range(12)]
    got = _entities({"Teresa Okafor": chunk_says, "James Brennan": ["James Brennan is the mayor."]})
    long_one = got["Teresa Okafor"]
    assert SUMMARY_CHARS == 300
    assert long_one.startswith(chunk_says[0] + " " + chunk_says[1]) and long_one.endswith("…")
    assert 250 < len(long_one) <= 301 and not long_one[:-1].endswith(" ")
    assert chunk_says[-1] not in long_one          # 12 sentences of about 70 characters do not fit
    assert got["James Brennan"] == "James Brennan is the mayor."   # a short one is kept whole
