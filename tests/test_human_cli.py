"""``human_main`` (what ``ts2 analyze human=FILE`` runs) end to end on a small synthetic human file."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf
from scipy import stats as ss

from analysis import human as H
from analysis.views import compare_views, view_values
from seg_data.human import load_human, make_synthetic_human
from ts2.commands.analyze_human import RESULT_COLUMNS, human_main

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> Path:
    return make_synthetic_human(tmp_path_factory.mktemp("human") / "human.csv", n_prompts=12, images_per_prompt=4,
                                seed=3)


@pytest.fixture(scope="module")
def run(synthetic, tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    cfg = OmegaConf.create({"human": str(synthetic), "output_dir": str(out), "bootstrap": 60, "seed": 1,
                            "metrics": None, "human_permutations": 40, "progress": False})
    rc = human_main(cfg)
    return rc, out, load_human(synthetic)


def test_writes_results_with_expected_columns(run):
    rc, out, hj = run
    assert rc == 0
    res = pd.read_csv(out / "human_metametrics.csv")
    assert list(res.columns) == RESULT_COLUMNS
    stats = set(H.KIND_STATISTICS["likert"][0]) | {"pairwise_acc_epsilon"}
    assert set(res.subset) == {"all"}  # the synthetic set has no categories
    for m in hj.metrics:
        for g in H.GROUPINGS:
            sub = res[(res.metric == m) & (res.grouping == g)]
            assert set(sub.statistic) == stats
    assert {"krippendorff_alpha_interval", "krippendorff_alpha_ordinal"} <= set(res[res.metric == "human"].statistic)
    for name in ("human_table.md", "human_table.csv", "human_metric_correlations.csv", "human_paired_tests.csv"):
        assert (out / name).is_file(), name


def test_values_match_direct_computation(run):
    _, out, hj = run
    res = pd.read_csv(out / "human_metametrics.csv").set_index(["metric", "statistic", "grouping"])
    x, y = hj.scores("oracle"), hj.human
    assert res.loc[("oracle", "kendall_b", "global"), "value"] == pytest.approx(ss.kendalltau(x, y).statistic)
    assert res.loc[("oracle", "spearman", "prompt"), "value"] == pytest.approx(
        H.grouped_correlation(x, y, hj.groups, "spearman").value)
    pa = H.tie_calibrated_pairwise_accuracy(x, y)
    assert res.loc[("oracle", "pairwise_acc", "global"), "value"] == pytest.approx(pa.accuracy)
    assert res.loc[("oracle", "pairwise_acc_epsilon", "global"), "value"] == pytest.approx(pa.epsilon)
    assert res.loc[("human", "krippendorff_alpha_interval", "global"), "value"] == pytest.approx(
        H.krippendorff_alpha(hj.reliability_data(), "interval"))
    # "noisy" has images without a score: they are left out and counted.
    n_scored = int(np.isfinite(hj.scores("noisy")).sum())
    assert 0 < n_scored < hj.n_items
    assert res.loc[("noisy", "kendall_b", "global"), "n"] == n_scored
    ok = np.isfinite(hj.scores("noisy"))
    assert res.loc[("noisy", "kendall_b", "global"), "value"] == pytest.approx(
        ss.kendalltau(hj.scores("noisy")[ok], y[ok]).statistic)


def test_intervals_and_ordering(run):
    _, out, _ = run
    res = pd.read_csv(out / "human_metametrics.csv")
    ci = res.dropna(subset=["ci_low"])
    assert len(ci) > 0
    assert (ci.ci_low <= ci.value + 1e-12).all() and (ci.value <= ci.ci_high + 1e-12).all()
    eps = res[res.statistic == "pairwise_acc_epsilon"]
    assert eps.ci_low.isna().all()
    tau = view_values(res, "kendall_b", "global")
    assert tau["oracle"] > tau["noisy"] > tau["random"]  # by construction of the synthetic set


def test_table_and_paired_tests(run):
    _, out, hj = run
    md = (out / "human_table.md").read_text()
    assert "over all images" in md and "within prompts" in md
    res = pd.read_csv(out / "human_metametrics.csv").set_index(["metric", "statistic", "grouping"])
    line = next(ln for ln in md.splitlines() if ln.startswith("| oracle |"))
    assert f"{100 * res.loc[('oracle', 'kendall_b', 'global'), 'value']:.1f}" in line
    tests = pd.read_csv(out / "human_paired_tests.csv")
    assert len(tests[["metric_a", "metric_b"]].drop_duplicates()) == 3  # 3 metrics -> 3 pairs
    assert set(tests.test) == {"williams", "permutation", "bootstrap"}  # bootstrap: pairwise accuracy
    assert (tests[tests.test == "permutation"].n_resamples == 40).all()
    assert tests.p_value.between(0, 1).all()
    best = tests[(tests.metric_a == "oracle") & (tests.metric_b == "random") & (tests.test == "williams")]
    assert (best.p_value < 0.01).all()
    corr = pd.read_csv(out / "human_metric_correlations.csv", index_col=0)
    assert list(corr.columns) == [*hj.metrics, "human"]


def test_side_by_side_with_a_seg_view(run):
    """The report's two views: human Kendall tau next to a SEG value per metric."""
    _, out, _ = run
    human_view = view_values(pd.read_csv(out / "human_metametrics.csv"))
    seg_view = {"oracle": 0.8, "noisy": 0.9, "random": 0.1, "clip_only_in_seg": 0.5}
    v = compare_views(seg_view, human_view)
    assert v.seg_order == ("noisy", "oracle", "random")
    assert v.human_order == ("oracle", "noisy", "random")
    assert v.tau == pytest.approx(1 / 3)
    assert v.only_seg == ("clip_only_in_seg",)


