"""Synthetic extractions for entity resolution, with a known answer (tests and bench).

People ("Teresa Okafor", sometimes also "Dr. Teresa Okafor", "Okafor's", the lone "Okafor" or a
middle initial; double-barrelled surnames once the plain ones run out) and organisations
("Harbour Workers Union", "the Harbour Workers' Union"), five mentions to a chunk with
relations between neighbours, until the extractions hold ``n_names`` distinct normalised names.
"""
from __future__ import annotations

import random

from engine.sim.graph.step import ExtractedEntity, ExtractedRelation, Extraction
from engine.sim.graph.store import normalise_name

FIRST = ("Teresa James Amina Ravi Sofia Lars Mei Omar Nadia Pieter Chloe Kwame Ines Tomas Yuki Farah Diego "
         "Elena Marcus Priya Jonas Leila Hugo Zainab Ivan Greta Mateo Hana Samuel Aisha Felix Rosa Dmitri "
         "Layla Victor Ingrid Kofi Lucia Arjun Maren Emeka Clara Tariq Astrid Nikolai Imani Oscar Freya "
         "Hamza Beatriz").split()
LAST = ("Okafor Lindqvist Haddad Moreau Brennan Takahashi Novak Osei Castillo Varga Petrova Mensah Dubois "
        "Kowalski Nakamura Ferreira Andersen Achterberg Quispe Rahman Oyelaran Strand Marchetti Abara "
        "Holloway Ibarra Kaminski Delacroix Wojcik Nyberg Adeyemi Salazar Fitzgerald Tanaka Eriksen "
        "Bianchi Kuznetsov Mwangi Oduya Lefevre Sandoval Hakimi Rossi Jankowski Aalto Balogun Cardenas "
        "Demir Engstrom Guerrero").split()
ORG_HEAD = ("Harbour Northern Riverside Coastal Central Eastside Metropolitan Valley Lakeside Western "
            "Southern Highland Greenfield Old Town Bridge Market Civic Dockland Hillcrest Union Street").split()
ORG_TAIL = ("Workers Union|City Council|Port Authority|Savings Bank|Chamber of Commerce|Tenants Association|"
            "Ferry Company|Daily News|Transport Board|Fishermen Cooperative|University|Police Department|"
            "Residents Committee|Shipping Group|Teachers Federation|Health Trust|Football Club").split("|")


def synthetic_extractions(n_names: int, seed: int = 0) -> list[tuple[int, Extraction]]:
    rng = random.Random(seed)
    people = [(first, last) for first in FIRST for last in LAST]
    orgs = [(h, t) for h in ORG_HEAD for t in ORG_TAIL]
    rng.shuffle(people)
    rng.shuffle(orgs)
    norms: set[str] = set()
    mentions: list[ExtractedEntity] = []
    while len(norms) < n_names:
        if not people:  # every plain name is taken: double-barrelled surnames
            people = [(rng.choice(FIRST), f"{rng.choice(LAST)}-{rng.choice(LAST)}") for _ in range(1000)]
        if orgs and rng.random() < 0.25:
            head, tail = orgs.pop()
            name = f"{head} {tail}"
            forms = [name] + ([f"the {head} {tail.replace('Workers', 'Workers’')}"] if rng.random() < 0.3 else [])
            kind = "Organization"
        else:
            first, last = people.pop()
            name = f"{first} {last}"
            forms = [name]
            if rng.random() < 0.3:
                forms.append(f"Dr. {name}")
            if rng.random() < 0.3:
                forms.append(f"{last}'s")
            if rng.random() < 0.3:
                forms.append(last)
            if rng.random() < 0.2:
                forms.append(f"{first} {rng.choice('ABCDEFGH')}. {last}")
            kind = "Person"
        for form in forms:
            mentions.append(ExtractedEntity(name=form, type=kind, summary=f"{name} appears in the story."))
            norms.add(normalise_name(form))
    rng.shuffle(mentions)
    extractions = []
    for index in range(0, len(mentions), 5):
        chunk = mentions[index:index + 5]
        relations = [ExtractedRelation(source=a.name, relation="RELATES_TO", target=b.name,
                                       fact=f"{a.name} spoke with {b.name}.")
                     for a, b in zip(chunk, chunk[1:])]
        extractions.append((index // 5, Extraction(entities=chunk, relations=relations)))
    return extractions
