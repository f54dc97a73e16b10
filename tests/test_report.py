"""Report assembly and merging of result directories (analysis.report.page, ts2 report)."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from analysis.pipeline import analyze
from analysis.report import page as rp
from analysis.report import result_dirs as rs
from analysis.report.settings import ReportSettings
from seg_data.results import BASE_COLUMNS
from seg_data.shards import Shard

NODES = ["0", "1a", "1b", "2"]


def make_scores(n_segs: int = 8, seed: int = 0) -> pd.DataFrame:
    """A small SEG set: 4 nodes x 3 images per SEG; 'good' falls with the error level, 'noisy' is random."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(n_segs):
        for node in NODES:
            level = int(node[0])
            for k in range(3):
                rows.append({"seg_id": str(s), "node": node, "file_name": f"img/{s}-{node}-{k}.png",
                             "image_path": f"/x/img/{s}-{node}-{k}.png", "prompt": f"prompt {s}",
                             "good": 0.9 - 0.25 * level + rng.normal(0, 0.05), "noisy": rng.uniform()})
    return pd.DataFrame(rows)


def write_run(d, scores: pd.DataFrame, overrides=None, flops=None, analyse=True, bootstrap=30):
    d.mkdir(parents=True, exist_ok=True)
    scores.to_csv(d / "scores.csv", index=False)
    metrics = [c for c in scores.columns if c not in BASE_COLUMNS]
    flops = flops or {"good": 2e9, "noisy": 5e12}
    (d / "run.json").write_text(json.dumps({
        "format": "ts2-score-run/1", "n_items": len(scores),
        "metrics": [{"name": m, "columns": [m], "directions": {m: True}, "device": "cpu", "wall_time_s": 2.0,
                     "images_per_s": 48.0, "cache_hits": 0, "cache_misses": len(scores), "failures": [],
                     "flops_per_image_estimate": flops.get(m), "flops_per_image_measured": None} for m in metrics]}))
    if overrides is not None:
        (d / ".hydra").mkdir(exist_ok=True)
        (d / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    if analyse:
        # min_segs_ci=0: these 8-SEG sets stand in for real ones; the report must show their CIs
        res = analyze(scores[["seg_id", "node", "file_name", *metrics]], protocols=["paper", "graph"],
                      bootstrap=bootstrap, seed=1, min_segs_ci=0)
        res.metametrics_frame().to_csv(d / "metametrics.csv", index=False)
        res.per_seg_frame().to_csv(d / "per_seg.csv", index=False)
    return d


def test_report_on_a_synthetic_results_dir(tmp_path):
    from analysis.report.result_dirs import build_report

    src = write_run(tmp_path / "run1", make_scores())
    out = build_report([src], tmp_path / "rep", bootstrap=0)
    page = out.html.read_text()
    names = {p.name for p in out.figures}
    assert {"pareto_rank.png", "pareto_sep.png", "histograms_1.png", "scatter_rank.png"} <= names
    # heatmaps per metric of interest (no roles in a /1 run.json: both are metrics): 2 best + 2 worst each
    for m in ("good", "noisy"):
        assert sum(n.startswith(f"heatmap_{m}_best_seg") for n in names) == 2
        assert sum(n.startswith(f"heatmap_{m}_worst_seg") for n in names) == 2
    # every figure is embedded, byte for byte: the page needs no other file
    blobs = re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", page)
    assert len(blobs) == len(out.figures)
    assert {base64.b64decode(b) for b in blobs} == {p.read_bytes() for p in out.figures}
    # the table: values of the input metametrics.csv, in %, with their CIs
    mm = pd.read_csv(src / "metametrics.csv")
    cell = mm[(mm.metric == "good") & (mm.protocol == "paper") & (mm.meta_metric == "rank") & (mm.subset == "Avg")].iloc[0]
    assert f"{100 * cell.value:.1f}" in page and f"[{100 * cell.ci_low:.1f}, {100 * cell.ci_high:.1f}]" in page
    assert {p.name for p in out.tables} == {"table.md", "table.tex", "table.csv", "pareto.csv"}
    for p in out.tables:
        assert p.stat().st_size > 0
    # reused, not recomputed: the merged metametrics are the input's
    pd.testing.assert_frame_equal(pd.read_csv(out.metametrics), mm)
    # each metric's best/worst SEGs drawn are those with its own highest/lowest per-SEG rank_m
    ps = pd.read_csv(src / "per_seg.csv", dtype={"seg_id": str})
    for m in ("good", "noisy"):
        own = ps[(ps.meta_metric == "rank") & (ps.protocol == "paper") & (ps.metric == m)].set_index("seg_id").value
        for kind, top in (("best", sorted(own, reverse=True)[:2]), ("worst", sorted(own)[:2])):
            ids = [n.removeprefix(f"heatmap_{m}_{kind}_seg").removesuffix(".png") for n in names
                   if n.startswith(f"heatmap_{m}_{kind}_seg")]
            assert sorted(own[ids], reverse=kind == "best") == pytest.approx(top)


def test_sweep_runs_with_the_same_column_are_told_apart(tmp_path):
    a = write_run(tmp_path / "sweep" / "0", make_scores(seed=1), ["metric.vqa=blip", "output_dir=x"], analyse=False)
    b = write_run(tmp_path / "sweep" / "1", make_scores(seed=2), ["metric.vqa=llava", "output_dir=x"], analyse=False,
                  flops={"good": 7e9})
    dirs = [rs.load_result_dir(p) for p in rs.expand_result_paths([tmp_path / "sweep"])]
    assert [d.path for d in dirs] == [a, b]
    merged, todo = rs.merge_results(dirs)
    assert todo == ["good[metric.vqa=blip]", "noisy[metric.vqa=blip]", "good[metric.vqa=llava]",
                    "noisy[metric.vqa=llava]"]
    assert merged.flops["good[metric.vqa=llava]"] == 7e9 and merged.flops["good[metric.vqa=blip]"] == 2e9
    merged = rs.complete_analysis(merged, todo, protocols=["graph"], bootstrap=0)
    # each renamed column carries its own run's numbers (computed here independently)
    alone = analyze(make_scores(seed=2)[["seg_id", "node", "file_name", "good"]], protocols=["graph"], bootstrap=0)
    got = merged.metametrics.set_index(["metric", "meta_metric", "subset"])["value"]
    assert got[("good[metric.vqa=llava]", "rank", "Avg")] == pytest.approx(alone.value("good", "rank"))
    assert got[("good[metric.vqa=llava]", "sep", "Avg")] == pytest.approx(alone.value("good", "sep"))


def test_equal_overrides_fall_back_to_the_directory_name(tmp_path):
    a = write_run(tmp_path / "first", make_scores(seed=1)[["seg_id", "node", "file_name", "good"]], analyse=False)
    b = write_run(tmp_path / "second", make_scores(seed=2)[["seg_id", "node", "file_name", "good"]], analyse=False)
    merged, todo = rs.merge_results([rs.load_result_dir(a), rs.load_result_dir(b)])
    assert todo == ["good[first]", "good[second]"]
    assert list(merged.scores.columns[-2:]) == ["good[first]", "good[second]"]


def test_shards_of_one_run_are_concatenated(tmp_path):
    full = make_scores(n_segs=10, seed=5)
    dirs = []
    for i in range(3):
        part = full[Shard(i, 3).mask(full["file_name"])]
        dirs.append(write_run(tmp_path / f"s{i}", part, ["metric=clip", f"shard={i}/3"], analyse=False))
    merged, todo = rs.merge_results([rs.load_result_dir(d) for d in dirs])
    assert todo == ["good", "noisy"] and len(merged.runs) == 1 and merged.runs[0].shards == ("0/3", "1/3", "2/3")
    assert sorted(merged.scores["file_name"]) == sorted(full["file_name"])
    merged = rs.complete_analysis(merged, todo, protocols=["paper"], bootstrap=0)
    ref = analyze(full[["seg_id", "node", "file_name", "good", "noisy"]], protocols=["paper"], bootstrap=0)
    got = merged.metametrics.set_index(["metric", "meta_metric", "subset"])["value"]
    for m in ("good", "noisy"):
        for k in ("rank", "sep", "delta"):
            assert got[(m, k, "Avg")] == pytest.approx(ref.value(m, k))
    # a missing shard is reported, not silently ignored
    merged2, _ = rs.merge_results([rs.load_result_dir(d) for d in dirs[:2]])
    assert any("shard(s) 2/3 missing" in n for n in merged2.notes)


def test_shards_disagreeing_on_an_image_are_an_error(tmp_path):
    full = make_scores(n_segs=2)
    a = write_run(tmp_path / "a", full.iloc[:10], ["shard=0/2"], analyse=False)
    clash = full.iloc[8:].copy()
    clash.loc[clash.index[0], "good"] += 0.5  # row 8 is in both shards with different scores
    b = write_run(tmp_path / "b", clash, ["shard=1/2"], analyse=False)
    with pytest.raises(ValueError, match="img/0-2-2.png|scored by two shards"):
        rs.merge_results([rs.load_result_dir(a), rs.load_result_dir(b)])


def test_bad_inputs_have_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        rs.expand_result_paths([tmp_path / "nope"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="expected scores.csv or metametrics.csv"):
        rs.expand_result_paths([tmp_path / "empty"])
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "metametrics.csv").write_text("metric,value\nx,1\n")
    with pytest.raises(ValueError, match="missing \\['protocol', 'meta_metric', 'subset'\\]"):
        rs.load_result_dir(bad)
    assert rs.parse_overrides(["+a.b=1", "c=x=y", "~d"]) == {"a.b": "1", "c": "x=y", "d": "~"}


def test_ts2_report_command_line(tmp_path):
    a = write_run(tmp_path / "a", make_scores(n_segs=6, seed=1)[["seg_id", "node", "file_name", "prompt", "good"]],
                  analyse=False)
    b = write_run(tmp_path / "b", make_scores(n_segs=6, seed=2), bootstrap=0)
    code = ("import sys, ts2.cli; rc = ts2.cli.main(sys.argv[1:]); "
            "sys.exit(3 if 'torch' in sys.modules else rc)")
    r = subprocess.run([sys.executable, "-c", code, "report", f"results=[{a},{b}]", f"output_dir={tmp_path / 'out'}",
                        "bootstrap=0", "labels={noisy: Noisy control}", "figures=[pareto]", "pareto=[rank]"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"report: {tmp_path / 'out' / 'report.html'}" in r.stdout
    page = (tmp_path / "out" / "report.html").read_text()
    assert "good[a]" in page and "good[b]" in page and "Noisy control" in page
    mm = pd.read_csv(tmp_path / "out" / "metametrics.csv")
    assert set(mm.metric) == {"good[a]", "good[b]", "noisy"}
    assert sorted(p.name for p in (tmp_path / "out" / "figures").iterdir()) == ["pareto_rank.png"]
    r = subprocess.run([sys.executable, "-m", "ts2", "report", f"results=[{tmp_path / 'missing'}]",
                        f"output_dir={tmp_path / 'out2'}"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "does not exist" in r.stderr


def test_report_on_a_ts2_analyze_output_finds_the_analysed_scores(tmp_path):
    from analysis.report.result_dirs import build_report

    make_scores(n_segs=6, seed=4).to_csv(tmp_path / "my_scores.csv", index=False)
    r = subprocess.run([sys.executable, "-m", "ts2", "analyze", "scores=my_scores.csv", "metrics=[good]",
                        "output_dir=ana", "bootstrap=0", "protocols=[paper,graph]", "ranking.enabled=false"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    d = rs.load_result_dir(tmp_path / "ana")
    assert d.metric_columns() == ["good"]  # what was analysed, not every column of the score file
    assert d.scores is not None and len(d.scores) == 6 * 4 * 3  # read back through the job's scores= setting
    out = build_report([tmp_path / "ana"], tmp_path / "rep", figures=["histograms"])
    assert [p.name for p in out.figures] == ["histograms_1.png"]
    pd.testing.assert_frame_equal(pd.read_csv(out.metametrics), pd.read_csv(tmp_path / "ana" / "metametrics.csv"))


def test_pareto_figures_need_the_cost_of_two_metrics(tmp_path):
    src = write_run(tmp_path / "r", make_scores(n_segs=4), flops={"good": 2e9}, bootstrap=0)  # 'noisy' has no cost
    merged, todo = rs.merge_results([rs.load_result_dir(src)])
    assert todo == [] and merged.flops == {"good": 2e9}
    assert rp.make_figures(merged, tmp_path / "f", kinds=["pareto"]) == []
    merged, _ = rs.merge_results([rs.load_result_dir(src)], flops={"noisy": 0.0})
    figs = rp.make_figures(merged, tmp_path / "g", kinds=["pareto"], pareto=["rank"])
    assert [f.path.name for f in figs] == ["pareto_rank.png"]
    with pytest.raises(ValueError, match="figure kinds"):
        rp.make_figures(merged, tmp_path / "h", kinds=["pie"])


def test_cis_at_different_levels_are_noted_in_the_merged_result_and_the_report(tmp_path):
    """Two analysed folders whose analysis.json give CI levels 0.9 and 0.95: the merge's note reaches
    MergedResults.notes and report.html (it was appended after the result was built, and lost)."""
    from seg_data.results import ANALYSIS_FILE, AnalysisRecord

    dirs = []
    for name, level in (("a", 0.9), ("b", 0.95)):
        d = write_run(tmp_path / name, make_scores(n_segs=6, seed=len(dirs))[["seg_id", "node", "file_name", "good"]],
                      bootstrap=0)
        (d / ANALYSIS_FILE).write_text(AnalysisRecord(metrics=("good",), confidence=level).to_json())
        dirs.append(d)
    merged, todo = rs.merge_results([rs.load_result_dir(d) for d in dirs])
    assert todo == [] and merged.confidence is None
    note = "the inputs' confidence intervals have different levels [0.9, 0.95]"
    assert note in merged.notes
    out = rp.write_report(merged, tmp_path / "rep", ReportSettings(figures=(), explorer=False))
    assert note.replace("'", "&#x27;") in out.html.read_text()


def test_an_analysed_table_with_text_columns_is_read_back_for_its_analysed_metrics(tmp_path):
    """A folder analysed with metrics=[good] from a table that also holds a text column: the report
    reads the analysed scores from the table (one reader, read_score_frame) and leaves the text."""
    from analysis.report.outputs import write_outputs

    scores = make_scores(n_segs=6, seed=3)
    scores["model"] = ["sd-xl", "dalle"] * (len(scores) // 2)
    src = tmp_path / "mine.csv"
    scores.to_csv(src, index=False)
    res = analyze(scores[["seg_id", "node", "file_name", "good"]], protocols=["graph"], bootstrap=0)
    write_outputs(res, tmp_path / "ana", score_files=[src])
    d = rs.load_result_dir(tmp_path / "ana")
    assert d.metric_columns() == ["good"]
    np.testing.assert_array_equal(d.scores["good"].to_numpy(), scores["good"].to_numpy())
    assert d.scores["model"].tolist()[:2] == ["sd-xl", "dalle"]
    merged = rs.merged_results([tmp_path / "ana"], bootstrap=0)
    assert list(merged.scores.columns[-1:]) == ["good"] and merged.metrics == ["good"]
