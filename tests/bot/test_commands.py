from pathlib import Path

import pytest

from bot.app import App
from bot.commands.registry import Arg, Command, UsageError, parse_text_args
from bot.neutral import Attachment, Incoming, Reply, Sent, split_text
from bot.permissions import ADMIN


class Recorder(Reply):
    """A Reply that keeps what the bot said (the adapters' own tests exercise real platforms)."""
    max_len = 50

    def __init__(self):
        self.sent: list[str] = []
        self.errors: list[str] = []

    async def _send_one(self, text):
        self.sent.append(text)
        outer = self

        class S(Sent):
            async def edit(self, new):
                outer.sent.append(f"edit:{new}")
        return S()

    async def error(self, text):
        self.errors.append(text)

    async def upload(self, path, caption="", image=False):
        self.sent.append(f"file:{Path(path).name}")


async def noop(ctx):
    pass


SIM = Command("simulate", "run a simulation", noop, [
    Arg("docs", "documents", type="attachment", multiple=True),
    Arg("requirement", "what to predict", type="text"),
    Arg("agents", "how many agents", type="int", required=False, option=True),
])


def test_split_text_respects_the_limit_and_keeps_every_word():
    text = "\n\n".join(" ".join(f"w{i}-{j}" for j in range(30)) for i in range(5))
    parts = split_text(text, 100)
    assert all(len(p) <= 100 for p in parts)
    assert " ".join(parts).split() == text.split()
    assert split_text("x" * 250, 100) == ["x" * 100, "x" * 100, "x" * 50]


def test_console_attachments_are_file_paths(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.md"
    a.write_text("x"), b.write_text("y")
    args = parse_text_args(SIM, f"{a} {b} --agents 7 how will students react?", [], files_from_text=True)
    assert [x.filename for x in args["docs"]] == ["a.txt", "b.md"]
    assert args["agents"] == 7
    assert args["requirement"] == "how will students react?"


def test_usage_errors_say_how_to_type_the_command(tmp_path):
    with pytest.raises(UsageError, match=r"/simulate needs a document: give the file's path\. Usage"):
        parse_text_args(SIM, "what happens?", [], files_from_text=True, attach_hint="give the file's path")
    with pytest.raises(UsageError, match=r"missing docs\. Usage"):
        parse_text_args(SIM, "what happens?", [], files_from_text=True)
    f = tmp_path / "a.txt"
    f.write_text("x")
    with pytest.raises(UsageError, match="agents must be a whole number"):
        parse_text_args(SIM, f"{f} --agents many what?", [], files_from_text=True)


async def test_admin_commands_are_refused_to_others(config):
    app = await App.create(config, features=[])
    try:
        ran = []

        async def secret(ctx):
            ran.append(ctx.message.author_id)

        app.commands.add(Command("wipe", "wipe", secret, permission=ADMIN))
        reply = Recorder()
        msg = Incoming("console", "console:local", "c", "u1", "u1", "/wipe")
        await app.dispatch(msg, reply)
        assert ran == [] and reply.errors[0] == "only an administrator may use /wipe."
        msg.is_admin = True
        await app.dispatch(msg, reply)
        assert ran == ["u1"]
    finally:
        await app.close()


async def test_long_answers_are_split_and_plain_messages_reach_listeners(config):
    app = await App.create(config, features=["bot.features.core"])
    try:
        heard = []

        async def listener(msg):
            heard.append(msg.text)

        app.listeners.append(listener)
        reply = Recorder()
        await app.dispatch(Incoming("console", "console:local", "c", "u", "u", "hello world"), reply)
        await app.dispatch(Incoming("console", "console:local", "c", "u", "u", "/help"), reply)
        assert heard == ["hello world"]
        assert len(reply.sent) > 1 and all(len(s) <= 50 for s in reply.sent)
    finally:
        await app.close()


async def test_a_refused_command_never_fetches_its_files_and_help_says_who_may_use_it(config, tmp_path):
    app = await App.create(config, features=["bot.features.core"])
    try:
        fetched, ran = [], []

        async def fetch(reply):
            fetched.append(True)
            path = tmp_path / "doc.txt"
            path.write_text("x")
            return path

        async def simulate(ctx):
            ran.append(ctx.args["docs"][0].path.read_text())

        app.commands.add(Command("simulate", "run", simulate, SIM.args, permission=ADMIN))
        reply = Recorder()
        member = Incoming("telegram", "telegram:-1", "-1", "u1", "u1", "/simulate what next?",
                          attachments=[Attachment("doc.txt", fetch=fetch)])
        await app.dispatch(member, reply)
        assert reply.errors == ["only an administrator may use /simulate."] and fetched == [] and ran == []
        member.is_admin = True
        await app.dispatch(member, reply)
        assert fetched == [True] and ran == ["x"]
        await app.dispatch(Incoming("console", "console:local", "c", "u", "u", "/help cancel"), reply)
        said = " ".join(reply.sent).split()  # this Reply splits at 50 characters
        assert " ".join(said).endswith("(who may use it: the person who started this job or an administrator)")
    finally:
        await app.close()
