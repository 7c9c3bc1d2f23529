"""What differs between two runs, read from their logs, platform databases and stances.

``load_run`` reads one run (``engine/sim/report/stats``, ``engine/sim/stance/history``, its injected
events and how far they travelled); ``compare_runs`` sets two side by side:
- where they part: the rounds both played alike (``engine/sim/compare/divergence``); what follows is
  compared from the first round after those (round 1 when they differ from the start);
- the agents whose behaviour differs most after that round: the same people in both runs,
  matched by agent id; the difference is the actions taken, type by type, plus
  ``STANCE_WEIGHT`` x the change of the mean stance score (from -1 against to +1 for);
- the posts only one run has (most engaged first), and the posts both share (same platform,
  id, author and words: written before they parted) whose engagement changed most.
Blocking: call through ``run_cpu``.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from engine.sim.compare.charts import run_label
from engine.sim.compare.divergence import shared_rounds
from engine.sim.compare.travel import Travel, event_travel
from engine.sim.inject.logged import Injected, read_injected
from engine.sim.report.stats import PostStat, SimStats, compute_stats
from engine.sim.run.output import POST_MADE, actions_log, is_action, read_log
from engine.sim.stance.history import Beliefs

STANCE_WEIGHT = 4.0


@dataclass
class Run:
    letter: str                      # "A" or "B"
    sim_id: str
    folder: Path
    stats: SimStats
    beliefs: Beliefs
    injected: list[Injected]
    travels: list[Travel]
    acted: dict[int, list[tuple[int, str]]]   # agent id -> (round from 1, action) taken

    @property
    def label(self) -> str:
        return run_label(self.letter, self.sim_id)

    def cite(self, post: PostStat) -> str:
        return f"[{self.letter} {post.platform} post {post.post_id}]"

    def actions_from(self, agent_id: int, from_round: int) -> Counter:
        return Counter(action for rnd, action in self.acted.get(agent_id, []) if rnd >= from_round)

    def total_from(self, from_round: int) -> int:
        return sum(n for platform in self.stats.rounds.values() for r, n in platform.items() if r + 1 >= from_round)


def load_run(letter: str, sim_id: str, folder: Path | str, beliefs: Beliefs) -> Run:
    """Everything compared about one run (blocking)."""
    folder = Path(folder)
    stats = compute_stats(folder)
    injected = read_injected(folder)
    sources = {(e.platform, e.post_id) for e in injected}   # the injection's post is no agent's doing
    acted: dict[int, list[tuple[int, str]]] = {}
    for platform in stats.platforms:
        for a in read_log(actions_log(folder, platform))[0]:
            info = a["info"] if isinstance(a.get("info"), dict) else {}
            if (is_action(a["action"]) and a.get("agent_id") is not None
                    and (platform, info.get(POST_MADE.get(a["action"], ""))) not in sources):
                acted.setdefault(int(a["agent_id"]), []).append((a["round"] + 1, a["action"]))
    return Run(letter, sim_id, folder, stats, beliefs, injected, [event_travel(folder, e) for e in injected], acted)


@dataclass
class AgentDiff:
    agent_id: int
    name: str
    a: Counter
    b: Counter
    stance_a: float | None
    stance_b: float | None

    @property
    def score(self) -> float:
        actions = sum(abs(self.a[t] - self.b[t]) for t in set(self.a) | set(self.b))
        stance = (abs(self.stance_a - self.stance_b) if self.stance_a is not None and self.stance_b is not None
                  else 0.0)
        return actions + STANCE_WEIGHT * stance


@dataclass
class Comparison:
    a: Run
    b: Run
    shared: int                                           # rounds played alike from round 1
    agents: list[AgentDiff] = field(default_factory=list)                 # most different first
    own_posts: dict[str, list[PostStat]] = field(default_factory=dict)    # letter -> posts only it has
    changed_posts: list[tuple[PostStat, PostStat]] = field(default_factory=list)   # (in A, in B)

    @property
    def from_round(self) -> int:
        return self.shared + 1

    @property
    def runs(self) -> tuple[Run, Run]:
        return self.a, self.b


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 3) if values else None


def _twin(post: PostStat, other: Run) -> PostStat | None:
    """The same post in the other run: same platform, id, author and words (written before they parted)."""
    twin = other.stats.find_post(post.platform, post.post_id)
    return twin if twin is not None and (twin.author_id, twin.content) == (post.author_id, post.content) else None


def compare_runs(a: Run, b: Run) -> Comparison:
    """What differs between two loaded runs (blocking)."""
    cmp = Comparison(a, b, shared_rounds(a.folder, b.folder, a.injected, b.injected))
    start = cmp.from_round
    names = {x.agent_id: x.name for run in (b, a) for x in run.stats.agents}
    for agent_id in sorted(set(a.acted) | set(b.acted) | set(names)):
        diff = AgentDiff(agent_id, names.get(agent_id, f"agent{agent_id}"), a.actions_from(agent_id, start),
                         b.actions_from(agent_id, start), _mean(a.beliefs.agent_scores(agent_id, start)),
                         _mean(b.beliefs.agent_scores(agent_id, start)))
        if diff.score > 0:
            cmp.agents.append(diff)
    cmp.agents.sort(key=lambda d: (-d.score, d.agent_id))
    for run, other in ((a, b), (b, a)):   # stats.posts are most engaged first
        cmp.own_posts[run.letter] = [p for p in run.stats.posts if _twin(p, other) is None]
    for pa in a.stats.posts:
        if (pb := _twin(pa, b)) is not None and pb.engagement != pa.engagement:
            cmp.changed_posts.append((pa, pb))
    cmp.changed_posts.sort(key=lambda ab: (-abs(ab[1].engagement - ab[0].engagement), ab[0].platform, ab[0].post_id))
    return cmp
