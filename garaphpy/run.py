"""``python -m garaphpy.run CONFIG.toml``: the command line (see :mod:`garaphpy.cli`).

``garaphpy.run`` is the library function :func:`garaphpy.api.run`; this
module only starts the command line when executed with ``-m``.  Imported as
``garaphpy.run`` it puts the function in its own place in ``sys.modules``,
so ``import garaphpy.run`` cannot shadow the function with this module.
"""

import sys

if __name__ == "__main__":
    from garaphpy.cli import main

    sys.exit(main())
else:
    from garaphpy.api import run

    sys.modules[__name__] = run
