"""The same evidence-labelled group chats in English, Brazilian Portuguese and Thai, for bench.recall.

No evidence-labelled conversation set in Portuguese or Thai could be had offline (LoCoMo and its
kin are English; the machine-translation packages on the registry download their models at run
time), so this one is built, reproducibly: bench.recall_synth's synthetic group chats (facts
people state about themselves, later corrections, a fact spread over three turns, events told
with a relative date, asked about in the third person with names and absolute dates) are
generated from templates that exist in the three languages, written by hand, sentence for
sentence. One seed draws one chat; the three languages draw it identically (the random choices
never depend on the text), so turn ids, speakers, channels, times, evidence and questions are
the same, and only the words differ. Names of people, cities and companies stay as they are;
the rest (animals, instruments, countries, months, activities, small talk) is translated.

Small talk between the facts is drawn from a list of chat lines in each language (the same line,
translated, at the same place), not from chatterbot-corpus as bench.recall_synth does: the
corpus's languages are not parallel (its Thai has 23 greeting lines).

    python -m bench.recall --languages [--seed S]        (English, Portuguese and Thai side by side)
    python -m bench.recall_languages --out /work/data/recall-languages   (the chats as JSONL files)

Each JSONL file holds one object per line: ``{"dialogue", "language", "turns": [{"id", "channel",
"speaker", "text", "ts", "session"}], "questions": [{"id", "text", "evidence", "category"}]}``.
"""
from __future__ import annotations

import argparse
import json
import random
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.recall_data import Dialogue, Question, Turn
from bench.recall_synth import CHANNELS, CITIES, COMPANIES, NAMES, START

LANGUAGES = ("english", "portuguese", "thai")

# Every list has the same length and order in each language: a draw picks the same index.
WORDS = {
    "english": {
        "animal": ("cat", "dog", "rabbit", "parrot", "tortoise"),
        "pet": ("Biscuit", "Pepper", "Mochi", "Ziggy", "Olive", "Nacho", "Luna", "Waffles"),
        "instrument": ("cello", "ukulele", "piano", "saxophone", "drums", "violin", "banjo"),
        "country": ("Japan", "Portugal", "Iceland", "Mexico", "Vietnam", "Morocco", "Chile", "Greece", "Canada"),
        "month": ("May", "June", "July", "August", "September"),
        "role": ("a data analyst", "a product designer", "a nurse", "a site engineer", "a teacher", "a sous chef",
                 "an accountant", "a translator"),
        "activity": ("ran a half marathon", "painted the kitchen ceiling", "went climbing at the quarry",
                     "baked sourdough for the first time", "saw a jazz concert", "planted tomatoes on the balcony",
                     "fixed my bike's gears", "visited the science museum", "played chess in the park",
                     "went kayaking on the river"),
        "months_of_year": ("January", "February", "March", "April", "May", "June", "July", "August", "September",
                           "October", "November", "December"),
    },
    "portuguese": {
        "animal": ("gata", "cachorra", "coelha", "papagaia", "tartaruga"),
        "pet": ("Biscuit", "Pepper", "Mochi", "Ziggy", "Olive", "Nacho", "Luna", "Waffles"),
        "instrument": ("violoncelo", "ukulele", "piano", "saxofone", "bateria", "violino", "banjo"),
        "country": ("Japão", "Portugal", "Islândia", "México", "Vietnã", "Marrocos", "Chile", "Grécia", "Canadá"),
        "month": ("maio", "junho", "julho", "agosto", "setembro"),
        "role": ("analista de dados", "designer de produto", "enfermeira", "engenheira de obras", "professora",
                 "subchef de cozinha", "contadora", "tradutora"),
        "activity": ("corri uma meia maratona", "pintei o teto da cozinha", "fui escalar na pedreira",
                     "fiz pão de fermentação natural pela primeira vez", "fui a um show de jazz",
                     "plantei tomates na varanda", "consertei as marchas da minha bicicleta",
                     "visitei o museu de ciências", "joguei xadrez no parque", "andei de caiaque no rio"),
        "months_of_year": ("janeiro", "fevereiro", "março", "abril", "maio", "junho", "julho", "agosto", "setembro",
                           "outubro", "novembro", "dezembro"),
    },
    "thai": {
        "animal": ("แมว", "หมา", "กระต่าย", "นกแก้ว", "เต่า"),
        "pet": ("Biscuit", "Pepper", "Mochi", "Ziggy", "Olive", "Nacho", "Luna", "Waffles"),
        "instrument": ("เชลโล", "อูคูเลเล่", "เปียโน", "แซกโซโฟน", "กลองชุด", "ไวโอลิน", "แบนโจ"),
        "country": ("ญี่ปุ่น", "โปรตุเกส", "ไอซ์แลนด์", "เม็กซิโก", "เวียดนาม", "โมร็อกโก", "ชิลี", "กรีซ", "แคนาดา"),
        "month": ("พฤษภาคม", "มิถุนายน", "กรกฎาคม", "สิงหาคม", "กันยายน"),
        "role": ("นักวิเคราะห์ข้อมูล", "นักออกแบบผลิตภัณฑ์", "พยาบาล", "วิศวกรประจำไซต์งาน", "ครู", "ผู้ช่วยเชฟ",
                 "นักบัญชี", "นักแปล"),
        "activity": ("วิ่งฮาล์ฟมาราธอน", "ทาสีเพดานห้องครัว", "ไปปีนผาที่เหมืองหิน", "อบขนมปังซาวร์โดว์ครั้งแรก",
                     "ไปดูคอนเสิร์ตแจ๊ส", "ปลูกมะเขือเทศที่ระเบียง", "ซ่อมเกียร์จักรยาน", "ไปพิพิธภัณฑ์วิทยาศาสตร์",
                     "เล่นหมากรุกในสวนสาธารณะ", "พายเรือคายัคในแม่น้ำ"),
        "months_of_year": ("มกราคม", "กุมภาพันธ์", "มีนาคม", "เมษายน", "พฤษภาคม", "มิถุนายน", "กรกฎาคม", "สิงหาคม",
                           "กันยายน", "ตุลาคม", "พฤศจิกายน", "ธันวาคม"),
    },
}

