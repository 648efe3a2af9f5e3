"""``python -m garaphpy``: the ``garaphpy`` console command (see :mod:`garaphpy.console`)."""

import sys

from garaphpy.console import main

if __name__ == "__main__":
    sys.exit(main())
