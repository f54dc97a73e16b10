"""The one file schema (seg_data.results): roles, run.json, directions read alike by every command,
atomic writes and result folders written as a set."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from seg_data import results as R


def test_roles_live_on_the_metric_classes():
    from metrics_adapters.base import Metric
    from metrics_adapters.controls.random import RandomScore
    from metrics_adapters.controls.shuffle import ShuffledImage, ShuffledText
    from metrics_adapters.controls.vqa import AlwaysYesVQA, BlindQA
    from metrics_adapters.quality.blur import BlurEffect

    assert Metric.role == "metric"
    assert RandomScore().role == "control" and RandomScore(name="r").roles() == {"r": "control"}
    assert ShuffledImage.role == ShuffledText.role == "control"
    assert AlwaysYesVQA.role == BlindQA.role == "control"
    assert BlurEffect.role == "control" and BlurEffect(name="blur").directions() == {"blur": False}
    for cls in (RandomScore, ShuffledImage, BlurEffect):
        assert cls.role in R.ROLES


def test_run_record_round_trip_and_errors(tmp_path):
    rec = R.run_record(
        n_items=3, columns=["seg_id", "node", "a", "b_errors"],
        metrics=[{"name": "a", "columns": ["a"], "directions": {"a": True}, "wall_time_s": 2.0,
                  "images_per_s": 1.5, "flops_per_image_estimate": 1e9, "flops_per_image_measured": 2e9},
                 {"name": "b", "columns": ["b_errors"], "directions": {"b_errors": False}, "wall_time_s": 1.0,
                  "images_per_s": None, "flops_per_image_estimate": 5.0, "flops_per_image_measured": None}],
        directions={"a": True, "b_errors": False}, roles={"a": "metric", "b_errors": "control"},
        derived_columns={}, wall_time_s=11.1, dataset={"name": "mini"})
    p = R.atomic_write_text(tmp_path / "run.json", json.dumps(rec))
    got = R.read_run_record(p)
    assert got.format == R.RUN_FORMAT and got.wall_time_s == 11.1 and got.dataset == "mini"
    assert got.lower_is_better == {"b_errors"} and got.roles == {"a": "metric", "b_errors": "control"}
    assert got.flops == {"a": 2e9, "b_errors": 5.0}  # measured beats the estimate
    assert got.images_per_s == {"a": 1.5} and got.metric_wall_time_s == {"a": 2.0, "b_errors": 1.0}
    # a /1 record (no roles): every column reads as a metric
    old = {"format": "ts2-score-run/1", "metrics": [{"name": "x", "columns": ["x"], "directions": {"x": False}}]}
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert R.read_run_record(tmp_path / "old.json").roles == {"x": "metric"}
    with pytest.raises(ValueError, match="expected a role among"):
        R.run_record(n_items=0, columns=[], metrics=[], directions={}, roles={"x": "competitor"}, derived_columns={})
    (tmp_path / "bad.json").write_text(json.dumps({"format": "ts2-score-run/9"}))
    with pytest.raises(ValueError, match="expected format among"):
        R.read_run_record(tmp_path / "bad.json")
    (tmp_path / "cut.json").write_text('{"format": "ts2-sc')
    with pytest.raises(ValueError, match="cut.json"):
        R.read_run_record(tmp_path / "cut.json")


def test_metric_columns_one_list():
    from analysis.scores_io import IGNORED_COLUMNS

    assert IGNORED_COLUMNS is R.DESCRIPTIVE_COLUMNS
    cols = ["seg_id", "node", "file_name", "image_path", "prompt", "subset", "status", "clip", "errors"]
    assert R.metric_columns(cols) == ["clip", "errors"]  # an error count is a metric


def test_atomic_write_leaves_no_temp_file_on_error(tmp_path):
    p = tmp_path / "x.csv"
    R.atomic_write_text(p, "old")
    R.atomic_write_text(p, "new")
    assert p.read_text() == "new"
    with pytest.raises(TypeError):
        R.atomic_write_bytes(p, object())  # a failed write keeps the old file and no temp file
    assert p.read_text() == "new" and sorted(x.name for x in tmp_path.iterdir()) == ["x.csv"]


def test_result_set_states(tmp_path):
    d = tmp_path / "out"
    with R.result_set(d, "test"):
        (d / "a.csv").write_text("1\n")
        (d / "sub").mkdir()
        (d / "sub" / "b.png").write_bytes(b"\x89PNG")
        (d / "ts2.log").write_text("log lines are not part of the set")
    assert R.result_set_state(d)[0] == "complete"
    man = json.loads((d / R.MANIFEST).read_text())
    assert sorted(man["files"]) == ["a.csv", "sub/b.png"]
    (d / "ts2.log").write_text("appended")
    assert R.result_set_state(d)[0] == "complete"
    (d / "a.csv").write_text("1")  # cut short
    state, why = R.result_set_state(d)
    assert state == "interrupted" and "a.csv" in why
    with pytest.raises(R.IncompleteResultError, match="interrupted"):
        R.check_result_set(d)
    # a writer that fails leaves its marker: the folder never reads as complete
    e = tmp_path / "e"
    with pytest.raises(RuntimeError), R.result_set(e, "test"):
        (e / "a.csv").write_text("x")
        raise RuntimeError("disk full")
    assert R.result_set_state(e)[0] == "interrupted" and not (e / R.MANIFEST).exists()
    assert R.result_set_state(tmp_path / "nothing")[0] == "unmanaged"


def _blur_folder(d):
    """scores.csv + run.json of a lower-is-better 'blur' that rises with the error count."""
    rng = np.random.default_rng(3)
    rows = []
    for s in range(12):
        for node in ("0", "1a", "1b", "2", "3"):
            lv = int(node[0])
            for k in range(2):
                rows.append({"seg_id": str(s), "node": node, "file_name": f"i/{s}-{node}-{k}.png",
                             "image_path": "", "prompt": f"p{s}", "blur": 0.1 + 0.15 * lv + rng.normal(0, 0.12)})
    scores = pd.DataFrame(rows)
    d.mkdir(parents=True)
    scores.to_csv(d / "scores.csv", index=False)
    rec = R.run_record(n_items=len(scores), columns=scores.columns,
                       metrics=[{"name": "blur", "columns": ["blur"], "directions": {"blur": False}}],
                       directions={"blur": False}, roles={"blur": "control"}, derived_columns={}, wall_time_s=1.0)
    (d / "run.json").write_text(json.dumps(rec))
    return scores


def test_analyze_and_report_read_the_same_directions(tmp_path):
    """Issue 18: the same scores.csv gave rank_m +x to ts2 report and -x to ts2 analyze."""
    from analysis.pipeline import analyze
    from ts2.commands.report import build_report

    scores = _blur_folder(tmp_path / "run")
    # independent reference: the analysis told explicitly that blur is lower-is-better
    ref = analyze(scores[["seg_id", "node", "file_name", "blur"]], protocols=["graph"], bootstrap=0,
                  lower_is_better=["blur"]).metametrics_frame()
    want = ref[(ref.meta_metric == "rank") & (ref.subset == "Avg")].value.item()
    assert want > 0.3
    r = subprocess.run([sys.executable, "-m", "ts2", "analyze", f"scores={tmp_path / 'run' / 'scores.csv'}",
                        f"output_dir={tmp_path / 'ana'}", "protocol=graph", "bootstrap=0"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    mm = pd.read_csv(tmp_path / "ana" / "metametrics.csv")
    got_analyze = mm[(mm.meta_metric == "rank") & (mm.subset == "Avg")].value.item()
    meta = json.loads((tmp_path / "ana" / "analysis.json").read_text())
    assert meta["lower_is_better"] == ["blur"] and meta["roles"] == {"blur": "control"}
    rep = build_report([tmp_path / "run"], tmp_path / "rep", protocols=["graph"], bootstrap=0, figures=[])
    mr = pd.read_csv(rep.metametrics)
    got_report = mr[(mr.meta_metric == "rank") & (mr.subset == "Avg")].value.item()
    assert got_analyze == pytest.approx(want, abs=1e-12)
    assert got_report == pytest.approx(want, abs=1e-12)
