"""Documents: every supported format, and one clear error per bad case (files made here)."""
from __future__ import annotations

import io
import re
import zipfile

import docx
import pytest
from pypdf import PdfWriter

from engine.config import DocumentsSection
from engine.documents import DocumentError, load_document, read_documents

LIMITS = DocumentsSection()


def pdf_bytes(text_pages: list[str] | None = None, password: str | None = None, blank_pages: int = 0) -> bytes:
    """A PDF with real text on each page (hand-written content streams) or blank pages."""
    writer = PdfWriter()
    for _ in range(blank_pages):
        writer.add_blank_page(200, 200)
    if text_pages:
        from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject
        for text in text_pages:
            page = writer.add_blank_page(400, 400)
            font = DictionaryObject({NameObject("/Type"): NameObject("/Font"),
                                     NameObject("/Subtype"): NameObject("/Type1"),
                                     NameObject("/BaseFont"): NameObject("/Helvetica")})
            page[NameObject("/Resources")] = DictionaryObject({NameObject("/Font"): DictionaryObject(
                {NameObject("/F1"): writer._add_object(font)})})
            stream = DecodedStreamObject()
            stream.set_data(f"BT /F1 12 Tf 20 300 Td ({text}) Tj ET".encode())
            page[NameObject("/Contents")] = writer._add_object(stream)
    if password:
        writer.encrypt(password, algorithm="RC4-128")
    buf = io.BytesIO()
    writer.write(buf)
    return buf.getvalue()


def test_reads_every_format(tmp_path):
    (tmp_path / "a.txt").write_bytes("Größe und Maß: café in München.".encode("cp1252"))
    (tmp_path / "b.md").write_text("# Title\n\nThe mayor spoke.", encoding="utf-8")
    (tmp_path / "c.html").write_text("<html><script>var x=1;</script><body><p>Union strikes</p></body></html>")
    (tmp_path / "d.pdf").write_bytes(pdf_bytes(["The council voted on Monday."]))
    d = docx.Document()
    d.add_paragraph("Workers gathered at the plant.")
    d.save(tmp_path / "e.docx")
    texts = {p: load_document(tmp_path / p, LIMITS).text for p in ("a.txt", "b.md", "c.html", "d.pdf", "e.docx")}
    assert "München" in texts["a.txt"] and "Maß" in texts["a.txt"]
    assert "mayor" in texts["b.md"]
    assert texts["c.html"] == "Union strikes"
    assert "council voted" in texts["d.pdf"]
    assert "Workers gathered" in texts["e.docx"]


@pytest.mark.parametrize("name,make,expected", [
    ("x.exe", lambda p: p.write_bytes(b"MZ..."), "unsupported file type .exe"),
    ("empty.txt", lambda p: p.write_bytes(b""), "the file is empty"),
    ("blank.txt", lambda p: p.write_text("  \n\n \t"), "contains no text"),
    ("scan.pdf", lambda p: p.write_bytes(pdf_bytes(blank_pages=2)), "no text (a scanned PDF"),
    ("broken.pdf", lambda p: p.write_bytes(b"%PDF-1.4\n garbage garbage"), "PDF is corrupt"),
    ("locked.pdf", lambda p: p.write_bytes(pdf_bytes(["secret plans"], password="pw")), "PDF is encrypted"),
    ("broken.docx", lambda p: p.write_bytes(b"PK\x03\x04 not really a zip"), "corrupt (not a valid .docx)"),
    ("locked.docx", lambda p: p.write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 600), "encrypted"),
])
def test_bad_files_get_one_clear_error(tmp_path, name, make, expected):
    path = tmp_path / name
    make(path)
    with pytest.raises(DocumentError, match=re.escape(expected)) as info:
        load_document(path, LIMITS)
    assert str(info.value).startswith(name) or "unsupported" in str(info.value)


def test_docx_zip_bomb_is_refused_before_opening(tmp_path):
    path = tmp_path / "bomb.docx"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("[Content_Types].xml", "<Types/>")
        zf.writestr("word/document.xml", b"\0" * (30 * 1024 * 1024))  # ~30 KiB compressed
    assert path.stat().st_size < 200_000
    with pytest.raises(DocumentError, match="zip bomb"):
        load_document(path, LIMITS)
    with pytest.raises(DocumentError, match="would unpack to"):
        load_document(path, DocumentsSection(max_unzipped_bytes=10 * 1024 * 1024))


def test_size_limits(tmp_path):
    big = tmp_path / "big.txt"
    big.write_text("word " * 3000)
    with pytest.raises(DocumentError, match="too large"):
        load_document(big, DocumentsSection(max_bytes=1000))
    with pytest.raises(DocumentError, match="too long"):
        load_document(big, DocumentsSection(max_chars=1000))
    pages = tmp_path / "pages.pdf"
    pages.write_bytes(pdf_bytes(["page"] * 4))
    with pytest.raises(DocumentError, match="too many pages \\(4"):
        load_document(pages, DocumentsSection(max_pages=3))


async def test_several_documents_and_their_limits(tmp_path):
    paths = []
    for i in range(3):
        paths.append(tmp_path / f"d{i}.txt")
        paths[-1].write_text(f"Document number {i}. " * 20)
    docs = await read_documents(paths, LIMITS)
    assert [d.name for d in docs] == ["d0.txt", "d1.txt", "d2.txt"]
    with pytest.raises(DocumentError, match="too many documents"):
        await read_documents(paths, DocumentsSection(max_files=2))
    with pytest.raises(DocumentError, match="too long together"):
        await read_documents(paths, DocumentsSection(max_chars=1000))
    # a bad file anywhere is reported before any parsing
    (tmp_path / "z.rtf").write_text("{\\rtf1}")
    with pytest.raises(DocumentError, match="z.rtf: unsupported"):
        await read_documents([*paths, tmp_path / "z.rtf"], LIMITS)


async def test_a_refusal_reads_in_the_current_language_also_from_the_sandbox(tmp_path):
    from engine.i18n import using

    disguised = tmp_path / "notes.txt"
    disguised.write_bytes(pdf_bytes(blank_pages=1))   # caught inside the sandbox: its refusal crosses a process
    empty = tmp_path / "empty.md"
    empty.write_bytes(b"")                              # caught before any sandbox starts
    for language, disguised_line, empty_line in (
            ("pt_BR", "notes.txt: o arquivo é um documento PDF, não .txt; envie-o com a extensão verdadeira",
             "empty.md: o arquivo está vazio"),
            ("th", "notes.txt: ไฟล์นี้เป็นเอกสาร PDF ไม่ใช่ .txt โปรดส่งด้วยนามสกุลที่ถูกต้อง", "empty.md: ไฟล์ว่างเปล่า"),
            ("en", "notes.txt: the file is a PDF document, not .txt; send it with its real extension",
             "empty.md: the file is empty")):
        with using(language):
            with pytest.raises(DocumentError) as refused:
                await read_documents([disguised], LIMITS)
            assert str(refused.value) == disguised_line
            with pytest.raises(DocumentError) as refused:
                await read_documents([empty], LIMITS)
            assert str(refused.value) == empty_line
