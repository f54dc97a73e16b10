"""Progress bars that are quiet where nobody watches them.

Every bar of ts2 comes from :func:`tqdm` here: tqdm's own, switched off when its stream (stderr by
default) is not a terminal. In a log file or a CI job a bar only adds carriage returns (``ts2 run``
wrote about 15 KB of them into a non-TTY stderr); the work it tracks is logged anyway.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["tqdm", "interactive"]


def interactive(stream: Any = None) -> bool:
    """Whether ``stream`` (default ``sys.stderr``) is a terminal."""
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def tqdm(*args: Any, disable: bool | None = False, **kw: Any):
    """``tqdm.auto.tqdm(*args, **kw)``, disabled when asked or when its stream is not a terminal.

    Examples
    --------
    >>> import io
    >>> bar = tqdm(range(3), file=io.StringIO())  # not a terminal: a silent pass-through
    >>> list(bar), bar.disable
    ([0, 1, 2], True)
    """
    from tqdm.auto import tqdm as _tqdm

    return _tqdm(*args, disable=bool(disable) or not interactive(kw.get("file")), **kw)
