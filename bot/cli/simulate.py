"""`simulate FILE... --requirement TEXT [--agents N] [--rounds N] [--runs N] [--lang CODE] [--out DIR]`:
run the simulation pipeline from the terminal, one progress bar per step (``--runs N``: an
ensemble of N runs, engine.sim.ensemble). With no FILE it starts from a brief: drafted by the LLM
from the requirement, or, with `--scope S --world W` or `--scope S --from-chat --channel C
[--since 7d]`, taken from that chat's memory (as the world's or the channel's audience reads it;
the simulation belongs to that scope and audience, so the chat sees it where that audience
reads). `--resume SIM_ID` continues a simulation at its first unfinished step; `--fork SIM_ID
--from-round K [--inject TEXT] [--rounds N] [--run R]` starts a new simulation from the state
after round K of another (/sim fork; an ensemble's run R, by default its median-most). It is the
same job that chat /simulate starts."""
from __future__ import annotations

import getpass
import sys
from pathlib import Path

from tqdm import tqdm

from bot.features.simulation.start import CROWD_NOTE
from engine import language
from engine.documents import Document, DocumentError, check_document, read_documents
from engine.jobs import JobError
from engine.memory.audience import PUBLIC, Viewer
from engine.memory.catchup import parse_since
from engine.memory.models import utcnow
from engine.services import open_services
from engine.sim.simulations import BRIEF_FILE
from engine.words import plural

SCOPE = "console:local"


def register(sub) -> None:
    p = sub.add_parser("simulate", help="run the simulation pipeline on documents")
    p.add_argument("files", nargs="*", metavar="FILE", help="documents (.txt .md .pdf .docx .html)")
    p.add_argument("--requirement", "-r", help="what the simulation should predict")
    p.add_argument("--agents", type=int, help="number of agents (default: [simulation] default_agents)")
    p.add_argument("--rounds", type=int, help="number of rounds (default: [simulation] default_rounds)")
    p.add_argument("--runs", type=int, help="runs with different seeds, reported with their spread (default 1; "
                                            "at most [simulation] max_runs)")
    p.add_argument("--lang", metavar="CODE", help="language the simulation writes in, e.g. en, pt-BR, th "
                                                  "(default: the requirement's, or the documents')")
    p.add_argument("--out", metavar="DIR", help="simulation folder (default: <data_dir>/sims/<id>)")
    p.add_argument("--resume", metavar="SIM_ID", help="continue this simulation at its first unfinished step")
    p.add_argument("--fork", metavar="SIM_ID", help="fork this simulation (with --from-round K)")
    p.add_argument("--from-round", type=int, metavar="K", help="fork: the completed round the fork starts after")
    p.add_argument("--inject", metavar="TEXT", help="fork: an event published at the fork's first round")
    p.add_argument("--run", type=int, metavar="R", help="fork: which run of an ensemble (default: the median-most)")
    p.add_argument("--scope", metavar="S", help="the chat whose memory seeds it (with --world or --from-chat), "
                                                 "e.g. discord:123; the simulation belongs to it")
    p.add_argument("--world", metavar="W", help="start from the memory of this world (name or id) of --scope")
    p.add_argument("--from-chat", action="store_true", help="start from the memory of --channel of --scope")
    p.add_argument("--channel", metavar="C", help="with --from-chat: the channel id")
    p.add_argument("--since", metavar="WHEN", help="with --world or --from-chat: messages since (7d, 2025-03-01)")
    p.set_defaults(func=simulate)


