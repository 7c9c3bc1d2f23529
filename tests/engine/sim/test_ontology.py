"""Step 1's prompt: how much of the documents the ontology step reads."""
from __future__ import annotations

from engine.config import parse_config
from engine.documents import Document
from engine.sim.ontology import messages


def _prompt(documents: list[Document]) -> str:
    limit = parse_config({}).simulation.ontology_input_chars
    return messages(documents, "How will the harbour react?", limit, "en")[1]["content"]


def _text(length: int, marks: dict[int, str]) -> str:
    text = list("word " * (length // 5))
    for at, mark in marks.items():
        text[at:at + len(mark)] = mark
    return "".join(text)


def test_the_ontology_step_reads_the_designs_50000_characters():
    doc = Document("long.txt", _text(60_000, {19_000: "EarlyActor", 45_000: "LateActor", 55_000: "TooLate"}))
    prompt = _prompt([doc])
    assert "EarlyActor" in prompt and "LateActor" in prompt   # past the 20,000 read before
    assert "TooLate" not in prompt and "[…]" in prompt


def test_several_documents_share_the_50000_characters():
    docs = [Document(f"d{i}.txt", _text(30_000, {22_000: f"Actor{i}", 27_000: f"Hidden{i}"})) for i in range(2)]
    prompt = _prompt(docs)
    assert all(f"Actor{i}" in prompt and f"Hidden{i}" not in prompt for i in range(2))
