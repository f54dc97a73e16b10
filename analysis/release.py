"""The TS2 release recognised by its data, for the one rule that belongs to it alone.

The paper's code iterates ``range(164)`` over TS2's 165 SEGs and so never analyses the last one
(id ``"164"``). ``protocol=paper`` reproduces that, but only on the TS2 release: a user's dataset
that happens to have a SEG called ``"164"`` keeps it. The release is recognised by its shape,
not by a name or a path: exactly the SEG ids ``"0"`` to ``"164"``, and SEG ``"164"`` with the
release's nodes (one image at ``0``, two at ``1``, two at ``2a``; the prompt "a baby girl
sleeping and an old man cooking" when the structure carries prompts).
"""

from __future__ import annotations

from collections import Counter

from seg_data.ts2_release import TS2_LAST_SEG, TS2_N_SEGS

from .walks import Structure

__all__ = ["TS2_N_SEGS", "TS2_LAST_SEG", "is_ts2_release"]

_LAST_SEG_NODES = {"0": 1, "1": 2, "2a": 2}  # node label -> images, in metadata.csv of the release
_LAST_SEG_PROMPT = "a baby girl sleeping and an old man cooking"


def is_ts2_release(structure: Structure) -> bool:
    """Whether ``structure`` holds the TS2 release's SEGs (see the module docstring).

    Node sizes are read from the SEGs themselves (all their images, scored or not), so a score
    table that misses a few scores of the release is still recognised.

    Examples
    --------
    >>> from analysis.walks import Structure
    >>> is_ts2_release(Structure((), 0))
    False
    """
    ids = structure.seg_ids
    if len(ids) != TS2_N_SEGS or set(ids) != {str(i) for i in range(TS2_N_SEGS)}:
        return False
    last = next(s for s in structure.segs if s.seg_id == TS2_LAST_SEG)
    seg = last.seg
    if seg is None:
        sizes = Counter({lbl: len(r) for lbl, r in zip(last.labels, last.rows, strict=True)})
    else:
        sizes = Counter({n: len(seg.images(n)) for n in seg.nodes})
        prompt = str(getattr(seg, "prompt", "") or "")
        if prompt and not prompt.startswith("(SEG ") and prompt.strip().lower() != _LAST_SEG_PROMPT:
            return False
    return dict(sizes) == _LAST_SEG_NODES
