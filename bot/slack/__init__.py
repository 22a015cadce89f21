"""The Slack adapter: questions in threads, DMs, the AI-app surface and ``/kb``, on the real Bolt app.

Modules, one job each:

- :mod:`.config`: the Slack part of the settings, validated (tokens kept out of ``repr`` and logs).
- :mod:`.client`: the Web API client (``SLACK_API_URL``, rate-limit and connection retry handlers) and
  the plain-words description of Web API errors.
- :mod:`.inbound`: Slack message mark-up to plain text (mention stripping) for the agent.
- :mod:`.mrkdwn`: Markdown to Slack mrkdwn, and splitting to Slack's text limits.
- :mod:`.render`: pure Block Kit renderers (answers, sources, feedback, ``/kb`` replies).
- :mod:`.commands`: the ``/kb`` grammar.
- :mod:`.middleware`: drops bot messages (ours included) and redelivered events (``event_id`` claimed in
  the state store).
- :mod:`.tasks`: background work after the ack.
- :mod:`.threads`: thread history (``conversations.replies``, bounded), thread participation, user profiles.
- :mod:`.conversation`: mention / DM / thread reply -> :class:`agent.models.Turn` -> agent -> reply in thread.
- :mod:`.kb`: the ``/kb`` command (questions, help, status, sources, admin re-index).
- :mod:`.actions`: block actions routed by ``action_id`` prefix (feedback, share, and a hook for others).
- :mod:`.bot`: :class:`SlackBot`, which builds the Bolt ``AsyncApp`` and owns the pieces above.
- :mod:`.http` and :mod:`.socket_mode`: the two ways Slack reaches the app (``POST /slack/events`` in
  :mod:`bot.server`, or Socket Mode).
- (the logging filter that masks tokens and secrets is :mod:`bot.logsafe`, shared by every platform)
"""

from .bot import SlackBot
from .config import SlackConfig, SlackConfigError

__all__ = ["SlackBot", "SlackConfig", "SlackConfigError"]
