"""Issue 24, items 6, 8 and 10: no interval from too little data, bounded options, and options or
columns that used to be taken silently (refused or warned now)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.pipeline import MIN_SEGS_CI, analyze
from analysis.report.outputs import summary_text
from analysis.scores_io import read_scores, table_shape
from analysis.stats import MAX_BOOTSTRAP, bootstrap_bytes, check_bootstrap_size, withhold_small_cis
from ts2 import options
from ts2.cli import main

SHARED = Path(__file__).resolve().parents[2] / "shared" / "ts2"


def _run(capsys, *argv) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def chain_table(n_segs: int) -> pd.DataFrame:
    """``n_segs`` three-node chains; ``good`` falls with the level, ``noisy`` does in most SEGs."""
    rng = np.random.default_rng(1)
    rows = []
    for s in range(n_segs):
        for lv in range(3):
            rows.append({"seg_id": str(s), "node": str(lv), "file_name": f"{s}-{lv}.png",
                         "good": 1.0 - 0.3 * lv, "noisy": float(rng.normal()) - 0.2 * lv})
    return pd.DataFrame(rows)


# -- item 6: minimum data for an interval ---------------------------------------------------------------
def test_withhold_small_cis_masks_only_the_small_cells():
    lo, hi, w = withhold_small_cis(np.array([[0.1, 0.2], [0.3, 0.4]]), np.array([[0.5, 0.6], [0.7, 0.8]]),
                                   np.array([[9, 10], [0, 11]]), 10)
    assert w.tolist() == [[True, False], [True, False]]
    assert np.isnan(lo[0, 0]) and np.isnan(hi[1, 0]) and lo[0, 1] == 0.2 and hi[1, 1] == 0.8


def test_one_seg_with_bootstrap_gets_no_interval_and_a_note():
    res = analyze(chain_table(1), protocols=["graph"], bootstrap=100, metrics=["good"])
    mm = res.metametrics_frame()
    assert mm["n_segs"].max() == 1
    assert mm[["ci_low", "ci_high"]].isna().all().all()
    assert res.value("good", "rank") == 1.0  # the value itself is still there
    assert any("no CI (n/a)" in n and "min_segs_ci=10" in n and "good (1 SEG at most)" in n for n in res.notes)
    text = summary_text(res)
    assert "Avg over 1 SEG," in text and "100.0 [n/a]" in text and "fewer than 10 SEGs" in text


def test_enough_segs_keep_their_interval_and_min_segs_ci_zero_keeps_all():
    res = analyze(chain_table(12), protocols=["graph"], bootstrap=50, min_segs_ci=10)
    assert not res.metametrics_frame()[["ci_low", "ci_high"]].isna().any().any()
    assert not any("no CI" in n for n in res.notes)
    one = analyze(chain_table(1), protocols=["graph"], bootstrap=20, min_segs_ci=0)
    assert one.metametrics_frame()["ci_low"].notna().all()
    assert MIN_SEGS_CI == 10


def test_compare_interval_withheld_below_min_segs():
    from analysis.compare import compare_metrics

    res = analyze(chain_table(4), protocols=["graph"], bootstrap=50, min_segs_ci=5)
    c = compare_metrics(res, "good", "noisy", n_permutations=99)
    assert (c["n_segs"] == 4).all() and c["ci_low"].isna().all()
    res = analyze(chain_table(6), protocols=["graph"], bootstrap=50, min_segs_ci=5)
    assert compare_metrics(res, "good", "noisy", n_permutations=99)["ci_low"].notna().all()


def test_header_states_each_metrics_real_seg_count(tmp_path):
    t = chain_table(12)
    t.loc[t["seg_id"] != "0", "noisy"] = np.nan  # noisy scored in SEG 0 only
    res = analyze(t, protocols=["graph"], bootstrap=30, chance=0)
    text = summary_text(res)
    assert "Avg over 1 to 12 SEGs (per metric: column SEGs)" in text
    lines = {ln.split()[0]: ln.split() for ln in text.splitlines() if ln.startswith(("good", "noisy"))}
    assert lines["good"][1] == "12" and lines["noisy"][1] == "1"
    assert "[n/a]" in " ".join(lines["noisy"]) and "[n/a]" not in " ".join(lines["good"])
    from analysis.report.tables import write_tables

    md = write_tables(res, tmp_path)[0].read_text()
    assert "Avg over 1 to 12 SEGs; SEGs per metric: good 12, noisy 1." in md


def test_cli_records_min_segs_ci_and_the_note(capsys, tmp_path):
    p = tmp_path / "s.csv"
    chain_table(2).to_csv(p, index=False)
    rc, out, err = _run(capsys, "analyze", f"scores={p}", "bootstrap=20", "chance=0", "ranking.enabled=false",
                        "reference=null", "min_segs_ci=3", f"output_dir={tmp_path / 'out'}")
    assert rc == 0, err
    meta = json.loads((tmp_path / "out" / "analysis.json").read_text())
    assert meta["min_segs_ci"] == 3
    assert any("fewer than 3 SEGs" in n for n in meta["notes"])
    assert "Avg over 2 SEGs" in out and "[n/a]" in out


@pytest.mark.parametrize("value", ["-1", "abc", "1.5"])
def test_min_segs_ci_is_typed(capsys, tmp_path, value):
    rc, _, err = _run(capsys, "analyze", "scores=x.csv", f"min_segs_ci={value}", f"output_dir={tmp_path / 'o'}")
    assert rc == 2 and f"min_segs_ci={value}: expected an integer >= 0" in err
    assert not (tmp_path / "o").exists()


# -- item 8: bounded options ------------------------------------------------------------------------------
def test_bootstrap_bytes_by_hand():
    # 2 * 100 SEG floats + 30 cells x (3 * 4 + 4) floats = 680 floats = 5440 bytes per replicate
    assert bootstrap_bytes(1, 100, 30, 4) == 8 * (200 + 30 * 16) == 5440
    assert bootstrap_bytes(1000, 100, 30, 4) == 5_440_000


def test_check_bootstrap_size_names_the_largest_that_fits():
    check_bootstrap_size(1000, 165, 20, 4)
    per = bootstrap_bytes(1, 165, 20, 4)
    fits = min(MAX_BOOTSTRAP, int(1 * 2**30 // per))
    check_bootstrap_size(fits, 165, 20, 4, max_gib=1)
    with pytest.raises(ValueError, match=rf"expected bootstrap <= {fits} \(about .* GiB for this table: 165 SEGs"):
        check_bootstrap_size(fits + 1, 165, 20, 4, max_gib=1)
    with pytest.raises(ValueError, match=rf"expected bootstrap <= {MAX_BOOTSTRAP} .*got 100000000"):
        check_bootstrap_size(100_000_000, 3, 1, 1)


def test_options_bound_is_the_analysis_bound():
    assert options.MAX_BOOTSTRAP == MAX_BOOTSTRAP
    assert options.OPTIONS["bootstrap"].max == MAX_BOOTSTRAP


@pytest.mark.parametrize("argv, msg", [
    (("analyze", "scores=x.csv", "bootstrap=100000000"), "bootstrap=100000000: expected an integer >= 0 and <= 100000"),
    (("analyze", "scores=x.csv", "chance=100000000"), "chance=100000000: expected an integer >= 0 and <= 10000"),
    (("analyze", "scores=x.csv", "permutations=100000000"), "permutations=100000000: expected an integer >= 1 and <= 1000000"),
    (("reproduce", "bootstrap=100000001"), "bootstrap=100000001: expected an integer >= 0 and <= 100000"),
    (("run", "chance=99999999"), "chance=99999999: expected an integer >= 0 and <= 10000"),
    (("report", "results=x", "heatmaps=100000"), "heatmaps=100000: expected an integer >= 0 and <= 100"),
    (("data", "make-synthetic", "n_segs=100000000"), "n_segs=100000000: expected an integer >= 1 and <= 100000"),
])
def test_work_scaling_options_are_bounded(capsys, tmp_path, argv, msg):
    where = f"out={tmp_path / 'o'}" if argv[0] == "data" else f"output_dir={tmp_path / 'o'}"
    rc, _, err = _run(capsys, *argv, where)
    assert rc == 2 and msg in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_bootstrap_memory_estimated_from_the_table(capsys, tmp_path):
    cols = [f"m{j}" for j in range(200)]
    rows = [[str(s), str(n), f"{s}-{n}"] + ["0.5"] * len(cols) for s in range(100) for n in range(2)]
    p = tmp_path / "wide.csv"
    pd.DataFrame(rows, columns=["seg_id", "node", "file_name"] + cols).to_csv(p, index=False)
    assert table_shape(p) == (100, 200, 0)
    # 200 metrics x 5 meta-metrics = 1000 cells, 4 groups assumed: 8 * (200 + 1000 * 16) bytes per replicate
    per = 8 * (2 * 100 + 1000 * 16)
    fits = int(8 * 2**30 // per)
    rc, _, err = _run(capsys, "analyze", f"scores={p}", f"bootstrap={fits + 1}", f"output_dir={tmp_path / 'o'}")
    assert rc == 2 and f"expected bootstrap <= {fits} (about 8.0 GiB for this table: 100 SEGs, 1000 metric" in err
    assert err.startswith("ts2 analyze: ") and not (tmp_path / "o").exists()


# -- item 10: options and columns taken silently ----------------------------------------------------------
@pytest.mark.parametrize("extra, msg", [
    (("meta_metrics=[]",), "meta_metrics=[]: expected a meta-metric among ['rank', 'sep', 'delta', 'kendall', "
                           "'pair_acc'] (a list of at least 1, each name once), got []"),
    (("table_meta_metrics=[rank,bogus]",), "table_meta_metrics=[rank, bogus]: expected a meta-metric among ['rank', "),
    (("ranking.meta_metrics=[rnk]",), "ranking.meta_metrics=[rnk]: expected a meta-metric among ['rank', 'sep'"),
    (("meta_metrics=[rank,rank]",), "(a list of at least 1, each name once), got [rank, rank]"),
    (("bootstrap=10", "bootstrap=20"), "expected each key once, got 'bootstrap' twice ('bootstrap=10' and 'bootstrap=20')"),
    (("seed=1", "+seed=2"), "got 'seed' twice"),
])
def test_silent_options_are_refused(capsys, tmp_path, extra, msg):
    rc, _, err = _run(capsys, "analyze", "scores=x.csv", *extra, f"output_dir={tmp_path / 'o'}")
    assert rc == 2 and msg in err, err
    assert not (tmp_path / "o").exists()


def test_sweeps_and_distinct_packages_are_not_repeated_keys():
    from ts2.config_check import ConfigError, _check_repeated

    _check_repeated("ts2 run", ["bootstrap=10,20", "+metric@metrics.a=clipscore", "+metric@metrics.b=siglip", "-m"])
    with pytest.raises(ConfigError, match=r"got 'metric@metrics\.a' twice"):
        _check_repeated("ts2 run", ["+metric@metrics.a=clipscore", "+metric@metrics.a=siglip"])


def test_table_meta_metric_not_computed_is_warned(capsys, tmp_path):
    p = tmp_path / "s.csv"
    chain_table(3).to_csv(p, index=False)
    rc, out, err = _run(capsys, "analyze", f"scores={p}", "bootstrap=0", "chance=0", "meta_metrics=[rank]",
                        "ranking.enabled=false", "reference=null", f"output_dir={tmp_path / 'o'}")
    assert rc == 0
    assert "table_meta_metrics names ['sep', 'delta'], not among the meta-metrics computed" in out + err
    assert "metric  SEGs  rank" in out


def _wide(text: str, tmp_path: Path) -> Path:
    p = tmp_path / "s.csv"
    p.write_text(text)
    return p


BASE = "seg_id,{extra_h}file_name,node,clip{tail_h}\n" + "".join(
    f"{s},{{extra{i}}}f{s}{n},{n},{v}{{tail}}\n" for i, (s, n, v) in enumerate(
        [(0, 0, 0.9), (0, 1, 0.5), (0, 2, 0.1), (1, 0, 0.8), (1, 1, 0.4), (1, 2, 0.2)]))


def test_id_beside_seg_id_is_not_a_metric(tmp_path, caplog):
    text = BASE.format(extra_h="id,", tail_h="", tail="", **{f"extra{i}": f"{i + 1}," for i in range(6)})
    with caplog.at_level(logging.WARNING):
        t = read_scores(_wide(text, tmp_path))
    assert t.metrics == ("clip",)
    assert "column 'id' holds only numbers but is another name of the key column 'seg_id'" in caplog.text
    assert any("'id'" in n for n in t.notes)
    assert read_scores(_wide(text, tmp_path), metrics=["id", "clip"]).metrics == ("id", "clip")


def test_excel_trailing_empty_column_dropped_with_a_warning(tmp_path, caplog):
    text = BASE.format(extra_h="", tail_h=",", tail=",", **{f"extra{i}": "" for i in range(6)})
    with caplog.at_level(logging.WARNING):
        t = read_scores(_wide(text, tmp_path))
    assert t.metrics == ("clip",) and "Unnamed: 4" not in t.frame.columns
    assert "column(s) ['Unnamed: 4'] have no header name and no value" in caplog.text


def test_unnamed_column_with_numbers_is_warned_not_analysed(tmp_path, caplog):
    text = BASE.format(extra_h="", tail_h=",", tail=",7", **{f"extra{i}": "" for i in range(6)})
    with caplog.at_level(logging.WARNING):
        t = read_scores(_wide(text, tmp_path))
    assert t.metrics == ("clip",)
    assert "column 'Unnamed: 4' holds only numbers but is a column without a header name" in caplog.text


def test_metric_columns_share_the_rule():
    from seg_data.results import metric_columns

    assert metric_columns(["seg_id", "id", "node", "rank", "clip", "Unnamed: 4", "tifa"]) == ["clip", "tifa"]
    assert metric_columns(["id", "clip"]) == ["id", "clip"]  # id alone is read as seg_id by the reader


def test_constant_metric_and_unscored_level0_are_warned(tmp_path, caplog):
    t = chain_table(3)
    t["const"] = 0.5
    t["notop"] = t["good"].where(t["node"] != "0")
    with caplog.at_level(logging.WARNING):
        res = analyze(t, protocols=["graph"], bootstrap=0)
    assert "metric 'const': every one of its 9 scores is 0.5 (a constant)" in caplog.text
    assert "metric 'notop': none of the 3 level-0 (error-free) images has a score" in caplog.text
    assert "'good'" not in caplog.text and "'noisy'" not in caplog.text
    assert sum("const" in n for n in res.notes) == 1


def test_compare_with_printed_lists_missing_columns():
    from analysis.paper_table2 import compare_with_printed
    from analysis.reproduction import missing_published_columns

    frame = pd.DataFrame({"seg_id": ["0"], "clipscore": [0.5], "alignscore": [0.4], "blip1_tifa": [np.nan]})
    miss = missing_published_columns(frame, "s.csv")
    assert miss == {"blip1_dsg": "published column 'blip1_dsg' missing from s.csv",
                    "blip1_tifa": "published column 'blip1_tifa' of s.csv has no score"}
    assert missing_published_columns(pd.DataFrame({"mine": [1.0]}), "s.csv") == {}
    mm = pd.DataFrame({"metric": ["clipscore"], "protocol": ["paper"], "meta_metric": ["rank"], "subset": ["Avg"],
                       "value": [0.71433]})
    d = compare_with_printed(mm, missing={"blip1_dsg": "gone"})
    dsg = d[d["metric"] == "blip1_dsg"]
    assert len(dsg) == 12 and not dsg["match"].any() and (dsg["known"] == "gone").all()
    assert d[d["metric"] == "clipscore"]["match"].all()


@pytest.mark.skipif(not (SHARED / "released" / "scores_subset.csv").is_file(),
                    reason="needs the TS2 release in ../shared/ts2")
def test_reproduce_names_the_missing_column(capsys, tmp_path):
    rel = tmp_path / "rel"
    (rel / "released").mkdir(parents=True)
    (rel / "metadata.csv").symlink_to(SHARED / "metadata.csv")
    f = pd.read_csv(SHARED / "released" / "scores_subset.csv", dtype=str)
    f.drop(columns=["blip1_dsg"]).to_csv(rel / "released" / "scores_subset.csv", index=False)
    rc, out, err = _run(capsys, "reproduce", f"path={rel}", "bootstrap=0", "chance=0", "figures=[]",
                        f"output_dir={tmp_path / 'out'}")
    assert rc == 0, err
    line = next(ln for ln in out.splitlines() if ln.startswith("protocol paper:"))
    assert "/48 printed Table 2 cells reproduced; 12 not reproduced because published column(s) ['blip1_dsg']" in line


def test_report_table_says_na_where_an_interval_was_withheld():
    from analysis.report.page import metametrics_html

    rows = [{"metric": "full", "protocol": "graph", "meta_metric": "rank", "subset": "Avg", "value": 0.5,
             "ci_low": 0.4, "ci_high": 0.6, "n_segs": 30},
            {"metric": "few", "protocol": "graph", "meta_metric": "rank", "subset": "Avg", "value": 0.7,
             "ci_low": float("nan"), "ci_high": float("nan"), "n_segs": 3}]
    page = metametrics_html(pd.DataFrame(rows), "graph")
    assert "[40.0, 60.0]" in page and "[n/a: 3 SEGs]" in page and "min_segs_ci" in page
    # without any bootstrap there is no interval anywhere, and no n/a either
    none = metametrics_html(pd.DataFrame(rows).assign(ci_low=float("nan"), ci_high=float("nan")), "graph")
    assert "n/a" not in none
