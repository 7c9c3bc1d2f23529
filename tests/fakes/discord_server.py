"""A fake Discord (REST + gateway websocket + CDN) on 127.0.0.1 for the real discord.py.

It runs on the test's event loop. Point discord.py at it with the adapter's config
(``[discord] api_base = server.api_base, gateway_url = server.gateway_url``). The gateway
says HELLO, answers IDENTIFY with READY and one GUILD_CREATE (guild ``GUILD`` with text
channel ``CHANNEL`` and any added with ``add_channel``, each with its permission overwrites,
threads added with ``add_thread``, roles @everyone, ``ADMIN_ROLE`` and ``STAFF_ROLE``) and
acknowledges heartbeats. A test then dispatches ``interaction(...)`` (a slash command),
``message_command(...)`` (a message context-menu command picked on a message) or ``message(...)``
(in any channel), changes a channel's overwrites with ``update_channel`` (CHANNEL_UPDATE) or a role's
permissions with ``update_role`` (GUILD_ROLE_UPDATE), and awaits the bot's REST calls with
``wait_for``; every REST call is kept in ``calls`` as (method, path, json, files).
Users' messages are kept per channel and served by ``GET /channels/{id}/messages``
(``missed_message`` adds one the bot never hears of); ``drop_connections`` closes the gateway
and the client's RESUME is answered with RESUMED.
Shards: ``add_guild`` adds another server (one text channel); an IDENTIFY with ``shard: [id, n]``
gets READY and GUILD_CREATE for the servers of that shard only ((server id >> 22) % n == id, as
Discord routes them), and every later event of a server goes to the connection of its shard.
REST answers carry ``Content-Type: application/json`` exactly: discord.py insists on it.
"""
from __future__ import annotations

import asyncio
import itertools
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Sequence

from aiohttp import WSMsgType, web

from tests.fakes.local_server import LocalServer

APP_ID, GUILD, CHANNEL, ADMIN_ROLE, OWNER = "1000", "2000", "3000", "4000", "5000"
STAFF_ROLE = "4001"
BOT_USER = {"id": APP_ID, "username": "worldbot", "discriminator": "0", "global_name": None, "avatar": None,
            "bot": True, "flags": 0}
MANAGE_GUILD = 1 << 5
VIEW_CHANNEL = 1 << 10
EVERYONE_PERMS = VIEW_CHANNEL | (1 << 11) | (1 << 31)  # view channel, send messages, use app commands


def overwrite(target: str, *, allow: int = 0, deny: int = 0, member: bool = False) -> dict:
    """A permission overwrite for a role (the guild id is @everyone) or, with ``member``, a member."""
    return {"id": target, "type": 1 if member else 0, "allow": str(allow), "deny": str(deny)}


def private_to(role: str) -> list[dict]:
    """Overwrites of a channel @everyone cannot view and ``role`` can."""
    return [overwrite(GUILD, deny=VIEW_CHANNEL), overwrite(role, allow=VIEW_CHANNEL)]


def user(uid: str, name: str = "") -> dict:
    return {"id": uid, "username": name or f"user{uid}", "discriminator": "0", "global_name": None,
            "avatar": None, "flags": 0}


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat()


@dataclass
class Call:
    method: str
    path: str
    json: Any = None
    files: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    query: dict[str, str] = field(default_factory=dict)

    @property
    def content(self) -> str:
        return (self.json or {}).get("content") or "" if isinstance(self.json, dict) else ""


