"""Issue 16: controls as controls, pareto.csv, heatmaps per metric of interest, honest Runs table,
tables that print what was asked, and the Pareto tick formatter bound per panel."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from analysis.report import plots
from analysis.report.figures import agreement, best_worst_segs, pareto_table
from analysis.report.page import metametrics_html
from analysis.report.plots_pareto import pareto_figure


def test_pareto_zero_tick_is_per_panel():
    """Costs differ between panels: each panel's "0" column sits one decade below its own cheapest."""
    rows = []
    for sub, cheap in (("A", 1e3), ("B", 1e8)):
        for m, cost, v in (("free", 0.0, 0.1), ("cheap", cheap, 0.5), ("dear", cheap * 100, 0.9)):
            rows.append({"metric": m, "meta_metric": "rank", "subset": sub, "value": v, "flops": cost})
    fig = pareto_figure(pd.DataFrame(rows), "rank", subsets=["A", "B"])
    ax_a, ax_b = fig.axes[:2]
    fa, fb = ax_a.xaxis.get_major_formatter(), ax_b.xaxis.get_major_formatter()
    assert fa(1e2, 0) == "0" and fb(1e7, 0) == "0"
    assert fa(1e7, 0) == "10M"  # panel A's zero is at 1e2, not at panel B's 1e7
    assert fb(1e2, 0) == ""     # left of panel B's zero column: no label


def test_pareto_table_never_puts_a_control_on_the_frontier():
    mm = pd.DataFrame({"metric": ["rnd", "a", "b", "c", "nan"], "protocol": "graph", "meta_metric": "sep",
                       "subset": "Avg", "value": [0.95, 0.5, 0.4, 0.9, np.nan]})
    flops = {"rnd": 0.0, "a": 1.0, "b": 2.0, "c": 3.0, "nan": 0.5}
    t = pareto_table(mm, flops, {"rnd": "control"}).set_index("metric")
    # hand: rnd is a control; a (cost 1, .5) undominated; b dominated by a; c (.9) best; nan undefined
    assert t["on_frontier"].to_dict() == {"rnd": False, "a": True, "b": False, "c": True, "nan": False}
    assert t.loc["rnd", "why"] == "control" and t.loc["nan", "why"] == "no value"
    # the figure agrees: the control is a grey cross, not a filled frontier marker
    pts = mm.assign(flops=mm["metric"].map(flops), role=mm["metric"].map({"rnd": "control"}).fillna("metric"))
    fig = pareto_figure(pts, "sep")
    bold = {t.get_text() for t in fig.axes[0].texts if t.get_fontweight() == "bold"}
    assert bold == {"a", "c"}


def test_best_worst_and_agreement_use_the_metric_itself():
    ps = pd.DataFrame({"metric": ["m"] * 4 + ["r1"] * 4 + ["r2"] * 4, "protocol": "paper", "meta_metric": "rank",
                       "seg_id": ["1", "2", "3", "4"] * 3,
                       "value": [0.9, -0.2, 0.5, 0.1, 0.8, -0.1, 0.6, 0.0, -0.9, 0.3, -0.5, 0.2]})
    best, worst, vals = best_worst_segs(ps, "m", "paper", 1)
    assert best == ["1"] and worst == ["2"] and vals["3"] == 0.5
    agree = agreement(ps, "m", ["r1", "r2"], "paper")
    assert list(agree.index) == ["r1", "r2"] and agree["r1"] == pytest.approx(1.0) and agree["r2"] < 0


def test_metametrics_html_prints_what_was_asked():
    mm = pd.DataFrame({"metric": ["good", "rnd", "ay"], "protocol": "p", "meta_metric": "delta", "subset": "Avg",
                       "value": [0.42, -0.0001, np.nan], "ci_low": [0.3, -0.2, np.nan], "ci_high": [0.5, 0.1, np.nan]})
    page = metametrics_html(mm, "p", roles={"rnd": "control", "ay": "control"})
    assert "-0.0" not in page and "<td class=ctrl>0.0<br>" in page
    assert "<sup>*</sup> Blank: the value is undefined for ay" in page
    assert "<b>42.0</b>" in page and "chance" not in page
    with_chance = mm.assign(chance=[0.1, 0.1, np.nan], chance_low=0.0, chance_high=0.2, adjusted=[0.356, -0.111, np.nan])
    page = metametrics_html(with_chance, "p", roles={"rnd": "control"})
    assert "chance<sup>&Dagger;</sup> 10.0; adj. 35.6" in page  # no chance_mc_error column: no error shown
    assert "permuted within each SEG" in page  # the footnote names the null


