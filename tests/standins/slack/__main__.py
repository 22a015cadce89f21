"""``python -m tests.standins.slack``: a Slack stand-in for manual use, its Web API URL printed."""

from tests.standins.slack.client import run_forever_for_debugging


run_forever_for_debugging()
