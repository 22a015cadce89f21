"""Stand-ins for the third-party services the bot talks to, each on 127.0.0.1 and speaking the service's wire
format: Slack (:mod:`tests.standins.slack`), Qdrant (:mod:`~tests.standins.qdrant`), Confluence
(:mod:`~tests.standins.confluence`), Jira (:mod:`~tests.standins.jira`), Microsoft Graph
(:mod:`~tests.standins.graph`), Google Calendar (:mod:`~tests.standins.google_calendar`), an OpenAI-compatible
model server (:mod:`~tests.standins.openai`), the Bot Framework's Connector (:mod:`~tests.standins.teams`) and
signing keys (:mod:`~tests.standins.openid`), and an OpenTelemetry collector (:mod:`~tests.standins.otlp`).

Every one is a :class:`tests.standins.base.StandIn`: the server's lifecycle, the request log and JSON replies
are written once there. The tests and ``bench/`` import them as ``tests.standins.<name>``.
"""
