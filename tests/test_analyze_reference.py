"""Validating a new metric: `ts2 analyze scores=mine.csv path=TS2` analyses the paper's released
metrics beside it (joined on file_name) and ranks it among them."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from analysis.scores_io import read_scores, reference_names, with_reference
from ts2.cli import main


def test_with_reference_joins_on_file_name():
    mine = read_scores(pd.DataFrame({"seg_id": ["0", "0", "1"], "node": ["0", "1", "0"],
                                     "file_name": ["a", "b", "c"], "new": [0.9, 0.1, 0.5]}))
    ref = read_scores(pd.DataFrame({"seg_id": ["0", "0"], "node": ["0", "1"], "file_name": ["b", "a"],
                                    "new": [7.0, 7.0], "old": [0.2, 0.8]}))
    t = with_reference(mine, ref)
    assert t.metrics == ("new", "new_reference", "old")
    assert t.frame["new"].tolist() == [0.9, 0.1, 0.5]  # the user's own column keeps its name
    np.testing.assert_array_equal(t.frame["new_reference"].to_numpy(), [7.0, 7.0, np.nan])  # the reference's, beside it
    np.testing.assert_array_equal(t.frame["old"].to_numpy(), [0.8, 0.2, np.nan])
    with pytest.raises(ValueError, match=r"found none in common: e\.g\. 'a' in yours, 'images/a' in the reference"):
        with_reference(mine, read_scores(pd.DataFrame({"seg_id": ["0"], "node": ["0"], "file_name": ["images/a"],
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
    assert main(["analyze", f"scores={f}", f"path={ts2_dir}", "bootstrap=0", "permutations=199", "protocols=[paper]",
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


# -- issue 24, item 5: a user column named like a reference metric never replaces it --------------------
def test_reference_names_never_collide():
    assert reference_names(["clipscore", "mine"], ["clipscore", "tifa"]) == {"clipscore": "clipscore_reference",
                                                                             "tifa": "tifa"}
    # The suffixed name is taken by the user too, or is itself a reference metric: the next free one.
    assert reference_names(["a", "a_reference"], ["a"]) == {"a": "a_reference2"}
    assert reference_names(["a"], ["a", "a_reference"]) == {"a": "a_reference2", "a_reference": "a_reference"}


def test_colliding_reference_is_kept_beside_with_a_warning_and_its_own_direction(caplog):
    mine = read_scores(pd.DataFrame({"seg_id": ["0", "0"], "node": ["0", "1"], "file_name": ["a", "b"],
                                     "clipscore": [0.1, 0.9]}), lower_is_better=["clipscore"])
    ref = read_scores(pd.DataFrame({"seg_id": ["0", "0"], "node": ["0", "1"], "file_name": ["a", "b"],
                                    "clipscore": [30.0, 20.0], "err": [1.0, 2.0]}), lower_is_better=["err"])
    with caplog.at_level("WARNING", logger="analysis.scores_io"):
        t = with_reference(mine, ref)
    assert t.metrics == ("clipscore", "clipscore_reference", "err")
    assert t.frame["clipscore"].tolist() == [0.1, 0.9]
    assert t.frame["clipscore_reference"].tolist() == [30.0, 20.0]
    assert t.lower_is_better == {"clipscore", "err"}  # the user's direction is not given to the reference column
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 1 and "'clipscore'" in warned[0] and "'clipscore_reference'" in warned[0]
    assert any("clipscore_reference" in n for n in t.notes)


def test_own_clipscore_is_analysed_beside_the_published_one(ts2_dir, tmp_path):
    released = pd.read_csv(ts2_dir / "released" / "scores_subset.csv", dtype={"seg_id": str, "node": str})
    # A user's own CLIPScore re-implementation, reversed: it must not take the published column's place.
    mine = released[["seg_id", "node", "file_name"]].assign(clipscore=-released["clipscore"])
    f = tmp_path / "mine.csv"
    mine.to_csv(f, index=False)
    out = tmp_path / "a"
    assert main(["analyze", f"scores={f}", f"path={ts2_dir}", "bootstrap=0", "permutations=199", "chance=0",
                 "protocols=[paper]", f"output_dir={out}"]) == 0
    mm = pd.read_csv(out / "metametrics.csv")
    assert {"clipscore", "clipscore_reference"} <= set(mm.metric)
    cell = mm[(mm.meta_metric == "rank") & (mm.subset == "Avg") & (mm.protocol == "paper")].set_index("metric")["value"]
    assert round(100 * cell["clipscore_reference"], 1) == 71.4  # the published Table 2 cell
    assert round(100 * cell["clipscore"], 1) == -71.4            # the user's reversed copy, under its own name
    notes = json.loads((out / "analysis.json").read_text(encoding="utf-8"))["notes"]
    assert any("'clipscore'" in n and "'clipscore_reference'" in n for n in notes)  # recorded beside the numbers


# -- issue 28, item 2: lower_is_better applies to every column of that name --------------------------------
@pytest.fixture
def release_with_llmscore(ts2_dir, tmp_path):
    """A TS2 release folder whose score file also has lower-is-better columns (LLMScore's error counts,
    here the reversed CLIPScore, so their Table 2 cells are known: rank Avg 71.4 once oriented)."""
    root = tmp_path / "release"
    (root / "released").mkdir(parents=True)
    (root / "metadata.csv").write_bytes((ts2_dir / "metadata.csv").read_bytes())
    released = pd.read_csv(ts2_dir / "released" / "scores_subset.csv", dtype={"seg_id": str, "node": str})
    released = released.assign(llmscore_ec=-released["clipscore"], llmscore_over=-released["clipscore"])
    released.to_csv(root / "released" / "scores_subset.csv", index=False)
    return root, released


def _rank_avg(out) -> pd.Series:
    mm = pd.read_csv(out / "metametrics.csv")
    cell = mm[(mm.meta_metric == "rank") & (mm.subset == "Avg") & (mm.protocol == "paper")]
    return (100 * cell.set_index("metric")["value"]).round(1)


def test_lower_is_better_names_reference_columns(release_with_llmscore, tmp_path):
    root, released = release_with_llmscore
    mine = released[["seg_id", "node", "file_name"]].assign(my_metric=released["clipscore"])
    f = tmp_path / "mine.csv"
    mine.to_csv(f, index=False)
    out = tmp_path / "a"
    # the names are columns of the reference table only: they apply there, and the command succeeds
    assert main(["analyze", f"scores={f}", f"path={root}", "protocol=paper", "subsets=ts2", "bootstrap=0",
                 "chance=0", "ranking.enabled=false", "lower_is_better=[llmscore_ec,llmscore_over]",
                 f"output_dir={out}"]) == 0
    rank = _rank_avg(out)
    assert (rank["llmscore_ec"], rank["llmscore_over"], rank["my_metric"]) == (71.4, 71.4, 71.4)


def test_lower_is_better_on_the_release_itself_with_path(release_with_llmscore, tmp_path):
    root, released = release_with_llmscore
    # the command: scores= the release's own file, path= its folder
    out = tmp_path / "a"
    assert main(["analyze", f"scores={root / 'released' / 'scores_subset.csv'}", f"path={root}", "protocol=paper",
                 "subsets=ts2", "bootstrap=0", "chance=0", "ranking.enabled=false",
                 "lower_is_better=[llmscore_ec,llmscore_over]", f"output_dir={out}"]) == 0
    assert _rank_avg(out)["llmscore_ec"] == 71.4
    # a copy of it elsewhere: its columns are the automatic reference's, recognised as them (issue 46)
    copy = tmp_path / "copy.csv"
    released.to_csv(copy, index=False)
    out2 = tmp_path / "b"
    assert main(["analyze", f"scores={copy}", f"path={root}", "protocol=paper", "subsets=ts2", "bootstrap=0",
                 "chance=0", "ranking.enabled=false", "lower_is_better=[llmscore_ec,llmscore_over]",
                 f"output_dir={out2}"]) == 0
    rank = _rank_avg(out2)
    for m in ("llmscore_ec", "llmscore_over", "clipscore"):
        assert rank[m] == 71.4, m
    assert not any(m.endswith("_reference") for m in rank.index), list(rank.index)


def test_lower_is_better_naming_no_column_is_an_error(release_with_llmscore, tmp_path, capfd):
    root, released = release_with_llmscore
    f = tmp_path / "mine.csv"
    released[["seg_id", "node", "file_name"]].assign(my_metric=released["clipscore"]).to_csv(f, index=False)
    assert main(["analyze", f"scores={f}", f"path={root}", "bootstrap=0", "chance=0", "ranking.enabled=false",
                 "lower_is_better=[llmscor_ec]", f"output_dir={tmp_path / 'a'}"]) == 2
    msg = capfd.readouterr().err
    assert "lower_is_better names ['llmscor_ec']: expected metrics among ['my_metric']" in msg
    assert "scores_subset.csv" in msg and "'llmscore_ec'" in msg


def test_automatic_reference_that_cannot_join_never_fails_the_run(ts2_dir, tmp_path, capfd):
    # a dataset folder in the TS2 layout whose released/scores_subset.csv scores other images
    # (none in common): the automatic reference is left out with a warning, the run succeeds;
    # a reference you name still must join.
    root = tmp_path / "mine"
    (root / "released").mkdir(parents=True)
    meta = pd.read_csv(ts2_dir / "metadata.csv", dtype=str)
    meta = meta[meta["id"].astype(int) < 5].assign(file_name=lambda d: d["file_name"].str.replace("images/", "own/"))
    meta.to_csv(root / "metadata.csv", index=False)
    ref = root / "released" / "scores_subset.csv"
    ref.write_bytes((ts2_dir / "released" / "scores_subset.csv").read_bytes())
    rng = np.random.default_rng(0)
    f = tmp_path / "mine.csv"
    pd.DataFrame({"seg_id": meta["id"], "node": meta["rank"], "file_name": meta["file_name"],
                  "my_metric": rng.random(len(meta))}).to_csv(f, index=False)
    out = tmp_path / "a"
    assert main(["analyze", f"scores={f}", f"path={root}", "bootstrap=0", "chance=0", "ranking.enabled=false",
                 f"output_dir={out}"]) == 0
    assert set(pd.read_csv(out / "metametrics.csv").metric) == {"my_metric"}
    assert "not analysing the reference metrics of" in capfd.readouterr().err
    assert main(["analyze", f"scores={f}", f"path={root}", "bootstrap=0", "chance=0", f"reference={ref}",
                 "ranking.enabled=false", f"output_dir={tmp_path / 'b'}"]) == 2
    assert "found none in common" in capfd.readouterr().err
