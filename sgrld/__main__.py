"""``python -m sgrld …``: the ``sgrld`` command (:func:`sgrld.cli.main`)."""

import sys

from sgrld.cli import main

if __name__ == "__main__":
    sys.exit(main())
