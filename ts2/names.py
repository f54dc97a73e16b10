"""The hint every unknown name gets: config keys and options, ``ts2.analyze``'s keywords, a dataset's options."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["did_you_mean"]


def did_you_mean(word: str, candidates: Iterable[str], n: int = 3) -> str:
    """``"; did you mean 'a' or 'b'?"`` (up to ``n`` close matches), or ``""``.

    >>> did_you_mean("bootstap", ["bootstrap", "seed"], n=1)
    "; did you mean 'bootstrap'?"
    """
    close = difflib.get_close_matches(word, sorted(set(candidates)), n=n, cutoff=0.6)
    if not close:
        return ""
    return "; did you mean " + " or ".join(repr(c) for c in close) + "?"
