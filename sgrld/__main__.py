"""``python -m sgrld …``: the ``sgrld`` command (:func:`sgrld.run.cli.main`)."""

import sys

from sgrld.run.cli import main

if __name__ == "__main__":
    sys.exit(main())