# kind -> (statement, question, correction, question after it, question about before it)
FACTS = {
    "english": {
        "home": ("I just moved to {city}, the flat is tiny but I love it", "Where does {name} live?",
                 "Update: the {city} flat fell through, I'm living in {city2} now", "Where does {name} live now?",
                 "Where did {name} live before {city2}?"),
        "job": ("Started my new job at {company} today, I'm {role} there", "Where does {name} work?",
                "I left {company}, been at {company2} since Monday", "Which company does {name} work for now?",
                "Where did {name} work before {company2}?"),
        "pet": ("We adopted a {animal} and called her {pet}", "What is the name of {name}'s {animal}?",
                "Small change: the {animal} is called {pet2} now, the kids insisted",
                "What is {name}'s {animal} called now?", "What was {name}'s {animal} called before {pet2}?"),
        "music": ("I've been learning the {instrument} for a month now", "Which instrument is {name} learning?",
                  "Gave up on the {instrument}, switched to the {instrument2}",
                  "Which instrument does {name} play now?",
                  "Which instrument did {name} learn before the {instrument2}?"),
        "trip": ("Booked flights to {country} for {month}!", "Where is {name} travelling in {month}?",
                 "Had to change plans, going to {country2} in {month} instead", "Where is {name} going in {month} now?",
                 "Where did {name} plan to travel before {country2}?"),
    },
    "portuguese": {
        "home": ("Acabei de me mudar para {city}, o apartamento é minúsculo mas eu adoro", "Onde {name} mora?",
                 "Novidade: o apartamento em {city} não deu certo, agora estou morando em {city2}",
                 "Onde {name} mora agora?", "Onde {name} morava antes de {city2}?"),
        "job": ("Comecei hoje no meu emprego novo na {company}, sou {role} lá", "Onde {name} trabalha?",
                "Saí da {company}, estou na {company2} desde segunda", "Em que empresa {name} trabalha agora?",
                "Onde {name} trabalhava antes da {company2}?"),
        "pet": ("Adotamos uma {animal} e demos o nome de {pet}", "Qual é o nome da {animal} de {name}?",
                "Pequena mudança: a {animal} agora se chama {pet2}, as crianças insistiram",
                "Como se chama a {animal} de {name} agora?", "Como a {animal} de {name} se chamava antes de {pet2}?"),
        "music": ("Estou aprendendo {instrument} faz um mês", "Que instrumento {name} está aprendendo?",
                  "Desisti do {instrument}, mudei para {instrument2}", "Que instrumento {name} toca agora?",
                  "Que instrumento {name} aprendia antes de {instrument2}?"),
        "trip": ("Comprei passagens para {country} em {month}!", "Para onde {name} vai viajar em {month}?",
                 "Tive que mudar os planos, vou para {country2} em {month}", "Para onde {name} vai em {month} agora?",
                 "Para onde {name} planejava viajar antes de {country2}?"),
    },
    "thai": {
        "home": ("เพิ่งย้ายไปอยู่ {city} ห้องเล็กมากแต่ชอบสุดๆ", "{name} อาศัยอยู่ที่ไหน",
                 "อัปเดต: ห้องที่ {city} ไม่ได้แล้ว ตอนนี้ย้ายมาอยู่ {city2}", "ตอนนี้ {name} อาศัยอยู่ที่ไหน",
                 "ก่อนจะอยู่ {city2} {name} เคยอยู่ที่ไหน"),
        "job": ("วันนี้เริ่มงานใหม่ที่ {company} เป็น{role}ที่นั่น", "{name} ทำงานที่ไหน",
                "ลาออกจาก {company} แล้ว อยู่ที่ {company2} ตั้งแต่วันจันทร์", "ตอนนี้ {name} ทำงานบริษัทอะไร",
                "ก่อนจะไป {company2} {name} เคยทำงานที่ไหน"),
        "pet": ("เรารับ{animal}มาเลี้ยง ตั้งชื่อว่า {pet}", "{animal}ของ {name} ชื่ออะไร",
                "เปลี่ยนนิดนึง ตอนนี้{animal}ชื่อ {pet2} แล้ว เด็กๆ ยืนยัน", "ตอนนี้{animal}ของ {name} ชื่ออะไร",
                "ก่อนจะชื่อ {pet2} {animal}ของ {name} เคยชื่ออะไร"),
        "music": ("หัดเล่น{instrument}มาได้เดือนนึงแล้ว", "{name} กำลังหัดเล่นเครื่องดนตรีอะไร",
                  "เลิกเล่น{instrument}แล้ว เปลี่ยนไปเล่น{instrument2}", "ตอนนี้ {name} เล่นเครื่องดนตรีอะไร",
                  "ก่อนจะเล่น{instrument2} {name} เคยหัดเล่นเครื่องดนตรีอะไร"),
        "trip": ("จองตั๋วเครื่องบินไป{country}เดือน{month}แล้ว!", "เดือน{month} {name} จะไปเที่ยวที่ไหน",
                 "ต้องเปลี่ยนแผน เดือน{month}จะไป{country2}แทน", "ตอนนี้เดือน{month} {name} จะไปที่ไหน",
                 "ก่อนจะเปลี่ยนเป็น{country2} {name} วางแผนจะไปเที่ยวที่ไหน"),
    },
}

