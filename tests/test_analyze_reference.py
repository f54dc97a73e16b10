"""Validating a new metric: `ts2 analyze scores=mine.csv path=TS2` analyses the paper's released
metrics beside it (joined on file_name) and ranks it among them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis.scores_io import read_scores, with_reference
from ts2.cli import main


def test_with_reference_joins_on_file_name():
    mine = read_scores(pd.DataFrame({"seg_id": ["0", "0", "1"], "node": ["0", "1", "0"],
                                     "file_name": ["a", "b", "c"], "new": [0.9, 0.1, 0.5]}))
    ref = read_scores(pd.DataFrame({"seg_id": ["0", "0"], "node": ["0", "1"], "file_name": ["b", "a"],
                                    "new": [7.0, 7.0], "old": [0.2, 0.8]}))
    t = with_reference(mine, ref)
    assert t.metrics == ("new", "old")
    assert t.frame["new"].tolist() == [0.9, 0.1, 0.5]  # the user's own column wins
    np.testing.assert_array_equal(t.frame["old"].to_numpy(), [0.8, 0.2, np.nan])
    with pytest.raises(ValueError, match="found none in common"):
        with_reference(mine, read_scores(pd.DataFrame({"seg_id": ["0"], "node": ["0"], "file_name": ["z"],
                                                       "old": [1.0]})))
    with pytest.raises(ValueError, match="expected a 'file_name' column"):
        with_reference(read_scores(pd.DataFrame({"seg_id": ["0"], "node": ["0"], "x": [1.0]})), ref)


def test_new_metric_is_analysed_beside_the_released_ones(ts2_dir, tmp_path, capsys):
    released = pd.read_csv(ts2_dir / "released" / "scores_subset.csv", dtype={"seg_id": str, "node": str})
    rng = np.random.default_rng(0)
    mine = released[["seg_id", "node", "file_name"]].assign(my_metric=released["clipscore"] + rng.normal(0, 0.05, len(released)))
    f = tmp_path / "mine.csv"
    mine.to_csv(f, index=False)
    out = tmp_path / "a"
    assert main(["analyze", f"scores={f}", f"path={ts2_dir}", "bootstrap=0", "permutations=199",
                 f"output_dir={out}"]) == 0
    mm = pd.read_csv(out / "metametrics.csv")
    assert set(mm.metric) == {"my_metric", "clipscore", "alignscore", "blip1_tifa", "blip1_dsg"}
    cell = mm[(mm.metric == "clipscore") & (mm.meta_metric == "rank") & (mm.subset == "Avg")]["value"].item()
    assert round(100 * cell, 1) == 71.4  # the released metric's Table 2 cell, beside the new one
    assert "my_metric" in capsys.readouterr().out
    ranking = pd.read_csv(out / "ranking.csv")
    assert "my_metric" in set(ranking.metric)
    out2 = tmp_path / "b"
    assert main(["analyze", f"scores={f}", f"path={ts2_dir}", "reference=null", "bootstrap=0",
                 f"output_dir={out2}"]) == 0
    assert set(pd.read_csv(out2 / "metametrics.csv").metric) == {"my_metric"}
