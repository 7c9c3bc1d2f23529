"""A fake Telegram Bot API on 127.0.0.1 for the real python-telegram-bot, polling included.

It runs on the test's event loop. ``push_message`` queues an update that the next
``getUpdates`` long-poll returns (at most ``limit`` at a time, like the Bot API; an offset
confirms the updates below it, and ``resend_confirmed`` sends confirmed ones again); every
call the bot makes is kept in ``calls`` as (method, params, files) and ``wait_for`` awaits
one that matches; ``push_raw`` queues updates as they are, however malformed. Files the test offers
with ``add_file`` are served under /file/bot<token>/<path>. An edit to identical text gets
Telegram's 400 "message is not modified", as the real API does. A user in ``unstarted`` never
opened a private chat with the bot: sending into it gets Telegram's 403 "bot can't initiate
conversation with a user". While ``down``, getUpdates answers 502 Bad Gateway, as Telegram does
when its side drops (counted in ``refused_polls``); ``polled``: when getUpdates was last served.
"""
from __future__ import annotations

import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from aiohttp import web

from tests.fakes.local_server import LocalServer

USER_ID = 7   # who sends what a test pushes, unless it names someone
BOT_USER = {"id": 4242, "is_bot": True, "first_name": "WorldBot", "username": "world_bot",
            "can_join_groups": True, "can_read_all_group_messages": False, "supports_inline_queries": False}


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    files: dict[str, tuple[str, bytes]] = field(default_factory=dict)


