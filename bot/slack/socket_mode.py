"""Socket Mode: the same Bolt app reached over Slack's WebSocket instead of a public URL.

Used by ``chatops serve --socket-mode`` (needs ``SLACK_APP_TOKEN``, an ``xapp-`` token with
``connections:write``). The HTTP server still runs for ``/healthz`` and ``/readyz``.
"""

from __future__ import annotations

import logging

from aiohttp import web
from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler

from .bot import SlackBot

__all__ = ["SlackSocketModeAdapter"]

log = logging.getLogger(__name__)


class SlackSocketModeAdapter:
    """The Socket Mode web adapter for :func:`bot.server.create_app` (no routes; a connection instead).

    Args:
        bot: the Slack bot (built with ``SlackConfig.socket_mode=True``).
        ping_interval: seconds between WebSocket pings.
    """

    name = "slack-socket-mode"

    def __init__(self, bot: SlackBot, ping_interval: float = 10) -> None:
        self.bot = bot
        self.handler = AsyncSocketModeHandler(bot.app, app_token=bot.config.app_token, web_client=bot.client,
                                              logger=logging.getLogger("bot.slack.socket_mode"),
                                              ping_interval=ping_interval)

    def routes(self) -> list[web.RouteDef]:
        """None: Slack pushes over the WebSocket."""
        return []

    async def start(self) -> None:
        """Start the bot's upkeep, check the bot token, then open the WebSocket (``apps.connections.open``);
        errors are logged."""
        await self.bot.start()
        try:
            await self.bot.check_auth()
            await self.handler.connect_async()
            log.info("connected to Slack over Socket Mode")
        except Exception as exc:  # noqa: BLE001 - /readyz reports it; the client reconnects by itself
            log.error("Socket Mode connection failed: %s: %s", type(exc).__name__, exc)

    async def stop(self) -> None:
        """Close the WebSocket, then finish background work."""
        try:
            await self.handler.close_async()
        finally:
            await self.bot.close()

    async def ready(self) -> tuple[bool, str]:
        """Ready when ``auth.test`` succeeded and the WebSocket is connected."""
        ok, detail = await self.bot.ready()
        if not ok:
            return ok, detail
        connected = await self.handler.client.is_connected()
        return connected, detail + (", socket connected" if connected else ", socket not connected")
