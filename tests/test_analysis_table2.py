"""The paper's Table 2 from the released per-image scores (needs ../shared; skipped without it)."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from reference_impl import reference_seg_values

from analysis.pareto import pareto_front, parse_flops
from analysis.pipeline import analyze
from analysis.protocols import PROTOCOLS
from analysis.scores_io import prepare_inputs, read_scores
from analysis.walks import build_walk_table, protocol_walks
from seg_data import load_ts2_release

pytestmark = pytest.mark.shared

# Table 2 of the paper, as quoted in ../shared/ts2/README.md (%, Avg/Synth/Nat/Real).
PRINTED = {
    "clipscore": {"rank": (71.4, 75.0, 58.0, 69.3), "sep": (90.7, 90.5, 91.5, 90.3), "delta": 89.7},
    "alignscore": {"rank": (73.9, 77.6, 70.2, 62.6), "sep": (92.8, 94.1, 92.6, 87.9), "delta": 95.6},
    "blip1_tifa": {"rank": (73.8, 78.8, 62.2, 64.0), "sep": (81.8, 84.1, 77.9, 76.4), "delta": 94.0},
    "blip1_dsg": {"rank": (76.6, 81.6, 71.6, 61.2), "sep": (80.8, 84.9, 73.3, 70.8), "delta": 103.7},
}
# The paper's delta subset rows (Synth, Nat, Real) for the same metrics: not reproducible.
PRINTED_DELTA_SUBSETS = {"clipscore": (89.9, 92.5, 95.1), "alignscore": (95.6, 98.6, 100.8),
                         "blip1_tifa": (93.9, 95.5, 96.9), "blip1_dsg": (103.6, 104.6, 105.9)}
SUBSETS = ("Avg", "Synth", "Nat", "Real")


@pytest.fixture(scope="module")
def scores_csv(ts2_dir):
    return ts2_dir / "released" / "scores_subset.csv"


@pytest.fixture(scope="module")
def paper(scores_csv):
    return analyze(scores_csv, protocols=["paper", "graph"], bootstrap=0)


def _pct(v: float) -> str:
    return f"{100 * v:.1f}"


@pytest.mark.parametrize("metric", list(PRINTED))
def test_paper_protocol_reproduces_table_2(paper, metric):
    assert paper.get("paper").group_names == SUBSETS
    for mm in ("rank", "sep"):
        got = [_pct(paper.value(metric, mm, s, "paper")) for s in SUBSETS]
        assert got == [f"{v:.1f}" for v in PRINTED[metric][mm]], (metric, mm)
    assert _pct(paper.value(metric, "delta", "Avg", "paper")) == f"{PRINTED[metric]['delta']:.1f}"


def test_paper_delta_subset_rows_are_not_reproducible(paper):
    # Documented discrepancy: no aggregation of the released scores gives the printed rows; ours
    # differ by 5 to 50 points (e.g. CLIPScore Synth 106.9 against the printed 89.9).
    for metric, printed in PRINTED_DELTA_SUBSETS.items():
        for sub, p in zip(SUBSETS[1:], printed, strict=True):
            assert abs(100 * paper.value(metric, "delta", sub, "paper") - p) > 5, (metric, sub)


def test_paper_protocol_counts_like_the_paper(paper):
    mm = paper.metametrics_frame().set_index(["protocol", "meta_metric", "subset", "metric"])["n_segs"]
    assert mm[("paper", "rank", "Avg", "clipscore")] == 164  # SEG 164 left out
    assert mm[("paper", "rank", "Real", "clipscore")] == 28
    assert mm[("graph", "rank", "Avg", "clipscore")] == 164  # all 165, but SEG 103 (one node) has no walk
    assert mm[("graph", "rank", "Real", "clipscore")] == 29
    assert paper.get("graph").seg_values.n_walks[paper.get("graph").seg_values.seg_ids.index("103")] == 0


def test_graph_protocol_differs_from_the_paper(paper):
    diffs = [abs(paper.value(m, "rank", s, "paper") - paper.value(m, "rank", s, "graph")) for m in PRINTED for s in SUBSETS]
    assert max(diffs) > 0.02  # a different computation, not a relabelling


def test_dataset_join_gives_the_same_numbers(ts2_dir, scores_csv, paper):
    ds = load_ts2_release(ts2_dir)
    joined = analyze(scores_csv, dataset=ds, protocols=["paper", "graph"], bootstrap=0)
    a, b = paper.metametrics_frame(), joined.metametrics_frame()
    np.testing.assert_allclose(a["value"], b["value"], equal_nan=True)


def test_engine_equals_reference_on_real_segs(scores_csv):
    inputs = prepare_inputs(read_scores(scores_csv))
    # multi-root SEGs, the single-node SEG 103, and a spread of others
    multi_root = [s.seg_id for s in inputs.structure.segs if s.levels.count(0) > 1]
    pick = {"103", "164", *multi_root[:8]} | {s.seg_id for s in inputs.structure.segs[::40]}
    segs = [s for s in inputs.structure.segs if s.seg_id in pick and len(protocol_walks(s, "levels", True)) <= 40]
    ids = [s.seg_id for s in segs]
    from analysis.aggregate import seg_means
    from analysis.compute import walk_values

    for name in ("paper", "graph"):
        protocol = PROTOCOLS[name]
        wt = build_walk_table(inputs.structure, protocol.walks, protocol.root_duplication, ids)
        wv, nv = walk_values(wt, inputs.scores, protocol, ("rank", "sep", "delta", "kendall", "pair_acc"))
        got = seg_means(wv, nv, wt.walk_seg, wt.n_segs, protocol.walk_weighting)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = reference_seg_values(segs, inputs.scores, protocol)
        np.testing.assert_allclose(got, want, atol=1e-12, equal_nan=True)


def test_ts2_dag_walks_with_root_duplication_are_the_paper_walks(scores_csv):
    inputs = prepare_inputs(read_scores(scores_csv))
    for s in inputs.structure.segs:
        if s.seg_id == "103":
            continue  # a single node: the paper's code makes the walk (0, 0), a DAG has no walk
        assert sorted(protocol_walks(s, "dag", True)) == sorted(protocol_walks(s, "levels", True)), s.seg_id


def _row(lines: list[str], prefix: str) -> list[float]:
    line = next(ln for ln in lines if ln.startswith(prefix))
    return [parse_flops(re.sub(r"<[^>]+>", "", c)) for c in line.split("\t")[2:]]


def test_pareto_frontier_of_the_printed_table(shared_dir):
    """Figure 4 from Table 2's own numbers: the Avg rank_m/sep_m rows and the FLOP row of the paper text."""
    lines = (shared_dir / "papers" / "t2iscorescore.txt").read_text(encoding="utf-8").splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith("rank _m\tAvg"))
    names = [c.strip() for c in lines[i - 2].split("\t") if c.strip()]
    families = ["emb"] * 2 + ["TIFA"] * 7 + ["DSG"] * 7 + ["cap"] * 3
    labels = [f"{f}:{n}" for f, n in zip(families, names, strict=True)]
    rank_avg, sep_avg, flops = _row(lines, "rank _m\tAvg"), _row(lines, "sep _m\tAvg"), _row(lines, "FLOP/run")
    assert len(labels) == len(rank_avg) == len(sep_avg) == len(flops) == 19
    assert flops[0] == 604e6 and flops[8] == 1.66e15
    front_rank = pareto_front({n: (v, c) for n, v, c in zip(labels, rank_avg, flops, strict=True)})
    # The printed numbers put DSG-InstructBLIP (79.0 at 140T) ahead of TIFA-GPT4-V (77.9 at 1.66P):
    # TIFA-GPT4-V is not on the rank_m frontier although section 5 / Figure 4 say it is.
    assert front_rank == ["emb:CLIPScore", "emb:ALIGNScore", "DSG:InstructBLIP", "DSG:GPT4-V"]
    # sep_m: nothing beats the embedding metrics, so they are the whole frontier
    assert pareto_front({n: (v, c) for n, v, c in zip(labels, sep_avg, flops, strict=True)}) == ["emb:CLIPScore", "emb:ALIGNScore"]
