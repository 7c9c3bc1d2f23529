"""The run's schedule and its agent-memory bound, without starting a child process."""
from __future__ import annotations

from collections import Counter

from engine.sim.environment.models import AgentConfig, SimulationConfig, TimeConfig
from engine.sim.run.child import oasis_setup
from engine.sim.run.schedule import active_steps, follow_edges, scheduled_posts
from tests.fakes.openai_server import FakeOpenAI, SocialResponder
from tests.helpers.sim import make_sim_folder


def config(**agent) -> SimulationConfig:
    base = dict(entity_type="Person", active_hours=list(range(24)))
    return SimulationConfig(sim_id="u", requirement="r", time=TimeConfig(rounds=48, minutes_per_round=60),
                            agents=[AgentConfig(agent_id=i, name=f"a{i}", username=f"a{i}", **{**base, **agent})
                                    for i in range(20)], seed=3)


def test_activity_follows_levels_hours_and_is_reproducible():
    busy, idle = config(activity_level=1.0), config(activity_level=0.1)

    def count(cfg) -> int:
        return sum(len(active_steps(cfg, "twitter", r, 3)) for r in range(48))

    assert count(busy) == 20 * 48 and count(idle) < count(busy) / 4
    night = config(activity_level=1.0, active_hours=[9])
    assert {r for r in range(48) if active_steps(night, "twitter", r, 3)} == {
        r for r in range(48) if night.time.hour_of_round(r) == 9}
    assert active_steps(idle, "reddit", 7, 3) == active_steps(idle, "reddit", 7, 3)  # resumable


def test_posts_per_hour_sets_steps_and_delay_holds_agents_back():
    chatty = config(activity_level=1.0, posts_per_hour=2.5)
    steps = Counter(n for r in range(48) for n in active_steps(chatty, "twitter", r, 3).values())
    assert set(steps) == {2, 3} and 0.3 < steps[3] / sum(steps.values()) < 0.7
    capped = config(activity_level=1.0, posts_per_hour=9)
    assert set(active_steps(capped, "twitter", 0, 3).values()) == {3}
    slow = config(activity_level=1.0, response_delay_rounds=2)
    assert not active_steps(slow, "twitter", 1, 3) and active_steps(slow, "twitter", 2, 3)


def test_platform_membership_posts_events_and_influence(tmp_path):
    cfg = make_sim_folder(tmp_path, agents=6, rounds=3)
    assert set(active_steps(cfg, "reddit", 0, 3)) == {1, 2, 3, 5}  # 0 and 4 are Twitter-only
    assert [p.content for p in scheduled_posts(cfg, "twitter", 0)] == ["The toll starts Monday."]
    assert scheduled_posts(cfg, "twitter", 1) == [] and scheduled_posts(cfg, "reddit", 1)[0].kind == "event"
    many = config(activity_level=1.0)
    for i, agent in enumerate(many.agents):
        agent.influence = 5.0 if i == 0 else 0.5
    followers = Counter(followee for _, followee in follow_edges(many, "twitter", 0.2))
    assert followers[0] == 19 and max(v for k, v in followers.items() if k != 0) < 10


def test_token_counter_round_trips_without_downloads():
    counter = oasis_setup.make_token_counter()
    text = "Überbrückung — the toll 🚗 starts Monday"
    assert counter.decode(counter.encode(text)) == text
    assert counter.count_tokens_from_messages([{"role": "user", "content": "x" * 400}]) >= 100


async def test_memory_bound_never_orphans_tool_results():
    from camel.agents import ChatAgent
    from camel.toolkits import FunctionTool

    def create_post(content: str) -> dict:
        """Create a post.

        Args:
            content (str): the text of the post.
        """
        return {"success": True}

    def do_nothing() -> dict:
        """Do nothing this round."""
        return {"success": True}

    with FakeOpenAI(SocialResponder()) as server:
        model = oasis_setup.make_model(server.base_url, "fake-model", "key", 10, 8192)
        agent = ChatAgent("You are a commuter.", model=model, max_iteration=1,
                          tools=[FunctionTool(create_post), FunctionTool(do_nothing)])
        for i in range(5):
            await agent.astep(f"round {i}: your feed")
            oasis_setup.trim_memory(agent, keep_rounds=2)
        messages, _ = agent.memory.get_context()
    assert messages[0]["role"] == "system"
    assert [m["content"] for m in messages if m["role"] == "user"] == ["round 3: your feed", "round 4: your feed"]
    called = set()
    for m in messages:
        called |= {tc["id"] for tc in m.get("tool_calls") or []}
        if m["role"] == "tool":
            assert m["tool_call_id"] in called
    assert any(m["role"] == "tool" for m in messages)


def test_fake_endpoint_enforces_the_tool_call_sequence():
    from tests.fakes.openai_server import tool_sequence_problem

    call = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
                                                                   "function": {"name": "f", "arguments": "{}"}}]}
    result = {"role": "tool", "tool_call_id": "c1", "content": "ok"}
    user = {"role": "user", "content": "hi"}
    assert tool_sequence_problem([user, call, result, user]) == ""
    assert "without a preceding tool call" in tool_sequence_problem([user, result, user])
    assert "not answered" in tool_sequence_problem([user, call, user])


async def test_usage_meter_counts_answers_with_and_without_usage_figures():
    """camel's real model backend against the fake: figures as the server gives them, else an
    estimate (about 4 characters per token), each call seen by the callback."""
    from tests.fakes.openai_server import completion

    answers = [completion("fine", prompt_tokens=120, completion_tokens=30),
               {k: v for k, v in completion("x" * 80).items() if k != "usage"}]
    seen = []
    with FakeOpenAI(lambda body: answers.pop(0)) as server:
        model = oasis_setup.make_model(server.base_url, "fake-model", "key", 10, 8192)
        _meter = oasis_setup.UsageMeter(model, seen.append)  # counts the model's calls while it lives
        await model.arun([{"role": "user", "content": "hello"}])
        await model.arun([{"role": "user", "content": "y" * 398}])
    assert seen == [{"calls": 1, "prompt_tokens": 120, "completion_tokens": 30},
                    {"calls": 2, "prompt_tokens": 120 + 100, "completion_tokens": 30 + 20}]


def test_the_response_delay_holds_agents_back_after_each_piece_of_news():
    from engine.sim.environment.models import EventConfig, InitialPost, ScheduledEvent
    slow = config(activity_level=1.0, response_delay_rounds=2)
    slow.events = EventConfig(initial_posts=[InitialPost(agent_id=0, content="The toll starts Monday.")],
                              scheduled_events=[ScheduledEvent(round=10, content="The toll is doubled.", agent_id=1,
                                                               platform="reddit")])

    def quiet(platform: str, injected: tuple[int, ...] = ()) -> set[int]:
        return {r for r in range(24) if not active_steps(slow, platform, r, 3, injected)}

    assert quiet("reddit") == {0, 1, 10, 11}          # after the first post and after the scheduled one
    assert quiet("twitter") == {0, 1}                  # the scheduled post goes out on Reddit only
    assert quiet("twitter", injected=(16,)) == {0, 1, 16, 17}   # an injected event is news too
    quick = config(activity_level=1.0)
    quick.events = slow.events
    assert not any(not active_steps(quick, "reddit", r, 3, (16,)) for r in range(24))  # no delay, never held