class FakeTelegram(LocalServer):
    def __init__(self, token: str = "123:TEST"):
        super().__init__()
        self.token = token
        self.calls: list[Call] = []
        self.files: dict[str, tuple[str, bytes]] = {}  # file_id -> (file_path, data)
        self.admins: set[tuple[int, int]] = set()       # (chat_id, user_id) that are administrators
        self.texts: dict[tuple[int, int], str] = {}     # (chat_id, message_id) -> current text
        self.unstarted: set[int] = set()                 # users the bot may not write to privately
        self._updates: list[dict] = []
        self.confirmed: list[dict] = []                  # updates a later getUpdates offset confirmed
        self.down = False
        self.refused_polls = 0
        self.polled = 0.0
        self._update_ids = itertools.count(1)
        self._message_ids = itertools.count(1000)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/bot"

    @property
    def base_file_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/file/bot"

    async def start(self) -> "FakeTelegram":
        app = web.Application(client_max_size=100 * 2**20)
        app.router.add_route("*", "/bot{token}/{method}", self._api)
        app.router.add_get("/file/bot{token}/{path:.+}", self._download)
        await self._serve(app)
        return self

    async def stop(self) -> None:
        await self._close()

    # -- what a test does ------------------------------------------------------------

    def add_file(self, file_id: str, filename: str, data: bytes) -> None:
        self.files[file_id] = (f"documents/{filename}", data)

    def push_message(self, chat_id: int, text: str = "", *, user_id: int = USER_ID, chat_type: str | None = None,
                     document: dict | None = None, reply_to: dict | None = None,
                     thread_id: int | None = None, language_code: str | None = None) -> dict:
        """Queue an incoming message; ``document`` = {'file_id','file_name','file_size'};
        ``language_code``: the sender's app language (IETF tag), as Telegram sends it."""
        chat_type = chat_type or ("private" if chat_id > 0 else "supergroup")
        message: dict[str, Any] = {
            "message_id": next(self._message_ids), "date": int(time.time()),
            "chat": {"id": chat_id, "type": chat_type, **({"first_name": "Ann"} if chat_type == "private"
                                                           else {"title": "Group"})},
            "from": {"id": user_id, "is_bot": False, "first_name": f"User{user_id}",
                     **({"language_code": language_code} if language_code else {})},
        }
        if thread_id is not None:
            message.update(message_thread_id=thread_id, is_topic_message=True)
        if document is not None:
            message["document"] = {"file_unique_id": document["file_id"] + "u", **document}
            if text:
                message["caption"] = text
        elif text:
            message["text"] = text
            if text.startswith("/"):
                cmd = text.split()[0]
                message["entities"] = [{"type": "bot_command", "offset": 0, "length": len(cmd)}]
        if reply_to is not None:
            message["reply_to_message"] = reply_to
        self._updates.append({"update_id": next(self._update_ids), "message": message})
        self._poke()
        return message

    def push_raw(self, update: dict) -> dict:
        """Queue ``update`` as it is, however malformed (a test's fuzzed update), under the next
        ``update_id``."""
        update = {"update_id": next(self._update_ids), **update}
        self._updates.append(update)
        self._poke()
        return update

    def resend_confirmed(self, count: int) -> list[dict]:
        """Send the last ``count`` confirmed updates again, as Telegram may after a lost answer."""
        again = self.confirmed[-count:]
        self._updates[:0] = again
        self._poke()
        return again

    def calls_of(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    async def wait_for(self, method: str, predicate: Callable[[Call], bool] = lambda c: True,
                       timeout: float = 10.0) -> Call:
        def failure() -> str:
            seen = [(c.method, c.params.get("text") or c.params.get("caption")) for c in self.calls]
            return f"no {method} call matched within {timeout}s; calls: {seen}"
        return await self._wait_for_call(lambda c: c.method == method and predicate(c), timeout, failure)

    # -- the API ----------------------------------------------------------------------

    def _message(self, chat_id: Any, **extra: Any) -> dict:
        chat_id = int(chat_id)
        return {"message_id": next(self._message_ids), "date": int(time.time()), "from": BOT_USER,
                "chat": {"id": chat_id, "type": "private" if chat_id > 0 else "supergroup"}, **extra}

    async def _api(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return web.json_response({"ok": False, "error_code": 401, "description": "Unauthorized"}, status=401)
        method = request.match_info["method"]
        if method == "getUpdates":
            if self.down:
                self.refused_polls += 1
                return web.json_response({"ok": False, "error_code": 502, "description": "Bad Gateway"}, status=502)
            self.polled = time.monotonic()
        params: dict[str, Any] = {}
        files: dict[str, tuple[str, bytes]] = {}
        if request.content_type in ("multipart/form-data", "application/x-www-form-urlencoded"):
            for key, value in (await request.post()).items():
                if isinstance(value, web.FileField):
                    files[key] = (value.filename, value.file.read())
                else:
                    params[key] = value
        elif request.can_read_body:
            params = await request.json()
        for key, value in list(params.items()):  # PTB JSON-encodes non-string values
            if isinstance(value, str) and value[:1] in "[{" or key in ("chat_id", "message_id", "offset",
                                                                       "timeout", "user_id", "limit"):
                try:
                    params[key] = json.loads(value)
                except (ValueError, TypeError):
                    pass
        handler = getattr(self, f"_m_{method}", None)
        if method != "getUpdates":
            self.calls.append(Call(method, params, files))
            self._poke()
        if method.startswith("send") and params.get("chat_id") in self.unstarted:
            return web.json_response({"ok": False, "error_code": 403, "description":
                                      "Forbidden: bot can't initiate conversation with a user"}, status=403)
        if handler is None:
            return web.json_response({"ok": True, "result": True})
        try:
            result = await handler(params, files)
        except (KeyError, ValueError, TypeError) as err:  # what Telegram says of a parameter it cannot read
            return web.json_response({"ok": False, "error_code": 400, "description": f"Bad Request: {err}"},
                                     status=400)
        if isinstance(result, web.Response):
            return result
        return web.json_response({"ok": True, "result": result})

    async def _m_getMe(self, params, files):
        return BOT_USER

    async def _m_getUpdates(self, params, files):
        offset = int(params.get("offset") or 0)
        self.confirmed += [u for u in self._updates if u["update_id"] < offset]
        self._updates = [u for u in self._updates if u["update_id"] >= offset]
        timeout = float(params.get("timeout") or 0)
        deadline = time.monotonic() + timeout
        while not self._updates and time.monotonic() < deadline:
            await self._next_change(min(0.5, deadline - time.monotonic()))
        return self._updates[:int(params.get("limit") or 100)]

    async def _m_sendMessage(self, params, files):
        msg = self._message(params["chat_id"], text=params["text"])
        self.texts[(msg["chat"]["id"], msg["message_id"])] = params["text"]
        return msg

    async def _m_editMessageText(self, params, files):
        key = (int(params["chat_id"]), int(params["message_id"]))
        if self.texts.get(key) == params["text"]:
            return web.json_response({"ok": False, "error_code": 400, "description":
                                      "Bad Request: message is not modified: specified new message content "
                                      "and reply markup are exactly the same"}, status=400)
        self.texts[key] = params["text"]
        return self._message(key[0], text=params["text"]) | {"message_id": key[1]}

    async def _sent_file(self, params, files, kind):
        name, data = files.get(kind, ("file", b""))
        entry = {"file_id": f"sent-{len(self.calls)}", "file_unique_id": f"u{len(self.calls)}",
                 "file_size": len(data)}
        body = [entry | {"width": 1, "height": 1}] if kind == "photo" else entry | {"file_name": name}
        return self._message(params["chat_id"], **{kind: body}, caption=params.get("caption", ""))

    async def _m_sendDocument(self, params, files):
        return await self._sent_file(params, files, "document")

    async def _m_sendPhoto(self, params, files):
        return await self._sent_file(params, files, "photo")

    async def _m_sendAnimation(self, params, files):
        message = await self._sent_file(params, files, "animation")
        message["animation"] |= {"width": 1, "height": 1, "duration": 1}
        return message

    async def _m_getFile(self, params, files):
        file_id = params["file_id"]
        if file_id not in self.files:
            return web.json_response({"ok": False, "error_code": 400,
                                      "description": "Bad Request: invalid file_id"}, status=400)
        path, data = self.files[file_id]
        return {"file_id": file_id, "file_unique_id": file_id + "u", "file_size": len(data), "file_path": path}

    async def _m_getChatMember(self, params, files):
        chat_id, user_id = int(params["chat_id"]), int(params["user_id"])
        status = "administrator" if (chat_id, user_id) in self.admins else "member"
        member = {"status": status, "user": {"id": user_id, "is_bot": False, "first_name": f"User{user_id}"}}
        if status == "administrator":
            member.update({k: False for k in (
                "can_be_edited", "is_anonymous", "can_manage_chat", "can_delete_messages",
                "can_manage_video_chats", "can_restrict_members", "can_promote_members", "can_change_info",
                "can_invite_users", "can_post_stories", "can_edit_stories", "can_delete_stories")})
        return member

    async def _download(self, request: web.Request) -> web.Response:
        for path, data in self.files.values():
            if path == request.match_info["path"]:
                return web.Response(body=data, content_type="application/octet-stream")
        return web.Response(status=404)
