"""``python -m tests.standins.qdrant``: a Qdrant stand-in in its own process (:func:`tests.standins.qdrant.main`)."""

import sys

from tests.standins.qdrant.process import main


sys.exit(main())
