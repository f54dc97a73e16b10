"""Issue 43: every Python entry point is a thin function over the library function its command calls, with typed
settings whose defaults are the configs', and none composes a Hydra config (except building a metric by its
config name: a metric config is a Hydra config)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap

import pandas as pd
import pytest
from conftest import REPO, shared_path

import ts2
from analysis.human.settings import HumanSettings
from analysis.report.settings import ExploreSettings, ReportSettings
from metrics_adapters.scoring import ScoreSettings
from ts2.config_check import compose_config

MINI = REPO / "tests" / "data" / "mini_run_scores.csv"
VERDICT_FILES = ("metametrics.csv", "per_seg.csv", "ranking.csv", "pairs.csv", "verdict.csv", "table.csv")


@pytest.mark.parametrize("cls,config,overrides", [
    (ScoreSettings, "score", []),
    (ReportSettings, "report", ["results=x"]),
    (ExploreSettings, "explore", ["results=x"]),
    (HumanSettings, "analyze", ["scores=x"]),
])
def test_the_dataclass_defaults_are_the_configs(cls, config, overrides):
    assert cls.from_mapping(compose_config(config, overrides)) == cls()


def test_settings_from_a_config_follow_its_values():
    cfg = compose_config("score", ["batch_size=8", "limit=5", "shard=1/4", "cache=false", "max_image_side=512",
                                   "num_workers=0"])
    s = ScoreSettings.from_mapping(cfg)
    assert (s.engine.batch_size, s.limit, s.shard, s.cache, s.engine.max_image_side, s.engine.num_workers) == \
        (8, 5, "1/4", False, 512, 0)
    h = HumanSettings.from_mapping(compose_config("analyze", ["scores=x", "human_permutations=50",
                                                              "human_clusters.alpha=0.1", "metrics=[a,b]"]))
    assert (h.permutations, h.alpha, h.metrics) == (50, 0.1, ("a", "b"))
    r = ReportSettings.from_mapping(compose_config("report", ["results=x", "scatter=[a,b]", "heatmaps=0"]))
    assert (r.scatter, r.heatmaps) == (("a", "b"), 0)
    with pytest.raises(ValueError, match="expected score options among"):
        ScoreSettings().updated(batchsize=3)
    with pytest.raises(TypeError, match="expected ReportSettings keys among"):
        ReportSettings().updated(titel="x")


def test_the_api_module_calls_no_command_and_nothing_names_a_meta_metric_by_string():
    api = (REPO / "ts2" / "api.py").read_text()
    assert "ts2.commands" not in api and "_overrides" not in api
    for pkg in ("ts2", "seg_data", "metrics_adapters", "analysis"):
        for p in (REPO / pkg).rglob("*.py"):
            assert '"analysis.metametrics.' not in p.read_text(), p


def _fresh(code: str, cwd) -> dict:
    """Run ``code`` in a new interpreter; it prints one JSON line last."""
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=cwd,
                       timeout=600, env={"PYTHONPATH": f"{REPO}", "PATH": "/usr/bin:/bin",
                                         "TS2_ANALYSIS_STORE_MAX_MB": "0", "HOME": str(cwd)})
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_in_a_fresh_interpreter_analyze_with_settings_equals_the_command_and_loads_no_hydra(tmp_path):
    code = f"""
        import json, sys
        import pandas as pd
        import ts2
        from analysis.settings import AnalysisSettings
        df = pd.read_csv({str(MINI)!r}, dtype={{"seg_id": str, "node": str}})
        a = ts2.analyze(df, "mini", settings=AnalysisSettings(bootstrap=50, chance=4, seed=7), progress=False)
        a.write({str(tmp_path / "py")!r})
        print(json.dumps({{"hydra": sorted(m for m in sys.modules if m.split(".")[0] == "hydra")}}))
    """
    got = _fresh(code, tmp_path)
    assert got["hydra"] == []
    r = subprocess.run([sys.executable, "-m", "ts2", "analyze", f"scores={MINI}", "dataset=mini", "bootstrap=50",
                        "chance=4", "seed=7", "progress=false", f"output_dir={tmp_path / 'cli'}"],
                       capture_output=True, text=True, cwd=REPO, timeout=600,
                       env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TS2_ANALYSIS_STORE_MAX_MB": "0"})
    assert r.returncode == 0, r.stderr
    for f in VERDICT_FILES:
        assert (tmp_path / "py" / f).read_bytes() == (tmp_path / "cli" / f).read_bytes(), f


def test_report_explore_and_human_from_python_load_no_hydra_and_equal_the_commands(tmp_path):
    """``ts2.score`` of a function, ``ts2.report`` and ``ts2.explore`` in a fresh interpreter: no Hydra module
    imported, and the report's tables equal ``ts2 report``'s on the same folder."""
    analysed = tmp_path / "a"
    r = subprocess.run([sys.executable, "-m", "ts2", "analyze", f"scores={MINI}", "dataset=mini", "bootstrap=0",
                        "chance=0", "progress=false", f"output_dir={analysed}"], capture_output=True, text=True,
                       cwd=REPO, timeout=600)
    assert r.returncode == 0, r.stderr
    code = f"""
        import json, sys
        import ts2
        ds = ts2.load_dataset("mini", n_segs=4)
        df = ts2.score(lambda images, prompts: [float(len(p)) for p in prompts], ds, cache=False, name="plen",
                       progress=False, device="cpu")
        rep = ts2.report({str(analysed)!r}, {str(tmp_path / "py")!r}, bootstrap=0, chance=0, explorer=False,
                         figures=[])
        page = ts2.explore({str(analysed)!r}, out={str(tmp_path / "x.html")!r}, images=False, progress=False)
        print(json.dumps({{"hydra": sorted(m for m in sys.modules if m.split(".")[0] == "hydra"), "n": len(df),
                          "page": str(page), "html": str(rep.html)}}))
    """
    got = _fresh(code, tmp_path)
    assert got["hydra"] == [] and got["n"] > 0 and got["page"] == str(tmp_path / "x.html")
    r = subprocess.run([sys.executable, "-m", "ts2", "report", f"results={analysed}", "bootstrap=0", "chance=0",
                        "explorer=false", "figures=[]", f"output_dir={tmp_path / 'cli'}"], capture_output=True,
                       text=True, cwd=REPO, timeout=600)
    assert r.returncode == 0, r.stderr
    for f in ("metametrics.csv", "table.csv", "verdict.csv"):
        assert (tmp_path / "py" / f).read_bytes() == (tmp_path / "cli" / f).read_bytes(), f


def test_human_from_python_equals_the_command(tmp_path):
    anns = shared_path("human", "dsg_tifa160_anns.csv")
    scores = shared_path("human", "tifa_v1_human_annotations_with_scores.json")
    res = ts2.human(str(anns), tmp_path / "py", human_scores=str(scores), bootstrap=20, permutations=50,
                    progress=False)
    r = subprocess.run([sys.executable, "-m", "ts2", "analyze", f"human={anns}", f"human_scores={scores}",
                        "bootstrap=20", "human_permutations=50", "progress=false", f"output_dir={tmp_path / 'cli'}"],
                       capture_output=True, text=True, cwd=REPO, timeout=600)
    assert r.returncode == 0, r.stderr
    assert res.results_path.parent == tmp_path / "py"
    for f in ("human_metametrics.csv", "human_paired_tests.csv", "human_sets.csv"):
        assert (tmp_path / "py" / f).read_bytes() == (tmp_path / "cli" / f).read_bytes(), f
    with pytest.raises(ValueError, match="unknown option 'bootstap'"):
        ts2.human(str(anns), tmp_path / "z", bootstap=3)


def test_reproduce_from_python_equals_the_command(tmp_path):
    rel = shared_path("ts2")
    py = ts2.reproduce(rel, tmp_path / "py", figures=[], bootstrap=0, chance=0)
    r = subprocess.run([sys.executable, "-m", "ts2", "reproduce", f"path={rel}", "figures=[]", "bootstrap=0",
                        "chance=0", f"output_dir={tmp_path / 'cli'}"], capture_output=True, text=True, cwd=REPO,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    assert isinstance(py["discrepancies"], pd.DataFrame)
    for f in ("discrepancies.csv", "table_paper.csv", "table_graph.csv", "metametrics.csv"):
        assert (tmp_path / "py" / f).read_bytes() == (tmp_path / "cli" / f).read_bytes(), f


def test_load_metric_takes_values_as_values(tmp_path):
    """A path with a quote and spaces needs no quoting, a dotted key reaches into the config, a group choice
    is a choice, and an unknown nested key names its close matches."""
    odd = "/models/it's a \"dir\", really"
    m = ts2.load_metric("clipscore_hf", model=odd)
    assert m.fingerprint()["model"] == odd
    t = ts2.load_metric("tifa", vqa="replay", **{"vqa.answers": str(tmp_path / "a b.csv")}, matcher={"batch_size": 8})
    assert type(t.vqa).__name__ == "ReplayVQA" and t.matcher.batch_size == 8
    with pytest.raises(ValueError, match=re.escape("unknown key 'metric.matcher.batchsize'") + ".*batch_size"):
        ts2.load_metric("tifa", matcher={"batchsize": 8})
    with pytest.raises(ValueError, match="expected a config option name for metric.vqa"):
        ts2.load_metric("tifa", vqa="replay,blip")


def test_the_readme_python_snippet_as_written_gives_a_verdict_against_the_control(tmp_path):
    readme = (REPO / "README.md").read_text()
    snippet = re.search(r"## From Python.*?```python\n(.*?)```", readme, re.S).group(1)
    metric = ("import numpy as np\n"
              "def my_metric(images, prompts):\n"
              "    return [float(np.asarray(im.convert('L')).mean()) for im in images]\n")
    r = subprocess.run([sys.executable, "-c", metric + snippet], capture_output=True, text=True, cwd=tmp_path,
                       timeout=900, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                                         "TS2_ANALYSIS_STORE_MAX_MB": "0"})
    assert r.returncode == 0, r.stderr[-3000:]
    verdict = [line for line in r.stdout.splitlines() if line.startswith("[paper] mine:")]
    assert verdict and "control" in verdict[0] and "no reference or control" not in r.stdout
    html = (tmp_path / "outputs" / "mine" / "report.html").read_text()
    assert "random" in html and "control" in html


def test_score_frames_join_on_their_keys_and_keep_each_frames_roles():
    from seg_data.score_frames import join_score_frames

    base = pd.DataFrame({"seg_id": ["0", "0", "1"], "node": ["0", "1a", "0"], "file_name": ["a", "b", "c"],
                         "prompt": ["p", "p", "q"]})
    mine = base.assign(mine=[0.9, 0.2, 0.5])
    ctrl = base.iloc[::-1].assign(random=[0.3, 0.1, 0.7])  # another row order: joined by key, not by position
    ctrl.attrs["roles"] = {"random": "control"}
    joined, roles = join_score_frames([mine, ctrl])
    assert roles == {"random": "control"} and list(joined.columns) == [*base.columns, "mine", "random"]
    assert joined.set_index("file_name").loc["c", "random"] == 0.3 and joined.attrs == {}
    with pytest.raises(ValueError, match=r"expected each metric column in one frame, got \['mine'\]"):
        join_score_frames([mine, mine])
    with pytest.raises(ValueError, match="expected frame 1 to score the same images as the others"):
        join_score_frames([mine, ctrl.iloc[:2]])
    with pytest.raises(ValueError, match="expected every score frame to have seg_id and node"):
        join_score_frames([mine, ctrl.drop(columns="node")])
    bad = ctrl.copy()
    bad.attrs["roles"] = {"random": "baseline"}
    with pytest.raises(ValueError, match="expected roles among"):
        join_score_frames([mine, bad])


def test_a_report_of_a_sweep_on_mini_finds_the_recorded_dataset_and_carries_the_synthetic_caveat(tmp_path):
    runs = tmp_path / "runs"
    r = subprocess.run([sys.executable, "-m", "ts2", "score", "-m", "dataset=mini", "metric=random,geneval_shapes",
                        "progress=false", f"output_dir={runs}"], capture_output=True, text=True, cwd=REPO,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    rep = ts2.report(runs, tmp_path / "py", bootstrap=0, chance=0, figures=[])
    html = rep.html.read_text()
    assert "This dataset is synthetic" in html and "href='explorer.html'" in html
    subsets = set(pd.read_csv(tmp_path / "py" / "metametrics.csv")["subset"])
    assert {"Colour", "Count", "Position"} <= subsets  # the recorded dataset's subsets, not node labels alone


def test_with_nothing_to_compare_the_verdict_says_so_once(tmp_path):
    from analysis.verdict import NOTHING_TO_COMPARE

    df = pd.read_csv(MINI, dtype={"seg_id": str, "node": str})
    alone = ts2.analyze(df[["seg_id", "node", "file_name", "geneval_shapes"]], "mini", bootstrap=0, chance=0,
                        progress=False, store=False)
    assert not alone.has_comparisons and alone.summary().count(NOTHING_TO_COMPARE) == 1
    html = alone.to_report(tmp_path / "alone").html.read_text()
    assert html.count("no reference or control to compare with") == 1 and "colspan=6" not in html
    assert "98.1" in html  # geneval_shapes' paper rank_m, in the one table
    withctl = ts2.analyze(df[["seg_id", "node", "file_name", "geneval_shapes", "random"]], "mini", bootstrap=0,
                          chance=0, progress=False, store=False, roles={"random": "control"})
    assert withctl.has_comparisons and NOTHING_TO_COMPARE not in withctl.summary()
    assert "no reference or control" not in withctl.to_report(tmp_path / "ctl").html.read_text()
