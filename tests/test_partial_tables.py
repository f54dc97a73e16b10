"""Legitimate partial score tables analyse (issue 42): a few SEGs scored, the last SEG of a subset
left out, one SEG's cells empty. Unscored SEGs and empty subsets give n/a with a note, never an
exception (they ended in numpy's "zero-size array to reduction operation maximum")."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import shared_path

from ts2.cli import main

pytestmark = pytest.mark.light


def _release_table(keep) -> pd.DataFrame:
    meta = pd.read_csv(shared_path("ts2", "metadata.csv"))
    rng = np.random.default_rng(0)
    t = pd.DataFrame({"seg_id": meta["id"], "node": meta["rank"].astype(str), "file_name": meta["file_name"],
                      "mine": rng.random(len(meta))})
    return keep(t)


def _blank_seg(t: pd.DataFrame) -> pd.DataFrame:
    t = t.copy()
    t.loc[t.seg_id == 5, "mine"] = np.nan
    return t


@pytest.mark.parametrize("case, keep, segs_paper", [
    ("three SEGs scored", lambda t: t[t.seg_id < 3], 3),
    ("SEGs 0-109 (the last Synth SEG left out)", lambda t: t[t.seg_id <= 109], 110),
    ("one SEG's cells empty", _blank_seg, 163),
])
def test_partial_release_tables_analyse(tmp_path, capsys, case, keep, segs_paper):
    scores = tmp_path / "s.csv"
    _release_table(keep).to_csv(scores, index=False)
    out = tmp_path / "out"
    rc = main(["analyze", f"scores={scores}", f"path={shared_path('ts2')}", "reference=null", f"output_dir={out}",
               "bootstrap=50"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    assert "zero-size" not in cap.err and "Traceback" not in cap.err
    mm = pd.read_csv(out / "metametrics.csv")
    avg = mm[(mm.subset == "Avg") & (mm.protocol == "paper") & (mm.meta_metric == "rank")].iloc[0]
    assert avg.n_segs == segs_paper and np.isfinite(avg.value)
    notes = json.loads((out / "analysis.json").read_text())["notes"]
    if segs_paper < 164:  # the missing scores are said: images without a row, or blank cells
        assert any("have no row" in n or n.startswith("protocol paper: metric 'mine' has") for n in notes), notes
    if segs_paper < 10:  # too few SEGs for a CI: n/a, said
        assert np.isnan(avg.ci_low) and any("no CI (n/a)" in n for n in notes)


def test_a_subset_without_any_scored_seg_is_na_not_an_error(tmp_path, capsys):
    scores = tmp_path / "s.csv"
    _release_table(lambda t: t[t.seg_id <= 109]).to_csv(scores, index=False)
    out = tmp_path / "out"
    assert main(["analyze", f"scores={scores}", f"path={shared_path('ts2')}", "reference=null",
                 f"output_dir={out}", "bootstrap=0", "chance=0"]) == 0
    mm = pd.read_csv(out / "metametrics.csv")
    real = mm[(mm.subset == "Real") & (mm.protocol == "paper")]
    assert len(real) == 0 or (real["value"].isna().all() and (real["n_segs"] == 0).all())
