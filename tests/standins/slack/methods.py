"""The Slack stand-in's Web API methods (``_m_<method>``: chat, reactions, conversations, users, files, assistant
threads, views, Socket Mode's ``apps.connections.open``), answered from its state under its lock."""

from __future__ import annotations

import json
import uuid
from typing import Any

from aiohttp import web

from tests.standins.slack.blocks import block_problem, view_problem
from tests.standins.slack.model import APP_ID, BOT_ID, BOT_USER_ID, TEAM_ID, Call, Conversation


class WebApiMethods:
    """The Web API methods of :class:`~tests.standins.slack.api.SlackStandin` (a mixin over its state)."""

    def _conv(self, p: dict[str, Any], key: str = "channel") -> tuple[str, Conversation | None, dict | None]:
        cid = str(p.get(key, ""))
        if cid[:1] in {"U", "W"} and cid in self.users:  # posting to a user id opens the app's DM
            dm = "D" + cid[1:]
            self.conversations.setdefault(dm, Conversation("im"))
            cid = dm
        conv = self.conversations.get(cid)
        if conv is None:
            return cid, None, {"ok": False, "error": "channel_not_found"}
        return cid, conv, None

    def _find(self, conv: Conversation, ts: str) -> dict[str, Any] | None:
        return next((m for m in conv.messages if m["ts"] == ts), None)

    def _m_auth_test(self, p: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "url": "https://standin.slack.com/", "team": "Stand-in", "user": "chatops",
                "team_id": TEAM_ID, "user_id": BOT_USER_ID, "bot_id": BOT_ID, "is_enterprise_install": False}

    def _m_chat_postMessage(self, p: dict[str, Any]) -> dict[str, Any]:
        cid, conv, err = self._conv(p)
        if err:
            return err
        assert conv is not None
        if not conv.member and conv.kind != "im":
            return {"ok": False, "error": "not_in_channel"}
        if not p.get("text") and not p.get("blocks"):
            return {"ok": False, "error": "no_text"}
        if "blocks" in p:
            problem = block_problem(p["blocks"])
            if problem:
                return {"ok": False, "error": "invalid_blocks", "errors": [problem]}
        if len(str(p.get("text", ""))) > 40000:
            return {"ok": False, "error": "msg_too_long"}
        msg = {"type": "message", "user": BOT_USER_ID, "bot_id": BOT_ID, "text": p.get("text", ""),
               "ts": self.next_ts(), "team": TEAM_ID, "app_id": APP_ID}
        if p.get("blocks"):
            msg["blocks"] = p["blocks"]
        if p.get("thread_ts"):
            msg["thread_ts"] = p["thread_ts"]
        conv.messages.append(msg)
        return {"ok": True, "channel": cid, "ts": msg["ts"], "message": msg}

    def _m_chat_startStream(self, p: dict[str, Any]) -> dict[str, Any]:
        cid, conv, err = self._conv(p)
        if err:
            return err
        assert conv is not None
        if not conv.member and conv.kind != "im":
            return {"ok": False, "error": "not_in_channel"}
        if not p.get("thread_ts") or self._find(conv, str(p["thread_ts"])) is None:
            return {"ok": False, "error": "invalid_arguments", "response_metadata": {
                "messages": ["a stream is a reply: thread_ts must be a message of the conversation"]}}
        if conv.kind != "im" and not (p.get("recipient_user_id") and p.get("recipient_team_id")):
            return {"ok": False, "error": "invalid_arguments", "response_metadata": {
                "messages": ["recipient_user_id and recipient_team_id are required outside DMs"]}}
        if len(str(p.get("markdown_text", ""))) > 12000:
            return {"ok": False, "error": "msg_too_long"}
        msg = {"type": "message", "user": BOT_USER_ID, "bot_id": BOT_ID, "text": str(p.get("markdown_text", "")),
               "ts": self.next_ts(), "team": TEAM_ID, "app_id": APP_ID, "thread_ts": str(p["thread_ts"]),
               "_streaming": True, "_pieces": [str(p.get("markdown_text", ""))]}
        conv.messages.append(msg)
        return {"ok": True, "channel": cid, "ts": msg["ts"]}

    def _streaming(self, p: dict[str, Any]) -> tuple[str, dict[str, Any] | None, dict[str, Any] | None]:
        cid, conv, err = self._conv(p)
        if err:
            return cid, None, err
        assert conv is not None
        msg = self._find(conv, str(p.get("ts", "")))
        if msg is None:
            return cid, None, {"ok": False, "error": "message_not_found"}
        if not msg.get("_streaming"):
            return cid, None, {"ok": False, "error": "message_not_in_streaming_state"}
        if len(str(p.get("markdown_text", ""))) > 12000:
            return cid, None, {"ok": False, "error": "msg_too_long"}
        return cid, msg, None

    def _m_chat_appendStream(self, p: dict[str, Any]) -> dict[str, Any]:
        cid, msg, err = self._streaming(p)
        if err:
            return err
        assert msg is not None
        if not p.get("markdown_text") and not p.get("chunks"):
            return {"ok": False, "error": "no_text"}
        msg["text"] += str(p.get("markdown_text", ""))
        msg["_pieces"].append(str(p.get("markdown_text", "")))
        return {"ok": True, "channel": cid, "ts": msg["ts"]}

    def _m_chat_stopStream(self, p: dict[str, Any]) -> dict[str, Any]:
        cid, msg, err = self._streaming(p)
        if err:
            return err
        assert msg is not None
        blocks = p.get("blocks") or []
        shown = [{"type": "markdown", "text": msg["text"] + str(p.get("markdown_text", ""))}, *blocks]
        problem = block_problem(shown)
        if problem:
            return {"ok": False, "error": "invalid_blocks", "errors": [problem]}
        msg["text"] += str(p.get("markdown_text", ""))
        msg["blocks"] = shown
        msg["_streaming"] = False
        # What the user now sees, recorded as one pseudo-call (like response_url): the whole message.
        self.calls.append(Call("chat.stream", {"channel": cid, "thread_ts": msg["thread_ts"], "ts": msg["ts"],
                                               "text": msg["text"], "blocks": shown,
                                               "pieces": list(msg["_pieces"])}, 200, {"ok": True, "ts": msg["ts"]}))
        return {"ok": True, "channel": cid, "ts": msg["ts"], "message": {k: v for k, v in msg.items()
                                                                         if not k.startswith("_")}}

    def _m_chat_postEphemeral(self, p: dict[str, Any]) -> dict[str, Any]:
        cid, conv, err = self._conv(p)
        if err:
            return err
        if not p.get("user"):
            return {"ok": False, "error": "user_not_in_channel"}
        return {"ok": True, "message_ts": self.next_ts()}

    def _m_chat_update(self, p: dict[str, Any]) -> dict[str, Any]:
        cid, conv, err = self._conv(p)
        if err:
            return err
        assert conv is not None
        msg = self._find(conv, str(p.get("ts", "")))
        if msg is None:
            return {"ok": False, "error": "message_not_found"}
        if msg.get("_streaming"):
            return {"ok": False, "error": "cant_update_message"}  # a stream is stopped before it is edited
        if "blocks" in p and (problem := block_problem(p["blocks"])):
            return {"ok": False, "error": "invalid_blocks", "errors": [problem]}
        msg.update({k: p[k] for k in ("text", "blocks") if k in p})
        return {"ok": True, "channel": cid, "ts": msg["ts"], "text": msg.get("text", "")}

    def _m_chat_delete(self, p: dict[str, Any]) -> dict[str, Any]:
        cid, conv, err = self._conv(p)
        if err:
            return err
        assert conv is not None
        msg = self._find(conv, str(p.get("ts", "")))
        if msg is None:
            return {"ok": False, "error": "message_not_found"}
        conv.messages.remove(msg)
        return {"ok": True, "channel": cid, "ts": msg["ts"]}

    def _reaction_target(self, p: dict[str, Any]) -> tuple[Conversation | None, dict | None]:
        cid, conv, err = self._conv(p)
        if err:
            return None, err
        assert conv is not None
        if not conv.member and conv.kind != "im":
            return None, {"ok": False, "error": "not_in_channel"}
        if self._find(conv, str(p.get("timestamp", ""))) is None:
            return None, {"ok": False, "error": "message_not_found"}
        return conv, None

    def _m_reactions_add(self, p: dict[str, Any]) -> dict[str, Any]:
        conv, err = self._reaction_target(p)
        if err:
            return err
        assert conv is not None
        names = conv.reactions.setdefault((str(p["timestamp"]), BOT_USER_ID), set())
        if p.get("name") in names:
            return {"ok": False, "error": "already_reacted"}
        names.add(str(p.get("name")))
        return {"ok": True}

    def _m_reactions_remove(self, p: dict[str, Any]) -> dict[str, Any]:
        conv, err = self._reaction_target(p)
        if err:
            return err
        assert conv is not None
        names = conv.reactions.get((str(p["timestamp"]), BOT_USER_ID), set())
        if p.get("name") not in names:
            return {"ok": False, "error": "no_reaction"}
        names.discard(str(p.get("name")))
        return {"ok": True}

    def _m_conversations_replies(self, p: dict[str, Any]) -> dict[str, Any]:
        cid, conv, err = self._conv(p)
        if err:
            return err
        assert conv is not None
        if not conv.member and conv.kind in {"group", "im", "mpim"}:
            return {"ok": False, "error": "channel_not_found"}
        ts = str(p.get("ts", ""))
        if self._find(conv, ts) is None:
            return {"ok": False, "error": "thread_not_found"}
        thread = sorted((m for m in conv.messages if m["ts"] == ts or m.get("thread_ts") == ts),
                        key=lambda m: float(m["ts"]))
        limit = max(1, min(int(p.get("limit", 1000) or 1000), 1000))
        start = int(p.get("cursor") or 0)
        page = thread[start:start + limit]
        more = start + limit < len(thread)
        return {"ok": True, "messages": [{k: v for k, v in m.items() if not k.startswith("_")} for m in page],
                "has_more": more,
                "response_metadata": {"next_cursor": str(start + limit) if more else ""}}

    def _m_conversations_members(self, p: dict[str, Any]) -> dict[str, Any]:
        cid, conv, err = self._conv(p)
        if err:
            return err
        assert conv is not None
        if not conv.member and conv.kind in {"group", "im", "mpim"}:
            return {"ok": False, "error": "channel_not_found"}
        limit = max(1, min(int(p.get("limit", 100) or 100), 1000))
        start = int(p.get("cursor") or 0)
        page = conv.people[start:start + limit]
        more = start + limit < len(conv.people)
        return {"ok": True, "members": list(page), "response_metadata": {"next_cursor": str(start + limit) if more else ""}}

    def _m_users_info(self, p: dict[str, Any]) -> dict[str, Any]:
        user = self.users.get(str(p.get("user", "")))
        if user is None:
            return {"ok": False, "error": "user_not_found"}
        out = {k: v for k, v in user.items() if not k.startswith("_")}
        if str(p.get("include_locale", "")).lower() not in {"1", "true"}:
            out.pop("locale", None)
        profile = {"real_name": user["real_name"], "display_name": user["name"]}
        if self.scopes is None or "users:read.email" in self.scopes:  # Slack shows e-mails only with the scope
            profile["email"] = user["_email"]
        out["profile"] = profile
        return {"ok": True, "user": out}

    def _m_users_lookupByEmail(self, p: dict[str, Any]) -> dict[str, Any]:
        email = str(p.get("email", "")).strip().lower()
        if not email:
            return {"ok": False, "error": "invalid_arguments"}
        user = next((u for u in self.users.values() if u["_email"].lower() == email), None)
        if user is None:
            return {"ok": False, "error": "users_not_found"}
        out = {k: v for k, v in user.items() if not k.startswith("_")}
        out["profile"] = {"real_name": user["real_name"], "display_name": user["name"], "email": user["_email"]}
        return {"ok": True, "user": out}

    def _m_conversations_open(self, p: dict[str, Any]) -> dict[str, Any]:
        users = [u for u in str(p.get("users", "")).split(",") if u]
        if len(users) != 1:  # a group DM is not needed by the bot; one user opens the app's DM with them
            return {"ok": False, "error": "users_list_not_supplied" if not users else "not_supported"}
        if users[0] not in self.users:
            return {"ok": False, "error": "user_not_found"}
        dm = "D" + users[0][1:]
        self.conversations.setdefault(dm, Conversation("im", people=[users[0], BOT_USER_ID]))
        return {"ok": True, "channel": {"id": dm}}

    def _m_files_getUploadURLExternal(self, p: dict[str, Any]) -> dict[str, Any]:
        filename, length = str(p.get("filename", "")), str(p.get("length", ""))
        if not filename or not length.isdigit():
            return {"ok": False, "error": "invalid_arguments"}
        file_id = f"F{uuid.uuid4().hex[:10].upper()}"
        self.uploads[file_id] = {"id": file_id, "filename": filename, "length": int(length), "data": None}
        return {"ok": True, "upload_url": f"{self.url}/upload/{file_id}", "file_id": file_id}

    def _m_files_completeUploadExternal(self, p: dict[str, Any]) -> dict[str, Any]:
        try:
            files = json.loads(p["files"]) if isinstance(p.get("files"), str) else p.get("files")
        except (KeyError, ValueError):
            return {"ok": False, "error": "invalid_arguments"}
        if not files:
            return {"ok": False, "error": "invalid_arguments"}
        channel = str(p.get("channel_id") or p.get("channels") or "")
        conv = self.conversations.get(channel) if channel else None
        if channel and conv is None:
            return {"ok": False, "error": "channel_not_found"}
        shared = []
        for f in files:
            up = self.uploads.get(str(f.get("id", "")))
            if up is None or up["data"] is None:  # never uploaded: Slack has nothing to complete
                return {"ok": False, "error": "file_not_found"}
            shared.append({"id": up["id"], "name": up["filename"], "title": f.get("title") or up["filename"],
                           "size": len(up["data"]), "content": up["data"], "channel": channel})
        for f in shared:
            self.uploads.pop(f["id"], None)
        self.files.extend(shared)
        if conv is not None:
            conv.messages.append({"type": "message", "user": BOT_USER_ID, "ts": self.next_ts(),
                                  "text": str(p.get("initial_comment") or ""),
                                  "files": [{"id": f["id"], "name": f["name"]} for f in shared]})
        return {"ok": True, "files": [{k: v for k, v in f.items() if k != "content"} for f in shared]}

    async def _upload(self, request: web.Request) -> web.Response:
        """The upload URL ``files.getUploadURLExternal`` handed out: the file's bytes as the body (raw, or a
        multipart form's ``file`` part); the length must be the one announced."""
        file_id = request.match_info["file_id"]
        if request.content_type.startswith("multipart/"):
            form = await request.post()
            part = form.get("file") or form.get("filename")
            data = part.file.read() if hasattr(part, "file") else str(part or "").encode()
        else:
            data = await request.read()
        with self.lock:
            up = self.uploads.get(file_id)
            status = self.upload_status
            if status == 200 and (up is None or up["data"] is not None):
                status = 404
            if status == 200 and len(data) != up["length"]:
                status = 400
            if status == 200:
                up["data"] = data
        self._record(Call("upload", {"file_id": file_id, "size": len(data)}, status, None, key=file_id))
        if status != 200:
            return web.Response(status=status, text="upload refused")
        return web.Response(text=f"OK - {len(data)}")

    def _assistant(self, p: dict[str, Any]) -> dict[str, Any]:
        cid, conv, err = self._conv(p, "channel_id")
        if err:
            return err
        assert conv is not None
        if conv.kind != "im":
            return {"ok": False, "error": "invalid_channel"}  # assistant threads live in the app's DM
        if not p.get("thread_ts"):
            return {"ok": False, "error": "invalid_arguments"}
        return {"ok": True}

    _m_assistant_threads_setStatus = _assistant
    _m_assistant_threads_setSuggestedPrompts = _assistant
    _m_assistant_threads_setTitle = _assistant

    def _m_views_open(self, p: dict[str, Any]) -> dict[str, Any]:
        trigger = str(p.get("trigger_id", ""))
        if not trigger or trigger not in self.triggers:
            return {"ok": False, "error": "invalid_trigger_id"}
        self.triggers.discard(trigger)  # a trigger opens one view
        problem = view_problem(p.get("view"), "modal")
        if problem:
            return {"ok": False, "error": "invalid_arguments", "response_metadata": {"messages": [problem]}}
        view = {**p["view"], "id": f"V{next(self._ts):08d}", "team_id": TEAM_ID, "app_id": APP_ID,
                "bot_id": BOT_ID, "state": {"values": {}}, "hash": uuid.uuid4().hex[:16]}
        self.views[view["id"]] = view
        return {"ok": True, "view": view}

    def _m_views_publish(self, p: dict[str, Any]) -> dict[str, Any]:
        user = str(p.get("user_id", ""))
        if user not in self.users:
            return {"ok": False, "error": "user_not_found"}
        if not self.home_tab:
            return {"ok": False, "error": "not_enabled"}  # home_tab_enabled is false in the app's settings
        problem = view_problem(p.get("view"), "home")
        if problem:
            return {"ok": False, "error": "invalid_arguments", "response_metadata": {"messages": [problem]}}
        view = {**p["view"], "id": f"V{next(self._ts):08d}", "team_id": TEAM_ID, "app_id": APP_ID}
        self.homes[user] = view
        return {"ok": True, "view": view}

    def _m_apps_connections_open(self, p: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "url": f"ws://127.0.0.1:{self.server.port}/link/?ticket={uuid.uuid4().hex}"}
