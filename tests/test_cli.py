"""The command-line front end (`ts2 COMMAND key=value ...`)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ts2.cli import COMMANDS, Command, main, register_command


def _run(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ts2", *args], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_data_info_json_on_ts2(ts2_dir, tmp_path):
    r = _run("data", "info", f"path={ts2_dir}", "json=true", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)  # stdout holds exactly one JSON object; logs go to stderr
    assert (info["n_segs"], info["n_images"], info["n_nodes"]) == (165, 2840, 835)
    assert info["nodes_per_level"] == {"0": 189, "1": 331, "2": 211, "3": 75, "4": 25, "5": 4}
    assert info["segs_per_subset"] == {"Synth": 111, "Nat": 25, "Real": 29}
    assert [p["code"] for p in info["problems"]] == ["prompt_mismatch"]
    assert list(tmp_path.iterdir()) == []  # `ts2 data` leaves no Hydra output folders behind


def test_data_commands_do_not_import_torch(ts2_dir):
    code = ("import sys, ts2.cli; rc = ts2.cli.main(['data', 'info', 'path=%s']); "
            "sys.exit(3 if 'torch' in sys.modules else rc)" % ts2_dir)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr


def test_data_validate_exit_codes(tmp_path, ts2_dir):
    assert _run("data", "validate", f"path={ts2_dir}").returncode == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text("segs:\n  - id: z\n    prompt: p\n    nodes: [{label: '0', images: [{id: a}]}, {label: '1', images: [{id: b}]}]\n"
                   "    edges: [{from: '0', to: '1'}, {from: '1', to: '0'}]\n")
    r = _run("data", "validate", f"path={bad}")
    assert r.returncode == 1
    assert "SEG z" in r.stdout and "cycle" in r.stdout


def test_unknown_command_and_action(capsys):
    assert main(["frobnicate"]) == 2
    assert "expected one of" in capsys.readouterr().err
    assert main(["data", "explode"]) == 2
    assert "['info', 'validate', 'make-synthetic', 'from-labels']" in capsys.readouterr().err
    assert main([]) == 0 and "commands:" in capsys.readouterr().out


def test_a_typo_gets_did_you_mean_and_analyse_is_analyze(capsys, tmp_path, monkeypatch):
    assert main(["anlyze"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ts2: unknown command 'anlyze'; did you mean 'analyze'?") and len(err.splitlines()) == 1
    assert main(["reprodce"]) == 2 and "did you mean 'reproduce'?" in capsys.readouterr().err
    assert main(["frobnicate"]) == 2 and "did you mean" not in capsys.readouterr().err
    # The British spelling runs analyze itself (its help, its errors, its output folder).
    assert main(["analyse", "--help"]) == 0 and capsys.readouterr().out.startswith("ts2 analyze: ")
    monkeypatch.chdir(tmp_path)
    assert main(["analyse", "scores=nope.csv"]) == 2
    assert "expected a score table at nope.csv" in capsys.readouterr().err


def test_help_examples_use_no_path_a_user_lacks():
    for name, cmd in COMMANDS.items():
        for example in cmd.examples:
            assert "../shared" not in example, (name, example)
    assert "ts2 reproduce path=PATH/TO/ts2 bootstrap=0" in COMMANDS["reproduce"].examples


@pytest.mark.parametrize("args", [("analyze", "scores=nope.csv"), ("report", "results=nope")])
def test_a_failed_command_leaves_no_empty_output_folder(args, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(list(args)) == 2
    assert "expected" in capsys.readouterr().err
    assert [p for p in (tmp_path / "outputs").rglob("*") if not p.is_dir() or not any(p.iterdir())] == \
        [tmp_path / "outputs" / args[0]]  # the timestamped run folder is gone, nothing else left in it
    # A failed run that wrote anything else keeps its folder (.hydra/ and the log with it).
    from ts2.cli import _drop_unwritten_folder

    kept = tmp_path / "kept"
    (kept / ".hydra").mkdir(parents=True)
    (kept / "ts2.log").write_text("log")
    (kept / "scores.csv").write_text("x")
    _drop_unwritten_folder(kept)
    assert sorted(p.name for p in kept.iterdir()) == [".hydra", "scores.csv", "ts2.log"]


def test_duplicate_command_rejected():
    with pytest.raises(ValueError, match="already registered"):
        register_command("data", Command("data", "x:y", "dup"))
    with pytest.raises(ValueError, match=r"\['analyse'\] already registered"):
        register_command("analyse2", Command("analyze", "x:y", "dup", aliases=("analyse",)))
    assert "analyse2" not in COMMANDS
    assert set(COMMANDS) >= {"data", "score", "analyze", "run", "report"}


def test_multirun_failure_gives_nonzero_exit(tmp_path):
    # Every job fails (no such results folder): the multirun must not exit 0.
    r = _run("report", "-m", f"results={tmp_path}/nope1,{tmp_path}/nope2", f"output_dir={tmp_path}/out")
    assert r.returncode != 0
    assert "exited with code 2" in r.stderr


def test_analyze_imports_neither_torch_nor_adapters(ts2_dir, tmp_path):
    scores = ts2_dir / "released" / "scores_subset.csv"
    code = ("import sys, ts2.cli; rc = ts2.cli.main(['analyze', 'scores=%s', 'bootstrap=0', 'output_dir=%s']); "
            "sys.exit(3 if {'torch', 'metrics_adapters'} & set(sys.modules) else rc)" % (scores, tmp_path / "a"))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (tmp_path / "a" / "metametrics.csv").is_file()


def test_run_default_end_to_end(tmp_path):
    """`ts2 run` with no metric arguments: the README's main job on the bundled mini set."""
    import pandas as pd

    out = tmp_path / "run"
    r = _run("run", f"output_dir={out}", "bootstrap=20", "progress=false", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"report: {out / 'report.html'}" in r.stdout
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") >= 5  # self-contained: figures embedded
    figs = {p.name for p in (out / "figures").iterdir()}
    assert any(f.startswith("histograms") for f in figs)
    # issue 26, item 6: one real metric with a cost has no frontier to draw, and a control is never
    # "the metric that agrees most": no Pareto figures and no scatter, each said in a sentence
    assert not any(f.startswith("pareto_") or f.startswith("scatter") for f in figs)
    assert "No Pareto figures: geneval_shapes is the only non-control metric with a known cost" in html
    assert "No per-SEG scatter: there is no second non-control metric" in html
    # ... mini is built from what the shapes detector checks, and the page says so up front
    overview = html.split("<h2>Overview</h2>")[1].split("<h2>")[0]
    assert "very shapes, colours and counts that the pixel shapes detector" in overview
    assert "adj. </small>" not in html and "adj. <" not in html.split("<h3>protocol:")[1]
    # the verdict: geneval_shapes against every control, with p-values; its CSVs beside the report
    verdict = html.split("<h2>Verdict</h2>")[1].split("<h2>")[0]
    assert "geneval_shapes: rank_m" in verdict and "above every control" in verdict
    vd = pd.read_csv(out / "verdict.csv")
    assert set(vd.against) == {"random", "shuffled_image", "always_yes"} and set(vd.metric) == {"geneval_shapes"}
    for name in ("ranking.csv", "pairs.csv"):
        assert (out / name).is_file(), name
    # heatmaps chosen by the real metric only (never by a control), named after it
    assert {f.split("_best")[0] for f in figs if "_best_seg" in f} == {"heatmap_geneval_shapes"}
    assert any(f.startswith("heatmap_geneval_shapes_worst") for f in figs)
    # issue 16's must-show: no control on any Pareto frontier; the Runs table shows the run's wall time
    front = pd.read_csv(out / "pareto.csv")
    assert set(front.loc[front.role == "control", "metric"]) == {"random", "shuffled_image", "always_yes"}
    assert not front.loc[front.role == "control", "on_frontier"].any()
    import json

    wall = json.loads((out / "run.json").read_text())["wall_time_s"]
    assert f"<td>{wall:.1f}</td>" in html.split("<h2>Runs</h2>")[1]
    for name in ("table.md", "table.tex", "table.csv", "scores.csv", "run.json", "metametrics.csv", "per_seg.csv"):
        assert (out / name).is_file(), name
    mm = pd.read_csv(out / "metametrics.csv")
    rank = mm[(mm.protocol == "graph") & (mm.meta_metric == "rank") & (mm.subset == "Avg")].set_index("metric")["value"]
    # a real metric orders the synthetic errors; the controls must not
    assert rank["geneval_shapes"] > 0.9
    assert abs(rank["random"]) < 0.15 and abs(rank["shuffled_image"]) < 0.15
    assert rank["always_yes"] == 0.0
