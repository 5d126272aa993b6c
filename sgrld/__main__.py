"""``python -m sgrld …``: the ``sgrld`` command (:func:`sgrld_app.cli.main`)."""

import sys

from sgrld_app.cli import main

if __name__ == "__main__":
    sys.exit(main())
