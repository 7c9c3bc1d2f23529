"""`simulate FILE... --requirement TEXT [--agents N] [--rounds N] [--out DIR]`: run the
simulation pipeline from the terminal, one progress bar per step. `--resume SIM_ID` continues
a simulation at its first unfinished step. It is the same job that chat /simulate starts."""
from __future__ import annotations

import asyncio
import getpass
import sys
from pathlib import Path

from tqdm import tqdm

from bot.app import App
from bot.features.simulation.access import simulations
from engine.documents import DocumentError, check_document, read_documents
from engine.jobs import JobError
from engine.sim import sizing
from engine.sim.estimate import estimate
from engine.words import plural

FEATURES = ["bot.features.core", "bot.features.llm", "bot.features.simulation"]
SCOPE = "console:local"


def register(sub) -> None:
    p = sub.add_parser("simulate", help="run the simulation pipeline on documents")
    p.add_argument("files", nargs="*", metavar="FILE", help="documents (.txt .md .pdf .docx .html)")
    p.add_argument("--requirement", "-r", help="what the simulation should predict")
    p.add_argument("--agents", type=int, help="number of agents (default: [simulation] default_agents)")
    p.add_argument("--rounds", type=int, help="number of rounds (default: [simulation] default_rounds)")
    p.add_argument("--out", metavar="DIR", help="simulation folder (default: <data_dir>/sims/<id>)")
    p.add_argument("--resume", metavar="SIM_ID", help="continue this simulation at its first unfinished step")
    p.set_defaults(func=simulate)


class _Bars:
    """One tqdm bar per pipeline step, fed by the job's progress events."""

    def __init__(self, stream):
        self.stream = stream
        self.bar: tqdm | None = None
        self.step: str | None = None

    def __call__(self, event) -> None:
        data = event.data
        if event.kind != "progress" or "step" not in data:
            return
        if data["step"] != self.step:
            self.close()
            self.step = data["step"]
            self.bar = tqdm(total=100, desc=f"{data['step_index'] + 1}/{data['steps']} {self.step}",
                            file=self.stream, leave=True, bar_format="{desc:<16} {bar} {percentage:3.0f}%{postfix}")
        fraction = data.get("step_fraction")
        if fraction is not None and self.bar is not None:
            self.bar.n = int(round(fraction * 100))
        if self.bar is not None:
            # one line only: tqdm redraws its own line, and a line break would strand the old text
            line = event.job.message.split("\n", 1)[0].split(": ", 1)[-1]
            self.bar.set_postfix_str(line[:60], refresh=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


async def simulate(args, config) -> int:
    if not config.llm.configured:
        print("error: no LLM is configured: set [llm] base_url in config.toml", file=sys.stderr)
        return 2
    if not args.resume and (not args.files or not args.requirement):
        print("error: give one or more FILEs and --requirement (or --resume SIM_ID)", file=sys.stderr)
        return 2
    app = await App.create(config, FEATURES)
    bars = _Bars(sys.stderr)
    try:
        await app.start()
        sims = simulations(app)
        if args.resume:
            sim = await sims.get(args.resume)
            if sim is None:
                print(f"error: no simulation {args.resume}", file=sys.stderr)
                return 2
            last_job = await sims.job_of(sim)
            if last_job is not None and (where := await app.jobs.elsewhere(last_job)) is not None:
                print(f"error: simulation {args.resume} is running in {where}; it continues there",
                      file=sys.stderr)
                return 2
            sim_id = args.resume
        else:
            files = [Path(f).expanduser() for f in args.files]
            try:
                for f in files:
                    check_document(f, config.documents)
                sizing.check(args.agents, args.rounds)
                sizes = sizing.resolve(config.simulation, args.agents, args.rounds)
                docs = await read_documents(files, config.documents)
                cost = await asyncio.to_thread(estimate, config, docs, args.requirement, sizes)
                print(f"{len(docs)} document(s), {sizes.agents} agents at most, {sizes.rounds} rounds; "
                      f"estimated {cost.describe()}", file=sys.stderr)
                for note in sizes.notes:
                    print(f"note: {note}", file=sys.stderr)
                sim_id, _ = await sims.create(files, args.requirement, SCOPE, agents=args.agents,
                                              rounds=args.rounds,
                                              folder=Path(args.out).expanduser() if args.out else None)
            except (DocumentError, JobError) as err:
                print(f"error: {err}", file=sys.stderr)
                return 2
        app.jobs.subscribe(bars)
        job = await sims.submit(sim_id, SCOPE, None, getpass.getuser())
        job = await app.jobs.wait(job.id)
        bars.close()
        if job.state != "done":
            print(f"simulation {sim_id} {job.state}: {job.error or job.message}", file=sys.stderr)
            if job.resumable:
                print(f"continue it with: python -m bot simulate --resume {sim_id}", file=sys.stderr)
            return 1
        result = job.result or {}
        priced = config.llm.prices.get(config.llm.model) is not None
        cost = f"≈ ${result.get('cost_usd', 0):.4f}" if priced else "cost unknown (no price for the model)"
        print(f"simulation {sim_id}: {plural(result.get('llm_calls', 0), 'LLM call')}, "
              f"{plural(result.get('tokens', 0), 'token')}, {cost}")
        for name, summary in result.get("steps", {}).items():
            shown = ", ".join(f"{k}={v}" for k, v in summary.items() if not isinstance(v, (list, dict)))
            print(f"  {name}: {shown}")
        print(f"folder: {result.get('folder')}")
        report = result.get("steps", {}).get("report")
        if report:
            print(f"report: {report['report']}")
            print(f"charts: {report['charts_dir']}")
        return 0
    finally:
        bars.close()
        await app.close()
