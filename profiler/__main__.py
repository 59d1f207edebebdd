"""``python -m profiler`` runs the ``trnprof`` command line."""

import sys

from profiler.cli import main

sys.exit(main())
