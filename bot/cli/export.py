"""`report-export SIM_ID [--out DIR]`: write a simulation's exports from the terminal, the same
files `/report <sim> export` posts (engine.sim.export): trajectory.csv, trajectory.jsonl and
transcript.md. An unknown simulation, or one that has not run, is one `error:` line and exit 2.
"""
from __future__ import annotations

import sys
from pathlib import Path

from engine.db import open_database
from engine.sim import records
from engine.sim.export import export_simulation
from engine.sim.report.stats import platforms_of


def register(sub) -> None:
    p = sub.add_parser("report-export", help="write a simulation's trajectory (CSV, JSONL) and transcript")
    p.add_argument("sim_id", metavar="SIM_ID")
    p.add_argument("--out", metavar="DIR", help="folder for the files (default: <simulation folder>/export)")
    p.set_defaults(func=report_export)


async def report_export(args, config) -> int:
    db = await open_database(config.db_url)
    try:
        sim = await records.get(db, args.sim_id)
        if sim is None:
            print(f"error: no simulation {args.sim_id}", file=sys.stderr)
            return 2
        if not platforms_of(sim.folder):
            print(f"error: simulation {args.sim_id} has not run yet: there is nothing to export", file=sys.stderr)
            return 2
        files = await export_simulation(db, sim.id, sim.folder,
                                        Path(args.out).expanduser() if args.out else sim.folder / "export")
    finally:
        await db.close()
    for path in (files.csv, files.jsonl, files.transcript):
        print(path)
    return 0