def test_metric_selection_bootstrap_off_and_bad_input(synthetic, tmp_path):
    cfg = OmegaConf.create({"human": str(synthetic), "output_dir": str(tmp_path / "a"), "bootstrap": 0,
                            "metrics": ["random", "oracle"], "human_permutations": 0, "progress": False})
    assert human_main(cfg) == 0
    res = pd.read_csv(tmp_path / "a" / "human_metametrics.csv")
    assert set(res.metric) == {"human", "rater_ceiling", "random", "oracle"}
    assert res.ci_low.isna().all()
    assert (pd.read_csv(tmp_path / "a" / "human_paired_tests.csv").test == "williams").all()  # permutations off
    bad = OmegaConf.create({"human": str(synthetic), "output_dir": str(tmp_path / "b"), "metrics": ["tifa"]})
    assert human_main(bad) == 2
    assert human_main(OmegaConf.create({"human": str(tmp_path / "none.csv"), "output_dir": str(tmp_path)})) == 2
    assert human_main(OmegaConf.create({"human": None, "output_dir": str(tmp_path)})) == 2
    broken = tmp_path / "broken.csv"
    broken.write_text("item_id,prompt,rater,rating\ni1,a,r,five\n")
    assert human_main(OmegaConf.create({"human": str(broken), "output_dir": str(tmp_path)})) == 2


def test_through_ts2_analyze(synthetic, tmp_path):
    """``ts2 analyze human=FILE`` routes to human_main (a lost routing fails here, never skips)."""
    from ts2.cli import main

    rc = main(["analyze", f"human={synthetic}", f"output_dir={tmp_path / 'out'}", "bootstrap=20", "++human_permutations=20"])
    assert rc == 0
    res = pd.read_csv(tmp_path / "out" / "human_metametrics.csv")
    assert not math.isnan(res[(res.metric == "oracle") & (res.statistic == "kendall_b")].value.iloc[0])


def test_human_view_never_imports_torch():
    import subprocess
    import sys

    code = ("import sys, analysis.human, analysis.views, seg_data.human, ts2.commands.analyze_human; "
            "bad = [m for m in ('torch', 'metrics_adapters') if m in sys.modules]; "
            "assert not bad, bad")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr
