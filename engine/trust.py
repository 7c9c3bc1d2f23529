"""Whom the operator trusts with its LLM key: the owners, and the servers and chats they allowed.

The bot is public: anyone can find it and message it, and anyone can invite it into a server or
group of their own, where they are the administrator. So what spends on the operator's key is
decided here, once, from ``[bot]``:

- **People** are written ``<platform>:<user id>`` (``telegram:123``, ``discord:456``; ``user_key``).
  The owners are ``[bot] owner_ids``, plus whoever sits at the console (the person running the bot).
- **Scopes** are ``<platform>:<id>`` as the adapters name them: a Discord server ``discord:<guild>``,
  a Discord direct message ``discord:dm-<user>`` (``dm_scope``), a Telegram chat ``telegram:<chat>``,
  where a private chat's id is its user's id (positive; groups are negative), and ``console:local``.
- A scope is **allowed** (the normal budgets of ``[llm]`` hold there) when it is the console, one of
  ``[bot] allowed_scopes`` or an owner's direct message. Every other scope is a **guest**: its daily
  spending is also capped by ``[llm] guest_budget_*`` (engine.llm.usage), so a stranger's server
  cannot spend the operator's whole key.
- In a direct message the administrators are the owners (``[bot] dm_admins = "owners"``), or the
  person themselves (``"everyone"``, spending still capped as a guest's). With "owners", nothing
  at all is spent in a stranger's direct message (``spends_in``): no command, and no belief
  extraction or topic naming of what they write there.
"""
from __future__ import annotations

from engine.config import BotSection

CONSOLE = "console"
_DISCORD_DM = "discord:dm-"


def user_key(platform: str, author_id: str) -> str:
    """One person across platforms: 'telegram:123'; '' when the author is not known."""
    return f"{platform}:{author_id}" if author_id else ""


def dm_scope(platform: str, user_id: str) -> str:
    """The scope of a direct message with ``user_id`` on a platform whose DMs are not chats of their
    own id (Discord)."""
    return f"{platform}:dm-{user_id}"


def dm_user(scope: str) -> str | None:
    """The person whose direct message with the bot ``scope`` is ('telegram:123'), or None for a
    server, group or anything else."""
    if scope.startswith(_DISCORD_DM):
        return "discord:" + scope[len(_DISCORD_DM):]
    platform, _, chat = scope.partition(":")
    if platform == "telegram" and chat.isdigit():  # private chats have the user's (positive) id
        return scope
    return None


def is_direct(scope: str) -> bool:
    return dm_user(scope) is not None


class Trust:
    """The owners and allowed scopes of ``[bot]``, asked by permissions, budgets and job caps."""

    def __init__(self, cfg: BotSection):
        self.cfg = cfg
        self.owners = frozenset(cfg.owner_ids)
        self.allowed = frozenset(cfg.allowed_scopes)

    def is_owner(self, user: str) -> bool:
        """``user`` as ``user_key`` writes it; the person at the console always is one."""
        return user in self.owners or user.startswith(CONSOLE + ":")

    def started_by_owner(self, scope: str, author_id: str) -> bool:
        """Whether the author id of someone acting in ``scope`` (a job's starter) is an owner's."""
        return bool(author_id) and self.is_owner(user_key(scope.partition(":")[0], author_id))

    def dm_admin(self, user: str) -> bool:
        """Whether ``user`` administers their direct message with the bot."""
        return self.cfg.dm_admins == "everyone" or self.is_owner(user)

    def spends_in(self, scope: str) -> bool:
        """Whether the LLM may spend anything for ``scope``: not in the direct message of someone
        who does not administer it."""
        person = dm_user(scope)
        return person is None or self.dm_admin(person)

    def is_guest(self, scope: str) -> bool:
        """A scope the operator has not allowed: a stranger's server, group or direct message."""
        if scope.startswith(CONSOLE + ":") or scope in self.allowed:
            return False
        owner = dm_user(scope)
        return owner is None or not self.is_owner(owner)
