"""The rules steps 1-3 enforce on whatever the LLM returns, and the chunker."""
from __future__ import annotations

from engine.sim.environment.step import active_hours, usernames
from engine.sim.graph.chunking import chunk_documents, split_text
from engine.sim.graph.store import normalise_name
from engine.sim.ontology import Attribute, EntityType, Ontology, RelationType, normalise


def test_ontology_is_normalised_whatever_the_llm_says():
    draft = Ontology(entity_types=[
        EntityType(name=f"kind {i}", attributes=[Attribute(name=n) for n in ("summary", "createdAt", "a", "b")])
        for i in range(12)] + [
        EntityType(name="Organization", description="LLM's org", attributes=[]),
        EntityType(name="Topic"), EntityType(name="Kind 1")],
        relation_types=[RelationType(name=f"rel {i}", source_types=["KIND 0", "Ghost"], target_types=[])
                        for i in range(14)] + [RelationType(name="Rel 0")])
    onto = normalise(draft)
    names = onto.type_names
    assert len(names) == 10 and names[-2:] == ["Person", "Organization"] and names[0] == "Kind0"
    assert "Topic" not in names and names.count("Kind1") == 1
    assert onto.entity_types[-1].description == "LLM's org"
    attrs = [a.name for a in onto.entity_types[0].attributes]
    assert attrs == ["summary_value", "created_at_value", "a"]
    assert all(1 <= len(t.attributes) <= 3 for t in onto.entity_types)
    assert len(onto.relation_types) == 10 and onto.relation_types[0].name == "REL_0"
    assert onto.relation_types[0].source_types == ["Kind0"]
    assert onto.relation_types[0].target_types == ["Person", "Organization"]


def test_empty_or_missing_ontology_gets_the_fallback_types():
    onto = normalise(None)
    assert onto.type_names == ["Person", "Organization"]
    assert [r.name for r in onto.relation_types] == ["RELATES_TO"]


def test_chunks_cut_at_sentences_with_overlap():
    text = " ".join(f"Sentence {i} tells what the council decided about the harbour." for i in range(60))
    chunks = split_text(text, 500, 50)
    assert all(len(c) <= 500 for c in chunks)
    assert all(c.endswith(".") for c in chunks[:-1])
    for a, b in zip(chunks, chunks[1:]):
        assert a[-30:].split()[-1] in b[:80]  # the tail of one chunk opens the next
    numbered = chunk_documents([("a", text), ("b", "Short one.")])
    assert numbered[-1].document == "b" and numbered[-1].index == len(numbered) - 1


def test_names_and_usernames():
    assert normalise_name("Dr. Teresa  Okafor's") == "teresa okafor"
    assert normalise_name("The Valmora Herald") == "valmora herald"
    assert usernames(["Ana Kovac", "Ana  Kovac!", ""]) == ["ana_kovac", "ana_kovac2", "agent"]
    assert active_hours([0.0] * 8 + [1.0] * 16) == list(range(8, 24))
