"""The one file schema (seg_data.results: roles, run.json, analysis.json, directions read alike by
every command) and the result-set machinery (seg_data.result_sets: atomic writes, result folders
written as a set, the one-writer lock, inputs checked on read)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from seg_data import result_sets as Sets
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
    p = Sets.atomic_write_text(tmp_path / "run.json", json.dumps(rec))
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
    Sets.atomic_write_text(p, "old")
    Sets.atomic_write_text(p, "new")
    assert p.read_text() == "new"
    with pytest.raises(TypeError):
        Sets.atomic_write_bytes(p, object())  # a failed write keeps the old file and no temp file
    assert p.read_text() == "new" and sorted(x.name for x in tmp_path.iterdir()) == ["x.csv"]


def test_result_set_states(tmp_path):
    d = tmp_path / "out"
    with Sets.result_set(d, "test") as stage:
        assert stage != d and not d.exists()  # written beside the folder, swapped in at the end
        (stage / "a.csv").write_text("1\n")
        (stage / "sub").mkdir()
        (stage / "sub" / "b.png").write_bytes(b"\x89PNG")
        (stage / "ts2.log").write_text("log lines are not part of the set")
    assert Sets.result_set_state(d)[0] == "complete"
    man = json.loads((d / Sets.MANIFEST).read_text())
    assert sorted(man["files"]) == ["a.csv", "sub/b.png"]
    (d / "ts2.log").write_text("appended")
    assert Sets.result_set_state(d)[0] == "complete"
    (d / "a.csv").write_text("1")  # cut short
    state, why = Sets.result_set_state(d)
    assert state == "interrupted" and "a.csv" in why
    with pytest.raises(Sets.IncompleteResultError, match="interrupted"):
        Sets.check_result_set(d)
    # a writer that fails writes nothing: no folder, no staging sibling left behind
    e = tmp_path / "e"
    with pytest.raises(RuntimeError), Sets.result_set(e, "test") as stage:
        (stage / "a.csv").write_text("x")
        raise RuntimeError("disk full")
    assert not e.exists() and Sets.result_set_state(e)[0] == "unmanaged"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def _complete_set(d, files, writer="test"):
    with Sets.result_set(d, writer) as stage:
        for name, text in files.items():
            (stage / name).parent.mkdir(parents=True, exist_ok=True)
            (stage / name).write_text(text)


def _snapshot(d):
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("failure", [RuntimeError("boom"), OSError(28, "No space left on device"),
                                     KeyboardInterrupt()])
def test_a_failed_second_run_leaves_the_first_set_whole(tmp_path, failure):
    d = tmp_path / "out"
    _complete_set(d, {"metametrics.csv": "old\n", "per_seg.csv": "old\n", "figures/a.png": "old"})
    before = _snapshot(d)
    with pytest.raises(type(failure)), Sets.result_set(d, "test") as stage:
        (stage / "metametrics.csv").write_text("new\n")
        raise failure
    assert _snapshot(d) == before and Sets.result_set_state(d)[0] == "complete"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no staging folder, no lock file left


def test_nothing_of_the_old_set_survives_into_the_new_one(tmp_path):
    d = tmp_path / "out"
    _complete_set(d, {"metametrics.csv": "old\n", "ranking.csv": "old\n", "figures/a.png": "old"})
    (d / "notes.txt").write_text("the user's own file")  # not ts2's: kept, never listed
    _complete_set(d, {"metametrics.csv": "new\n"})
    assert sorted(_snapshot(d)) == ["manifest.json", "metametrics.csv", "notes.txt"]
    assert (d / "metametrics.csv").read_text() == "new\n" and (d / "notes.txt").read_text() == "the user's own file"
    assert sorted(json.loads((d / Sets.MANIFEST).read_text())["files"]) == ["metametrics.csv"]


def test_this_runs_hydra_files_move_with_the_set_and_an_old_runs_go(tmp_path):
    d = tmp_path / "out"
    _complete_set(d, {"a.csv": "old"})
    (d / ".hydra").mkdir()
    (d / ".hydra" / "config.yaml").write_text("old run")
    old = time.time() - 3600
    os.utime(d / ".hydra" / "config.yaml", (old, old))
    os.utime(d / ".hydra", (old, old))
    _complete_set(d, {"a.csv": "new"})  # a Python call: no Hydra files of its own
    assert not (d / ".hydra").exists()
    with Sets.folder_lock(d, "cli"):  # the CLI locks first, then Hydra writes its files, then the set
        (d / ".hydra").mkdir()
        (d / ".hydra" / "config.yaml").write_text("this run")
        (d / "ts2.log").write_text("this run's log")
        _complete_set(d, {"a.csv": "newer"})
    assert (d / ".hydra" / "config.yaml").read_text() == "this run" and (d / "ts2.log").exists()
    assert Sets.result_set_state(d)[0] == "complete"


def test_nested_sets_of_one_folder_are_one_set_and_paths_are_published(tmp_path):
    d = tmp_path / "out"
    with Sets.result_set(d, "outer") as outer:
        (outer / "scores.csv").write_text("s")
        with Sets.result_set(d, "inner") as inner:
            assert inner == outer
            (inner / "report.html").write_text("r")
            assert Sets.published_path(inner / "report.html") == d / "report.html"
        assert not d.exists()  # the inner set does not swap: the outer one does, once
        assert Sets.result_set_state(outer)[0] == "unmanaged"  # readable by this process while written
    assert sorted(json.loads((d / Sets.MANIFEST).read_text())["files"]) == ["report.html", "scores.csv"]
    assert Sets.published_path(tmp_path / "elsewhere.csv") == tmp_path / "elsewhere.csv"


def test_the_current_folder_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for bad in (".", tmp_path, tmp_path.parent):
        with pytest.raises(ValueError, match="other than the current folder"), Sets.result_set(bad, "t"):
            pass


_HOLD = """
import sys, time
from seg_data.result_sets import folder_lock
with folder_lock(sys.argv[1], "ts2 analyze"):
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def test_a_second_writer_is_refused_naming_the_first(tmp_path):
    d = tmp_path / "out"
    p = subprocess.Popen([sys.executable, "-c", _HOLD, str(d), "30"], stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        assert p.stdout.readline().strip() == "locked"
        with pytest.raises(Sets.FolderLockedError, match=rf"expected no other writer, got ts2 analyze \(pid {p.pid},"):
            with Sets.result_set(d, "test"):
                pass
    finally:
        p.kill()
        p.wait()
    # the holder died without releasing: its lock is taken over, with a note
    with Sets.folder_lock(d, "test"):
        pass


def test_a_dead_writers_lock_and_staging_folder_are_taken_over(tmp_path, caplog):
    d = tmp_path / "out"
    _complete_set(d, {"a.csv": "old"})
    before = _snapshot(d)
    # what a writer killed half-way leaves: its lock file (no live holder) and its staging folder
    (tmp_path / ".out.ts2-lock").write_text(json.dumps({"writer": "ts2 report", "pid": 999999999, "started": "x"}))
    stage = tmp_path / ".out.ts2-new-999999999"
    stage.mkdir()
    (stage / "a.csv").write_text("half")
    (stage / Sets.INCOMPLETE_MARKER).write_text("{}")
    with caplog.at_level("WARNING"):
        _complete_set(d, {"a.csv": "new"})
    assert "took over the lock of ts2 report (pid 999999999" in caplog.text
    assert not stage.exists() and (d / "a.csv").read_text() == "new" and before != _snapshot(d)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_writer_killed_between_the_fallback_renames_is_recovered(tmp_path):
    d = tmp_path / "out"
    _complete_set(d, {"a.csv": "old"})
    d.rename(tmp_path / ".out.ts2-old-999999999")  # killed after moving the old set aside
    with Sets.folder_lock(d, "test"):
        pass
    assert (d / "a.csv").read_text() == "old" and Sets.result_set_state(d)[0] == "complete"


def test_the_fallback_swap_without_renameat2(tmp_path, monkeypatch):
    monkeypatch.setattr(Sets, "_exchange", lambda a, b: False)
    d = tmp_path / "out"
    _complete_set(d, {"a.csv": "old"})
    _complete_set(d, {"a.csv": "new"})
    assert (d / "a.csv").read_text() == "new" and Sets.result_set_state(d)[0] == "complete"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_changed_inputs_are_refused_on_read(tmp_path):
    src = tmp_path / "scores.csv"
    src.write_text("seg_id,node,m\n0,0,1\n")
    d = tmp_path / "out"
    with Sets.result_set(d, "test") as stage:
        (stage / R.ANALYSIS_FILE).write_text(json.dumps({"inputs": Sets.input_fingerprints([src])}))
    Sets.check_inputs(d)
    src.write_text("seg_id,node,m\n0,0,2\n")  # same size, other bytes
    with pytest.raises(Sets.StaleResultError, match=rf"expected {re.escape(str(src))} as it was when analysed"):
        Sets.check_inputs(d)


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
    from analysis.report.result_dirs import build_report

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


# -- analysis.json: one record, one reader -------------------------------------------------------

def _record(**kw):
    base = dict(source="s.csv", metrics=("a", "b_err"), lower_is_better=frozenset({"b_err"}),
                roles={"a": "metric", "b_err": "control"}, dataset="mini", score_files=("/x/s.csv",),
                inputs={"/x/s.csv": {"bytes": 3, "sha256": "ab"}}, meta_metrics=("rank", "sep"),
                protocols={"graph": {"name": "graph"}}, subsets={"graph": ["Avg", "Synth"]}, subset_source="ts2",
                n_segs={"graph": 30}, excluded_segs={"graph": ["7"]}, delta_sigma={"graph": {"a": 0.5, "b_err": None}},
                bootstrap=200, seed=3, confidence=0.9, ci_method="percentile", bootstrap_scheme="seg",
                chance_permutations=20, min_segs_ci=10, notes=("n1",), chance_null="permuted")
    return R.AnalysisRecord(**{**base, **kw})


def test_analysis_record_round_trip(tmp_path):
    rec = _record()
    p = Sets.atomic_write_text(tmp_path / R.ANALYSIS_FILE, rec.to_json())
    raw = json.loads(p.read_text())
    assert next(iter(raw)) == "format" and raw["format"] == R.ANALYSIS_FORMAT == "ts2-analysis/2"
    got = R.read_analysis_record(p)
    assert got.path == p and got.version == 2 and got.raw == raw
    assert dataclasses.replace(got, path=None, raw={}) == rec
    assert got.directions == {"a": True, "b_err": False}
    # no chance levels: no chance_null key (as ts2 analyze wrote it before the record existed)
    assert "chance_null" not in _record(chance_null=None).to_dict()


def test_ts2_analyze_writes_the_record_and_the_folder_reads_it(tmp_path):
    from analysis.pipeline import analyze
    from analysis.report.outputs import write_outputs

    rng = np.random.default_rng(0)
    f = pd.DataFrame({"seg_id": ["0"] * 6 + ["1"] * 6, "node": ["0", "0", "1", "1", "2", "2"] * 2,
                      "file_name": [f"f{i}" for i in range(12)], "m": rng.uniform(size=12), "e": rng.uniform(size=12)})
    src = tmp_path / "s.csv"
    f.to_csv(src, index=False)
    res = analyze(f, protocols=["graph"], bootstrap=0, lower_is_better=["e"])
    write_outputs(res, tmp_path / "out", roles={"e": "control"}, dataset="toy", score_files=[src])
    rec = R.read_analysis_record(tmp_path / "out" / R.ANALYSIS_FILE)
    assert rec.format == R.ANALYSIS_FORMAT and rec.metrics == ("m", "e") and rec.lower_is_better == {"e"}
    assert rec.roles == {"m": "metric", "e": "control"} and rec.dataset == "toy"
    assert rec.score_files == (str(src.resolve()),) and rec.inputs == Sets.input_fingerprints([src])
    assert rec.confidence == res.confidence and rec.n_segs == {"graph": 2}
    schema = R.folder_schema(tmp_path / "out")
    assert schema.directions == {"m": True, "e": False} and schema.roles["e"] == "control"


def test_an_analysis_json_without_format_is_read_as_version_1(tmp_path):
    old = {"source": "s.csv", "metrics": ["x", "y"], "lower_is_better": ["y"], "roles": {"y": "reference"},
           "dataset": "TS2", "confidence": 0.95, "bootstrap": 1000}  # an early file: no score_files, no inputs
    (tmp_path / R.ANALYSIS_FILE).write_text(json.dumps(old))
    rec = R.read_analysis_record(tmp_path / R.ANALYSIS_FILE)
    assert rec.format == "ts2-analysis/1" and rec.version == 1
    assert rec.metrics == ("x", "y") and rec.lower_is_better == {"y"} and rec.confidence == 0.95
    assert rec.score_files == () and rec.inputs == {} and rec.chance_null is None
    assert R.folder_schema(tmp_path) == R.FolderSchema({"x": True, "y": False}, {"y": "reference"}, "TS2")
    Sets.check_inputs(tmp_path)  # nothing recorded: passes


@pytest.mark.parametrize("text, match", [
    ('{"format": "ts2-analysis/3", "metrics": []}', r"expected format <= 2 \('ts2-analysis/2'\), got 3"),
    ('{"format": "ts2-score-run/2"}', r"expected format 'ts2-analysis/N'"),
    ('{"metrics": "abc"}', r"expected 'metrics' to be a list, got str"),
    ('{"roles": {"x": "competitor"}}', r"roles\['x'\]: expected a role among"),
    ('{"confidence": "high"}', r"expected 'confidence' to be a number, got 'high'"),
    ('[1, 2]', r"expected a JSON object, got list"),
    ('{"metrics": [', r"could not parse it"),
])
def test_a_bad_or_newer_analysis_json_is_refused_naming_the_file(tmp_path, text, match):
    p = tmp_path / R.ANALYSIS_FILE
    p.write_text(text)
    with pytest.raises(ValueError, match=match) as e:
        R.read_analysis_record(p)
    assert str(p) in str(e.value)


def test_every_reader_of_analysis_json_refuses_a_newer_version(tmp_path):
    """folder_schema, check_inputs and ts2 report's folder reader all read through
    read_analysis_record: each refuses a version-3 file with the same message."""
    from analysis.report import result_dirs as rs

    d = tmp_path / "ana"
    d.mkdir()
    pd.DataFrame({"metric": ["m"], "protocol": ["graph"], "meta_metric": ["rank"], "subset": ["Avg"],
                  "value": [0.5]}).to_csv(d / "metametrics.csv", index=False)
    (d / R.ANALYSIS_FILE).write_text(json.dumps({"format": "ts2-analysis/3", "metrics": ["m"]}))
    msg = rf"{re.escape(str(d / R.ANALYSIS_FILE))}: expected format <= 2"
    for read in (R.folder_schema, Sets.check_inputs, rs.load_result_dir, lambda p: rs.merged_results([p])):
        with pytest.raises(ValueError, match=msg):
            read(d)


def _functions(tree):
    import ast

    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def test_analysis_json_is_parsed_in_one_place_and_score_tables_read_in_one_module():
    """No function outside seg_data/results.py that names analysis.json parses JSON itself, and in
    analysis/ and ts2/ only analysis/scores_io.py calls pandas' CSV reader (read_scores,
    read_score_frame, read_result_table: one NaN policy each for score and result tables)."""
    import ast
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    json_readers, csv_readers = [], []
    for pkg in ("analysis", "ts2", "seg_data", "metrics_adapters"):
        for f in sorted((repo / pkg).rglob("*.py")):
            rel = f.relative_to(repo).as_posix()
            tree = ast.parse(f.read_text(encoding="utf-8"))
            for fn in _functions(tree):
                doc = ast.get_docstring(fn, clean=False)
                names = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
                strings = {n.value for n in ast.walk(fn) if isinstance(n, ast.Constant) and n.value != doc}
                calls = {n.func.attr for n in ast.walk(fn) if isinstance(n, ast.Call)
                         and isinstance(n.func, ast.Attribute)}
                if rel != "seg_data/results.py" and ("ANALYSIS_FILE" in names or "analysis.json" in strings) \
                        and calls & {"load", "loads"}:
                    json_readers.append(f"{rel}:{fn.name}")
            if pkg in ("analysis", "ts2") and rel != "analysis/scores_io.py":
                csv_readers += [f"{rel}:{n.lineno}" for n in ast.walk(tree) if isinstance(n, ast.Attribute)
                                and n.attr == "read_csv"]
    assert json_readers == []
    assert csv_readers == []