class FakeDiscord(LocalServer):
    def __init__(self):
        super().__init__()
        self.calls: list[Call] = []
        self.cdn: dict[str, bytes] = {}
        self.messages: dict[str, dict] = {}
        self.history: dict[str, list[dict]] = {}   # channel id -> messages users sent there, oldest first
        self.nonces: dict[str, str] = {}   # nonce -> message id
        self.fail_after_create = 0         # answer this many channel posts with 502 after creating them
        self._ids = itertools.count(10_000)
        self._seq = itertools.count(1)
        self._sockets: list[web.WebSocketResponse] = []
        self.identified = asyncio.Event()
        self.guilds: dict[str, str] = {GUILD: "Test Guild"}   # server id -> name
        self.preferred_locale = "en-US"    # every server's language (Server Settings, Community)
        self.channels: dict[str, dict] = {CHANNEL: self._channel(CHANNEL, "general", [])}
        self.shards: dict[web.WebSocketResponse, tuple[int, int]] = {}  # connection -> (shard id, shard count)
        self.identified_shards: list[tuple[int, int]] = []
        self.threads: dict[str, dict] = {}
        self.dms: dict[str, dict] = {}     # user id -> their direct-message channel with the bot
        self.roles: dict[str, dict] = {r["id"]: r for r in (
            {"id": GUILD, "name": "@everyone", "permissions": str(EVERYONE_PERMS), "position": 0},
            {"id": ADMIN_ROLE, "name": "botadmin", "permissions": str(EVERYONE_PERMS), "position": 1},
            {"id": STAFF_ROLE, "name": "staff", "permissions": str(EVERYONE_PERMS), "position": 2})}
        self.resumed = 0                   # sessions resumed after drop_connections

    # -- addresses -------------------------------------------------------------------

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v10"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/gateway"

    def next_id(self) -> str:
        return str(next(self._ids))

    async def start(self) -> "FakeDiscord":
        app = web.Application(client_max_size=100 * 2**20)
        app.router.add_get("/gateway", self._gateway)
        app.router.add_get("/cdn/{name}", self._cdn)
        app.router.add_route("*", "/api/v10/{path:.+}", self._rest)
        await self._serve(app)
        return self

    async def stop(self) -> None:
        for ws in list(self._sockets):
            await ws.close()
        await self._close()

    # -- what a test does --------------------------------------------------------------

    def member(self, uid: str, roles: tuple[str, ...] = (), permissions: int = EVERYONE_PERMS) -> dict:
        return {"user": user(uid), "roles": list(roles), "joined_at": now_iso(), "deaf": False, "mute": False,
                "flags": 0, "permissions": str(permissions)}

    def add_attachment(self, filename: str, data: bytes, size: int | None = None) -> dict:
        att_id = self.next_id()
        self.cdn[att_id] = data
        url = f"http://127.0.0.1:{self.port}/cdn/{att_id}"
        return {"id": att_id, "filename": filename, "size": len(data) if size is None else size, "url": url,
                "proxy_url": url, "content_type": "text/plain"}

    def add_channel(self, name: str, overwrites: Sequence[dict] = (), guild: str = GUILD) -> str:
        """A text channel of ``guild`` (the first server unless named); added before the bot
        connects, it arrives with GUILD_CREATE."""
        channel_id = self.next_id()
        self.channels[channel_id] = self._channel(channel_id, name, list(overwrites), guild)
        return channel_id

    def add_guild(self, guild_id: str, name: str = "Other Guild") -> str:
        """Another server the bot is in, with one text channel (its id is returned); added before
        the bot connects. Its shard is (guild_id >> 22) % shard count."""
        self.guilds[guild_id] = name
        channel_id = self.next_id()
        self.channels[channel_id] = self._channel(channel_id, "general", [], guild_id)
        return channel_id

    def guild_of(self, channel: str) -> str:
        """The server of a channel or thread (the first server for one the fake does not list)."""
        return (self.channels.get(channel) or self.threads.get(channel) or {}).get("guild_id", GUILD)

    def add_thread(self, parent: str, name: str, private: bool = False) -> str:
        """An active thread of ``parent`` (public, or private: only members added read it)."""
        thread_id = self.next_id()
        self.threads[thread_id] = {
            "id": thread_id, "type": 12 if private else 11, "name": name, "guild_id": self.guild_of(parent),
            "parent_id": parent,
            "owner_id": "6001", "message_count": 0, "member_count": 1, "rate_limit_per_user": 0, "flags": 0,
            "thread_metadata": {"archived": False, "auto_archive_duration": 1440, "archive_timestamp": now_iso(),
                                "locked": False}}
        return thread_id

    async def update_role(self, role_id: str, permissions: int) -> None:
        """Change a role's server-wide permissions (the guild id is @everyone): GUILD_ROLE_UPDATE."""
        self.roles[role_id] = {**self.roles[role_id], "permissions": str(permissions)}
        await self.dispatch("GUILD_ROLE_UPDATE", {"guild_id": GUILD, "role": self.roles[role_id]})

    async def update_channel(self, channel_id: str, overwrites: list[dict]) -> None:
        """Change a channel's permission overwrites, as a moderator would: CHANNEL_UPDATE."""
        self.channels[channel_id] = {**self.channels[channel_id], "permission_overwrites": list(overwrites)}
        await self.dispatch("CHANNEL_UPDATE", self.channels[channel_id])

    def dm_channel(self, user_id: str) -> str:
        """The id of the direct-message channel between the bot and ``user_id`` (made on first use)."""
        if user_id not in self.dms:
            self.dms[user_id] = {"id": self.next_id(), "type": 1, "recipients": [user(user_id)],
                                 "last_message_id": None}
        return self.dms[user_id]["id"]

    async def interaction(self, name: str, options: list[dict] | None = None, *, member: dict | None = None,
                          attachments: Sequence[dict] = (), channel: str = CHANNEL, dm: str | None = None,
                          locale: str = "en-US") -> dict:
        """Dispatch a slash command; options: [{'name','type','value'}]. ``dm``: a user id, who sends it
        in a direct message with the bot (no server, no member). ``locale``: the member's Discord
        language (the server's is ``preferred_locale``)."""
        data: dict[str, Any] = {"id": self.next_id(), "name": name, "type": 1, "options": options or []}
        if attachments:
            data["resolved"] = {"attachments": {a["id"]: a for a in attachments}}
        return await self._interact(data, member, channel, dm, locale)

    async def message_command(self, name: str, target: dict, *, member: dict | None = None) -> dict:
        """Dispatch a message context-menu command (a message's Apps menu) picked on ``target``, a
        message payload (what ``message`` returned), in that message's channel."""
        data = {"id": self.next_id(), "name": name, "type": 3, "target_id": target["id"],
                "resolved": {"messages": {target["id"]: target}}}
        return await self._interact(data, member, target["channel_id"])

    async def _interact(self, data: dict, member: dict | None, channel: str, dm: str | None = None,
                        locale: str = "en-US") -> dict:
        payload = self.interaction_payload(data, member, channel, dm, locale)
        await self.dispatch("INTERACTION_CREATE", payload)
        return payload

    def interaction_payload(self, data: dict, member: dict | None = None, channel: str = CHANNEL,
                            dm: str | None = None, locale: str = "en-US") -> dict:
        """An INTERACTION_CREATE's payload around ``data`` (a test may change it before ``dispatch``)."""
        token = f"itoken-{self.next_id()}"
        member = member or self.member("6000")
        payload = {
            "id": self.next_id(), "application_id": APP_ID, "type": 2, "token": token, "version": 1,
            "guild_id": self.guild_of(channel), "channel_id": channel, "channel": self.channels[channel],
            "member": member, "app_permissions": str(EVERYONE_PERMS | (1 << 15)), "locale": locale,
            "guild_locale": self.preferred_locale, "attachment_size_limit": 10 * 2**20, "entitlements": [],
            "context": 0,
            "authorizing_integration_owners": {"0": self.guild_of(channel)}, "data": data,
        }
        if dm is not None:
            dm_id = self.dm_channel(dm)
            for key in ("guild_id", "member", "guild_locale"):
                del payload[key]
            payload.update(channel_id=dm_id, channel=self.dms[dm], user=user(dm), context=1,
                           authorizing_integration_owners={"1": dm})
        return payload

    async def dm_message(self, content: str, author_id: str, reply_to: str | None = None) -> dict:
        """A user's message to the bot in their direct-message channel (``reply_to``: a message id)."""
        channel = self.dm_channel(author_id)
        msg = self.message_payload(channel, content, user(author_id))
        if reply_to is not None:
            msg.update(type=19, message_reference={"message_id": reply_to, "channel_id": channel})
        await self.dispatch("MESSAGE_CREATE", msg)
        return msg

    async def message(self, content: str, author_id: str = "6000", channel: str = CHANNEL,
                      reply_to: str | None = None) -> dict:
        """A user's message (``reply_to``: the id of the message it replies to): kept in the
        channel's history and sent to the bot over the gateway."""
        msg = self.missed_message(content, author_id, channel, reply_to)
        await self.dispatch("MESSAGE_CREATE", msg)
        return msg

    def missed_message(self, content: str, author_id: str = "6000", channel: str = CHANNEL,
                       reply_to: str | None = None) -> dict:
        """A user's message the bot never hears of (it was away): only in the channel's history."""
        msg = self.message_payload(channel, content, user(author_id))
        msg["guild_id"] = self.guild_of(channel)
        if reply_to is not None:   # Discord's reply: message type 19 with a reference
            msg.update(type=19, message_reference={"message_id": reply_to, "channel_id": channel,
                                                   "guild_id": msg["guild_id"]})
        msg["member"] = {k: v for k, v in self.member(author_id).items() if k not in ("user", "permissions")}
        self.history.setdefault(channel, []).append(msg)
        return msg

    async def drop_connections(self) -> None:
        """Close every gateway connection, as Discord does now and then: the client resumes."""
        for ws in list(self._sockets):
            self._sockets.remove(ws)
            await ws.close(code=4000)

    def listening(self, guild: str = GUILD) -> bool:
        """Whether a gateway connection that receives ``guild``'s events is open now."""
        return any(self._serves(ws, guild) for ws in self._sockets)

    def calls_to(self, method: str, contains: str) -> list[Call]:
        return [c for c in self.calls if c.method == method and contains in c.path]

    async def wait_for(self, method: str, contains: str, predicate: Callable[[Call], bool] = lambda c: True,
                       timeout: float = 10.0) -> Call:
        def failure() -> str:
            seen = [(c.method, c.path, c.content[:60]) for c in self.calls]
            return f"no {method} {contains} within {timeout}s; calls: {seen}"
        return await self._wait_for_call(
            lambda c: c.method == method and contains in c.path and predicate(c), timeout, failure)

    # -- payloads -------------------------------------------------------------------------

    @staticmethod
    def _channel(channel_id: str, name: str, overwrites: list[dict], guild: str = GUILD) -> dict:
        return {"id": channel_id, "type": 0, "name": name, "position": 0, "guild_id": guild,
                "permission_overwrites": overwrites, "nsfw": False, "parent_id": None}

    def guild_payload(self, guild: str = GUILD) -> dict:
        roles = (list(self.roles.values()) if guild == GUILD else
                 [{"id": guild, "name": "@everyone", "permissions": str(EVERYONE_PERMS), "position": 0}])
        return {
            "id": guild, "name": self.guilds[guild], "icon": None, "owner_id": OWNER, "unavailable": False,
            "member_count": 3, "large": False, "features": [], "emojis": [], "stickers": [], "roles": roles,
            "channels": [c for c in self.channels.values() if c["guild_id"] == guild],
            "threads": [t for t in self.threads.values() if t["guild_id"] == guild],
            "members": [{**self.member(APP_ID), "user": BOT_USER}], "voice_states": [],   # the bot as Discord sends
            "presences": [], "stage_instances": [], "guild_scheduled_events": [], "soundboard_sounds": [],
            "premium_tier": 0, "preferred_locale": self.preferred_locale, "joined_at": now_iso(), "mfa_level": 0,
            "verification_level": 0, "explicit_content_filter": 0, "default_message_notifications": 0,
            "system_channel_flags": 0, "nsfw_level": 0,
        }

    def message_payload(self, channel_id: str, content: str, author: dict, **extra: Any) -> dict:
        return {"id": self.next_id(), "channel_id": channel_id, "author": author, "content": content,
                "timestamp": now_iso(), "edited_timestamp": None, "tts": False, "mention_everyone": False,
                "mentions": [], "mention_roles": [], "attachments": [], "embeds": [], "pinned": False,
                "type": 0, "flags": 0, "components": [], **extra}

    # -- gateway ---------------------------------------------------------------------------

    async def dispatch(self, event: str, data: dict) -> None:
        """Send an event to the connection(s) of the shard its server belongs to; a connection
        whose client has gone (killed) misses it, as on Discord."""
        guild = data.get("guild_id") or (data["id"] if event == "GUILD_CREATE" else None)
        for ws in list(self._sockets):
            if self._serves(ws, guild):
                try:
                    await self._send(ws, event, data)
                except ConnectionResetError:
                    if ws in self._sockets:
                        self._sockets.remove(ws)

    async def _send(self, ws: web.WebSocketResponse, event: str, data: dict) -> None:
        await ws.send_str(json.dumps({"op": 0, "t": event, "s": next(self._seq), "d": data}))

    def _serves(self, ws: web.WebSocketResponse, guild: Any) -> bool:
        shard, count = self.shards.get(ws, (0, 1))
        try:
            return shard == 0 if guild is None else (int(guild) >> 22) % count == shard
        except (TypeError, ValueError):   # a malformed event's server id: shard 0 gets it
            return shard == 0

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_str(json.dumps({"op": 10, "d": {"heartbeat_interval": 41250}}))
        async for msg in ws:
            if msg.type != WSMsgType.TEXT:
                continue
            payload = json.loads(msg.data)
            op = payload.get("op")
            if op == 1:
                await ws.send_str(json.dumps({"op": 11}))
            elif op == 2:
                self.identify = payload["d"]
                shard = tuple(payload["d"].get("shard") or (0, 1))
                self.shards[ws] = shard
                self.identified_shards.append(shard)
                self._sockets.append(ws)
                guilds = [g for g in self.guilds if self._serves(ws, g)]
                await self._send(ws, "READY", {
                    "v": 10, "user": BOT_USER, "guilds": [{"id": g, "unavailable": True} for g in guilds],
                    "session_id": f"session-{shard[0]}-{shard[1]}", "resume_gateway_url": self.gateway_url,
                    "shard": list(shard), "application": {"id": APP_ID, "flags": 0}, "private_channels": [],
                    "relationships": []})
                for guild in guilds:
                    await self._send(ws, "GUILD_CREATE", self.guild_payload(guild))
                self.identified.set()
            elif op == 6:  # RESUME: the session goes on (events missed meanwhile are not replayed)
                shard, count = payload["d"]["session_id"].split("-")[1:]
                self.shards[ws] = (int(shard), int(count))
                self._sockets.append(ws)
                await ws.send_str(json.dumps({"op": 0, "t": "RESUMED", "s": next(self._seq), "d": {}}))
                self.resumed += 1
        if ws in self._sockets:
            self._sockets.remove(ws)
        self.shards.pop(ws, None)
        return ws

    async def _cdn(self, request: web.Request) -> web.Response:
        data = self.cdn.get(request.match_info["name"])
        return web.Response(body=data) if data is not None else web.Response(status=404)

    # -- REST ------------------------------------------------------------------------------

    @staticmethod
    def _json(data: Any, status: int = 200) -> web.Response:
        return web.Response(body=json.dumps(data).encode(), status=status,
                            headers={"Content-Type": "application/json"})

    async def _rest(self, request: web.Request) -> web.Response:
        path = "/" + request.match_info["path"]
        body: Any = None
        files: dict[str, tuple[str, bytes]] = {}
        if request.content_type == "multipart/form-data":
            form = await request.post()
            for key, value in form.items():
                if isinstance(value, web.FileField):
                    files[key] = (value.filename, value.file.read())
                elif key == "payload_json":
                    body = json.loads(value)
        elif request.can_read_body:
            body = await request.json()
        call = Call(request.method, path, body, files, dict(request.query))
        self.calls.append(call)
        self._poke()
        answer = self._answer(call)
        return web.Response(status=204) if answer is None else self._json(*answer)

    def _answer(self, call: Call) -> tuple[Any, ...] | None:
        m, path, body = call.method, call.path, call.json or {}
        parts = path.strip("/").split("/")
        if m == "GET" and path == "/users/@me":
            return (BOT_USER,)
        if m == "GET" and path == "/oauth2/applications/@me":
            return ({"id": APP_ID, "name": "worldbot", "description": "", "icon": None, "bot_public": True,
                     "bot_require_code_grant": False, "owner": user(OWNER, "owner"), "team": None,
                     "verify_key": "00", "flags": 0},)
        if m == "PUT" and parts[0] == "applications":  # command sync: echo with ids (a menu command: no description)
            return ([{"description": "", **cmd, "id": self.next_id(), "application_id": APP_ID, "version": "1",
                      "default_member_permissions": cmd.get("default_member_permissions")} for cmd in body],)
        if m == "POST" and parts[0] == "interactions":
            return ({"interaction": {"id": parts[1], "type": 2,
                                     "response_message_loading": body.get("type") == 5,
                                     "response_message_ephemeral": bool((body.get("data") or {}).get("flags", 0)
                                                                        & 64)},
                     "resource": {"type": body.get("type")}},)
        if parts[0] == "webhooks":
            if m == "DELETE":
                return None
            return (self._store(self.message_payload(CHANNEL, body.get("content") or "", BOT_USER,
                                                     webhook_id=APP_ID, attachments=self._attachments(call))),)
        if m == "POST" and parts[0] == "channels" and parts[2:3] == ["typing"]:  # the typing indicator
            return None
        if parts[0] == "channels" and parts[2:3] == ["messages"]:
            if m == "GET" and len(parts) == 3:
                return (self._history_page(parts[1], call.query),)
            if m == "POST":
                nonce = body.get("nonce")
                if body.get("enforce_nonce") and nonce in self.nonces:  # Discord's de-duplication
                    return (self.messages[self.nonces[nonce]],)
                msg = self._store(self.message_payload(parts[1], body.get("content") or "", BOT_USER,
                                                       attachments=self._attachments(call), nonce=nonce))
                if nonce:
                    self.nonces[nonce] = msg["id"]
                if self.fail_after_create > 0:  # created, but the answer is lost: the client retries
                    self.fail_after_create -= 1
                    return ({"message": "502: Bad Gateway", "code": 0}, 502)
                return (msg,)
            if m == "PATCH":
                msg = self.messages.get(parts[3]) or self.message_payload(parts[1], "", BOT_USER, id=parts[3])
                msg = {**msg, "content": body.get("content", msg["content"]), "edited_timestamp": now_iso()}
                return (self._store(msg),)
        return ({"message": f"fake discord: {m} {path} not implemented", "code": 0}, 404)

    def _history_page(self, channel_id: str, query: dict[str, str]) -> list[dict]:
        """GET /channels/{id}/messages: newest first, like Discord; ``after`` takes the oldest
        ``limit`` messages after that id, ``before`` the newest before it."""
        limit = min(int(query.get("limit", 50)), 100)
        found = sorted(self.history.get(channel_id, []), key=lambda msg: int(msg["id"]))
        if "after" in query:
            return [msg for msg in found if int(msg["id"]) > int(query["after"])][:limit][::-1]
        if "before" in query:
            found = [msg for msg in found if int(msg["id"]) < int(query["before"])]
        return found[::-1][:limit]

    def _attachments(self, call: Call) -> list[dict]:
        return [{"id": self.next_id(), "filename": name, "size": len(data), "url": "http://x/a",
                 "proxy_url": "http://x/a"} for name, data in call.files.values()]

    def _store(self, msg: dict) -> dict:
        self.messages[msg["id"]] = msg
        return msg
