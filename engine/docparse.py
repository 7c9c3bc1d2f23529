"""Parse one document in the calling process: the code the document sandbox runs.

``engine.documents`` is the public face: ``read_documents`` runs ``python -m engine.docparse``
as a child process per document (see ``main``), and ``load_document`` calls ``parse`` in the
calling process (tests, and the child itself). This module imports nothing else of the engine
but the msgid marker of engine.i18n (a leaf), and the format libraries only when a file needs
them, so the child starts quickly.

Every format is read by a parser whose time and memory grow in proportion to the file, and the
limits that bound an object model are checked before it is built; a file that breaks one
raises ``Refused`` with one line naming the file and the limit (an English msgid and its values:
the child knows no chat language, so ``engine.documents`` writes the line in the reader's):

- text (.txt .md): ``decode_text`` (byte-order mark, UTF-8, UTF-16, then charset-normalizer).
- HTML: libxml2's HTML parser (lxml) with a parser target that keeps the text nodes in
  document order and builds no tree, so memory follows the text, not the tags, and deep
  nesting costs nothing (Python's html.parser, used before, is quadratic on unclosed start
  tags). libxml2 stops at 10 MB in one token; such a file is refused, not read in part.
- .docx: the zip's declared sizes (zip bombs; zipfile refuses to inflate a member past its
  declared size), then the total declared size of its XML parts (``max_xml_bytes``), then one
  streaming pass over them that counts paragraphs and elements and stops at
  ``max_paragraphs`` / ``max_xml_elements``; only then python-docx builds its model.
- PDF: the page count the document declares (/Count), then the pages counted, before any
  page is read; text until ``max_chars``. pypdf's text extraction can take seconds a page on
  a small file (pages that share one long content stream): the sandbox's time limits bound it.
- A file whose first bytes say it is another known type than its extension (a PDF or a zip
  named .txt, a PDF named .docx, an image named .html) is refused, naming what it is.

``limits`` is the ``[documents]`` section (``engine.config.DocumentsSection``) or, in the
child, any object with the same attributes.
"""
from __future__ import annotations

import codecs
import json
import logging
import os
import re
import resource
import signal
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from engine.i18n import N_

SUPPORTED = (".txt", ".md", ".markdown", ".pdf", ".docx", ".html", ".htm")
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # encrypted Office files and legacy .doc
# What a file is, by its first bytes (only signatures no text file starts with).
_ZIP, _OLE = N_("a zip archive (a .docx is one)"), N_("a legacy Office file (.doc, .xls) or an encrypted one")
_MAGIC = ((b"%PDF-", N_("a PDF document")), (b"PK\x03\x04", _ZIP), (_OLE_MAGIC, _OLE),
          (b"\x89PNG\r\n\x1a\n", N_("a PNG image")), (b"\xff\xd8\xff", N_("a JPEG image")),
          (b"GIF8", N_("a GIF image")), (b"\x7fELF", N_("a program (ELF)")), (b"\x1f\x8b", N_("a gzip archive")),
          (b"Rar!\x1a\x07", N_("a RAR archive")), (b"7z\xbc\xaf\x27\x1c", N_("a 7-Zip archive")))
W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
W_P = f"{{{W_NS}}}p"
HTML_SKIPPED = frozenset({"script", "style", "noscript", "template", "svg"})


class Refused(Exception):
    """The document cannot be used; the text says which one and why, in one line: ``msgid`` (an
    English msgid, engine.i18n) filled from ``values`` (strings; one that is a msgid too, what a
    file is, is translated as well). ``str()`` is the English line."""

    def __init__(self, msgid: str, **values: str):
        super().__init__(msgid.format(**values))
        self.msgid, self.values = msgid, values


CORRUPT_DOCX = N_("{name}: the file is corrupt (not a valid .docx)")
ENCRYPTED_PDF = N_("{name}: the PDF is encrypted (password-protected); send an unprotected copy")
TOO_MANY_PAGES = N_("{name}: too many pages ({pages}; the limit is {limit})")


def mib(n: int) -> str:
    return f"{n / 1024 / 1024:.1f} MiB"


