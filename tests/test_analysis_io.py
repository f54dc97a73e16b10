"""Score tables: wide and long formats, bad cells, directions, dataset joins, subsets."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

from analysis.pipeline import analyze
from analysis.scores_io import prepare_inputs, read_scores
from seg_data import SEG, ImageRecord, SEGDataset, SEGValidationError
from seg_data.graph import build_graph


def wide() -> pd.DataFrame:
    return pd.DataFrame({
        "seg_id": ["0", "0", "0", "1", "1", "1"],
        "node": ["0", "1a", "1b", "0", "1", "2"],
        "file_name": [f"img{i}" for i in range(6)],
        "prompt": ["p"] * 6,
        "clip": [0.9, 0.5, 0.6, 0.8, 0.4, 0.1],
        "tifa": [1.0, 0.5, 0.5, 1.0, 0.5, 0.0],
    })


def test_wide_table_reads_ids_as_strings_and_ignores_descriptive_columns(tmp_path):
    p = tmp_path / "s.csv"
    df = wide()
    df["seg_id"] = [0, 0, 0, 1, 1, 1]
    df.to_csv(p, index=False)
    t = read_scores(p)
    assert t.metrics == ("clip", "tifa")  # "prompt" is not a metric
    assert t.frame["seg_id"].tolist() == ["0", "0", "0", "1", "1", "1"]
    assert t.frame["node"].tolist()[:3] == ["0", "1a", "1b"]
    assert read_scores(p, metrics=["tifa"]).metrics == ("tifa",)
    with pytest.raises(ValueError, match=r"expected metrics among \['clip', 'tifa'\], got unknown \['vqa'\]"):
        read_scores(p, metrics=["vqa"])


def test_ts2_metadata_column_names_are_accepted():
    df = wide().rename(columns={"seg_id": "id", "node": "rank"})
    assert read_scores(df).frame.columns[:2].tolist() == ["seg_id", "node"]


def test_non_numeric_cell_names_row_and_column(tmp_path):
    p = tmp_path / "s.csv"
    df = wide()
    df["clip"] = df["clip"].astype(object)
    df.loc[3, "clip"] = "0.8x"
    df.to_csv(p, index=False)
    with pytest.raises(ValueError, match=r"s\.csv, row 5, column 'clip': expected a number, got '0\.8x'"):
        read_scores(p)


def test_missing_tokens_are_nan_and_inf_is_an_error(tmp_path):
    p = tmp_path / "s.csv"
    text = wide().to_csv(index=False).replace("0.4,0.5", "NA,").replace("0.1,0.0", "nan,0.0")
    p.write_text(text)
    t = read_scores(p)
    assert np.isnan(t.frame["clip"]).sum() == 2 and np.isnan(t.frame["tifa"]).sum() == 1
    p.write_text(wide().to_csv(index=False).replace("0.9,1.0", "inf,1.0"))
    with pytest.raises(ValueError, match="row 2, column 'clip': expected a finite number"):
        read_scores(p)


def test_bad_label_duplicate_image_and_missing_columns():
    bad = wide()
    bad.loc[2, "node"] = "x1"
    with pytest.raises(ValueError, match=r"row 2, column 'node': expected a node label"):
        read_scores(bad)
    dup = wide()
    dup.loc[1, "file_name"] = "img0"
    with pytest.raises(ValueError, match="expected each file_name once, got 'img0' 2 times"):
        read_scores(dup)
    with pytest.raises(ValueError, match="expected columns 'seg_id' and 'node'"):
        read_scores(wide().drop(columns=["node"]))
    with pytest.raises(ValueError, match="lower_is_better names \\['vqa'\\]"):
        read_scores(wide(), lower_is_better=["vqa"])


def test_long_format_equals_wide(tmp_path):
    w = wide()
    long = w.melt(id_vars=["seg_id", "node", "file_name"], value_vars=["clip", "tifa"], var_name="metric",
                  value_name="score")
    long["higher_is_better"] = np.where(long["metric"] == "tifa", "false", "true")
    p = tmp_path / "long.csv"
    long.sample(frac=1, random_state=0).to_csv(p, index=False)  # row order must not matter
    t = read_scores(p)
    assert set(t.metrics) == {"clip", "tifa"} and t.lower_is_better == {"tifa"}
    a = analyze(t, protocols=["paper"], bootstrap=0)
    b = analyze(w, protocols=["paper"], bootstrap=0, lower_is_better=["tifa"])
    for m in ("clip", "tifa"):
        for k in a.meta_metrics:
            assert a.value(m, k) == pytest.approx(b.value(m, k), nan_ok=True)
    long2 = pd.concat([long, long.iloc[[0]]])
    with pytest.raises(ValueError, match=r"one score per \(file_name, metric\)"):
        read_scores(long2)


def _dataset() -> SEGDataset:
    segs = []
    for sid, nodes in {"0": {"0": ["img0"], "1a": ["img1"], "1b": ["img2"]},
                       "1": {"0": ["img3"], "1": ["img4"], "2": ["img5", "img6"]}}.items():
        g = build_graph({k: [ImageRecord(i) for i in v] for k, v in nodes.items()})
        segs.append(SEG(sid, "a prompt", g, subset="A" if sid == "0" else "B"))
    return SEGDataset(segs, name="tiny")


def test_dataset_join(caplog):
    df = wide()
    df.loc[5, "seg_id"] = "0"  # disagrees with the dataset: the dataset wins
    extra = pd.DataFrame([{"seg_id": "9", "node": "0", "file_name": "stray", "prompt": "p", "clip": 0.3, "tifa": 1.0}])
    with caplog.at_level(logging.WARNING):
        inputs = prepare_inputs(read_scores(pd.concat([df, extra], ignore_index=True)), _dataset())
    assert "1 row(s)" in caplog.text and "'stray'" in caplog.text
    assert "differs from dataset 'tiny'" in caplog.text
    assert any("1 image(s) of dataset 'tiny' have no row" in n for n in inputs.notes)  # img6 is unscored
    assert inputs.structure.seg_ids == ["0", "1"] and inputs.subset_source == "dataset"
    seg1 = inputs.structure.segs[1]
    assert [len(r) for r in seg1.rows] == [1, 1, 1]  # img5 joined to SEG 1 by file name, img6 has no score
    with pytest.raises(ValueError, match="no file_name matches an image id of dataset 'tiny'"):
        prepare_inputs(read_scores(wide().assign(file_name=[f"x{i}" for i in range(6)])), _dataset())
    with pytest.raises(ValueError, match="needs a 'file_name' column"):
        prepare_inputs(read_scores(wide().drop(columns=["file_name"])), _dataset())


def test_subset_sources():
    df = wide()
    assert prepare_inputs(read_scores(df)).subset_source == "none"
    col = prepare_inputs(read_scores(df.assign(subset=["S", "S", "S", "T", "T", "T"])))
    assert col.subset_source == "column" and [s.subset for s in col.structure.segs] == ["S", "T"]
    with pytest.raises(ValueError, match=r"SEG 0: expected one subset per SEG, got \['S', 'T'\]"):
        prepare_inputs(read_scores(df.assign(subset=["S", "T", "S", "T", "T", "T"])))
    ts2 = prepare_inputs(read_scores(df), subsets="ts2")
    assert [s.subset for s in ts2.structure.segs] == ["Synth", "Synth"]
    # TS2 release file names switch the TS2 subsets on by themselves
    named = df.assign(seg_id=["0", "0", "0", "140", "140", "140"],
                      file_name=["images/000-00.jpg", "images/000-01.jpg", "images/000-02.jpg",
                                 "images/140-00.jpg", "images/140-01.jpg", "images/140-02.jpg"])
    auto = prepare_inputs(read_scores(named))
    assert auto.subset_source == "ts2" and [s.subset for s in auto.structure.segs] == ["Synth", "Real"]
    assert prepare_inputs(read_scores(named), subsets="none").subset_source == "none"
    with pytest.raises(ValueError, match="expected subsets to be one of"):
        prepare_inputs(read_scores(df), subsets="mine")


def test_seg_without_a_root_is_reported():
    df = wide()
    df.loc[3, "node"] = "3"  # SEG 1 now has levels 1, 2, 3 only
    with pytest.raises(SEGValidationError, match="error-0 node"):
        prepare_inputs(read_scores(df))


def test_all_nan_metric_gives_nan_not_a_crash(caplog):
    df = wide().assign(empty=np.nan)
    with caplog.at_level(logging.WARNING):
        r = analyze(df, protocols=["paper"], bootstrap=20)
    assert "'empty' has no score at all" in caplog.text
    mm = r.metametrics_frame()
    e = mm[mm.metric == "empty"]
    assert e["value"].isna().all() and (e["n_segs"] == 0).all() and e["ci_low"].isna().all()


# -- one reader for score tables, one for result tables ------------------------------------------------

def test_read_score_frame_has_read_scores_nan_policy(tmp_path):
    """The report's and reproduce's reader reads the cells exactly as read_scores does: missing tokens
    NaN, quotes dropped; descriptive columns keep their text (an 'NA' prompt stays 'NA')."""
    from analysis.scores_io import read_score_frame

    p = tmp_path / "s.csv"
    p.write_text('seg_id,node,file_name,prompt,m,r\n'
                 '0,0,a,NA,"0.5",null\n0,1,b,x,0.25",none\n0,1,c,y,,3\n1,0,d,z,N/A,-1\n', encoding="utf-8")
    frame, lower = read_score_frame(p)
    table = read_scores(p)
    assert frame["prompt"].tolist() == ["NA", "x", "y", "z"] and lower == frozenset()
    for m in ("m", "r"):
        np.testing.assert_array_equal(frame[m].to_numpy(), table.frame[m].to_numpy())
    np.testing.assert_array_equal(frame["m"].to_numpy(), [0.5, 0.25, np.nan, np.nan])
    p.write_text("seg_id,node,m\n0,0,0.5\n0,1,abc\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"row 3, column 'm': expected a number, got 'abc'"):
        read_score_frame(p)
    with pytest.raises(ValueError, match=r"row 3, column 'm': expected a number, got 'abc'"):
        read_scores(p)


def test_read_score_frame_metrics_long_tables_urls_and_keys(tmp_path):
    from analysis.scores_io import read_score_frame

    p = tmp_path / "s.csv"
    p.write_text("seg_id,node,file_name,model,good\n0,0,a,sd-xl,0.9\n0,1,b,dalle,0.1\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"column 'model': expected a number, got 'sd-xl'"):
        read_score_frame(p)  # every metric column by default
    frame, _ = read_score_frame(p, metrics=["good", "absent"])  # what a metrics=[good] analysis read
    assert frame["model"].tolist() == ["sd-xl", "dalle"] and frame["good"].tolist() == [0.9, 0.1]
    long = tmp_path / "long.csv"
    long.write_text("seg_id,node,file_name,metric,score,higher_is_better\n0,0,a,err,1,false\n0,1,b,err,3,false\n",
                    encoding="utf-8")
    frame, lower = read_score_frame(long)
    assert frame["err"].tolist() == [1.0, 3.0] and lower == {"err"}
    with pytest.raises(FileNotFoundError, match="got the URL http://127.0.0.1:9/x.csv"):
        read_score_frame("http://127.0.0.1:9/x.csv")
    with pytest.raises(OSError):
        read_score_frame("http://127.0.0.1:9/x.csv", allow_url=True)  # fetched: the server is down
    (tmp_path / "nokey.csv").write_text("id_x,node,m\n0,0,1\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"expected columns 'seg_id' and 'node'.*missing \['seg_id'\]"):
        read_score_frame(tmp_path / "nokey.csv")


def test_read_result_table_names_the_file_and_missing_columns(tmp_path):
    from analysis.scores_io import read_result_table
    from seg_data.results import METAMETRICS_REQUIRED

    p = tmp_path / "metametrics.csv"
    p.write_text("metric,protocol,meta_metric,subset,value\nm,graph,rank,Avg,\nm,graph,rank,Synth,0.5\n")
    df = read_result_table(p, "meta-metric", METAMETRICS_REQUIRED, dtype={"metric": str, "subset": str})
    assert df["value"].isna().tolist() == [True, False]  # an undefined value is written as an empty cell
    p.write_text("metric,value\nm,1\n")
    with pytest.raises(ValueError, match=rf"{p}: expected meta-metric columns .* missing \['protocol', "):
        read_result_table(p, "meta-metric", METAMETRICS_REQUIRED)
