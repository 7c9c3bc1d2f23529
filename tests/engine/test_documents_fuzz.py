"""Documents, fuzzed: valid PDF, .docx, HTML and text files cut short or with bytes overwritten,
and bytes of no format at all under every supported extension (a file whose extension lies). The
reader gives the text or one short DocumentError line that names the file; nothing else escapes
it. The hostile documents named one by one (a zip bomb as .docx, a PDF of 5,000 pages, HTML
nested 100,000 deep, a zip sent as .txt) are tests/engine/test_docparse.py's, through the
sandbox with its time and memory limits."""
from __future__ import annotations

import functools
import io

import docx
from hypothesis import example, given, strategies as st

from engine.config import DocumentsSection
from engine.documents import DocumentError, load_document
from tests.engine.test_documents import pdf_bytes
from tests.helpers.fuzz import fuzz, hostile_text

LIMITS = DocumentsSection()
LONGEST_ERROR = 400
EXTENSIONS = [".pdf", ".docx", ".html", ".htm", ".txt", ".md"]


@functools.cache
def valid(ext: str) -> bytes:
    if ext == ".pdf":
        return pdf_bytes(["The council voted on Monday.", "The harbour closed."])
    if ext == ".docx":
        out = io.BytesIO()
        document = docx.Document()
        document.add_paragraph("Workers gathered at the plant.")
        document.save(out)
        return out.getvalue()
    if ext in (".html", ".htm"):
        return b"<html><body><p>Union <b>strikes</b></p><script>x()</script></body></html>"
    return "The mayor spoke. Größe.".encode()


@st.composite
def documents(draw) -> tuple[str, bytes]:
    ext = draw(st.sampled_from(EXTENSIONS))
    how = draw(st.sampled_from(["cut", "overwrite", "other type", "noise", "text"]))
    if how == "noise":
        return ext, draw(st.binary(max_size=300))
    if how == "text":
        return ext, draw(hostile_text()).encode("utf-8", "surrogatepass")
    data = bytearray(valid(draw(st.sampled_from(EXTENSIONS)) if how == "other type" else valid(ext)))
    if how == "cut":
        return ext, bytes(data[:draw(st.integers(0, len(data)))])
    for _ in range(draw(st.integers(1, 8))):
        i = draw(st.integers(0, len(data) - 1))
        data[i:i + 4] = draw(st.binary(min_size=1, max_size=4))
    return ext, bytes(data)


@fuzz(120)
@given(document=documents())
@example(document=(".txt", b"\xff\xfe" + "\ud800".encode("utf-16-le", "surrogatepass") * 10))
@example(document=(".html", b"<p>" + b"\x00" * 1000))
@example(document=(".md", b"\x00\x01\x02" * 1000))
def test_any_document_gives_its_text_or_one_short_line(tmp_path, document):
    ext, data = document
    path = tmp_path / f"doc{ext}"
    path.write_bytes(data)
    try:
        result = load_document(path, LIMITS)
    except DocumentError as err:
        text = str(err)
        assert "\n" not in text and 0 < len(text) <= LONGEST_ERROR, text[:600]
        assert path.name in text, text
        return
    assert isinstance(result.text, str) and result.text.strip()
    result.text.encode("utf-8")   # storable, and sendable to the LLM as JSON
