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
    if segs_paper < 164:  # the missing scores are said, with their numbers
        line = next(n for n in notes if n.startswith("protocol paper: mine:"))
        assert "images without a score" in line and f"{164 - segs_paper} SEGs left without a value" in line, line
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


def test_missing_scores_are_counted_per_metric_and_protocol(tmp_path, capsys):
    """406 of 2,840 cells blanked (issue 46): one line per metric and protocol with the numbers,
    on the command's output and in analysis.json's notes."""
    t = _release_table(lambda t: t)
    rng = np.random.default_rng(1)
    blank = rng.choice(len(t), 406, replace=False)
    t.loc[blank, "mine"] = np.nan
    t["other"] = rng.random(len(t))
    scores = tmp_path / "s.csv"
    t.to_csv(scores, index=False)
    out = tmp_path / "out"
    assert main(["analyze", f"scores={scores}", f"path={shared_path('ts2')}", "reference=null", f"output_dir={out}",
                 "bootstrap=0", "chance=0", "protocols=[paper,graph]"]) == 0
    err = capsys.readouterr().err
    notes = json.loads((out / "analysis.json").read_text())["notes"]
    meta = pd.read_csv(shared_path("ts2", "metadata.csv"))
    for proto, excluded in (("paper", {164}), ("graph", set())):
        kept = ~meta["id"].isin(excluded).to_numpy()
        n_missing = int(np.isin(np.arange(len(t)), blank)[kept].sum())
        n_segs = int(meta.loc[np.isin(np.arange(len(t)), blank) & kept, "id"].nunique())
        line = next(n for n in notes if n.startswith(f"protocol {proto}: mine:"))
        assert f"{n_missing} of {int(kept.sum())} images without a score, in {n_segs} of " in line, line
        assert line in err
    assert not any(n.startswith("protocol paper: other:") for n in notes)  # a complete column says nothing