def _run_folder(d, scores, wall=11.1):
    from seg_data.results import run_record

    d.mkdir(parents=True)
    scores.to_csv(d / "scores.csv", index=False)
    cols = ["good", "noisy", "rnd"]
    recs = [{"name": m, "columns": [m], "directions": {m: True}, "device": "cpu", "wall_time_s": 2.0,
             "images_per_s": rate, "cache_hits": 0, "cache_misses": len(scores), "failures": [],
             "flops_per_image_estimate": f, "flops_per_image_measured": None}
            for m, rate, f in zip(cols, (48.0, 30.0, 9000.0), (2e9, 5e12, 0.0), strict=True)]
    rec = run_record(n_items=len(scores), columns=scores.columns, metrics=recs, directions={m: True for m in cols},
                     roles={"good": "metric", "noisy": "metric", "rnd": "control"}, derived_columns={},
                     wall_time_s=wall, dataset={"name": "toy"})
    (d / "run.json").write_text(json.dumps(rec))


def test_report_marks_controls_and_names_heatmap_metrics(tmp_path, monkeypatch):
    from analysis.report.result_dirs import build_report

    rng = np.random.default_rng(0)
    rows = []
    for s in range(10):
        for node in ("0", "1a", "1b", "2"):
            lv = int(node[0])
            for k in range(3):
                rows.append({"seg_id": str(s), "node": node, "file_name": f"i/{s}-{node}-{k}.png", "prompt": f"p{s}",
                             "good": 0.9 - 0.25 * lv + rng.normal(0, 0.05), "noisy": rng.uniform(),
                             "rnd": 2.0 - 0.6 * lv + rng.normal(0, 0.01)})  # a control that would "win"
    _run_folder(tmp_path / "run", pd.DataFrame(rows))
    titles = []
    real = plots.seg_heatmap

    def spy(*a, **k):
        titles.append(k["title"])
        return real(*a, **k)

    monkeypatch.setattr(plots, "seg_heatmap", spy)
    out = build_report([tmp_path / "run"], tmp_path / "rep", bootstrap=50, confidence=0.9)
    front = pd.read_csv(tmp_path / "rep" / "pareto.csv")
    assert not front.loc[front.metric == "rnd", "on_frontier"].any() and (front.loc[front.metric == "rnd", "why"] == "control").all()
    assert front.loc[front.metric == "good", "on_frontier"].any()
    # heatmaps: chosen for good and noisy (2 best + 2 worst each), never for the control; titles name the metric
    assert len(titles) == 8 and sum("for good:" in t for t in titles) == 4 and sum("for noisy:" in t for t in titles) == 4
    assert not any("rnd" in p.name for p in out.figures if p.name.startswith("heatmap"))
    page = out.html.read_text()
    assert "90% confidence interval" in page and "95%" not in page.split("<h2>Runs")[0].split("Pareto")[0]
    assert "<b>Dataset:</b> toy" in page and "Controls (built to fail" in page
    runs = page.split("<h2>Runs</h2>")[1]
    assert "<td>11.1</td>" in runs  # the run's wall time, not the 6.0 s sum of per-metric times
    assert "good: 48" in runs and "rnd: 9e+03" in runs and "9.03e+03" not in runs  # per metric, no mean


def test_wide_seg_heatmap_wraps_whole_nodes_over_rows():
    nodes = ["0"] + [f"{lv}{c}" for lv in (1, 2, 3) for c in "abc"]  # 10 nodes x 3 images = 30 cells
    sc = pd.DataFrame([{"seg_id": "7", "node": n, "file_name": f"{n}-{k}", "m": float(i)}
                       for i, n in enumerate(nodes) for k in range(3)])
    fig = plots.seg_heatmap(sc, "7", ["m"], max_per_row=20)
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert len(panels) == 2 and fig.get_figwidth() <= 14.0
    shown = [t.get_text() for ax in panels for t in ax.get_xticklabels()]
    assert shown == nodes  # every node once, in order, never split across rows
    widths = [ax.get_xlim()[1] - ax.get_xlim()[0] for ax in panels]
    assert widths[0] == widths[1]  # equal cell widths in every row
    # rows of about equal width: 15 + 15 cells, not 18 + 12
    assert [len(ax.get_xticklabels()) for ax in panels] == [5, 5]


def test_pareto_chance_band_only_when_the_columns_are_there():
    base = pd.DataFrame({"metric": ["a", "b"], "meta_metric": "sep", "subset": "Avg", "value": [0.9, 0.7],
                         "flops": [1e9, 1e6]})
    assert not pareto_figure(base, "sep").axes[0].patches  # stats not merged yet: no band, no error
    fig = pareto_figure(base.assign(chance=[0.6, 0.62], chance_low=[0.55, 0.5], chance_high=[0.66, 0.7]), "sep")
    (band,) = fig.axes[0].patches
    ys = band.get_path().transformed(band.get_patch_transform()).vertices[:, 1] if hasattr(band, "get_patch_transform") \
        else band.get_xy()[:, 1]
    assert min(ys) == pytest.approx(50.0) and max(ys) == pytest.approx(70.0)