LINES: dict[str, dict[str, Any]] = {   # per language: line kind -> a template, or templates
    "english": {
        "spread": ("Big news in my family: my sister is getting married!", "Congrats! When and where?",
                   "On the {day}th of October, in {city}", "When and where is {name}'s sister getting married?"),
        "date": ("{activity} yesterday, exhausted now", "What did {name} do on {date}?"),
        "date_format": "{day} {month} {year}",
        "acks": ("nice, {name}!", "congrats {name}!", "oh cool", "wow, tell us more", "that's great news", "amazing"),
        "small": ("morning all", "haha", "lol same", "anyone up for lunch?", "ok", "thanks!", "brb", "nice",
                  "what a week", "coffee time", "so tired today", "did anyone see the game?", "agreed",
                  "the weather is awful again", "weekend plans anyone?", "that's hilarious", "true",
                  "I can't believe it's already Thursday", "who's bringing snacks tomorrow?", "good night folks",
                  "omg", "traffic was terrible this morning", "hmm not sure", "sounds good to me",
                  "the printer is broken again", "has anyone tried the new bakery downstairs?",
                  "my phone battery dies so fast", "the meeting ran late again", "I need a holiday",
                  "it's raining cats and dogs out there", "anyone watching the new series?",
                  "the bus was late, as always", "I'm starving", "can someone send me the link?",
                  "happy Friday everyone", "that movie was so boring"),
    },
    "portuguese": {
        "spread": ("Grande notícia na minha família: minha irmã vai se casar!", "Parabéns! Quando e onde?",
                   "No dia {day} de outubro, em {city}", "Quando e onde a irmã de {name} vai se casar?"),
        "date": ("Ontem eu {activity}, estou exausta agora", "O que {name} fez em {date}?"),
        "date_format": "{day} de {month} de {year}",
        "acks": ("legal, {name}!", "parabéns {name}!", "que massa", "nossa, conta mais", "que ótima notícia",
                 "incrível"),
        "small": ("bom dia pessoal", "haha", "kkkk igual", "alguém topa almoçar?", "ok", "valeu!", "já volto",
                  "show", "que semana", "hora do café", "tão cansada hoje", "alguém viu o jogo?", "concordo",
                  "o tempo está horrível de novo", "planos pro fim de semana?", "que engraçado", "verdade",
                  "não acredito que já é quinta", "quem traz os petiscos amanhã?", "boa noite galera",
                  "meu deus", "o trânsito estava terrível hoje de manhã", "hmm não sei", "por mim tudo bem",
                  "a impressora quebrou de novo", "alguém já provou a padaria nova aqui embaixo?",
                  "a bateria do meu celular acaba tão rápido", "a reunião atrasou de novo", "preciso de férias",
                  "está chovendo canivete lá fora", "alguém está vendo a série nova?",
                  "o ônibus atrasou, como sempre", "estou morrendo de fome", "alguém me manda o link?",
                  "feliz sexta a todos", "aquele filme foi muito chato"),
    },
    "thai": {
        "spread": ("ข่าวใหญ่ของครอบครัว: พี่สาวเรากำลังจะแต่งงาน!", "ยินดีด้วย! เมื่อไหร่และที่ไหน",
                   "วันที่ {day} ตุลาคม ที่ {city}", "พี่สาวของ {name} จะแต่งงานเมื่อไหร่และที่ไหน"),
        "date": ("เมื่อวาน{activity} ตอนนี้เหนื่อยมาก", "{name} ทำอะไรในวันที่ {date}"),
        "date_format": "{day} {month} {year}",
        "acks": ("เยี่ยมเลย {name}!", "ยินดีด้วยนะ {name}!", "เจ๋งอะ", "ว้าว เล่าอีกสิ", "ข่าวดีมาก", "สุดยอด"),
        "small": ("อรุณสวัสดิ์ทุกคน", "555", "เหมือนกันเลย", "มีใครไปกินข้าวเที่ยงไหม", "โอเค", "ขอบคุณ!",
                  "เดี๋ยวมา", "ดีเลย", "สัปดาห์นี้หนักมาก", "ได้เวลากาแฟ", "วันนี้เหนื่อยมาก", "มีใครดูบอลไหม",
                  "เห็นด้วย", "อากาศแย่อีกแล้ว", "เสาร์อาทิตย์นี้ใครมีแผนบ้าง", "ตลกมาก", "จริง",
                  "ไม่อยากเชื่อว่าวันพฤหัสแล้ว", "พรุ่งนี้ใครเอาขนมมา", "ราตรีสวัสดิ์ทุกคน", "โอ้โห",
                  "เช้านี้รถติดมาก", "อืม ไม่แน่ใจ", "ได้เลย", "เครื่องพิมพ์เสียอีกแล้ว",
                  "มีใครลองร้านเบเกอรี่ใหม่ข้างล่างหรือยัง", "แบตมือถือหมดเร็วมาก", "ประชุมเลิกช้าอีกแล้ว",
                  "อยากไปเที่ยวพักร้อน", "ข้างนอกฝนตกหนักมาก", "มีใครดูซีรีส์ใหม่อยู่ไหม",
                  "รถเมล์มาช้าเหมือนเคย", "หิวมาก", "ใครส่งลิงก์ให้หน่อย", "สุขสันต์วันศุกร์ทุกคน",
                  "หนังเรื่องนั้นน่าเบื่อมาก"),
    },
}


