"""Score frames joined: several per-image score tables (each ``ts2.score``'s frame, or ``scores.csv`` read back)
become one, with each table's metric roles (``frame.attrs["roles"]``: control, reference, metric) kept.

``pandas.merge`` drops ``attrs`` that differ between its inputs, so a control scored by ``ts2.score`` would lose
its role in ``mine.merge(control)``; :func:`join_score_frames` is the join that keeps them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .results import BASE_COLUMNS, KEY_COLUMNS, ROLES

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["frame_roles", "shared_keys", "metric_columns", "join_score_frames"]


def frame_roles(frame: pd.DataFrame) -> dict[str, str]:
    """The roles a frame carries (``attrs["roles"]``: column -> role), for its columns only.

    Raises
    ------
    ValueError
        A role not among :data:`seg_data.results.ROLES`.
    """
    roles = {str(c): str(r) for c, r in dict(frame.attrs.get("roles") or {}).items() if c in frame.columns}
    bad = {c: r for c, r in roles.items() if r not in ROLES}
    if bad:
        raise ValueError(f"expected roles among {list(ROLES)} in the frame's attrs['roles'], got {bad}")
    return roles


def shared_keys(frames: Sequence[pd.DataFrame]) -> list[str]:
    """The key columns (:data:`seg_data.results.KEY_COLUMNS`) every frame has.

    Raises
    ------
    ValueError
        No frame, or ``seg_id``/``node`` missing from one.
    """
    if not frames:
        raise ValueError("expected one or more score frames, got none")
    keys = [k for k in KEY_COLUMNS if all(k in f.columns for f in frames)]
    if "seg_id" not in keys or "node" not in keys:
        raise ValueError(f"expected every score frame to have seg_id and node columns, got key columns {keys}")
    return keys


def metric_columns(frame: pd.DataFrame) -> list[str]:
    """A frame's metric columns: every column that is not a key or base column."""
    base = set(BASE_COLUMNS) | set(KEY_COLUMNS)
    return [str(c) for c in frame.columns if c not in base]


def join_score_frames(frames: Sequence[pd.DataFrame]) -> tuple[pd.DataFrame, dict[str, str]]:
    """One frame of every metric column of ``frames``, joined on the key columns they share (:func:`shared_keys`;
    the other base columns taken from the first frame), and the roles their ``attrs`` carry.

    Raises
    ------
    ValueError
        As :func:`shared_keys`; a metric column in two frames; frames whose rows do not match one to one on the
        keys.
    """
    keys = shared_keys(frames)
    joined, roles = frames[0], frame_roles(frames[0])
    owner = dict.fromkeys(metric_columns(frames[0]), 0)
    for i, f in enumerate(frames[1:], start=1):
        metrics = metric_columns(f)
        clash = [c for c in metrics if c in owner]
        if clash:
            raise ValueError(f"expected each metric column in one frame, got {clash} in frames {owner[clash[0]]} "
                             f"and {i}; rename one (ts2.score(..., name=...))")
        merged = joined.merge(f[keys + metrics], on=keys, how="inner", validate="one_to_one")
        if not len(merged) == len(joined) == len(f):
            raise ValueError(f"expected frame {i} to score the same images as the others ({len(joined)} rows on "
                             f"{keys}), got {len(f)} rows of which {len(merged)} match")
        joined, roles = merged, {**roles, **frame_roles(f)}
        owner.update(dict.fromkeys(metrics, i))
    joined.attrs = {}
    return joined, roles
