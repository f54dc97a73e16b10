"""Issue 43: one verdict, whichever door. ``ts2 analyze`` and ``ts2.analyze`` call one library function with typed
settings; the Python door composes no Hydra config; a dataset given as an object or as a path gives the same
analysis, reference metrics included."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from conftest import REPO, shared_path

import ts2
from analysis.settings import AnalysisSettings, ComparisonSettings, RankingSettings
from ts2.config_check import compose_config

MINI = REPO / "tests" / "data" / "mini_run_scores.csv"


def test_comparison_defaults_are_the_configs():
    cfg = compose_config("analyze", ["scores=x.csv"])
    assert ComparisonSettings.from_config(cfg) == ComparisonSettings()
    assert AnalysisSettings.from_config(cfg) == AnalysisSettings()
    assert ComparisonSettings().ranking == RankingSettings(True, ("rank", "sep", "delta"), "Avg", 0.05)
    changed = ComparisonSettings.from_config(compose_config("analyze", ["scores=x.csv", "ranking.alpha=0.01",
                                                                       "permutations=99", "compare=[a,b]"]))
    assert (changed.ranking.alpha, changed.permutations, changed.compare) == (0.01, 99, ("a", "b"))


def test_the_python_door_composes_no_config(monkeypatch):
    import ts2.config_check as cc

    def refuse(*a, **k):
        raise AssertionError("ts2.analyze composed a Hydra config")

    monkeypatch.setattr(cc, "compose_config", refuse)
    monkeypatch.setattr(cc, "precheck", refuse)
    ds = ts2.load_dataset("mini", n_segs=30)
    a = ts2.analyze(pd.read_csv(MINI, dtype={"seg_id": str, "node": str}), ds, bootstrap=0, chance=0,
                    protocol="graph", ranking={"enabled": False}, store=False)
    assert list(a.result.protocols) == ["graph"] and a.ranking.empty
    assert a.settings.protocols == ("graph",) and a.comparison.ranking.enabled is False


def test_settings_objects_go_whole_and_keywords_replace_single_ones():
    df = pd.read_csv(MINI, dtype={"seg_id": str, "node": str})
    s = AnalysisSettings(bootstrap=0, chance=0, protocols=("paper",))
    c = ComparisonSettings(permutations=99, ranking=RankingSettings(alpha=0.1))
    a = ts2.analyze(df, settings=s, comparison=c, seed=3, store=False, progress=False)
    assert a.settings == s.updated(seed=3) and a.comparison == c
    assert a.ranking_alpha == 0.1 and a.permutations == 99
    with pytest.raises(ValueError, match=r"unknown option 'bootstap'; did you mean 'bootstrap'\?"):
        ts2.analyze(df, bootstap=0)
    with pytest.raises(ValueError, match="expected compare=\\[metric_a,metric_b\\]"):
        ts2.analyze(df, compare=["only_one"])
    with pytest.raises(ValueError, match="protocol= .* or protocols= .* got both"):
        ts2.analyze(df, protocol="graph", protocols=["paper"])


@pytest.mark.shared
def test_a_dataset_object_a_path_and_the_command_line_give_one_verdict(tmp_path):
    rel = shared_path("ts2")
    base = pd.read_csv(rel / "released" / "scores_subset.csv", dtype={"seg_id": str, "node": str})
    mine = base[["seg_id", "node", "file_name"]].copy()
    mine["mine"] = base["clipscore"] + np.random.default_rng(0).normal(scale=0.02, size=len(base))
    scores = tmp_path / "mine.csv"
    mine.to_csv(scores, index=False)
    kw = dict(bootstrap=100, chance=0, protocols=["paper"], progress=False, store=False)
    by_object = ts2.analyze(mine, ts2.load_dataset(rel), **kw)
    by_path = ts2.analyze(mine, rel, **kw)
    by_file = ts2.analyze(scores, str(rel), **kw)
    # the four published reference metrics join whichever way the dataset was given
    assert {"clipscore", "alignscore", "blip1_tifa", "blip1_dsg"} <= set(by_object.result.metrics)
    for other in (by_path, by_file):
        pd.testing.assert_frame_equal(by_object.metametrics, other.metametrics)
        assert by_object.verdict_lines() == other.verdict_lines()
    assert "place 5 of 5" in by_object.verdict_lines()[0]
    out = tmp_path / "cli"
    r = subprocess.run([sys.executable, "-m", "ts2", "analyze", f"scores={scores}", f"path={rel}", "bootstrap=100",
                        "chance=0", "protocol=paper", "progress=false", "store=false", f"output_dir={out}"],
                       capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr
    cli = pd.read_csv(out / "metametrics.csv")
    mine_py = by_object.metametrics
    assert sorted(cli.metric.unique()) == sorted(mine_py.metric.unique())
    assert np.allclose(cli.sort_values(["metric", "meta_metric", "subset"]).value.to_numpy(),
                       mine_py.sort_values(["metric", "meta_metric", "subset"]).value.to_numpy(), equal_nan=True)
    assert by_object.verdict_lines()[0] in r.stdout
    # the files, byte for byte: each Python door's written tables equal the command line's
    for name, a in (("object", by_object), ("path", by_path), ("file", by_file)):
        a.write(tmp_path / name)
        for f in ("verdict.csv", "metametrics.csv", "ranking.csv", "pairs.csv", "table.csv"):
            assert (tmp_path / name / f).read_bytes() == (out / f).read_bytes(), (name, f)


def test_ts2_analyze_says_how_to_read_it_in_a_browser_and_ts2_explore_draws_it(tmp_path):
    out = tmp_path / "a"
    r = subprocess.run([sys.executable, "-m", "ts2", "analyze", f"scores={MINI}", "bootstrap=0", "chance=0",
                        "progress=false", "store=false", f"output_dir={out}"], capture_output=True, text=True,
                       cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"ts2 report results={out}" in r.stdout and f"ts2 explore results={out}" in r.stdout
    page = ts2.explore(out, out=tmp_path / "x" / "explorer.html", images=False, progress=False)
    assert page == tmp_path / "x" / "explorer.html" and page.is_file()
    text = page.read_text()
    assert "geneval_shapes" in text and "<script" in text
    with pytest.raises(ValueError, match="unknown"):
        ts2.explore(out, out=tmp_path / "y.html", metrix=["a"])
