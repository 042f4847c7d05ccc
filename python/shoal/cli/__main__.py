"""``python -m shoal.cli``: the ``shoal`` command, for environments without the console script."""

import sys

from shoal.cli.main import main

sys.exit(main())
