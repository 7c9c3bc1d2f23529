"""`report-export SIM_ID [--out DIR]`: write a simulation's exports from the terminal, the same
files `/report <sim> export` posts (engine.sim.report.export, through the simulation service):
trajectory.csv, trajectory.jsonl and transcript.md (an ensemble's every run, with a run column).
An unknown simulation, or one that has not run, is one `error:` line and exit 2.
"""
from __future__ import annotations

import sys
from pathlib import Path

from engine.services import open_services


def register(sub) -> None:
    p = sub.add_parser("report-export", help="write a simulation's trajectory (CSV, JSONL) and transcript")
    p.add_argument("sim_id", metavar="SIM_ID")
    p.add_argument("--out", metavar="DIR", help="folder for the files (default: <simulation folder>/export)")
    p.set_defaults(func=report_export)


async def report_export(args, config) -> int:
    services = await open_services(config, llm=False)
    try:
        sims = services.sims
        assert sims is not None  # built with sims=True, open_services' default
        sim = await sims.get(args.sim_id)
        if sim is None:
            print(f"error: no simulation {args.sim_id}", file=sys.stderr)
            return 2
        if not await sims.ran(sim):
            print(f"error: simulation {args.sim_id} has not run yet: there is nothing to export", file=sys.stderr)
            return 2
        files = await sims.export(sim, Path(args.out).expanduser() if args.out else None)
    finally:
        await services.close()
    for path in (files.csv, files.jsonl, files.transcript):
        print(path)
    return 0
