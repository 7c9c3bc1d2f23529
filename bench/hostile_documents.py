"""Hostile documents: parse or refusal time and the parser process's peak memory, main's parser
beside the sandbox, in one run.

    python -m bench.hostile_documents [--baseline REV] [--cap-s 60] [--cap-mb 2048] [--only NAME,...]
    python -m bench.hostile_documents --html-corpus FOLDER... [--sample 1000]

Each document is built here (see the builders, also used by tests/test_document_sandbox.py).
"Before" runs ``load_document`` of ``git show <baseline>:engine/documents.py`` (by default the last
revision that parsed in the bot's process, with BeautifulSoup's html.parser) in a child of its
own under a wall-clock cap and an address-space cap (so it cannot hang or take the machine); its
time is that of ``load_document`` alone, as the bot paid it in its own process;
"after" runs the sandbox's own child (``engine.documents.sandbox_command``) under the default
``[documents]`` limits, killed at ``parse_timeout_s`` as the bot kills it. Peak memory is the
child's maximum resident set (VmHWM, read every 5 ms while it runs). Valid documents of every type are measured too, and
their texts compared: "same text" means the sandbox read exactly what main's parser read.
``--html-corpus`` compares the two HTML readers on real pages instead.
"""
from __future__ import annotations

import argparse
import io
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path

from engine.config import DocumentsSection
from engine.documents import DocumentError, sandbox_command, sandbox_outcome, sandbox_request

REPO = Path(__file__).resolve().parent.parent
BEFORE_SANDBOX = "2fd03795c0ae6d23e16fb66cb56f6e3a52986728"  # documents parsed in the bot's own process


# -- builders -----------------------------------------------------------------------------------

def unclosed_html(folder: Path, size: int = 2**20) -> Path:
    """Start tags that never close: Python's html.parser rescans the rest of the file for each."""
    path = folder / "unclosed.html"
    path.write_text("<a " * (size // 3))
    return path


def nested_html(folder: Path, depth: int = 200_000) -> Path:
    path = folder / "nested.html"
    path.write_text("<div>" * depth + "deep inside" + "</div>" * depth)
    return path


def _docx(folder: Path, name: str, body_xml: bytes, level: int = 9) -> Path:
    """A .docx from python-docx's own template with ``body_xml`` as the start of its body."""
    import docx

    template = io.BytesIO()
    docx.Document().save(template)
    path = folder / name
    with zipfile.ZipFile(template) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED,
                                                           compresslevel=level) as out:
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename == "word/document.xml":
                head, tail = data.split(b"<w:body>", 1)
                with out.open(info.filename, "w", force_zip64=True) as fh:
                    fh.write(head + b"<w:body>")
                    fh.write(body_xml)
                    fh.write(tail)
            else:
                out.writestr(info.filename, data)
    return path


def paragraph_bomb_docx(folder: Path, paragraphs: int = 16_000_000, name: str = "paragraphs.docx",
                        every: int = 110) -> Path:
    """Empty paragraphs, one in ``every`` with a random revision id: it deflates about 80x, under
    the zip ratio check (100x), to six bytes a paragraph."""
    rng = random.Random(7)
    unit = b"<w:p/>" * (every - 1)
    body = b"".join(unit + b'<w:p w:rsidR="%08X"/>' % rng.getrandbits(32) for _ in range(paragraphs // every))
    return _docx(folder, name, body)


def runs_docx(folder: Path, runs: int = 3_000_000) -> Path:
    """One paragraph of empty runs: few paragraphs, millions of elements."""
    rng = random.Random(8)
    body = b"<w:p>" + b"".join(b"<w:r/>" * 69 + b'<w:r w:rsidR="%08X"/>' % rng.getrandbits(32)
                               for _ in range(runs // 70)) + b"</w:p>"
    return _docx(folder, "runs.docx", body)


def zip_bomb_docx(folder: Path, size: int = 200 * 2**20) -> Path:
    """document.xml of 200 MiB of spaces: a thousandfold deflate."""
    body = b" " * (8 * 2**20)
    path = folder / "zipbomb.docx"
    import docx

    template = io.BytesIO()
    docx.Document().save(template)
    with zipfile.ZipFile(template) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for info in src.infolist():
            if info.filename == "word/document.xml":
                with out.open(info.filename, "w", force_zip64=True) as fh:
                    for _ in range(size // len(body)):
                        fh.write(body)
            else:
                out.writestr(info.filename, src.read(info.filename))
    return path


def _pdf(path: Path, streams: list[bytes], pages_per_stream: int = 1) -> Path:
    """A PDF whose pages draw ``streams`` (each shared by ``pages_per_stream`` pages), Helvetica."""
    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    writer = PdfWriter()
    font = writer._add_object(DictionaryObject({NameObject("/Type"): NameObject("/Font"),
                                                NameObject("/Subtype"): NameObject("/Type1"),
                                                NameObject("/BaseFont"): NameObject("/Helvetica")}))
    resources = DictionaryObject({NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})})
    for data in streams:
        stream = DecodedStreamObject()
        stream.set_data(data)
        content = writer._add_object(stream.flate_encode())
        for _ in range(pages_per_stream):
            page = writer.add_blank_page(400, 400)
            page[NameObject("/Resources")] = resources
            page[NameObject("/Contents")] = content
    with path.open("wb") as fh:
        writer.write(fh)
    return path


def many_pages_pdf(folder: Path, pages: int = 5000) -> Path:
    return _pdf(folder / "pages.pdf", [f"BT /F1 12 Tf 20 300 Td (page {i}) Tj ET".encode() for i in range(pages)])


def slow_pdf(folder: Path, operators: int = 100_000, pages: int = 300) -> Path:
    """A few kilobytes: ``pages`` pages that share one content stream of ``operators`` text
    operators, each taking pypdf's text extraction a little time."""
    return _pdf(folder / "slow.pdf", [b"BT /F1 12 Tf 20 300 Td " + b"(x) Tj 1 0 Td " * operators + b"ET"], pages)


def lying_txt(folder: Path) -> Path:
    """A .docx sent as notes.txt: read as text it is zip bytes in some single-byte encoding."""
    docx_path = valid_docx(folder)
    path = folder / "notes.txt"
    path.write_bytes(docx_path.read_bytes())
    return path


SENTENCE = "The harbour workers met the port authority on Monday to discuss the night shifts. "


def valid_txt(folder: Path) -> Path:
    path = folder / "valid.txt"
    path.write_text("\n\n".join(f"{i}. {SENTENCE * 4}" for i in range(1300)), encoding="utf-8")
    return path


def valid_html(folder: Path) -> Path:
    path = folder / "valid.html"
    rows = "".join(f"<p class=\"x\">{i}. <b>{SENTENCE}</b><a href=\"#{i}\">{SENTENCE}</a>{SENTENCE}</p>\n"
                   for i in range(1500))
    path.write_text(f"<html><head><title>Harbour</title><style>p {{color: red}}</style></head>"
                    f"<body><h1>Harbour</h1>{rows}<script>var x = 1;</script></body></html>")
    return path


def valid_docx(folder: Path) -> Path:
    import docx

    document = docx.Document()
    for i in range(5000):
        paragraph = document.add_paragraph(f"{i}. ")
        paragraph.add_run(SENTENCE).bold = True
    table = document.add_table(rows=50, cols=3)
    for r, row in enumerate(table.rows):
        for c, cell in enumerate(row.cells):
            cell.text = f"cell {r}.{c}"
    path = folder / "valid.docx"
    document.save(str(path))
    return path


def valid_pdf(folder: Path) -> Path:
    lines = [SENTENCE[i:i + 60] for i in range(0, len(SENTENCE), 60)] * 14
    streams = []
    for page in range(300):
        ops = "".join(f"({page}: {line}) Tj 0 -14 Td " for line in lines)
        streams.append(f"BT /F1 10 Tf 20 380 Td {ops}ET".encode())
    return _pdf(folder / "valid.pdf", streams)


HOSTILE = {
    "unclosed.html": (unclosed_html, "1 MiB of '<a ' (start tags never closed)"),
    "nested.html": (nested_html, "200,000 nested <div> (1.2 MB)"),
    "paragraphs.docx": (paragraph_bomb_docx, "16 million empty paragraphs, deflated 75x"),
    "runs.docx": (runs_docx, "3 million empty runs in one paragraph"),
    "zipbomb.docx": (zip_bomb_docx, "200 MiB document.xml deflated 1000x"),
    "pages.pdf": (many_pages_pdf, "5,000 pages"),
    "slow.pdf": (slow_pdf, "300 pages sharing one content stream of 100,000 text operators"),
    "notes.txt": (lying_txt, "a .docx named .txt"),
}
VALID = {
    "valid.txt": (valid_txt, "1,300 paragraphs"),
    "valid.html": (valid_html, "1,500 paragraphs with markup, a script, a style"),
    "valid.docx": (valid_docx, "5,000 paragraphs and a 50x3 table"),
    "valid.pdf": (valid_pdf, "300 pages of text"),
}


# -- measuring ----------------------------------------------------------------------------------

BASELINE = """
import importlib.util, resource, sys
cap = int(sys.argv[3]) * 2**20
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
spec = importlib.util.spec_from_file_location("baseline_documents", sys.argv[1])
module = sys.modules["baseline_documents"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
import time
from engine.config import DocumentsSection
start, cpu = time.perf_counter(), time.process_time()
try:
    doc = module.load_document(sys.argv[2], DocumentsSection())
    out = "TEXT" + doc.text
except module.DocumentError as err:
    out = "REFUSED" + str(err)
except MemoryError:
    out = "MEMORY"
sys.stderr.write(f"PARSED IN {time.perf_counter() - start:.3f} {time.process_time() - cpu:.3f}")
sys.stdout.write(out)
"""


def run_child(argv: list[str], stdin: bytes, env: dict,
              timeout: float) -> tuple[int, bytes, bytes, float, float, float, bool]:
    """(return code, stdout, stderr, seconds, processor seconds, peak MiB, killed at the timeout)
    of one child; its
    memory is read every 5 ms while it runs."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    streams: dict[str, bytes] = {}
    readers = [threading.Thread(target=lambda n=n, s=s: streams.__setitem__(n, s.read()))
               for n, s in (("out", proc.stdout), ("err", proc.stderr))]
    for reader in readers:
        reader.start()
    assert proc.stdin is not None  # started with stdin=PIPE
    try:
        proc.stdin.write(stdin)
        proc.stdin.close()
    except BrokenPipeError:
        pass
    killed, peak = False, 0
    while True:
        peak = max(peak, _high_water_kib(proc.pid))
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() - start > timeout:
            os.kill(proc.pid, signal.SIGKILL)
            killed = True
            pid, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.005)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    for reader in readers:
        reader.join()
    cpu = usage.ru_utime + usage.ru_stime
    return proc.returncode, streams["out"], streams["err"], seconds, cpu, peak / 1024, killed


def _high_water_kib(pid: int) -> int:
    """The process's peak resident set so far (VmHWM). Not ru_maxrss from wait4: Linux carries
    the high-water mark of the forking process's memory across exec into the child's."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def before(path: Path, module: Path, cap_s: float, cap_mb: int) -> tuple[str, str | None, float, float, float]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    code, out, err, seconds, cpu, peak, killed = run_child(
        [sys.executable, "-c", BASELINE, str(module), str(path), str(cap_mb)], b"", env, cap_s)
    text = None
    if killed:
        outcome = f"still parsing at the {cap_s:g} s cap"
    elif out.startswith(b"TEXT"):
        text = out[4:].decode("utf-8", "surrogatepass")
        outcome = f"parsed: {len(text):,} chars"
    elif out.startswith(b"REFUSED"):
        outcome = "refused: " + out[7:].decode()
    elif out.startswith(b"MEMORY") or b"MemoryError" in err:
        outcome = f"out of memory at the {cap_mb:,} MiB cap"
    else:
        outcome = f"crashed ({code}): {err.decode(errors='replace')[-200:]}"
    if not killed and err.startswith(b"PARSED IN "):  # the parse alone, as the bot paid it in-process
        seconds, cpu = (float(x) for x in err[10:].split()[:2])
    return outcome, text, seconds, cpu, peak


def after(path: Path, limits: DocumentsSection) -> tuple[str, str | None, float, float, float]:
    argv, env = sandbox_command()
    code, out, err, seconds, cpu, peak, killed = run_child(argv, sandbox_request(path, limits), env,
                                                           limits.parse_timeout_s)
    text = None
    if killed:
        outcome = f"refused: {path.name}: reading it took longer than {limits.parse_timeout_s:g} s"
    else:
        try:
            text = sandbox_outcome(path.name, code, out, err, limits).text
            outcome = f"parsed: {len(text):,} chars"
        except DocumentError as refusal:
            outcome = f"refused: {refusal}"
    return outcome, text, seconds, cpu, peak


def compare_html(roots: list[str], module: Path, sample: int) -> None:
    """Main's HTML reading beside the sandbox's (both in this process) on real pages: how many
    read identically, and the time each took over all of them."""
    import importlib.util

    from engine import docparse

    spec = importlib.util.spec_from_file_location("baseline_documents", module)
    assert spec is not None and spec.loader is not None  # a Python file
    baseline = sys.modules["baseline_documents"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(baseline)

    files = sorted(p for root in roots for pattern in ("*.html", "*.htm") for p in Path(root).rglob(pattern)
                   if p.is_file() and p.stat().st_size > 1024)
    if len(files) > sample:
        files = random.Random(1).sample(files, sample)
    same, old_s, new_s, differ = 0, 0.0, 0.0, []
    for path in files:
        start = time.perf_counter()
        old = docparse.clean(baseline._html(path))
        old_s += time.perf_counter() - start
        start = time.perf_counter()
        new = docparse.clean(docparse._html(path))
        new_s += time.perf_counter() - start
        same += old == new
        if old != new:
            differ.append(str(path))
    print(f"HTML pages: {same} of {len(files)} read identically; main's parser {old_s:.1f} s, the sandbox's "
          f"{new_s:.1f} s in all")
    for name in differ:
        print(f"  differs: {name}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default=BEFORE_SANDBOX, help="git revision whose engine/documents.py is 'before'")
    parser.add_argument("--cap-s", type=float, default=60.0, help="wall-clock cap of the baseline parser")
    parser.add_argument("--cap-mb", type=int, default=2048, help="address-space cap of the baseline parser")
    parser.add_argument("--only", default="", help="comma-separated document names")
    parser.add_argument("--html-corpus", nargs="*", default=[], metavar="FOLDER",
                        help="instead: compare main's and the sandbox's text of every HTML page under these folders")
    parser.add_argument("--sample", type=int, default=1000, help="at most this many pages of the corpus (seeded)")
    args = parser.parse_args(argv)
    limits = DocumentsSection()
    chosen = {**HOSTILE, **VALID}
    if args.only:
        chosen = {name: chosen[name] for name in args.only.split(",")}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        module = folder / "baseline_documents.py"
        module.write_bytes(subprocess.run(["git", "show", f"{args.baseline}:engine/documents.py"], cwd=REPO,
                                          check=True, capture_output=True).stdout)
        if args.html_corpus:
            compare_html(args.html_corpus, module, args.sample)
            return 0
        print(f"limits: parse_timeout_s {limits.parse_timeout_s:g}, parse_cpu_s {limits.parse_cpu_s:g}, "
              f"parse_memory_mb {limits.parse_memory_mb}, max_paragraphs {limits.max_paragraphs:,}, "
              f"max_xml_bytes {limits.max_xml_bytes:,}, max_xml_elements {limits.max_xml_elements:,}; "
              f"baseline {args.baseline[:10]} capped at {args.cap_s:g} s and {args.cap_mb:,} MiB")
        print("| document | what | size | before: outcome | before s | before CPU s | before MiB | after: outcome "
              "| after s | after CPU s | after MiB |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for name, (build, what) in chosen.items():
            docs = folder / name.replace(".", "_")
            docs.mkdir()
            path = build(docs)
            if path.name != name:
                path = path.rename(docs / name)
            old, old_text, old_s, old_cpu, old_mb = before(path, module, args.cap_s, args.cap_mb)
            new, new_text, new_s, new_cpu, new_mb = after(path, limits)
            if old_text is not None and new_text is not None:
                new += " (same text)" if old_text == new_text else " (TEXT DIFFERS)"
            print(f"| {name} | {what} | {path.stat().st_size / 2**20:.2f} MiB | {old} | {old_s:.2f} | {old_cpu:.2f} | "
                  f"{old_mb:.0f} | {new} | {new_s:.2f} | {new_cpu:.2f} | {new_mb:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
