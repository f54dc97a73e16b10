"""Inter-annotator agreement: Krippendorff's alpha."""

from __future__ import annotations

import numpy as np


# -- inter-annotator agreement -------------------------------------------------------------------
def krippendorff_alpha(reliability_data, level: str = "interval", value_domain=None) -> float:
    """Krippendorff's alpha with the ``krippendorff`` package.

    ``alpha = 1 - D_o / D_e``: observed disagreement within items over the disagreement
    expected by chance from all pairable values. ``level`` picks the distance: ``"interval"``
    (squared difference), ``"ordinal"`` (rank-frequency distance), ``"nominal"``, ``"ratio"``.
    Items with fewer than 2 ratings do not contribute.

    Parameters
    ----------
    reliability_data : array_like, shape (raters, items)
        Ratings, NaN where a rater did not rate an item
        (:meth:`seg_data.human.HumanJudgments.reliability_data`).
    level : {"interval", "ordinal", "nominal", "ratio"}
    value_domain : sequence, optional
        The ordered scale (e.g. ``[1, 2, 3, 4, 5]``); default: the values present.

    Raises
    ------
    ValueError
        Not 2-D, fewer than 2 raters, unknown level, or no variation (a single value in the
        data, where alpha is undefined).
    ImportError
        ``krippendorff`` is not installed (``pip install ts2[human]``).

    Examples
    --------
    >>> round(krippendorff_alpha([[1, 2, 3, 4], [1, 2, 3, 5]]), 3)  # 1 - (2/8) / (222/56)
    0.937
    """
    try:
        import krippendorff
    except ImportError as e:  # optional dependency: say how to get it
        raise ImportError("krippendorff's alpha needs the 'krippendorff' package: pip install 'ts2[human]'") from e
    data = np.asarray(reliability_data, dtype=float)
    if data.ndim != 2 or data.shape[0] < 2:
        raise ValueError(f"expected a (raters >= 2, items) array, got shape {data.shape}")
    if level not in {"interval", "ordinal", "nominal", "ratio"}:
        raise ValueError(f"expected level in ['interval', 'ordinal', 'nominal', 'ratio'], got {level!r}")
    try:
        return float(krippendorff.alpha(reliability_data=data, level_of_measurement=level,
                                        value_domain=value_domain))
    except (ValueError, ZeroDivisionError) as e:
        vals = np.unique(data[np.isfinite(data)])
        raise ValueError(f"Krippendorff's alpha is undefined here: expected ratings with at least 2 distinct "
                         f"values in items rated twice or more, got values {vals[:10].tolist()} ({e})") from e
