"""Exceptions raised by garaphpy.

Every error a user can cause names what caused it: the input file and the
line or byte offset, the configuration key, or the function argument.  The
command line turns any :class:`GaraphError` into a one-line message and a
non-zero exit code.
"""

from __future__ import annotations


class GaraphError(Exception):
    """Base class of every error garaphpy raises on purpose."""


class GraphInputError(GaraphError, ValueError):
    """An input graph file (or in-memory input) is missing or malformed.

    Parameters
    ----------
    message : str
        What is wrong, in a few words.
    path : str, optional
        The file the problem is in (or a description such as ``"<arrays>"``).
    line : int, optional
        1-based line number of a text file.
    offset : int, optional
        Byte offset in the (decompressed) file, used for binary formats.
    """

    def __init__(self, message: str, path: str | None = None,
                 line: int | None = None, offset: int | None = None):
        self.message = message
        self.path = path
        self.line = line
        self.offset = offset
        super().__init__(self._render())

    def _render(self) -> str:
        where = self.path if self.path is not None else "<input>"
        if self.line is not None:
            where += f":{self.line}"
        elif self.offset is not None:
            where += f": byte {self.offset}"
        return f"{where}: {self.message}"


class ConfigError(GaraphError, ValueError):
    """A configuration file, override or API argument is invalid.

    The message names the key (``store.n_streams``) or argument.
    """


class StoreError(GaraphError):
    """A preprocessed store cannot be built, found or opened."""


class StoreCorruptError(StoreError):
    """A store's manifest or data does not match its recorded checksums."""


class CheckpointError(GaraphError):
    """A run cannot resume: no checkpoint, none readable, or one of another run.

    The message names the checkpoint directory or file and what is wrong.
    """


class SignalInterrupt(KeyboardInterrupt):
    """A stop signal (SIGTERM, SIGHUP) handled as Ctrl-C.

    A :class:`KeyboardInterrupt`, so code that handles Ctrl-C still does.

    Attributes
    ----------
    signal_number : int
        The signal received.
    """

    def __init__(self, signal_number: int):
        self.signal_number = signal_number
        super().__init__(f"stopped by signal {signal_number}")


class RunInterrupted(KeyboardInterrupt):
    """A run stopped at Ctrl-C (or a stop signal) after writing a checkpoint it
    can resume from.

    A :class:`KeyboardInterrupt`, so code that handles Ctrl-C still does.

    Attributes
    ----------
    checkpoint : pathlib.Path
        The checkpoint written at the stop.
    iteration : int
        Iterations done; the resumed run continues with this one.
    signal_number : int
        The signal that stopped the run (2, SIGINT, for Ctrl-C).
    """

    def __init__(self, checkpoint, iteration: int, signal_number: int = 2):
        self.checkpoint = checkpoint
        self.iteration = iteration
        self.signal_number = signal_number
        super().__init__(f"interrupted after {iteration} iterations; checkpoint written to "
                         f"{checkpoint}")


class OutputError(GaraphError):
    """A result file (values, iteration records) cannot be written.

    The message names the file, what is wrong and, for a full disk, the
    bytes needed.
    """


def caller_stacklevel() -> int:
    """The ``stacklevel`` for :func:`warnings.warn`, called in the function that
    warns, that names the first frame outside garaphpy: the user's line that
    called ``garaphpy.run`` (or the command line's), however deep inside the
    package the warning is raised."""
    import os
    import sys

    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    return level
