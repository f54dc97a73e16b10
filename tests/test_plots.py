"""Report figures (analysis.report.plots): what is drawn is checked against hand-computed values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from scipy.stats import spearmanr

from analysis.report import plots
from analysis.report.plots_pareto import pareto_figure


def _png_ok(path):
    with Image.open(path) as im:
        assert im.format == "PNG"
        w, h = im.size
        assert w > 300 and h > 200
        # a real picture, not a blank canvas
        arr = np.asarray(im.convert("L"))
        assert arr.std() > 5


def _points():
    # cost, value: a (cheap, worse), b (cheap, better; dominates a), c (costly, best), d (costly, worse than b)
    rows = []
    for subset, vals in {"Avg": [0.50, 0.60, 0.80, 0.55], "Synth": [0.70, 0.60, 0.65, 0.75]}.items():
        for m, f, v in zip("abcd", [1e9, 1e9, 1e14, 1e15], vals, strict=True):
            rows.append({"metric": m, "protocol": "paper", "meta_metric": "rank", "subset": subset, "value": v,
                         "ci_low": v - 0.05, "ci_high": v + 0.04, "flops": f})
    rows.append({"metric": "e", "protocol": "paper", "meta_metric": "rank", "subset": "Avg", "value": 0.99,
                 "ci_low": np.nan, "ci_high": np.nan, "flops": np.nan})  # no cost: left out, and said so
    return pd.DataFrame(rows)


def test_pareto_figure_draws_the_hand_computed_frontier(tmp_path):
    fig = pareto_figure(_points(), "rank")
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in axes] == ["Avg", "Synth"]
    for ax, (fx, fy) in zip(axes, [([1e9, 1e14], [60.0, 80.0]),       # Avg: b then c; a, d dominated
                                   ([1e9, 1e15], [70.0, 75.0])], strict=True):      # Synth: a then d; b, c dominated
        assert ax.get_xscale() == "log"
        line = next(ln for ln in ax.get_lines() if ln.get_label() == "Pareto frontier")
        xs, ys = np.asarray(line.get_xdata()), np.asarray(line.get_ydata())
        np.testing.assert_allclose(xs[:-1], fx)  # the last point extends the staircase to the axis edge
        np.testing.assert_allclose(ys[:-1], fy)
        bold = sorted(t.get_text() for t in ax.texts if t.get_fontweight() == "bold")
        assert bold == sorted({"Avg": ["b", "c"], "Synth": ["a", "d"]}[ax.get_title()])
    assert "Not shown (no FLOPs estimate): e." in fig._supxlabel.get_text()
    _png_ok(plots.save_figure(fig, tmp_path / "p.png"))


def test_pareto_figure_ties_and_errors():
    pts = pd.DataFrame({"metric": ["x", "y", "z"], "meta_metric": "sep", "subset": "Avg", "value": [0.5, 0.5, 0.4],
                        "flops": [10.0, 10.0, 100.0]})
    ax = pareto_figure(pts, "sep").axes[0]
    bold = sorted(t.get_text() for t in ax.texts if t.get_fontweight() == "bold")
    assert bold == ["x", "y"]  # equal points dominate neither each other: both on the frontier
    with pytest.raises(ValueError, match="meta_metric='rank'"):
        pareto_figure(pts, "rank")
    with pytest.raises(ValueError, match="'flops' column"):
        pareto_figure(pts.drop(columns="flops"), "sep")


def _seg_scores():
    return pd.DataFrame({
        "seg_id": ["7"] * 5 + ["8"] * 2,
        "node": ["0", "1a", "1a", "2", "1b", "0", "1"],
        "file_name": ["a", "b", "c", "d", "e", "f", "g"],
        "good": [0.9, 0.5, 0.7, 0.1, 0.3, 0.2, 0.1],
        "errs": [0.0, 1.0, 2.0, 4.0, 1.0, 0.0, 1.0],   # lower is better
        "flat": [0.5, 0.5, 0.5, 0.5, 0.5, 1.0, 1.0],
    })


def test_seg_heatmap_cells_are_within_seg_scaled_scores(tmp_path):
    fig = plots.seg_heatmap(_seg_scores(), "7", ["good", "errs", "flat"], lower_is_better=["errs"],
                            seg_values={"good": 0.75}, prompt="a red cube")
    ax = fig.axes[0]
    arr = np.ma.filled(ax.images[0].get_array(), np.nan)
    # columns ordered by level then node label: 0 | 1a 1a | 1b | 2
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "1a", "1b", "2"]
    good = np.array([0.9, 0.5, 0.7, 0.3, 0.1])
    errs = np.array([0.0, 1.0, 2.0, 1.0, 4.0])
    np.testing.assert_allclose(arr[0], (good - 0.1) / 0.8)
    np.testing.assert_allclose(arr[1], 1 - errs / 4.0)          # flipped: fewest errors = best = 1
    np.testing.assert_allclose(arr[2], 0.5)                     # constant on the SEG: mid-scale
    assert "75%" in ax.get_yticklabels()[0].get_text()
    assert "a red cube" in fig._suptitle.get_text()
    _png_ok(plots.save_figure(fig, tmp_path / "h.png"))

    node = plots.seg_heatmap(_seg_scores(), "7", ["good"], aggregate="node").axes[0]
    np.testing.assert_allclose(np.ma.filled(node.images[0].get_array(), np.nan)[0],
                               (np.array([0.9, 0.6, 0.3, 0.1]) - 0.1) / 0.8)
    with pytest.raises(ValueError, match="SEG '99'"):
        plots.seg_heatmap(_seg_scores(), "99", ["good"])
    with pytest.raises(ValueError, match="aggregate"):
        plots.seg_heatmap(_seg_scores(), "7", ["good"], aggregate="mean")


def test_score_histograms_levels_counts_and_nan(tmp_path):
    s = _seg_scores().assign(good=[0.9, 0.5, np.nan, 0.1, 0.3, 0.2, 0.1])
    fig = plots.score_histograms(s, ["good", "errs"], min_count=1)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 2
    labels = [t.get_text() for t in axes[0].get_yticklabels()]
    # levels 0, 1, 2 (top to bottom); counts of finite scores per level: 0 -> a,f; 1 -> b,e,g (c is NaN); 2 -> d
    assert labels == ["0 err (n=2)", "1 err (n=3)", "2 err (n=1)"]
    assert "1 NaN" in axes[0].get_title()
    # sparse top levels are pooled: with min_count=2 level 2 (1 image) joins level 1 as ">=1"
    pooled = [t.get_text() for t in plots.score_histograms(s, ["errs"], min_count=2).axes[0].get_yticklabels()]
    assert pooled == ["0 err (n=2)", "\u22651 err (n=5)"]
    _png_ok(plots.save_figure(fig, tmp_path / "s.png"))
    with pytest.raises(ValueError, match="missing \\['nope'\\]"):
        plots.score_histograms(s, ["nope"])


def test_rank_scatter_reports_spearman_of_per_seg_values(tmp_path):
    rng = np.random.default_rng(3)
    ids = [str(i) for i in range(12)]
    a, b = rng.uniform(-1, 1, 12), rng.uniform(-1, 1, 12)
    b[0] = np.nan  # a SEG without a value for b is left out
    per_seg = pd.concat([pd.DataFrame({"metric": m, "protocol": "graph", "meta_metric": "rank", "seg_id": ids,
                                       "subset": ["S"] * 6 + ["N"] * 6, "value": v}) for m, v in (("a", a), ("b", b))])
    fig = plots.rank_scatter(per_seg, "a", "b")
    ax = fig.axes[0]
    n_points = sum(len(c.get_offsets()) for c in ax.collections)
    assert n_points == 11
    rho = spearmanr(a[1:], b[1:]).statistic
    assert f"= {rho:.2f} over 11 SEGs" in ax.texts[0].get_text()
    _png_ok(plots.save_figure(fig, tmp_path / "r.png"))
    with pytest.raises(ValueError, match="metric 'c'"):
        plots.rank_scatter(per_seg, "a", "c")


def test_add_levels_names_the_bad_row():
    with pytest.raises(ValueError, match="row 3 \\(SEG 1\\)"):
        plots.add_levels(pd.DataFrame({"seg_id": ["1", "1"], "node": ["0", "x1"]}))


def test_palette_is_okabe_ito_and_markers_differ_within_a_group():
    style = plots.metric_colors(["a", "b", "c"], groups={"a": "g1", "b": "g1", "c": "g2"})
    assert style["a"][0] == style["b"][0] == plots.OKABE_ITO[0] and style["c"][0] == plots.OKABE_ITO[1]
    assert style["a"][1] != style["b"][1]


def test_pareto_zero_cost_metric_is_drawn_in_a_zero_column_and_can_lead_the_frontier():
    pts = pd.DataFrame({"metric": ["free", "cheap", "dear"], "meta_metric": "rank", "subset": "Avg",
                        "value": [0.1, 0.05, 0.9], "flops": [0.0, 2e9, 5e9]})
    fig = pareto_figure(pts, "rank")
    ax = fig.axes[0]
    fig.canvas.draw()
    line = next(ln for ln in ax.get_lines() if ln.get_label() == "Pareto frontier")
    np.testing.assert_allclose(np.asarray(line.get_ydata())[:-1], [10.0, 90.0])  # free, then dear; cheap dominated
    assert np.asarray(line.get_xdata())[0] == pytest.approx(1e8)  # one decade left of the cheapest costed metric
    shown = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert shown[0] == "0" and "2G" in shown and "5G" in shown
    assert sorted(t.get_text() for t in ax.texts if t.get_fontweight() == "bold") == ["dear", "free"]
