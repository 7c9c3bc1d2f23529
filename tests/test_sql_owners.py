"""One owner per table family: every SQL statement on a table is written in the module that owns the
table, and every other module calls that owner's functions. Read from the syntax tree of every .py
under bot/ and engine/: each string expression (a literal, an f-string, a ``+`` of them) is looked
at for SQL keywords in capitals followed by a table that migrations/ create.

A statement belongs to the owner of its subject: the first table it reads FROM, inserts INTO or
UPDATEs (DELETE FROM counts as FROM; a fragment with only JOINs has its first JOIN as subject). It
may join or sub-select tables of other families: a read across families lives with the family it is
about (a simulation's listing joins its job; unread messages exclude channels by a setting).

Exempt, by rule: migrations/ (they create the tables), engine/db/ (the database layer itself:
``db migrate-to`` copies every table by name), tests/ and bench/ (they may read and seed tables
directly, to check or measure what the owners stored).

The owners, table family by family (OWNERS below is the map the test reads):

- memory (engine/memory/records.py, at the bottom of engine/memory so that every memory module can
  call it): memory_messages, worlds, world_merges; its neighbours in
  engine/memory/ each own one side table: beliefs.py the belief graph (beliefs), keyword_sql.py the
  keyword index (the *_fts tables, memory_search_stats), chattext.py the refit queues (*_unfitted),
  members.py opt-outs (memory_optouts), audience.py channel_audiences, scope_cache.py
  memory_scope_stamps; engine/vector_model.py the embedding model's record (vector_model,
  vector_refit).
- jobs (engine/jobs.py): jobs; process ownership (engine/owners.py): owners; engine/claims.py:
  claims; engine/rates.py: costly_uses.
- settings (engine/settings.py): channel_settings.
- usage (engine/llm/usage.py): llm_usage; engine/llm/modes.py: llm_modes.
- simulation records (engine/sim/records.py): simulations, sim_steps, sim_reports; the run
  (engine/sim/run/service.py): sim_runs, sim_interviews; its spending (engine/sim/run/accounting.py):
  sim_run_usage; outcomes (engine/sim/outcome.py): sim_outcomes; stances
  (engine/sim/stance/tracking.py): sim_stances, sim_stance_skips, sim_stances_carried; the brief
  (engine/sim/seed/store.py): sim_briefs, sim_brief_lines; the report's chat
  (engine/sim/report/chat_store.py): report_chat, report_messages.
- graph (engine/sim/graph/store.py): sim_entities, sim_edges.
- the chat edge's own state: bot/scheduler.py (digest_subscriptions, schedule_runs),
  bot/adapters/telegram_inbox.py (telegram_inbox, telegram_offsets).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Iterator

from tests.conftest import REPO

OWNERS: dict[str, set[str]] = {
    "engine/memory/records.py": {"memory_messages", "worlds", "world_merges"},
    "engine/memory/beliefs.py": {"beliefs"},
    "engine/memory/keyword_sql.py": {"memory_messages_fts", "beliefs_fts", "memory_search_stats"},
    "engine/memory/chattext.py": {"memory_messages_unfitted", "beliefs_unfitted"},
    "engine/memory/members.py": {"memory_optouts"},
    "engine/memory/audience.py": {"channel_audiences"},
    "engine/memory/scope_cache.py": {"memory_scope_stamps"},
    "engine/vector_model.py": {"vector_model", "vector_refit"},
    "engine/jobs.py": {"jobs"},
    "engine/owners.py": {"owners"},
    "engine/claims.py": {"claims"},
    "engine/rates.py": {"costly_uses"},
    "engine/settings.py": {"channel_settings"},
    "engine/llm/usage.py": {"llm_usage"},
    "engine/llm/modes.py": {"llm_modes"},
    "engine/sim/records.py": {"simulations", "sim_steps", "sim_reports"},
    "engine/sim/run/service.py": {"sim_runs", "sim_interviews"},
    "engine/sim/run/accounting.py": {"sim_run_usage"},
    "engine/sim/outcome.py": {"sim_outcomes"},
    "engine/sim/stance/tracking.py": {"sim_stances", "sim_stance_skips", "sim_stances_carried"},
    "engine/sim/seed/store.py": {"sim_briefs", "sim_brief_lines"},
    "engine/sim/report/chat_store.py": {"report_chat", "report_messages"},
    "engine/sim/graph/store.py": {"sim_entities", "sim_edges"},
    "bot/scheduler.py": {"digest_subscriptions", "schedule_runs"},
    "bot/adapters/telegram_inbox.py": {"telegram_inbox", "telegram_offsets"},
}
MIGRATION_ONLY = {"jobs_new", "llm_usage_new", "memory_messages_new"}  # built and renamed inside one migration
SCANNED = ("bot", "engine")
EXEMPT = ("engine/db/",)

SQL = re.compile(r"\b(FROM|INTO|UPDATE|JOIN)\s+(\w+)")
CREATED = re.compile(r"(?i)create\s+(?:virtual\s+)?table\s+(?:if\s+not\s+exists\s+)?(\w+)")


def tables() -> set[str]:
    """Every table the migrations create, on either backend."""
    return {name.lower() for path in (REPO / "migrations").rglob("*.sql")
            for name in CREATED.findall(path.read_text(encoding="utf-8"))}


def text_of(node: ast.AST) -> str | None:
    """The text of a string expression, with ``{}`` where a value goes; None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(str(v.value) if isinstance(v, ast.Constant) else "{}" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = text_of(node.left), text_of(node.right)
        if left is not None or right is not None:
            return (left if left is not None else "{}") + (right if right is not None else "{}")
    return None


def holes(node: ast.AST) -> Iterator[ast.AST]:
    """The expressions inside a string expression that are not string parts of it."""
    if isinstance(node, ast.JoinedStr):
        yield from (v.value for v in node.values if isinstance(v, ast.FormattedValue))
    elif isinstance(node, ast.BinOp):
        for side in (node.left, node.right):
            yield from holes(side) if text_of(side) is not None else [side]


def strings(node: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, text) of every maximal string expression under ``node``."""
    text = text_of(node)
    if text is None:
        children: Iterator[ast.AST] = ast.iter_child_nodes(node)
    else:
        yield getattr(node, "lineno", 0), text
        children = holes(node)
    for child in children:
        yield from strings(child)


def subject(text: str, known: set[str]) -> str | None:
    """The table a statement is about: its first FROM, INTO or UPDATE table, else its first JOIN."""
    named = [(keyword, table.lower()) for keyword, table in SQL.findall(text) if table.lower() in known]
    for keyword, table in named:
        if keyword != "JOIN":
            return table
    return named[0][1] if named else None


def statements(source: str, known: set[str]) -> list[tuple[int, str]]:
    """(line, subject table) of every SQL statement in a module's source."""
    found = []
    for line, text in strings(ast.parse(source)):
        table = subject(text, known)
        if table is not None:
            found.append((line, table))
    return found


def owner_of() -> dict[str, str]:
    return {table: module for module, family in OWNERS.items() for table in family}


def scanned() -> Iterator[Path]:
    for top in SCANNED:
        for path in sorted((REPO / top).rglob("*.py")):
            if not path.relative_to(REPO).as_posix().startswith(EXEMPT):
                yield path


def misplaced() -> list[tuple[str, int, str]]:
    """(module, line, table) of every statement outside its table's owner."""
    known, owners = tables(), owner_of()
    found = []
    for path in scanned():
        module = path.relative_to(REPO).as_posix()
        for line, table in statements(path.read_text(encoding="utf-8"), known):
            if owners.get(table) != module:
                found.append((module, line, table))
    return found


def test_every_statement_on_a_table_is_in_its_owner():
    owners = owner_of()
    found = [f"{module}:{line} {table}: belongs in {owners.get(table, 'no owner yet')}"
             for module, line, table in misplaced()]
    assert found == [], "SQL on a table outside the module that owns it:\n" + "\n".join(found)


def test_every_table_has_one_owner_that_exists():
    listed = [table for family in OWNERS.values() for table in family]
    assert len(listed) == len(set(listed)), "a table with two owners"
    assert set(listed) == tables() - MIGRATION_ONLY
    assert [m for m in OWNERS if not (REPO / m).is_file()] == []


def test_the_rule_sees_each_way_of_writing_a_statement():
    known = {"jobs", "simulations", "worlds"}
    source = '''
"""A docstring that says one reads FROM jobs counts too: it is a string."""
db.execute("UPDATE jobs SET state=? WHERE id=?")
db.fetchall(f"SELECT * FROM simulations WHERE id IN ({marks})")
db.fetchall("SELECT s.id FROM simulations s"
            " LEFT JOIN jobs j ON j.id = s.job_id")
db.fetchall("SELECT id" + where + " FROM worlds")
db.fetchall(f"{head} JOIN jobs j ON j.id = x")
db.execute(f"DELETE FROM {table} WHERE id=?")
db.fetchall(f"SELECT {'x' if a else 'y'} FROM {f'INSERT INTO worlds'}")
print("This from jobs is English; FROM nothing_known is not a table")
'''
    assert statements(source, known) == [(2, "jobs"), (3, "jobs"), (4, "simulations"), (5, "simulations"),
                                         (7, "worlds"), (8, "jobs"), (10, "worlds")]
