"""Input checks shared by the human-view statistics (private)."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import pandas as pd
from scipy import stats as ss


# -- input checks -----------------------------------------------------------------------------
def _as_pair(x, y, nan_policy: str = "raise") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two equal-length float vectors and the boolean mask of the items kept."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.ndim != 1 or y.ndim != 1:
        raise ValueError(f"expected 1-D score vectors, got shapes {x.shape} and {y.shape}")
    if x.shape != y.shape:
        raise ValueError(f"expected metric and human vectors of equal length, got {len(x)} and {len(y)}")
    keep = np.isfinite(x) & np.isfinite(y)
    if nan_policy == "raise":
        if not keep.all():
            bad = np.flatnonzero(~keep)
            raise ValueError(f"expected finite scores, got {len(bad)} NaN/inf at positions {bad[:10].tolist()}"
                             f"{' ...' if len(bad) > 10 else ''} (pass nan_policy='omit' to drop them)")
    elif nan_policy != "omit":
        raise ValueError(f"expected nan_policy 'raise' or 'omit', got {nan_policy!r}")
    return x[keep], y[keep], keep


def _groups_codes(groups, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes (0..G-1, first-appearance order) and the group ids."""
    g = np.asarray(groups, dtype=object)
    if g.shape != (n,):
        raise ValueError(f"expected one group id per item ({n}), got shape {g.shape}")
    if pd.isna(pd.Series(g)).any():
        raise ValueError("expected a group id for every item, got a missing (NaN/None) one")
    codes, uniques = pd.factorize(g, sort=False)
    return codes.astype(np.intp), np.asarray(uniques, dtype=object)


def _quiet(fn: Callable[[], float]) -> float:
    """Call a scipy statistic, turning its constant-input warnings into a NaN result."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=ss.ConstantInputWarning)
        warnings.simplefilter("ignore", category=RuntimeWarning)
        return float(fn())


def _progress(it, progress: bool, desc: str):
    if not progress:
        return it
    from seg_data.progress import tqdm

    return tqdm(it, desc=desc, leave=False)