def clean(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    text = re.sub(r"[ \t\f\v]+", " ", text)
    text = re.sub(r" *\n *", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def check_file(path: Path, limits: Any) -> None:
    """Checks that read nothing but the file's metadata: exists, supported type, size."""
    name = path.name
    if path.is_dir():
        raise Refused(N_("{path} is a folder; name the documents inside it"), path=str(path))
    if not path.is_file():
        raise Refused(N_("{path}: no such file"), path=str(path))
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED:
        raise Refused(N_("{name}: unsupported file type {suffix}; use one of {supported}"), name=name,
                      suffix=suffix or "(none)", supported=", ".join(SUPPORTED))
    size = path.stat().st_size
    if size == 0:
        raise Refused(N_("{name}: the file is empty"), name=name)
    if size > limits.max_bytes:
        raise Refused(N_("{name}: too large ({size}; the limit is {limit})"), name=name, size=mib(size),
                      limit=mib(limits.max_bytes))


def _check_kind(path: Path) -> None:
    """Refuse a file whose first bytes say it is a known type other than its extension says."""
    with path.open("rb") as fh:
        head = fh.read(1024)
    suffix = path.suffix.lower()
    if suffix == ".pdf" and b"%PDF-" in head:  # PDF readers accept junk before the header
        return
    kind = next((kind for magic, kind in _MAGIC if head.startswith(magic)), None)
    if kind is None or (suffix == ".docx" and kind in (_ZIP, _OLE)):  # _check_zip explains an OLE file
        return
    raise Refused(N_("{name}: the file is {kind}, not {suffix}; send it with its real extension"), name=path.name,
                  kind=kind, suffix=suffix)


def _check_zip(path: Path, limits: Any) -> list[zipfile.ZipInfo]:
    name = path.name
    with path.open("rb") as fh:
        if fh.read(8) == _OLE_MAGIC:
            raise Refused(N_("{name}: the document is password-protected (encrypted) or an old .doc saved as .docx; "
                             "save it unprotected as .docx"), name=name)
    try:
        with zipfile.ZipFile(path) as zf:
            members = zf.infolist()
    except (zipfile.BadZipFile, OSError):
        raise Refused(CORRUPT_DOCX, name=name) from None
    # Declared sizes are binding: zipfile stops with a CRC error when a member inflates past
    # its declared size, so checking them bounds what python-docx can unpack.
    total = sum(m.file_size for m in members)
    if len(members) > 10_000 or total > limits.max_unzipped_bytes:
        raise Refused(N_("{name}: refused: it would unpack to {size} (limit {limit}), which looks like a zip bomb"),
                      name=name, size=mib(total), limit=mib(limits.max_unzipped_bytes))
    for m in members:
        if m.file_size > 1024 * 1024 and m.file_size > limits.max_zip_ratio * max(m.compress_size, 1):
            raise Refused(N_("{name}: refused: {member} inflates {ratio}x, which looks like a zip bomb"), name=name,
                          member=m.filename, ratio=str(m.file_size // max(m.compress_size, 1)))
    return members


class _XmlCounter:
    """A parser target that counts elements and paragraphs and stops at either limit."""

    def __init__(self, name: str, limits: Any):
        self.name, self.limits = name, limits
        self.elements = self.paragraphs = 0

    def start(self, tag, attrib) -> None:
        self.elements += 1
        if self.elements > self.limits.max_xml_elements:
            raise Refused(N_("{name}: more than {limit} XML elements (limit [documents] max_xml_elements)"),
                          name=self.name, limit=f"{self.limits.max_xml_elements:,}")
        if tag == W_P:
            self.paragraphs += 1
            if self.paragraphs > self.limits.max_paragraphs:
                raise Refused(N_("{name}: more than {limit} paragraphs (limit [documents] max_paragraphs)"),
                              name=self.name, limit=f"{self.limits.max_paragraphs:,}")

    def close(self) -> None:
        return None


def _check_docx_xml(path: Path, members: list[zipfile.ZipInfo], limits: Any) -> None:
    """Bound the model python-docx would build: it parses every XML part when it opens the file."""
    from lxml import etree

    name = path.name
    xml = [m for m in members if m.filename.lower().endswith((".xml", ".rels"))]
    total = sum(m.file_size for m in xml)
    if total > limits.max_xml_bytes:
        raise Refused(N_("{name}: {size} of XML (limit [documents] max_xml_bytes, {limit})"), name=name,
                      size=mib(total), limit=mib(limits.max_xml_bytes))
    counter = _XmlCounter(name, limits)
    with zipfile.ZipFile(path) as zf:
        for member in xml:
            # python-docx's own parser settings: entities are not expanded, nothing is fetched
            parser = etree.XMLParser(target=counter, resolve_entities=False,  # type: ignore[call-overload]
                                     no_network=True, load_dtd=False)  # a parser target: the events lxml calls
            try:
                with zf.open(member) as fh:
                    while chunk := fh.read(1 << 16):
                        parser.feed(chunk)
                parser.close()
            except etree.XMLSyntaxError:
                continue  # counted up to the damage; python-docx decides whether the part matters
            except (zipfile.BadZipFile, OSError, EOFError):
                raise Refused(CORRUPT_DOCX, name=name) from None


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
        raise Refused(N_("{name}: the file is corrupt or not text (no character encoding fits)"), name=path.name)
    return text


class _HtmlText:
    """A parser target for libxml2's HTML parser: the text nodes in document order, no tree.

    Text delivered between two events (a tag, a comment) is one text node, as in a tree, and the
    nodes are joined with newlines; text inside HTML_SKIPPED elements is left out."""

    def __init__(self):
        self.parts: list[str] = []
        self._node: list[str] = []
        self._skipping = 0

    def _flush(self) -> None:
        if self._node:
            if not self._skipping:
                self.parts.append("".join(self._node))
            self._node = []

    def start(self, tag, attrib) -> None:
        self._flush()
        if self._skipping or tag.lower() in HTML_SKIPPED:
            self._skipping += 1

    def end(self, tag) -> None:
        self._flush()
        if self._skipping:
            self._skipping -= 1

    def data(self, text: str) -> None:
        self._node.append(text)

    def comment(self, text: str) -> None:
        self._flush()

    def pi(self, target, data=None) -> None:
        self._flush()

    def close(self) -> str:
        self._flush()
        return "\n".join(self.parts)


def _html(path: Path) -> str:
    from lxml import etree

    # NUL characters would become U+FFFD in libxml2; they are dropped from every text anyway.
    data = _text_file(path).replace("\x00", "").encode("utf-8", "replace")
    parser = etree.HTMLParser(target=_HtmlText(), encoding="utf-8",  # type: ignore[call-overload]
                              no_network=True)  # a parser target: the events lxml calls
    try:
        text = etree.fromstring(data, parser)
    except etree.XMLSyntaxError:
        return ""
    if any(error.type_name == "ERR_RESOURCE_LIMIT" for error in parser.error_log):
        # libxml2 stopped reading there: never use part of a file
        raise Refused(N_("{name}: the HTML holds a single text, tag or comment over 10 MB, more than the parser "
                         "reads"), name=path.name)
    return text or ""


def _declared_pages(reader) -> int | None:
    try:
        count = reader.trailer["/Root"]["/Pages"]["/Count"]
    except Exception:  # a damaged catalogue: pypdf may still find the pages
        return None
    return count if isinstance(count, int) else None


def _pdf(path: Path, limits: Any) -> tuple[str, int]:
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError, PdfReadError

    name = path.name
    try:
        reader = PdfReader(path)
        if reader.is_encrypted:
            # Many PDFs are encrypted with an empty user password and open fine.
            try:
                opened = bool(reader.decrypt(""))   # PasswordType.NOT_DECRYPTED is 0
            except (DependencyError, NotImplementedError):
                opened = False
            if not opened:
                raise Refused(ENCRYPTED_PDF, name=name)
        # the declared count first: counting the pages themselves walks the whole page tree
        declared = _declared_pages(reader)
        if declared is not None and declared > limits.max_pages:
            raise Refused(TOO_MANY_PAGES, name=name, pages=str(declared), limit=str(limits.max_pages))
        pages = len(reader.pages)
        if pages > limits.max_pages:
            raise Refused(TOO_MANY_PAGES, name=name, pages=str(pages), limit=str(limits.max_pages))
        parts, chars = [], 0
        for page in reader.pages:
            text = page.extract_text() or ""
            parts.append(text)
            chars += len(text)
            if chars > limits.max_chars:
                break
    except Refused:
        raise
    except FileNotDecryptedError:
        raise Refused(ENCRYPTED_PDF, name=name) from None
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError, OSError):
        raise Refused(N_("{name}: the PDF is corrupt and cannot be read"), name=name) from None
    return "\n\n".join(parts), pages


def _docx(path: Path, limits: Any) -> str:
    members = _check_zip(path, limits)
    _check_docx_xml(path, members, limits)
    import docx

    try:
        document = docx.Document(str(path))
    except MemoryError:
        raise
    except Exception:  # python-docx and lxml raise many kinds on damaged packages
        raise Refused(CORRUPT_DOCX, name=path.name) from None
    parts = [p.text for p in document.paragraphs]
    for table in document.tables:
        for row in table.rows:
            parts.append(" | ".join(cell.text for cell in row.cells))
    return "\n".join(parts)


def parse(path: Path, limits: Any) -> dict:
    """Check and parse one document in this process: {"name", "text", "pages"}, or Refused."""
    check_file(path, limits)
    _check_kind(path)
    suffix = path.suffix.lower()
    pages = 1
    if suffix == ".pdf":
        text, pages = _pdf(path, limits)
    elif suffix == ".docx":
        text = _docx(path, limits)
    elif suffix in (".html", ".htm"):
        text = _html(path)
    else:
        text = _text_file(path)
    text = clean(text)
    if not text:
        raise Refused(N_("{name}: the document contains no text (a scanned PDF has no text layer; run OCR first)")
                      if suffix == ".pdf" else N_("{name}: the document contains no text"), name=path.name)
    if len(text) > limits.max_chars:
        raise Refused(N_("{name}: too long ({chars} characters; the limit is {limit})"), name=path.name,
                      chars=f"{len(text):,}", limit=f"{limits.max_chars:,}")
    return {"name": path.name, "text": text, "pages": pages}


# -- the sandbox's child ------------------------------------------------------------------------

MEMORY_EXCEEDED = "memory"  # the answer's "limit" when the address-space limit was reached
LOG_RECORDS_KEPT = 50


class _Notes(logging.Handler):
    """The libraries' log records (pypdf's notes about a file), handed back to the parent."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.records: list[list] = []

    def emit(self, record: logging.LogRecord) -> None:
        if len(self.records) < LOG_RECORDS_KEPT:
            self.records.append([record.name, record.levelno, record.getMessage()[:500]])


def _limit_self(cpu_s: float, memory_mb: int) -> None:
    """Limits on this process: processor time from now (SIGXCPU kills it), address space
    (allocations fail: MemoryError), no core file, no file written (a write fails; no bytecode
    is cached for the libraries imported later); lower priority; and death with the parent
    (Linux), so an orphan never keeps parsing."""
    sys.dont_write_bytecode = True
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    used = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(used.ru_utime + used.ru_stime + cpu_s) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 2))
    resource.setrlimit(resource.RLIMIT_AS, (memory_mb * 2**20, memory_mb * 2**20))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    os.nice(10)
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    except OSError:
        pass


def main() -> int:
    """One request on stdin: {"path", "limits": {...}, "cpu_s", "memory_mb"}; one answer on stdout:
    {"document": {...}} or {"refused": {"msgid", "values"}} or {"limit": "memory"}, each with "notes" (log
    records)."""
    request = json.loads(sys.stdin.buffer.read())
    _limit_self(request["cpu_s"], request["memory_mb"])
    notes = _Notes()
    root = logging.getLogger()
    root.handlers[:] = [notes]
    root.setLevel(logging.INFO)
    limits = SimpleNamespace(**request["limits"])
    try:
        answer: dict = {"document": parse(Path(request["path"]), limits)}
    except Refused as refusal:
        answer = {"refused": {"msgid": refusal.msgid, "values": refusal.values}}
    except MemoryError:
        answer = {"limit": MEMORY_EXCEEDED}
    answer["notes"] = notes.records
    sys.stdout.write(json.dumps(answer))  # ASCII: any character, lone surrogates included, survives
    return 0


if __name__ == "__main__":
    sys.exit(main())
