"""Pausing Python's cyclic garbage collector while a large object tree is built.

Loading a 100k-image dataset allocates millions of dicts, lists and tuples that all stay alive.
Each allocation burst triggers the collector, whose oldest-generation passes walk every object
built so far: about a third of a dataset's load time, for cycles that loading never creates.
Reference counting still frees everything as usual; only the cycle search waits until the end.

Once built, the tree stays alive for a whole command, yet every oldest-generation pass of the
analysis that follows walks it again (a second of a 100k-image ``ts2 analyze``):
:func:`gc_frozen` sets what is alive aside for the collector during a block.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused", "gc_frozen"]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic garbage collector inside the block; re-enable it after (if it was on).

    Nested blocks are fine: only the outermost one turns the collector back on.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextmanager
def gc_frozen() -> Iterator[None]:
    """Inside the block, the cyclic garbage collector skips every object alive on entry
    (``gc.freeze``); after it, they are collectable as before (``gc.unfreeze``).

    Only the cycle search changes: reference counting frees everything as usual, and a cycle
    among the objects set aside is found by the first collection after the block. Not nested.
    """
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
