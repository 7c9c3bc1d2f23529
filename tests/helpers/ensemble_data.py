"""Simulations that have run, registered in a database, without running camel-oasis: the sample run
of tests/helpers/simdata.py copied into each run's folder, its stances written by hand, so what the
runs ended in is known. ``ran_simulation`` makes one simulation of one run, or an ensemble whose
runs are registered as step 4 registers them (engine.sim.ensemble.members.prepare)."""
from __future__ import annotations

import shutil

from engine.sim import records
from engine.sim.ensemble import members
from engine.sim.records import SimRecord
from tests.helpers.compare_data import write_stances
from tests.helpers.sim import SAMPLE
from tests.helpers.simdata import NAMES, sample_simulation, write_environment

REQUIREMENT = "How will commuters react to the transit fare hike?"


def camp(score: float) -> dict:
    """Every agent at ``score`` on Twitter in rounds 1-3 (a run that ends for, above 0.2, or against)."""
    return {("twitter", rnd): dict.fromkeys(range(len(NAMES)), score) for rnd in (1, 2, 3)}


async def ran_simulation(db, config, tmp_path_factory, tmp_path, stances: list[dict], scope: str = "console:local",
                         channel: str = "console", audience: str = "") -> SimRecord:
    """A simulation of ``len(stances)`` runs, run K with the stances ``stances[K-1]``, of the
    channel's ``audience`` ('' public)."""
    runs = len(stances)
    sim_id, _ = await records.create(db, config, [SAMPLE], REQUIREMENT, scope, channel,
                                     runs=runs if runs > 1 else None, audience=audience)
    sim = await records.get(db, sim_id)
    assert sim is not None
    write_environment(sim.folder, sim_id)
    sample = sample_simulation(tmp_path_factory, tmp_path / f"sample-{sim_id}")
    targets = await members.prepare(db, config, sim, runs) if runs > 1 else [sim]
    for target, scores in zip(targets, stances):
        for platform in ("twitter", "reddit"):
            shutil.copytree(sample / platform, target.folder / platform)
        await write_stances(db, target.id, scores)
    return sim
