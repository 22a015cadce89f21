"""Microsoft Teams adapter on the Bot Framework protocol (``POST /api/messages``).

Thin on purpose: Microsoft ended support for the Bot Framework SDK at the end of 2025 and its
successor (Microsoft 365 Agents SDK) speaks the same protocol, so a move must touch only this
package. :mod:`bot.teams.cards` renders (pure functions), :mod:`bot.teams.bot` turns activities
into turns and replies, :mod:`bot.teams.adapter` is the web adapter with authentication,
:mod:`bot.teams.auth` refuses impossible tokens before the SDK and caps requests being authenticated,
:mod:`bot.teams.openid` fetches the signing keys off the event loop with a timeout,
:mod:`bot.teams.entities` puts the AI-generated label on every message, :mod:`bot.teams.streaming`
streams answers in personal chats, :mod:`bot.teams.members` reads the roster, :mod:`bot.teams.outbox` delivers scheduled messages
(reminders) into users' personal chats, and
:mod:`bot.teams.package` builds the Teams app package (``make teams-package``).
"""