def _seed_problem(args) -> str | None:
    """What is wrong with the options that say where a simulation starts from, or None."""
    seeded = args.world or args.from_chat
    if seeded and (args.resume or args.fork):
        return "--world and --from-chat start a new simulation: not with --resume or --fork"
    if seeded and args.files:
        return "a simulation starts from FILEs or from a chat's memory (--world, --from-chat), not both"
    if args.world and args.from_chat:
        return "--world or --from-chat: one of them"
    if seeded and not args.scope:
        return "--world and --from-chat need --scope S: the chat whose memory seeds it (python -m bot worlds)"
    if args.from_chat and not args.channel:
        return "--from-chat needs --channel C: the channel whose messages seed it"
    if (args.channel and not args.from_chat) or (args.since and not seeded):
        return "--channel goes with --from-chat, and --since with --world or --from-chat"
    if args.scope and not seeded:
        return "--scope goes with --world or --from-chat"
    return None


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
    if args.fork and args.from_round is None:
        print("error: --fork needs --from-round K (the completed round the fork starts after)", file=sys.stderr)
        return 2
    if not args.fork and (args.from_round is not None or args.inject or args.run is not None):
        print("error: --from-round, --inject and --run go with --fork SIM_ID", file=sys.stderr)
        return 2
    if not args.resume and not args.fork and not args.requirement:
        print("error: give --requirement, with FILEs, --world or --from-chat, or none of them for a brief the LLM "
              "drafts (or --resume SIM_ID, or --fork SIM_ID)", file=sys.stderr)
        return 2
    if problem := _seed_problem(args):
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if args.lang is not None and (args.fork or args.resume):
        print("error: --lang goes with a new simulation (a fork or a resumed one keeps its language)",
              file=sys.stderr)
        return 2
    if args.lang is not None and language.normalize(args.lang) is None:
        print(f"error: --lang {args.lang}: not a language code; give one such as en, pt-BR or th", file=sys.stderr)
        return 2
    services = await open_services(config)
    bars = _Bars(sys.stderr)
    try:
        await services.start(memory=False)
        sims, jobs = services.sims, services.jobs
        assert sims is not None  # built with open_services' default
        scope = SCOPE
        if args.fork:
            try:
                parent = await sims.get(args.fork)
                which = ""
                if parent is not None:
                    parent, which = await sims.pick_run(parent, args.run)
                fork = await sims.fork(parent.id if parent is not None else args.fork, args.from_round,
                                       rounds=args.rounds, inject=args.inject, asked_by=getpass.getuser())
            except JobError as err:
                print(f"error: {err}", file=sys.stderr)
                return 2
            if fork.parent_id != args.fork and parent is not None:
                print(f"forking run {parent.run} of {args.fork} ({fork.parent_id}"
                      + (f", {which}; --run R picks another" if which else "") + ")", file=sys.stderr)
            print(f"simulation {fork.sim_id}: fork of {fork.parent_id} after round {fork.from_round}, "
                  f"runs rounds {fork.from_round + 1}-{fork.rounds}", file=sys.stderr)
            sim_id, scope = fork.sim_id, fork.scope
        elif args.resume:
            sim = await sims.get(args.resume)
            if sim is None:
                print(f"error: no simulation {args.resume}", file=sys.stderr)
                return 2
            last_job = await sims.job_of(sim)
            if last_job is not None and (where := await jobs.elsewhere(last_job)) is not None:
                print(f"error: simulation {args.resume} is running in {where}; it continues there",
                      file=sys.stderr)
                return 2
            sim_id = args.resume
        else:
            files = [Path(f).expanduser() for f in args.files]
            scope = args.scope or SCOPE
            try:
                for f in files:
                    check_document(f, config.documents)
                sims.check_sizes(args.agents, args.rounds, args.runs)
                sizes = sims.sizes(args.agents, args.rounds, args.runs)
                brief, brief_cost = None, None
                if args.world or args.from_chat:
                    since = parse_since(args.since, utcnow(), config.memory.timezone) if args.since else None
                    viewer = (Viewer.operator(scope) if args.world
                              else Viewer(scope, await sims.memory.audience_of(scope, args.channel)))
                    brief = await sims.memory_brief(viewer, world=args.world, since=since,
                                                    channel=args.channel if args.from_chat else None)
                elif not files:
                    brief = await sims.draft_brief(args.requirement, scope, args.lang)
                    brief_cost = sims.brief_cost(args.requirement, brief)
                    print(brief.body, file=sys.stderr)
                docs = ([Document(BRIEF_FILE, brief.render())] if brief
                        else await read_documents(files, config.documents))
                cost = await sims.estimate(docs, args.requirement, sizes, brief_cost)
                what = f"a brief {brief.describe()}" if brief else f"{len(docs)} document(s)"
                runs = f", {sizes.runs} runs" if sizes.runs > 1 else ""
                print(f"{what}, {sizes.agents:,} agents{CROWD_NOTE}, {sizes.rounds:,} rounds{runs}; "
                      f"estimated {cost.describe()}", file=sys.stderr)
                for note in sizes.notes:
                    print(f"note: {note}", file=sys.stderr)
                sim_id, spec = await sims.create(files, args.requirement, scope, agents=args.agents,
                                                 rounds=args.rounds,
                                                 folder=Path(args.out).expanduser() if args.out else None,
                                                 audience=brief.audience if brief else PUBLIC, brief=brief,
                                                 runs=args.runs, texts=[d.text for d in docs], language=args.lang)
                print(f"written in {language.describe(spec.language)}", file=sys.stderr)
            except (DocumentError, JobError, ValueError) as err:
                print(f"error: {err}", file=sys.stderr)
                return 2
        jobs.subscribe(bars)
        submitted = await sims.submit(sim_id, scope, None, getpass.getuser())
        job = await jobs.wait(submitted.id)
        assert job is not None  # it was just submitted
        bars.close()
        if job.state != "done":
            print(f"simulation {sim_id} {job.state}: {job.error or job.message}", file=sys.stderr)
            if job.resumable:
                print(f"continue it with: python -m bot simulate --resume {sim_id}", file=sys.stderr)
            return 1
        result = job.result or {}
        priced = config.llm.prices.get(config.llm.model) is not None
        spent = f"≈ ${result.get('cost_usd', 0):.4f}" if priced else "cost unknown (no price for the model)"
        print(f"simulation {sim_id}: {plural(result.get('llm_calls', 0), '{n} LLM call', '{n} LLM calls')}, "
              f"{plural(result.get('tokens', 0), '{n} token', '{n} tokens')}, {spent}")
        for name, summary in result.get("steps", {}).items():
            shown = ", ".join(f"{k}={v}" for k, v in summary.items() if not isinstance(v, (list, dict)))
            print(f"  {name}: {shown}")
        print(f"folder: {result.get('folder')}")
        sim = await sims.get(sim_id)
        if sim is not None and (ensemble := await sims.ensemble(sim, with_stats=False)) is not None:
            print(f"runs: {', '.join(f'{m.run_no} {m.id}' for m in ensemble.runs)}")
            print(f"confidence: {ensemble.spread.confidence_line()}")
        report = result.get("steps", {}).get("report")
        if report:
            print(f"report: {report['report']}")
            print(f"charts: {report['charts_dir']}")
        return 0
    finally:
        bars.close()
        await services.close()
