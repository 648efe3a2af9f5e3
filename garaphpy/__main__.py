"""``python -m garaphpy``: the ``garaphpy`` console command (see :mod:`garaphpy.console`)."""

import sys

from garaphpy.console import command

if __name__ == "__main__":
    sys.exit(command())
