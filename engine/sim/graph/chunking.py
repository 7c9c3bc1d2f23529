"""Split document text into overlapping chunks that end at sentence boundaries where possible."""
from __future__ import annotations

import re
from dataclasses import dataclass

# A sentence ends at . ! ? (or their CJK forms) followed by space or a quote, or at a blank line.
_SENTENCE_END = re.compile(r"(?:[.!?。！？][\"'”’)\]]*(?=\s)|[。！？]|\n\s*\n)")


@dataclass(frozen=True)
class Chunk:
    index: int
    document: str
    text: str


def split_text(text: str, size: int = 500, overlap: int = 50) -> list[str]:
    """Chunks of at most ``size`` characters; each cut at the last sentence end in its second
    half when there is one, and each starting ``overlap`` characters before the previous cut."""
    text = text.strip()
    if size <= overlap:
        raise ValueError("chunk size must be larger than the overlap")
    chunks: list[str] = []
    start = 0
    while start < len(text):
        end = min(start + size, len(text))
        if end < len(text):
            window = text[start + size // 2:end]
            cuts = [m.end() for m in _SENTENCE_END.finditer(window)]
            if cuts:
                end = start + size // 2 + cuts[-1]
            else:  # no sentence end: cut at a word boundary
                space = text.rfind(" ", start + size // 2, end)
                end = space if space > 0 else end
        piece = text[start:end].strip()
        if piece:
            chunks.append(piece)
        if end >= len(text):
            break
        start = max(end - overlap, start + 1)
        # do not begin in the middle of a word
        while 0 < start < end and not text[start - 1].isspace() and text[start - 1] not in ".!?":
            start += 1
    return chunks


def chunk_documents(documents: list[tuple[str, str]], size: int = 500, overlap: int = 50) -> list[Chunk]:
    """(name, text) pairs -> numbered chunks across all documents."""
    out: list[Chunk] = []
    for name, text in documents:
        for piece in split_text(text, size, overlap):
            out.append(Chunk(len(out), name, piece))
    return out
