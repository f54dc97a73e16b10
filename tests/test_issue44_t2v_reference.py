"""Issue 44, must show: ``ts2 analyze human=dsg_tifa160_anns.csv human_scores=<TIFA v1.0 JSON>`` gives, for all 10
metrics, what t2v_metrics' own evaluation computes on TIFA160 (``TIFA160_DSG.evaluate_scores`` in its ``dataset.py``:
Pearson by ``np.corrcoef``, Kendall tau-b by ``KendallVariants``, tie-calibrated pairwise accuracy by
``tau_optimization.tau_optimization(..., TauSufficientStats.acc_23)``), and a rater-ceiling row.

t2v_metrics is on PyPI (``t2v-metrics``) but its wheel ships only the ``t2v_metrics`` package, not the repository's
``dataset.py`` / ``tau_optimization.py`` (checked on 3.0), so the reference below is an independent re-implementation
of those two files' algorithms (read from github.com/linzhiqiu/t2v_metrics): the per-image mean is built the way
``TIFA160_DSG.__init__`` builds it (``source_id`` + mapped ``model_type`` keys, images in ``tifa160.json`` order),
the Kendall counts from the pairwise sign matrices of ``_MatrixSufficientStatistics``, and the tie optimisation as
``tau_optimization``'s walk over the pairs sorted by metric difference (a threshold's accuracy is the one after all
pairs of that difference became ties; the first maximum wins), here once as its Python loop (on a subsample) and
once with the same steps as cumulative sums (all 800 images).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import shared_path
from omegaconf import OmegaConf

pytestmark = pytest.mark.shared

TIFA_METRICS = ("bleu", "rouge", "meteor", "spice", "clipscore_vitb32", "tifa_vilt", "tifa_ofa-large",
                "tifa_git-large", "tifa_blip2-flant5xl", "tifa_mplug-large")
DSG_TO_TIFA = {"mini-dalle": "mini_dalle", "vq-diffusion": "vq_diffusion", "sd1dot5": "stable_diffusion_v1_5",
               "sd2dot1": "stable_diffusion_v2_1", "sd1dot1": "stable_diffusion_v1_1"}


# -- the reference: t2v_metrics' algorithms, written again ---------------------------------------
def t2v_inputs():
    """Per-image mean DSG ratings and the TIFA v1.0 metric scores, as TIFA160_DSG lines them up."""
    anns = pd.read_csv(shared_path("human", "dsg_tifa160_anns.csv"))
    order = list(json.loads(shared_path("human", "tifa160.json").read_text()).keys())
    keys = [f"{s}_{DSG_TO_TIFA[m]}" for s, m in zip(anns["source_id"], anns["model_type"], strict=True)]
    ratings: dict[str, list[float]] = {}
    for k, a in zip(keys, anns["answer"], strict=True):
        ratings.setdefault(k, []).append(float(a))
    human = np.array([np.mean(ratings[k]) for k in order])
    tifa = json.loads(shared_path("human", "tifa_v1_human_annotations_with_scores.json").read_text())
    scores = {m: np.array([float(tifa[k][m]) for k in order]) for m in TIFA_METRICS}
    return order, human, scores


def t2v_kendall_b(gold, metric) -> float:
    """``KendallVariants(gold, metric, variant="b")`` through ``_MatrixSufficientStatistics`` with epsilon 0."""
    x, y = np.asarray(metric, float), np.asarray(gold, float)
    x_diffs = x[None, :] - x[:, None]
    y_diffs = y[None, :] - y[:, None]
    x_tie, y_tie = x_diffs == 0, y_diffs == 0
    n = len(y)
    num_pairs = n * (n - 1) // 2
    con = int((((x_diffs > 0) & (y_diffs > 0)) | ((x_diffs < 0) & (y_diffs < 0))).sum() / 2)
    t_x = int((x_tie & ~y_tie).sum() / 2)
    t_y = int((~x_tie & y_tie).sum() / 2)
    t_xy = int(((x_tie & y_tie).sum() - n) / 2)
    dis = num_pairs - (con + t_x + t_y + t_xy)
    xtie, ytie, tot = t_x + t_xy, t_y + t_xy, num_pairs
    return (con - dis) / np.sqrt(tot - xtie) / np.sqrt(tot - ytie)


def t2v_pairwise_acc_loop(gold, metric) -> tuple[float, float]:
    """``tau_optimization(metric, gold, TauSufficientStats.acc_23)`` for one row, as its Python loop."""
    h, m = list(map(float, gold)), list(map(float, metric))
    pairs = []  # (diff, stats, tie_stats) with stats as (con + ties_both) counts: acc_23's numerator
    for i in range(len(h)):
        for j in range(i + 1, len(h)):
            if h[i] == h[j]:  # ties_both (counts) or ties_human (does not); as a metric tie: ties_both
                stat, tie_stat = (1 if m[i] == m[j] else 0), 1
            elif m[i] == m[j]:
                stat, tie_stat = 0, 0
            else:
                stat = 1 if (h[i] > h[j]) == (m[i] > m[j]) else 0
                tie_stat = 0
            pairs.append((abs(m[i] - m[j]), stat, tie_stat))
    total = len(pairs)
    num = sum(p[1] for p in pairs)
    thresholds, taus = [0.0], [num / total]
    pairs.sort(key=lambda p: p[0])
    for diff, stat, tie_stat in pairs:
        num += tie_stat - stat
        if thresholds[-1] == diff:
            taus[-1] = num / total
        else:
            thresholds.append(diff)
            taus.append(num / total)
    best = int(np.nanargmax(taus))
    return taus[best], thresholds[best]


def t2v_pairwise_acc(gold, metric) -> tuple[float, float]:
    """The same walk with numpy: per pair the acc_23 numerator before (concordant or tied in both) and after it
    becomes a metric tie (tied in the human scores), summed in order of |metric difference|."""
    h, m = np.asarray(gold, float), np.asarray(metric, float)
    i, j = np.triu_indices(len(h), 1)
    dh, dm = h[i] - h[j], m[i] - m[j]
    before = ((dh == 0) & (dm == 0)) | ((dh != 0) & (dm != 0) & (np.sign(dh) == np.sign(dm)))
    after = dh == 0
    order = np.argsort(np.abs(dm), kind="stable")
    diff = np.abs(dm)[order]
    num = before.sum() + np.cumsum(after[order].astype(int) - before[order].astype(int))
    last = np.r_[diff[1:] != diff[:-1], True]  # a threshold's value is the one after its last pair
    thresholds = np.r_[0.0, diff[last]]
    taus = np.r_[before.sum(), num[last]] / len(i)
    if diff[0] == 0:  # a 0 difference overwrites the initial threshold 0.0 (thresholds[-1] == pair.diff)
        thresholds, taus = thresholds[1:], taus[1:]
    best = int(np.nanargmax(taus))
    return float(taus[best]), float(thresholds[best])


def t2v_pearson(gold, metric) -> float:
    return float(100 * np.corrcoef(gold, metric)[0, 1])


# -- the checks ----------------------------------------------------------------------------------------
def test_the_numpy_walk_is_the_loop():
    """The cumulative-sum form of tau_optimization equals its loop, on tie-heavy random data and a real subsample."""
    rng = np.random.default_rng(0)
    for _ in range(20):
        n = int(rng.integers(2, 40))
        g = rng.integers(1, 6, n).astype(float)
        m = np.round(rng.normal(size=n), int(rng.integers(0, 3)))
        assert t2v_pairwise_acc(g, m) == pytest.approx(t2v_pairwise_acc_loop(g, m), abs=1e-12)
    _, human, scores = t2v_inputs()
    idx = rng.choice(len(human), 150, replace=False)
    for metric in ("tifa_vilt", "clipscore_vitb32"):
        assert t2v_pairwise_acc(human[idx], scores[metric][idx]) == pytest.approx(
            t2v_pairwise_acc_loop(human[idx], scores[metric][idx]), abs=1e-12)


@pytest.fixture(scope="module")
def cli_results(tmp_path_factory):
    from ts2.commands.analyze_human import human_main

    out = tmp_path_factory.mktemp("t2v")
    cfg = OmegaConf.create({"human": str(shared_path("human", "dsg_tifa160_anns.csv")),
                            "human_scores": str(shared_path("human", "tifa_v1_human_annotations_with_scores.json")),
                            "bootstrap": 0, "output_dir": str(out), "progress": False, "human_permutations": 200})
    assert human_main(cfg) == 0
    return pd.read_csv(out / "human_metametrics.csv")


def test_cli_equals_t2v_metrics_on_all_ten_metrics(cli_results):
    order, human, scores = t2v_inputs()
    assert len(order) == 800
    res = cli_results[(cli_results.grouping == "global") & (cli_results.subset == "all")].set_index(
        ["metric", "statistic"])["value"]
    worst = {"pearson": 0.0, "kendall_b": 0.0, "pairwise_acc": 0.0}
    for m in TIFA_METRICS:
        ref = {"pearson": t2v_pearson(human, scores[m]) / 100, "kendall_b": t2v_kendall_b(human, scores[m]),
               "pairwise_acc": t2v_pairwise_acc(human, scores[m])[0]}
        for st, v in ref.items():
            worst[st] = max(worst[st], abs(res[(m, st)] - v))
            assert res[(m, st)] == pytest.approx(v, abs=1e-12), (m, st)
        eps = cli_results.set_index(["metric", "statistic", "grouping", "subset"])["value"]
        assert eps[(m, "pairwise_acc_epsilon", "global", "all")] == pytest.approx(
            t2v_pairwise_acc(human, scores[m])[1], abs=1e-12)
    print("max |ts2 - t2v_metrics reference|:", worst)  # noqa: T201 - shown with -s, the report's number


def test_rater_ceiling_row(cli_results):
    """Leave-one-rater-out: each of the 5 DSG workers against the mean of the others, Pearson by hand."""
    res = cli_results.set_index(["metric", "statistic", "grouping", "subset"])
    anns = pd.read_csv(shared_path("human", "dsg_tifa160_anns.csv"))
    anns["key"] = anns["source_id"] + "_" + anns["model_type"].map(DSG_TO_TIFA)
    wide = anns.pivot(index="key", columns="worker_id", values="answer")
    vals = []
    for w in wide.columns:
        mine = wide[w]
        others = wide.drop(columns=w)
        ok = mine.notna() & others.notna().any(axis=1)
        vals.append(np.corrcoef(mine[ok], others[ok].mean(axis=1))[0, 1])
    for st in ("pearson", "kendall_b", "pairwise_acc"):
        assert (("rater_ceiling", st, "global", "all")) in res.index
    assert res.loc[("rater_ceiling", "pearson", "global", "all"), "value"] == pytest.approx(np.mean(vals), abs=1e-12)
    assert res.loc[("rater_ceiling", "pearson", "global", "all"), "n"] == 5
    # People agree with each other better than any metric agrees with them.
    best = res.xs(("pearson", "global", "all"), level=(1, 2, 3))["value"].drop(["rater_ceiling"]).max()
    assert res.loc[("rater_ceiling", "pearson", "global", "all"), "value"] > best
