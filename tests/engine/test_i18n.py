"""The catalogs are complete and the code goes through them: every msgid Babel extracts from bot/
and engine/ (engine.i18n.KEYWORDS) has a non-fuzzy translation in pt_BR and th with the same
placeholders; no user-facing literal bypasses the catalog where replies, usage errors, job errors and
progress lines are written; no catalog call hides inside an f-string (Babel's extractor cannot see it)."""
from __future__ import annotations

import ast
import re

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import read_po

from engine.i18n import DEFAULT, KEYWORDS, LANGUAGES, LOCALE_DIR, _, normalize, using
from tests.conftest import REPO

PLACEHOLDER = re.compile(r"\{(\w*)[^{}]*\}")
SOURCES = [REPO / "bot", REPO / "engine"]
# The operator's command line (python -m bot memory ..., simulate ...) speaks English to the operator
# (README "Languages"); everything else in bot/ and engine/ that people read goes through the catalogs.
ENGLISH_ONLY = REPO / "bot" / "cli"


def checked(folder):
    return [p for p in folder.rglob("*.py") if ENGLISH_ONLY not in p.parents]


def extracted() -> set:
    ids = set()
    for folder in SOURCES:
        for _file, _line, message, _comments, _context in extract_from_dir(
                folder, method_map=[("**.py", "python")], keywords=KEYWORDS, comment_tags=()):
            ids.add(message)
    return ids


def catalog(language: str):
    with (LOCALE_DIR / language / "LC_MESSAGES" / "worldbot.po").open("rb") as fh:
        return read_po(fh, locale=language)


@pytest.mark.parametrize("language", [lang for lang in LANGUAGES if lang != DEFAULT])
def test_every_msgid_has_a_translation_with_the_same_placeholders(language):
    found = catalog(language)
    missing, fuzzy, wrong = [], [], []
    for msgid in extracted():
        entry = found.get(msgid)
        if entry is None or not (all(entry.string) if isinstance(entry.string, tuple) else entry.string):
            missing.append(msgid)
            continue
        if entry.fuzzy:
            fuzzy.append(msgid)
        wanted = set(PLACEHOLDER.findall(msgid if isinstance(msgid, str) else " ".join(msgid)))
        for text in entry.string if isinstance(entry.string, tuple) else (entry.string,):
            if set(PLACEHOLDER.findall(text)) != wanted:
                wrong.append((msgid, text))
    assert missing == [], f"{language}: {len(missing)} msgids without a translation: {missing[:20]}"
    assert fuzzy == [] and wrong == [], (fuzzy, wrong)


def _calls(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            yield name, node


def _bare(node: ast.AST) -> bool:
    """A string written in place: a literal or an f-string, not wrapped in a catalog call."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return any(ch.isalpha() for ch in node.value)
    return isinstance(node, ast.JoinedStr) and any(
        isinstance(v, ast.Constant) and isinstance(v.value, str) and any(ch.isalpha() for ch in v.value)
        for v in node.values)


def test_no_reply_usage_or_job_error_bypasses_the_catalog():
    bypass = []
    for folder in SOURCES:
        for path in checked(folder):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for name, call in _calls(tree):
                if name in ("send", "error", "UsageError", "JobError", "JobStopped", "progress") and call.args:
                    text = call.args[-1] if name == "progress" else call.args[0]
                    if _bare(text):
                        bypass.append(f"{path.relative_to(REPO)}:{call.lineno}")
    assert bypass == [], f"user-facing literals outside the catalog (wrap them in _()): {bypass}"


def test_no_catalog_call_hides_in_an_f_string():
    hidden = []
    for folder in SOURCES:
        for path in checked(folder):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.JoinedStr):
                    hidden += [f"{path.relative_to(REPO)}:{c.lineno}" for name, c in _calls(node)
                               if name in KEYWORDS and isinstance(c.func, ast.Name)
                               and any(isinstance(a, ast.Constant) for a in c.args)]
    assert hidden == [], f"catalog calls inside f-strings are never extracted: {hidden}"


def test_languages_and_their_codes():
    assert [normalize(c) for c in ("pt-BR", "pt", "pt_PT", "th", "th-TH", "en-US", "de", "", None)] == [
        "pt_BR", "pt_BR", "pt_BR", "th", "th", "en", None, None, None]
    with using("pt_BR"):
        assert _("unknown command /{name}. Type /help for the list.", name="x") == \
            "comando desconhecido /x. Digite /help para ver a lista."
    with using("th"):
        assert _("No jobs yet.") == "ยังไม่มีงาน"
    assert _("No jobs yet.") == "No jobs yet."   # outside any chat: English
