"""`discord sync` publishes the slash commands (on demand, not at every start); `discord invite`
prints the link that adds the bot to a server."""
from __future__ import annotations

from engine.config import secret


def register(sub) -> None:
    p = sub.add_parser("discord", help="Discord: publish slash commands, print the invite link")
    dsub = p.add_subparsers(dest="discord_command", metavar="<action>", required=True)
    sync = dsub.add_parser("sync", help="publish the slash commands (to [discord] sync_guild, or globally)")
    where = sync.add_mutually_exclusive_group()
    where.add_argument("--guild", type=int, help="guild id (overrides [discord] sync_guild); instant")
    where.add_argument("--global", dest="everywhere", action="store_true",
                       help="publish globally, ignoring sync_guild (may take a while to show up)")
    sync.set_defaults(func=run_sync)
    invite = dsub.add_parser("invite", help="print the OAuth2 link that adds the bot to a server")
    invite.set_defaults(func=run_invite)


def _token_missing(config) -> bool:
    if secret(config.discord.token_env) is None:
        print(f"error: set the bot token in the environment variable {config.discord.token_env}")
        return True
    return False


async def run_sync(args, config) -> int:
    from bot.adapters.discord_adapter import sync_commands
    from bot.app import App

    if _token_missing(config):
        return 2
    guild = None if args.everywhere else (args.guild or (int(config.discord.sync_guild)
                                                         if config.discord.sync_guild else None))
    app = await App.create(config)
    try:
        names = await sync_commands(app, guild)
    finally:
        await app.close()
    target = f"guild {guild}" if guild else "all servers (global; Discord may take up to an hour)"
    print(f"synced {len(names)} commands to {target}: {', '.join('/' + n for n in names)}")
    return 0


async def run_invite(args, config) -> int:
    import discord

    from bot.adapters.discord_adapter import invite_url, point_at

    if _token_missing(config):
        return 2
    point_at(config.discord)
    client = discord.Client(intents=discord.Intents.none())
    try:
        await client.login(secret(config.discord.token_env) or "")   # _token_missing: it is set
        assert client.application_id is not None  # known once logged in
        print(invite_url(client.application_id))
    finally:
        await client.close()
    return 0
