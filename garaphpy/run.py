"""``python -m garaphpy.run CONFIG.toml``: the command line (see :mod:`garaphpy.cli`).

``garaphpy.run`` is the library function :func:`garaphpy.api.run`; this
module only starts the command line when executed with ``-m``.  Imported as
``garaphpy.run`` it puts the function in its own place in ``sys.modules``,
so ``import garaphpy.run`` cannot shadow the function with this module.

An interrupted run exits with its documented status (130 for Ctrl-C) by
:func:`garaphpy.cli.exit_after_interrupt`: under ``-m``, a KeyboardInterrupt that once
left an ``exec`` of a string (numba compiles generated source so) marks the
interpreter as ended by Ctrl-C however the program handled it, and CPython
would then kill the process with SIGINT as it exits (``pymain_run_module``).
"""

import sys


if __name__ == "__main__":
    try:
        from garaphpy.cli import INTERRUPT_EXIT_CODES, exit_after_interrupt, main
    except KeyboardInterrupt:
        import os

        print("garaphpy: interrupted", file=sys.stderr, flush=True)
        os._exit(130)
    code = main()
    if code in INTERRUPT_EXIT_CODES:
        exit_after_interrupt(code)
    sys.exit(code)
else:
    from garaphpy.api import run

    sys.modules[__name__] = run
