"""``python -m sgrld …``: the ``sgrld`` command."""

import sys

from sgrld.cli import main

sys.exit(main())
