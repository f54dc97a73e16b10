"""The report's side-by-side view: SEG view (rank_m on the bundled mini set) beside the human
view (correlation with a small synthetic human-judgment file), both orders and Kendall's tau."""

from __future__ import annotations

import pandas as pd
import pytest

from seg_data.human import make_synthetic_human
from ts2.cli import main

pytest.importorskip("torch")


def test_report_shows_seg_and_human_views_side_by_side(tmp_path):
    scores = tmp_path / "scores"
    assert main(["score", "dataset=mini", "metric=geneval_shapes", "+metric@metrics.random=random",
                 "+metric@metrics.random2=random", "metrics.random2.name=random2", "metrics.random2.seed=1",
                 "progress=false", f"output_dir={scores}"]) == 0
    # A human file whose metric columns carry the names of the scored metrics: the synthetic
    # "oracle" plays geneval_shapes (best in both views by construction).
    human_csv = make_synthetic_human(tmp_path / "human.csv")
    h = pd.read_csv(human_csv).rename(columns={"oracle": "geneval_shapes", "noisy": "random2"})
    h.to_csv(human_csv, index=False)
    human_out = tmp_path / "human"
    assert main(["analyze", f"human={human_csv}", "bootstrap=0", "human_permutations=0",
                 f"output_dir={human_out}"]) == 0
    report = tmp_path / "report"
    assert main(["report", f"results=[{scores}]", f"human={human_out}", "dataset=mini", "bootstrap=0",
                 "protocols=[graph]", "figure_protocol=graph", f"output_dir={report}"]) == 0

    views = pd.read_csv(report / "views.csv").set_index("metric")
    assert set(views.index) == {"geneval_shapes", "random", "random2"}
    assert views.loc["geneval_shapes", "seg_rank"] == 1 and views.loc["geneval_shapes", "human_rank"] == 1
    # the SEG-view values are the report's own rank_m cells
    mm = pd.read_csv(report / "metametrics.csv")
    cell = mm[(mm.metric == "geneval_shapes") & (mm.protocol == "graph") & (mm.meta_metric == "rank")
              & (mm.subset == "Avg")]["value"].item()
    assert views.loc["geneval_shapes", "seg_value"] == pytest.approx(cell)
    html = (report / "report.html").read_text()
    assert "SEG view and human view" in html and "Kendall&#x27;s tau-b between the two views" not in html
    assert "Kendall's tau-b between the two views over 3 metric(s)" in html
