"""``python -m bot.cli``: the ``chatops`` console script."""

import sys

from bot.cli import main

sys.exit(main())