def _choice(rng: random.Random, n: int, avoid: int | None = None) -> int:
    return rng.choice([i for i in range(n) if i != avoid])


def chat(seed: int, language: str, speakers: int = 6, channels: int = 3, days: int = 30) -> Dialogue:
    """One group chat in ``language``; every random draw is an index, so the three languages
    draw the same chat."""
    rng = random.Random(seed)
    words, facts, lines = WORDS[language], FACTS[language], LINES[language]
    people = list(NAMES[:speakers])
    rooms = CHANNELS[:channels]
    events: dict[int, list[tuple[list[tuple[str, str]], list[tuple[str, list[int], str]]]]] = {}

    def add(day: int, said: list[tuple[str, str]], asked: list[tuple[str, list[int], str]]) -> None:
        events.setdefault(day, []).append((said, asked))

    for name in people:
        city, company = _choice(rng, len(CITIES)), _choice(rng, len(COMPANIES))
        draws = {
            "home": ({"city": CITIES[city]}, {"city2": CITIES[_choice(rng, len(CITIES), city)]}, 0.5),
            "job": ({"company": COMPANIES[company], "role": words["role"][_choice(rng, len(words["role"]))]},
                    {"company2": COMPANIES[_choice(rng, len(COMPANIES), company)]}, 0.5),
        }
        animal, pet = _choice(rng, len(words["animal"])), _choice(rng, len(words["pet"]))
        draws["pet"] = ({"animal": words["animal"][animal], "pet": words["pet"][pet]},
                        {"pet2": words["pet"][_choice(rng, len(words["pet"]), pet)]}, 0.4)
        inst = _choice(rng, len(words["instrument"]))
        draws["music"] = ({"instrument": words["instrument"][inst]},
                          {"instrument2": words["instrument"][_choice(rng, len(words["instrument"]), inst)]}, 0.4)
        month, country = _choice(rng, len(words["month"])), _choice(rng, len(words["country"]))
        draws["trip"] = ({"month": words["month"][month], "country": words["country"][country]},
                         {"country2": words["country"][_choice(rng, len(words["country"]), country)]}, 0.4)
        for kind, (first, second, p_fix) in draws.items():
            values: dict[str, object] = {"name": name, **first, **second}
            statement, question, correction, now_q, before_q = (t.format(**values) for t in facts[kind])
            fixes = rng.random() < p_fix
            d1 = rng.randrange(0, days // 2)
            if not fixes:
                add(d1, [(name, statement)], [(question, [0], "fact")])
                continue
            add(d1, [(name, statement)], [(before_q, [0], "before")])
            add(rng.randrange(d1 + 1, days), [(name, correction)], [(now_q, [0], "correction")])
        friend = people[_choice(rng, len(people), people.index(name))]
        announce, ask, answer, question = lines["spread"]
        values = {"name": name, "day": rng.randint(1, 28), "city": CITIES[_choice(rng, len(CITIES))]}
        add(rng.randrange(days), [(name, announce), (friend, ask), (name, answer.format(**values))],
            [(question.format(**values), [0, 2], "spread")])
        for activity in rng.sample(range(len(words["activity"])), 2):
            day = rng.randrange(1, days)
            when = START + timedelta(days=day - 1)
            date = lines["date_format"].format(day=when.day, month=words["months_of_year"][when.month - 1],
                                              year=when.year)
            told, asking = lines["date"]
            text = told.format(activity=words["activity"][activity])
            add(day, [(name, text[0].upper() + text[1:])], [(asking.format(name=name, date=date), [0], "date")])

    turns: list[Turn] = []
    questions: list[Question] = []

    def post(day: int, clock, channel: str, speaker: str, text: str) -> str:
        tid = f"s{seed}-{len(turns) + 1}"
        turns.append(Turn(tid, channel, speaker, text, clock, str(day)))
        return tid

    for day in range(days):
        clock = START + timedelta(days=day)
        for _ in range(rng.randint(4, 12)):
            clock += timedelta(seconds=rng.randint(20, 900))
            post(day, clock, rooms[rng.randrange(len(rooms))], people[rng.randrange(len(people))],
                 lines["small"][rng.randrange(len(lines["small"]))])
        for said, asked in events.get(day, []):
            channel = rooms[rng.randrange(len(rooms))]
            for _ in range(rng.randint(2, 6)):
                clock += timedelta(seconds=rng.randint(20, 600))
                post(day, clock, channel, people[rng.randrange(len(people))],
                     lines["small"][rng.randrange(len(lines["small"]))])
            ids = []
            for speaker, text in said:
                clock += timedelta(seconds=rng.randint(15, 120))
                ids.append(post(day, clock, channel, speaker, text))
            clock += timedelta(seconds=rng.randint(10, 90))
            speaker = said[0][0]
            ack = lines["acks"][rng.randrange(len(lines["acks"]))].format(name=speaker)
            post(day, clock, channel, people[_choice(rng, len(people), people.index(speaker))], ack)
            for text, which, category in asked:
                questions.append(Question(f"s{seed}/q{len(questions)}", text, tuple(ids[i] for i in which), category))
    return Dialogue(f"{language}-{seed}", turns, questions)


def dialogues(language: str, seed: int = 0, count: int = 3) -> list[Dialogue]:
    """``count`` chats (6 speakers, 3 channels, 30 days) in ``language``, each its own scope."""
    return [chat(seed + i, language) for i in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description="write the chats as JSONL, one file per language")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=int, default=3)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for language in LANGUAGES:
        path = args.out / f"{language}.jsonl"
        with path.open("w", encoding="utf-8") as f:
            for d in dialogues(language, args.seed, args.count):
                f.write(json.dumps({
                    "dialogue": d.name, "language": language,
                    "turns": [{"id": t.id, "channel": t.channel, "speaker": t.speaker, "text": t.text,
                               "ts": t.ts.isoformat(), "session": t.session} for t in d.turns],
                    "questions": [{"id": q.id, "text": q.text, "evidence": list(q.evidence), "category": q.category}
                                  for q in d.questions]}, ensure_ascii=False) + "\n")
        print(f"{path}: {args.count} chats")


if __name__ == "__main__":
    main()
