"""How the commands talk: errors and warnings as single lines.

Shared by ``mspca`` (which prints them on stderr) and the genomics job (which logs them), so
that a warning or an error reads the same wherever it is shown.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from typing import TextIO

from ..errors import MSPCAWarning

__all__ = ["one_line", "error_line", "report_warnings"]


def one_line(text: object) -> str:
    """``text`` with every run of whitespace (newlines included) collapsed to one space.

    Examples
    --------
    >>> one_line("no eigenvalue is clearly\\n   above the edge ")
    'no eigenvalue is clearly above the edge'
    """
    return " ".join(str(text).split())


def error_line(err: BaseException) -> str:
    """The message of ``err`` on one line, or its class name when it has no message.

    Examples
    --------
    >>> error_line(ValueError("bad\\nvalue")), error_line(KeyboardInterrupt())
    ('bad value', 'KeyboardInterrupt')
    """
    return one_line(err) or type(err).__name__


@contextlib.contextmanager
def report_warnings(emit: Callable[[str], None]) -> Iterator[None]:
    """Show every :class:`~mspca_dask.errors.MSPCAWarning` as one line through ``emit``.

    Parameters
    ----------
    emit : callable
        Receives the warning's message on one line (:func:`one_line`), e.g.
        ``lambda line: print(f"mspca: warning: {line}", file=sys.stderr)`` or
        ``lambda line: logger.warning("%s", line)``.

    Notes
    -----
    Every occurrence is shown (the filter is ``"always"`` for our warnings inside the
    block); other warnings keep the filters and the format in force.  Filters and
    :func:`warnings.showwarning` are restored on exit.

    Examples
    --------
    >>> from mspca_dask.errors import NoSpikeWarning
    >>> with report_warnings(print):
    ...     warnings.warn("no spike\\n above the edge", NoSpikeWarning, stacklevel=1)
    no spike above the edge
    """
    with warnings.catch_warnings():  # restores the filters and showwarning on exit
        warnings.simplefilter("always", MSPCAWarning)
        previous = warnings.showwarning

        def show(
            message: Warning | str,
            category: type[Warning],
            filename: str,
            lineno: int,
            file: TextIO | None = None,
            line: str | None = None,
        ) -> None:
            if issubclass(category, MSPCAWarning):
                emit(one_line(message))
            else:
                previous(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        yield
