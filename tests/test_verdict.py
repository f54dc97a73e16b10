"""Issue 26, items 1-2: the verdict (place, Holm group, paired comparison with every reference and
control) in analyze's stdout and in the report, and the direction check."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from analysis.compare import compare_metrics, rank_metrics
from analysis.pipeline import analyze
from analysis.verdict import VERDICT_COLUMNS, verdict
from ts2.cli import main

REFS = ["clipscore", "alignscore", "blip1_tifa", "blip1_dsg"]


def _toy(n_segs: int = 30, seed: int = 0) -> pd.DataFrame:
    """SEGs of three levels, two images each: ``ref`` orders well, ``mine`` less well, ``weak``
    (a reference) not at all, ``ctrl`` is noise, ``rev`` orders the wrong way round."""
    rng = np.random.default_rng(seed)
    rows = [(str(s), str(lv), f"{s}-{lv}-{j}") for s in range(n_segs) for lv in range(3) for j in range(2)]
    df = pd.DataFrame(rows, columns=["seg_id", "node", "file_name"])
    lv = df["node"].astype(float).to_numpy()
    n = len(df)
    return df.assign(mine=-lv + rng.normal(0, 1.0, n), ref=-lv + rng.normal(0, 0.2, n), weak=rng.normal(0, 1, n),
                     ctrl=rng.normal(0, 1, n), rev=lv + rng.normal(0, 0.5, n))


ROLES = {"ref": "reference", "weak": "reference", "ctrl": "control"}


def _holm(p: np.ndarray) -> np.ndarray:
    """Holm by hand: the i-th smallest p times (m - i), running maximum, capped at 1."""
    order = np.argsort(p)
    adj = np.minimum(1.0, np.maximum.accumulate((len(p) - np.arange(len(p))) * p[order]))
    out = np.empty_like(adj)
    out[order] = adj
    return out


@pytest.fixture(scope="module")
def toy_result():
    return analyze(_toy(), protocols=["graph"], meta_metrics=["rank", "sep", "delta"], bootstrap=300)


def test_verdict_rows_are_the_results_statistics(toy_result):
    r = toy_result
    v = verdict(r, ROLES, n_permutations=999)
    t = v.table
    assert list(t.columns) == VERDICT_COLUMNS
    # every metric under evaluation against every reference and control, per meta-metric; no others
    assert set(zip(t.metric, t.against, strict=True)) == {(m, c) for m in ("mine", "rev") for c in ("ref", "weak", "ctrl")}
    assert len(t) == 2 * 3 * 3
    for row in t.itertuples(index=False):
        assert row.value == pytest.approx(r.value(row.metric, row.meta_metric, protocol="graph"))
        assert row.diff == pytest.approx(r.value(row.metric, row.meta_metric) - r.value(row.against, row.meta_metric))
        assert 0 < row.p_value <= 1 and row.p_holm >= row.p_value
        assert row.against_role == ROLES[row.against]
    # Holm within one metric's comparisons on one meta-metric (by hand)
    for _, fam in t.groupby(["metric", "meta_metric"]):
        np.testing.assert_allclose(fam["p_holm"].to_numpy(), _holm(fam["p_value"].to_numpy()))
    # the difference's CI is the paired one of compare_metrics (the same bootstrap replicates)
    one = compare_metrics(r, "mine", "ref", n_permutations=999)
    one = one[(one.meta_metric == "rank") & (one.subset == "Avg")].iloc[0]
    row = t[(t.metric == "mine") & (t.against == "ref") & (t.meta_metric == "rank")].iloc[0]
    assert (row.diff_ci_low, row.diff_ci_high) == pytest.approx((one.ci_low, one.ci_high))
    assert row.diff_ci_high < 0 and row.direction == "below" and row.significant
    # places: rank_metrics' position and Holm group
    ranking, _ = rank_metrics(r, "rank", n_permutations=999)
    place = ranking.set_index("metric")
    for m in ("mine", "rev"):
        got = t[(t.metric == m) & (t.meta_metric == "rank")].iloc[0]
        assert (got.position, got.group, got.n_metrics) == (place.loc[m, "position"], place.loc[m, "group"], 5)
    assert (t[(t.metric == "mine") & (t.meta_metric == "rank")].set_index("against")["direction"].to_dict()
            == {"ref": "below", "weak": "above", "ctrl": "above"})


def test_summary_line_and_direction_check(toy_result, caplog):
    r = toy_result
    with caplog.at_level("WARNING", logger="analysis.verdict"):
        v = verdict(r, ROLES, n_permutations=999)
    assert v.reversed == ("rev",)
    assert "lower_is_better=[rev]" in caplog.text and "lower_is_better=[mine]" not in caplog.text
    lines = dict(line.split(": ", 1) for line in v.summary_lines())
    assert set(lines) == {"mine", "rev"}
    pr = r.get("graph")
    i, k = r.metrics.index("mine"), r.meta_metrics.index("rank")
    val, lo, hi = (f"{100 * x[i, k, 0]:.1f}" for x in (pr.estimates, pr.ci_low, pr.ci_high))
    assert lines["mine"].startswith(f"rank_m {val} [{lo}, {hi}], place ")
    assert "significantly below ref, significantly above weak; sep_m" in lines["mine"]
    # sep_m of noise sits at KS's chance level (far above 0): mine does not clear the control there,
    # and the line says so instead of "above every control"
    t = v.table.set_index(["metric", "against", "meta_metric"])
    assert t.loc[("mine", "ctrl", "rank"), "direction"] == "above"
    assert t.loc[("mine", "ctrl", "sep"), "direction"] != "above"
    assert lines["mine"].endswith("not above control(s) ctrl (sep) [floor: the scored control's own value, not the "
                                  "chance level] (Holm 0.05)")
    assert "lower_is_better" not in lines["mine"]
    assert lines["rev"].endswith("analyse it with lower_is_better=[rev]")
    # a metric analysed as lower-is-better that still reads reversed is told the other way round
    flipped = analyze(_toy(), protocols=["graph"], meta_metrics=["rank"], bootstrap=200, lower_is_better=["mine"])
    v2 = verdict(flipped, ROLES, n_permutations=99)
    assert "mine" in v2.reversed
    assert "drop it from lower_is_better=[mine]" in v2.summary_lines()[0]
    assert "drop it" not in v2.summary_lines()[1]  # rev was not listed: analyse it with lower_is_better


def test_no_ci_no_direction_flag_and_no_comparators():
    r = analyze(_toy(), protocols=["graph"], meta_metrics=["rank"], bootstrap=0)
    v = verdict(r, ROLES, n_permutations=99)
    assert v.reversed == ()  # rev's rank_m is negative, but without a CI there is no evidence
    assert v.table["ci_low"].isna().all() and v.table["diff_ci_low"].isna().all()
    assert v.table["p_value"].notna().all()
    # every metric under evaluation, nothing to compare with: one row each, said so
    alone = verdict(r, {}, n_permutations=99)
    assert len(alone.table) == 5 and (alone.table["against"] == "").all()
    assert all("significantly" not in line and "Holm" not in line for line in alone.summary_lines())
    with pytest.raises(ValueError, match="expected a role among"):
        verdict(r, {"ctrl": "baseline"})
    with pytest.raises(ValueError, match="expected alpha in"):
        verdict(r, ROLES, alpha=1.5)


def test_released_scores_plus_a_new_metric_verdict_in_stdout_and_report(ts2_dir, tmp_path, capsys):
    """The issue's must-show: released scores + one synthetic new metric -> analyze's stdout ends
    with its verdict line, and the report's Verdict section lists every reference with a p-value."""
    released = pd.read_csv(ts2_dir / "released" / "scores_subset.csv", dtype={"seg_id": str, "node": str})
    rng = np.random.default_rng(0)
    mine = released[["seg_id", "node", "file_name"]].assign(
        my_metric=released["blip1_dsg"] + rng.normal(0, 0.15, len(released)))
    f = tmp_path / "mine.csv"
    mine.to_csv(f, index=False)
    out = tmp_path / "a"
    assert main(["analyze", f"scores={f}", f"path={ts2_dir}", "bootstrap=200", "chance=0", "protocols=[paper]",
                 f"output_dir={out}"]) == 0
    stdout = capsys.readouterr().out
    last = stdout.rstrip("\n").splitlines()[-1]
    vd = pd.read_csv(out / "verdict.csv")
    rank = vd[vd.meta_metric == "rank"].iloc[0]
    assert last.startswith(f"my_metric: rank_m {100 * rank.value:.1f} [{100 * rank.ci_low:.1f}, "
                           f"{100 * rank.ci_high:.1f}], place {rank.position} of 5")
    assert last.endswith("(Holm 0.05)")
    # the noisy copy orders worse than every published metric, and the line says so
    assert "significantly below clipscore, alignscore, blip1_tifa, blip1_dsg; sep_m" in last
    assert set(vd.against) == set(REFS) and set(vd.meta_metric) == {"rank", "sep", "delta"}
    assert (vd.against_role == "reference").all() and vd.p_value.between(0, 1).all()

    rep = tmp_path / "r"
    assert main(["report", f"results={out}", "bootstrap=200", "chance=0", f"output_dir={rep}"]) == 0
    page = (rep / "report.html").read_text()
    section = page.split("<h2>Verdict</h2>")[1].split("<h2>")[0]
    for ref in REFS:
        rows = re.findall(rf"<td>{ref}</td><td>[^<]*</td><td>[^<]*(?:<small>[^<]*</small>)?</td>"
                          r"<td>([^<]+)</td><td>([^<]+)</td>", section)
        assert len(rows) == 3, ref  # one row per meta-metric, each with a p-value and a Holm p-value
        assert all(re.fullmatch(r"&lt; 0\.0001|[01]\.\d{4}", p) for row in rows for p in row), rows
    # the report folder holds the CSVs it shows, and its verdict is analyze's (same seed and settings)
    got = pd.read_csv(rep / "verdict.csv")
    got = got[got.protocol == "paper"].reset_index(drop=True)
    pd.testing.assert_frame_equal(got[VERDICT_COLUMNS], vd[VERDICT_COLUMNS], check_dtype=False)
    assert (rep / "ranking.csv").is_file() and (rep / "pairs.csv").is_file()
    assert f"<p>{last.replace('&', '&amp;')}</p>" in section.replace("&#x27;", "'")


def test_reversed_metric_is_named_in_stdout_and_report(ts2_dir, tmp_path, capsys):
    released = pd.read_csv(ts2_dir / "released" / "scores_subset.csv", dtype={"seg_id": str, "node": str})
    f = tmp_path / "rev.csv"
    released[["seg_id", "node", "file_name"]].assign(one_minus=1 - released["clipscore"]).to_csv(f, index=False)
    out = tmp_path / "a"
    assert main(["analyze", f"scores={f}", f"path={ts2_dir}", "bootstrap=200", "chance=0", "protocols=[paper]", "permutations=999",
                 f"output_dir={out}"]) == 0
    last = capsys.readouterr().out.rstrip("\n").splitlines()[-1]
    assert last.startswith("one_minus: rank_m -71.4") and last.endswith("lower_is_better=[one_minus]")
    rep = tmp_path / "r"
    assert main(["report", f"results={out}", "bootstrap=200", "chance=0", f"output_dir={rep}"]) == 0
    section = (rep / "report.html").read_text().split("<h2>Verdict</h2>")[1].split("<h2>")[0]
    assert "<b>Direction:</b> one_minus" in section and "lower_is_better=[one_minus]" in section

