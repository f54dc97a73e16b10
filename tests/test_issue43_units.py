"""Issue 43: one unit convention (analysis/units.py). Files and Python objects keep fractions; the
terminal summary, the HTML table and the verdict section print percent with the unit in the header;
the note on delta_m above 100 % appears exactly when a printed delta_m number exceeds 100."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from analysis.report.outputs import summary_text, write_outputs
from analysis.report.page import metametrics_html, verdict_html
from analysis.session import run_analysis
from analysis.units import DELTA_NOTE, delta_above_100, pct

pytestmark = pytest.mark.light


def _scores(noise: float, seed: int = 0) -> pd.DataFrame:
    """20 chain SEGs of 3 levels x 2 images; score = -errors + noise. Small noise: adjacent levels
    lie more than one score std apart (delta_m > 1); large noise: far less."""
    rng = np.random.default_rng(seed)
    rows = [(str(s), str(lv), f"{s}-{lv}-{j}") for s in range(20) for lv in range(3) for j in range(2)]
    df = pd.DataFrame(rows, columns=["seg_id", "node", "file_name"])
    lv = df["node"].astype(float).to_numpy()
    df["mine"] = -lv + rng.normal(0, noise, len(df))
    df["ref"] = -lv + rng.normal(0, 2 * noise, len(df))
    return df


def _analysis(noise: float):
    return run_analysis(_scores(noise), protocols=["graph"], bootstrap=100, chance=0, permutations=99,
                        roles={"ref": "reference"}, reference=None, store=False, progress=False)


def _delta_max(a) -> float:
    mm = a.metametrics
    return float(mm.loc[mm["meta_metric"] == "delta", ["value", "ci_low", "ci_high"]].to_numpy(float).max())


@pytest.fixture(scope="module")
def wide():
    a = _analysis(0.3)
    assert _delta_max(a) > 1, "the fixture is meant to give delta_m above 100 %"
    return a


@pytest.fixture(scope="module")
def narrow():
    a = _analysis(3.0)
    assert _delta_max(a) < 1, "the fixture is meant to give delta_m below 100 %"
    return a


def test_files_and_objects_keep_fractions(wide, tmp_path):
    write_outputs(wide.result, tmp_path)
    csv = pd.read_csv(tmp_path / "metametrics.csv")
    r = wide.result.protocols["graph"]
    k, g = wide.result.meta_metrics.index("rank"), list(r.group_names).index("Avg")
    row = csv[(csv.metric == "mine") & (csv.meta_metric == "rank") & (csv.subset == "Avg")].iloc[0]
    # the file, the frame and the result's array hold the same fraction (rank_m is at most 1)
    assert row.value == pytest.approx(r.estimates[0, k, g]) and -1 <= row.value <= 1
    obj = wide.metametrics.set_index(["metric", "meta_metric", "subset"]).loc[("mine", "rank", "Avg"), "value"]
    assert obj == pytest.approx(row.value)
    assert (csv["value"].abs() <= 1).sum() >= len(csv[csv.meta_metric != "delta"])
    cmp = wide.compare("mine", "ref")
    assert cmp["diff"].abs().max() < 2  # a difference of fractions, not of percents


def test_summary_prints_percent_with_the_unit_in_the_header(wide):
    text = summary_text(wide.result)
    head = next(line for line in text.splitlines() if line.startswith("metric  "))
    assert re.split(r"\s{2,}", head.strip()) == ["metric", "SEGs", "rank (%)", "sep (%)", "delta (%)"]
    r = wide.result.protocols["graph"]
    k = wide.result.meta_metrics.index("rank")
    mine = next(line for line in text.splitlines() if line.startswith("mine "))
    assert re.split(r"\s{2,}", mine)[2].startswith(pct(r.estimates[0, k, 0]) + " [")


def test_html_table_prints_percent_with_the_unit_in_the_header(wide):
    page = metametrics_html(wide.metametrics, "graph", roles=wide.roles)
    assert "<th>meta-metric (values in %)</th>" in page
    v = wide.metametrics.set_index(["metric", "meta_metric", "subset"]).loc[("mine", "sep", "Avg"), "value"]
    assert f"<td>sep</td><td>Avg</td><td><b>{pct(v)}</b>" in page
    assert "% (fractions x 100" in wide._repr_html_()


def test_delta_note_appears_exactly_when_a_delta_exceeds_100(wide, narrow):
    note = DELTA_NOTE.replace("'", "&#x27;")
    for a, shown in ((wide, True), (narrow, False)):
        assert (DELTA_NOTE in summary_text(a.result)) is shown
        assert (note in metametrics_html(a.metametrics, "graph", roles=a.roles)) is shown
        assert (DELTA_NOTE in a.summary()) is shown
        assert (note in verdict_html(a.verdict_result, "graph")) is shown


def test_delta_note_on_a_ci_bound_alone():
    """A value below 100 % whose upper CI bound prints above 100 (the issue's 'delta_m 106.5')."""
    mm = pd.DataFrame({"metric": ["m", "m"], "protocol": ["graph"] * 2, "meta_metric": ["rank", "delta"],
                       "subset": ["Avg", "Avg"], "value": [0.5, 0.967], "ci_low": [0.4, 0.881],
                       "ci_high": [0.6, 1.065], "n_segs": [30, 30]})
    note = DELTA_NOTE.replace("'", "&#x27;")
    assert note in metametrics_html(mm, "graph")
    mm.loc[1, "ci_high"] = 0.999
    assert note not in metametrics_html(mm, "graph")
    # a rank_m above 1 is impossible, but the note is about delta only
    mm.loc[0, "ci_high"] = 1.2
    assert note not in metametrics_html(mm, "graph")


def test_pct_is_the_one_rounding_rule():
    from analysis.verdict import pct as verdict_pct

    assert verdict_pct is pct
    assert [pct(x) for x in (0.4674, -0.00001, 1.0651, 0.0)] == ["46.7", "0.0", "106.5", "0.0"]
    assert delta_above_100([0.5, np.nan, 1.0001]) and not delta_above_100([1.0, np.nan])
