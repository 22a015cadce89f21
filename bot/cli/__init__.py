"""The ``chatops`` command line: ``index``, ``ask``, ``chat``, ``eval``, ``calibrate`` and more.

Exit codes: 0 success, 1 a run that finished with errors worth a look (e.g. eval targets are the
caller's business, so eval exits 0), 2 bad usage or configuration (the message says what to do).

One module a job: :mod:`.run` (the entry point, :func:`main`, and its error mapping), :mod:`.parser`
(every command's arguments, help and examples), :mod:`.settings` (the settings, logging and tracing
each command starts from), and the commands by concern: :mod:`.indexing` (``index``, ``calibrate``),
:mod:`.asking` (``ask``, ``chat``), :mod:`.evaluating` (``eval``) and :mod:`.operating` (``serve``,
``worker``, ``sync``, ``status`` and the other commands that look after a deployment).
"""

# Everything heavy (the index, the embedding model, the agent, Slack and Teams) is imported by the
# command that needs it, so `chatops --help` and argument errors answer at once.

from .parser import build_parser
from .run import main
from .settings import ConfigError

__all__ = ["main", "build_parser", "ConfigError"]
