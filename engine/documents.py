"""Read the documents a simulation starts from: .txt .md .pdf .docx .html.

Limits (bytes, pages, characters, files) come from the ``[documents]`` config section and
are checked before the expensive part of parsing. Every bad file gets one DocumentError
naming the file and the problem: unsupported, oversized, empty, corrupt, encrypted, or a
.docx whose zip would inflate suspiciously (zip bomb). Parsing runs off the event loop.
"""
from __future__ import annotations

import codecs
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

from engine.config import DocumentsSection
from engine.jobs import JobError
from engine.offload import run_cpu

SUPPORTED = (".txt", ".md", ".markdown", ".pdf", ".docx", ".html", ".htm")
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # encrypted Office files and legacy .doc


class DocumentError(JobError):
    """A document cannot be used; the message says which one and why. Resuming reads the same
    file again, so it cannot help."""

    resumable = False


@dataclass
class Document:
    name: str
    text: str
    pages: int = 1

    @property
    def chars(self) -> int:
        return len(self.text)


def _mib(n: int) -> str:
    return f"{n / 1024 / 1024:.1f} MiB"


def _clean(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    text = re.sub(r"[ \t\f\v]+", " ", text)
    text = re.sub(r" *\n *", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def check_document(path: Path, limits: DocumentsSection) -> None:
    """Cheap checks that need no parsing: exists, supported type, size, zip bomb."""
    name = path.name
    if path.is_dir():
        raise DocumentError(f"{path} is a folder; name the documents inside it")
    if not path.is_file():
        raise DocumentError(f"{path}: no such file")
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED:
        raise DocumentError(f"{name}: unsupported file type {suffix or '(none)'}; "
                            f"use one of {', '.join(SUPPORTED)}")
    size = path.stat().st_size
    if size == 0:
        raise DocumentError(f"{name}: the file is empty")
    if size > limits.max_bytes:
        raise DocumentError(f"{name}: too large ({_mib(size)}; the limit is {_mib(limits.max_bytes)})")
    if suffix == ".docx":
        _check_zip(path, limits)


def _check_zip(path: Path, limits: DocumentsSection) -> None:
    name = path.name
    with path.open("rb") as fh:
        if fh.read(8) == _OLE_MAGIC:
            raise DocumentError(f"{name}: the document is password-protected (encrypted) or an old "
                                ".doc saved as .docx; save it unprotected as .docx")
    try:
        with zipfile.ZipFile(path) as zf:
            members = zf.infolist()
    except (zipfile.BadZipFile, OSError):
        raise DocumentError(f"{name}: the file is corrupt (not a valid .docx)") from None
    # Declared sizes are binding: zipfile stops with a CRC error when a member inflates past
    # its declared size, so checking them bounds what python-docx can unpack.
    total = sum(m.file_size for m in members)
    if len(members) > 10_000 or total > limits.max_unzipped_bytes:
        raise DocumentError(f"{name}: refused: it would unpack to {_mib(total)} "
                            f"(limit {_mib(limits.max_unzipped_bytes)}), which looks like a zip bomb")
    for m in members:
        if m.file_size > 1024 * 1024 and m.file_size > limits.max_zip_ratio * max(m.compress_size, 1):
            raise DocumentError(f"{name}: refused: {m.filename} inflates {m.file_size // max(m.compress_size, 1)}x, "
                                "which looks like a zip bomb")


# Byte-order marks, longest first (a UTF-32 LE mark starts like a UTF-16 LE one).
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
         (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
_WESTERN = ("cp1252", "latin_1")  # preferred among equally plausible single-byte guesses


def _utf16_without_bom(data: bytes) -> str | None:
    """Latin-script UTF-16 has a zero byte in every other position: that half tells the order."""
    if len(data) < 2 or len(data) % 2:
        return None
    half = len(data) // 2
    for zeros, encoding in ((data[1::2].count(0), "utf-16-le"), (data[0::2].count(0), "utf-16-be")):
        if zeros >= 0.3 * half:
            try:
                return data.decode(encoding)
            except UnicodeDecodeError:
                return None
    return None


def decode_text(data: bytes) -> str | None:
    """The text of ``data`` in its most likely character encoding, or None when none fits.

    In order: a byte-order mark; strict UTF-8; UTF-16 without a mark; then charset-normalizer's
    candidates. Among single-byte candidates it rates as equally clean, Windows-1252 (a superset
    of Latin-1's printable characters) wins: charset-normalizer alone reads "Señor Peña" in
    Latin-1 as cp1250 ("Seńor Peńa"), since both decode those bytes without chaos.
    """
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(encoding)
            except UnicodeDecodeError:
                break
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    if (text := _utf16_without_bom(data)) is not None:
        return text
    from charset_normalizer import from_bytes
    from charset_normalizer.utils import is_multi_byte_encoding

    matches = list(from_bytes(data))
    if not matches:
        return None
    best = matches[0]
    if not is_multi_byte_encoding(best.encoding):
        for match in matches:
            if (match.chaos <= best.chaos + 0.02
                    and any(e in _WESTERN for e in (match.encoding, *match.could_be_from_charset))):
                try:
                    return data.decode("cp1252")
                except UnicodeDecodeError:  # bytes cp1252 leaves undefined: Latin-1 proper
                    return data.decode("latin-1")
    return str(best)


def _text_file(path: Path) -> str:
    text = decode_text(path.read_bytes())
    if text is None:
        raise DocumentError(f"{path.name}: the file is corrupt or not text (no character encoding fits)")
    return text


def _html(path: Path) -> str:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(_text_file(path), "html.parser")
    for tag in soup(["script", "style", "noscript", "template", "svg"]):
        tag.decompose()
    return soup.get_text("\n")


def _pdf(path: Path, limits: DocumentsSection) -> tuple[str, int]:
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError, PdfReadError

    name = path.name
    try:
        reader = PdfReader(path)
        if reader.is_encrypted:
            # Many PDFs are encrypted with an empty user password and open fine.
            try:
                opened = reader.decrypt("")
            except (DependencyError, NotImplementedError):
                opened = 0
            if not opened:
                raise DocumentError(f"{name}: the PDF is encrypted (password-protected); "
                                    "send an unprotected copy")
        pages = len(reader.pages)
        if pages > limits.max_pages:
            raise DocumentError(f"{name}: too many pages ({pages}; the limit is {limits.max_pages})")
        parts, chars = [], 0
        for page in reader.pages:
            text = page.extract_text() or ""
            parts.append(text)
            chars += len(text)
            if chars > limits.max_chars:
                break
    except DocumentError:
        raise
    except FileNotDecryptedError:
        raise DocumentError(f"{name}: the PDF is encrypted (password-protected); send an unprotected copy") from None
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError, OSError):
        raise DocumentError(f"{name}: the PDF is corrupt and cannot be read") from None
    return "\n\n".join(parts), pages


def _docx(path: Path) -> str:
    import docx

    try:
        document = docx.Document(str(path))
    except Exception:  # python-docx and lxml raise many kinds on damaged packages
        raise DocumentError(f"{path.name}: the file is corrupt (not a valid .docx)") from None
    parts = [p.text for p in document.paragraphs]
    for table in document.tables:
        for row in table.rows:
            parts.append(" | ".join(cell.text for cell in row.cells))
    return "\n".join(parts)


def load_document(path: str | Path, limits: DocumentsSection) -> Document:
    """Check and parse one document (blocking; use ``read_documents`` from async code)."""
    path = Path(path)
    check_document(path, limits)
    suffix = path.suffix.lower()
    pages = 1
    if suffix == ".pdf":
        text, pages = _pdf(path, limits)
    elif suffix == ".docx":
        text = _docx(path)
    elif suffix in (".html", ".htm"):
        text = _html(path)
    else:
        text = _text_file(path)
    text = _clean(text)
    if not text:
        hint = " (a scanned PDF has no text layer; run OCR first)" if suffix == ".pdf" else ""
        raise DocumentError(f"{path.name}: the document contains no text{hint}")
    if len(text) > limits.max_chars:
        raise DocumentError(f"{path.name}: too long ({len(text):,} characters; the limit is {limits.max_chars:,})")
    return Document(path.name, text, pages)


async def read_documents(paths: list[str | Path], limits: DocumentsSection) -> list[Document]:
    """Check every file first (cheap), then parse each off the event loop."""
    if not paths:
        raise DocumentError("no document given")
    if len(paths) > limits.max_files:
        raise DocumentError(f"too many documents ({len(paths)}; the limit is {limits.max_files})")
    for p in paths:
        check_document(Path(p), limits)
    docs = [await run_cpu(load_document, p, limits) for p in paths]
    total = sum(d.chars for d in docs)
    if total > limits.max_chars:
        raise DocumentError(f"the documents are too long together ({total:,} characters; "
                            f"the limit is {limits.max_chars:,})")
    return docs
