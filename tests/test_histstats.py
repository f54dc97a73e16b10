"""HistStats: the meta-metric kernels read the same walk values from histograms as from sorted samples."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.metametrics import META_METRICS, get_meta_metric
from analysis.metametrics.histstats import HistStats
from analysis.metametrics.walkstats import WalkStats
from analysis.protocols import Protocol


def random_walks(seed: int, n: int = 400, width: int = 12):
    """Walks with sorted levels, heavy ties, NaN holes and some one-level / empty / constant walks."""
    rng = np.random.default_rng(seed)
    levels = np.sort(rng.integers(0, 4, (n, width)), axis=1)
    scores = rng.integers(0, 5, (n, width)) / 4.0
    scores[rng.random((n, width)) < 0.15] = np.nan
    scores[:20] = np.nan  # empty walks
    levels[20:40] = 2  # one level
    scores[40:60] = 0.5  # constant scores
    scores[60:70, 1:] = np.nan  # one valid sample
    return levels, scores


def to_hist(levels, scores):
    """Per-walk slot histograms over the batch's distinct values (the conversion under test)."""
    vals = np.unique(scores[~np.isnan(scores)])
    n, width = scores.shape
    valid = ~np.isnan(scores)
    slot = np.zeros((n, width), dtype=np.int64)
    for i in range(n):  # dense rank of the level among valid samples: a plain loop, the reference
        present = sorted(set(levels[i][valid[i]].tolist()))
        slot[i] = [present.index(v) if ok else 0 for v, ok in zip(levels[i], valid[i])]
    k = int(slot.max()) + 1
    hist = np.zeros((n, k, len(vals)))
    r = np.searchsorted(vals, np.nan_to_num(scores))
    for i, j in zip(*np.nonzero(valid)):
        hist[i, slot[i, j], r[i, j]] += 1
    return hist, np.broadcast_to(vals, (n, len(vals)))


@pytest.mark.parametrize("options", [
    {},
    {"tie_method": "min", "ks_pairs": "adjacent", "degenerate_walk": "skip"},
    {"tie_method": "max"},
    {"tie_method": "dense", "walk_weighting": "uniform"},
])
def test_every_kernel_reads_the_same_value_from_histograms(options):
    levels, scores = random_walks(3)
    protocol = Protocol(**options)
    hist, vals = to_hist(levels, scores)
    hs = HistStats(hist, vals)
    ws = WalkStats(levels, scores, levels_sorted=True)
    for name in META_METRICS:
        spec = get_meta_metric(name)
        want, got = spec(ws, protocol), spec(hs, protocol)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=name)
        assert np.isnan(want).sum() > 0 or name == "delta" and options.get("degenerate_walk") != "skip"


def test_with_values_changes_only_the_totals():
    levels, scores = random_walks(5, n=50)
    hist, vals = to_hist(levels, scores)
    a = HistStats(hist, vals)
    np.testing.assert_allclose(a.total, np.nansum(np.where(np.isnan(scores), 0, scores)[:, None, :]
                                                  * (to_slots(levels, scores)), axis=2))
    counts = a.count
    b = a.with_values(2 * vals)
    np.testing.assert_allclose(b.total, 2 * a.total)
    assert b.count is counts  # computed once, shared


def to_slots(levels, scores):
    hist, _ = to_hist(levels, scores)
    valid = ~np.isnan(scores)
    out = np.zeros((len(scores), hist.shape[1], scores.shape[1]))
    for i in range(len(scores)):
        present = sorted(set(levels[i][valid[i]].tolist()))
        for j in np.flatnonzero(valid[i]):
            out[i, present.index(levels[i, j]), j] = 1
    return out


def test_total_without_values_is_a_clear_error():
    with pytest.raises(ValueError, match="values"):
        _ = HistStats(np.ones((1, 2, 3))).total
