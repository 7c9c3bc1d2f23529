"""Conversations with questions whose answer turns are known, for bench.recall.

One shape for both sources: a ``Dialogue`` (one memory scope) holds its ``Turn``s in order and
its ``Question``s, each with the ids of the turns that hold its answer (``evidence``) and the
session every turn belongs to (a LoCoMo session; a day in the synthetic chats).

LoCoMo (snap-research/locomo, ACL 2024: 10 two-person conversations of 19-32 sessions, about
590 turns each, 1,986 questions with turn-level evidence). Licence: CC BY-NC 4.0
(Attribution-NonCommercial; LICENSE.txt of the repository), so the data is not committed
here: fetch it with ``git clone https://github.com/snap-research/locomo`` and pass
``--locomo locomo/data/locomo10.zip`` (or the extracted folder, or a ``locomo10.json``).
``load_locomo`` reads any of the three layouts: the zip of per-conversation files
(``data/multimodal_dialog/locomo10_v2/*.json``: each a flat dict of speaker_a/b,
session_N_date_time, session_N, qa), that folder, or the single ``locomo10.json`` list whose
items keep the conversation under ``conversation``.
"""
from __future__ import annotations

import json
import re
import zipfile
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

ADVERSARIAL = 5            # LoCoMo category of unanswerable questions: left out
TURN_SECONDS = 10          # a turn's time: its session's time + 10 s per turn before it
_SESSION = re.compile(r"^session_(\d+)$")
_DIA = re.compile(r"^D:?(\d+):0*(\d+)$")


@dataclass(frozen=True)
class Turn:
    id: str                 # platform message id (LoCoMo: the dia_id, "D3:7")
    channel: str
    speaker: str
    text: str
    ts: datetime
    session: str            # LoCoMo: "3"; synthetic: the day
    caption: str = ""       # the attached image's caption, if any


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    evidence: tuple[str, ...]   # turn ids holding the answer
    category: str


@dataclass
class Dialogue:
    name: str
    turns: list[Turn]
    questions: list[Question]
    dropped: int = 0            # questions left out (adversarial, or no known evidence turn)
    session_of: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        self.session_of = {t.id: t.session for t in self.turns}


class DataError(ValueError):
    """The dataset cannot be read; the message says where."""


def session_time(text: str) -> datetime:
    """LoCoMo's "1:56 pm on 8 May, 2023" -> an aware UTC datetime."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)


def evidence_ids(raw: list) -> list[str]:
    """LoCoMo's evidence lists, normalised: a few entries hold two ids ("D8:6; D9:17"), a
    stray colon ("D:11:26") or a leading zero ("D30:05")."""
    out = []
    for item in raw or []:
        for part in re.split(r"[;,\s]+", str(item)):
            m = _DIA.match(part.strip())
            if m:
                out.append(f"D{int(m.group(1))}:{int(m.group(2))}")
    return list(dict.fromkeys(out))


def dialogue_from_locomo(name: str, conv: dict, qa: list[dict]) -> Dialogue:
    turns: list[Turn] = []
    sessions = sorted((int(m.group(1)) for key in conv if (m := _SESSION.match(key))))
    for n in sessions:
        rows = conv.get(f"session_{n}") or []
        when = conv.get(f"session_{n}_date_time")
        if not rows or not when:
            continue
        start = session_time(when)
        for i, row in enumerate(rows):
            text = str(row.get("text") or "").strip()
            caption = str(row.get("blip_caption") or "").strip()
            if not text and caption:
                text = caption
            if not text:
                continue
            turns.append(Turn(str(row["dia_id"]), "chat", str(row["speaker"]), text,
                              start + timedelta(seconds=TURN_SECONDS * i), str(n), caption))
    known = {t.id for t in turns}
    questions, dropped = [], 0
    for i, q in enumerate(qa):
        evidence = [e for e in evidence_ids(q.get("evidence") or []) if e in known]
        if int(q.get("category", 0)) == ADVERSARIAL or not evidence:
            dropped += 1
            continue
        questions.append(Question(f"{name}/q{i}", str(q["question"]).strip(), tuple(evidence), str(q["category"])))
    return Dialogue(name, turns, questions, dropped)


def _items(path: Path) -> list[tuple[str, dict]]:
    """(name, raw item) of every conversation under ``path``, in name order."""
    if path.is_dir():
        files = sorted(path.rglob("*.json"))
        if not files:
            raise DataError(f"{path}: no .json files")
        return [(f.stem, json.loads(f.read_text(encoding="utf-8"))) for f in files]
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            names = sorted(n for n in z.namelist() if n.endswith(".json"))
            if not names:
                raise DataError(f"{path}: no .json files in the zip")
            return [(Path(n).stem, json.loads(z.read(n))) for n in names]
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, list):
        raise DataError(f"{path}: expected a list of conversations")
    return [(str(item.get("sample_id", i)), item) for i, item in enumerate(data)]


def load_locomo(path: Path, limit: int | None = None) -> list[Dialogue]:
    """The first ``limit`` conversations (all when None), sorted by name."""
    if not path.exists():
        raise DataError(f"{path}: not found (git clone https://github.com/snap-research/locomo, "
                        f"then --locomo locomo/data/locomo10.zip)")
    out = []
    for name, item in _items(path)[:limit]:
        conv = item.get("conversation", item)
        if "speaker_a" not in conv:
            raise DataError(f"{path}: {name}: not a LoCoMo conversation (no speaker_a)")
        out.append(dialogue_from_locomo(f"locomo-{name}", conv, item.get("qa") or []))
    return out
