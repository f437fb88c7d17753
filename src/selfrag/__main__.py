"""``python -m selfrag``: the same command line as the ``selfrag`` script."""

import sys

from .cli.main import main

if __name__ == "__main__":
    sys.exit(main())
