"""``python -m zg``: the same as the ``zg`` command (see :mod:`zg.cli`)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
