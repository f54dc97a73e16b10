"""Issue 32, item 2: one set of analysis settings (``conf/analysis/default.yaml`` ->
:class:`analysis.settings.AnalysisSettings`) taken by ``ts2 analyze``, ``report``, ``run``,
``reproduce`` and the Python API."""

from __future__ import annotations

import subprocess
import sys
from importlib.resources import files

import numpy as np
import pandas as pd
import pytest
import yaml

import analysis.report.result_dirs
import analysis.reproduction
import analysis.session
import ts2
from analysis.pipeline import analyze
from analysis.settings import AnalysisSettings
from ts2.config_check import ConfigError, compose_config, precheck

CONF = files("conf")


def _cli(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ts2", *args], capture_output=True, text=True, cwd=cwd, timeout=300)


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    """A score table of mini: ``good`` falls with the error level (plus noise), ``noise`` does not."""
    ds = ts2.load_dataset("mini")
    f = ds.to_frame()[["seg_id", "node", "file_name", "level"]].copy()
    rng = np.random.default_rng(3)
    f["good"] = -f["level"].astype(float) + rng.normal(0, 0.7, len(f))
    f["noise"] = rng.normal(0, 1, len(f))
    return f.drop(columns="level")


def test_dataclass_defaults_are_the_config_file():
    shared = yaml.safe_load(CONF.joinpath("analysis", "default.yaml").read_text())
    assert set(shared) == set(AnalysisSettings.keys())  # every setting in the file, nothing else
    assert AnalysisSettings.from_config(shared) == AnalysisSettings()


def test_every_entry_point_gets_the_same_defaults(monkeypatch, table, tmp_path):
    """The four commands' configs and the Python API, with no overrides, build one and the same
    AnalysisSettings, and it is the dataclass's default."""
    from ts2.commands.analyze import settings_from_config

    built = {
        "ts2 analyze": settings_from_config(compose_config("analyze", ["scores=x.csv"])),
        "ts2 report": AnalysisSettings.from_config(compose_config("report", ["results=x"])),
        "ts2 run": AnalysisSettings.from_config(compose_config("run", [])),
        "ts2 reproduce": AnalysisSettings.from_config(compose_config("reproduce", [])),
    }
    # What the Python API hands to the library functions (captured at the call).
    got = {}

    class Stop(Exception):
        pass

    def capture(name):
        def f(*args, **kwargs):
            given = args[2] if len(args) > 2 else kwargs.get("settings")
            got[name] = AnalysisSettings() if given is None else given  # None: the library's defaults
            raise Stop
        return f

    monkeypatch.setattr(analysis.session, "run_analysis", capture("ts2.analyze"))
    monkeypatch.setattr(analysis.report.result_dirs, "build_report", capture("ts2.report"))
    monkeypatch.setattr(analysis.reproduction, "reproduce", capture("ts2.reproduce"))
    for call in (lambda: ts2.analyze(table), lambda: ts2.report(tmp_path, tmp_path / "r"),
                 lambda: ts2.reproduce(tmp_path, tmp_path / "p")):
        with pytest.raises(Stop):
            call()
    built |= got
    assert len(built) == 7
    for where, s in built.items():
        assert s == AnalysisSettings(), where
    # ... and the library functions called without settings use the same (captured at the pipeline)
    seen = {}

    def pipeline(*args, **kwargs):
        seen.update(kwargs)
        raise Stop

    monkeypatch.undo()  # the API captures above are done; keep only the pipeline capture
    monkeypatch.setattr("analysis.pipeline.analyze", pipeline)
    with pytest.raises(Stop):
        analysis.session.run_analysis(table)
    assert seen.pop("progress") is True  # not a setting: the command's progress option
    assert seen.pop("store") is not None  # nor is the analysis store (results are the same without it)
    assert seen == {"settings": AnalysisSettings()}  # passed whole
    assert seen["settings"].chance == 10 and seen["settings"].protocols == ("paper", "graph")
    # the pipeline's own defaults are the settings' (no signature default of its own)
    import inspect

    sig = inspect.signature(analysis.pipeline.analyze)
    assert set(AnalysisSettings.keys()).isdisjoint(sig.parameters)


def test_an_override_reaches_every_entry_point():
    for primary, extra in (("analyze", ["scores=x.csv"]), ("report", ["results=x"]), ("run", []), ("reproduce", [])):
        cfg = precheck(f"ts2 {primary}", primary, [*extra, "ci_method=bca", "chance=7", "bootstrap_scheme=plain"])
        s = AnalysisSettings.from_config(cfg)
        assert (s.ci_method, s.chance, s.bootstrap_scheme) == ("bca", 7, "plain"), primary


def test_bad_values_name_setting_expected_and_given():
    with pytest.raises(ValueError, match=r"confidence: expected a number in \(0, 1\), got 1.5"):
        AnalysisSettings(confidence=1.5)
    with pytest.raises(ValueError, match="chance: expected an integer >= 0, got -1"):
        AnalysisSettings(chance=-1)
    with pytest.raises(ValueError, match="subsets: expected one of auto, dataset, column, ts2, none, got 'x'"):
        AnalysisSettings(subsets="x")
    with pytest.raises(ValueError, match="expected at least one protocol"):
        AnalysisSettings(protocols=[])
    with pytest.raises(ValueError, match="expected the analysis setting 'chance' in the config"):
        AnalysisSettings.from_config({k: v for k, v in yaml.safe_load(
            CONF.joinpath("analysis", "default.yaml").read_text()).items() if k != "chance"})
    with pytest.raises(TypeError, match="expected analysis settings among"):
        AnalysisSettings().updated(bootstrapp=3)
    with pytest.raises(TypeError, match="bootstrapp"):
        analysis.session.run_analysis(pd.DataFrame({"seg_id": ["0"], "node": ["0"], "m": [1.0]}), bootstrapp=3)


def test_a_key_of_another_command_is_refused_with_the_reason():
    with pytest.raises(ConfigError, match="'compare' is a key of ts2 analyze, which ts2 report does not use"):
        precheck("ts2 report", "report", ["results=x", "compare=[a,b]"])
    with pytest.raises(ConfigError, match="'title' is a key of ts2 report"):
        precheck("ts2 reproduce", "reproduce", ["title=x"])


def test_analyze_protocol_group_replaces_the_protocols_list(tmp_path, table):
    scores = tmp_path / "scores.csv"
    table.to_csv(scores, index=False)
    for args, want in (([], ["paper", "graph"]), (["protocol=graph"], ["graph"])):
        out = tmp_path / ("o" + "".join(args).replace("=", "_"))
        r = _cli("analyze", f"scores={scores}", "bootstrap=0", "chance=0", f"output_dir={out}", *args, cwd=tmp_path)
        assert r.returncode == 0, r.stderr[-2000:]
        mm = pd.read_csv(out / "metametrics.csv")
        assert list(dict.fromkeys(mm["protocol"])) == want


def _bca_reference(frame: pd.DataFrame) -> pd.DataFrame:
    """The meta-metrics with BCa intervals, computed straight from the pipeline."""
    res = analyze(frame, dataset=ts2.load_dataset("mini"), bootstrap=20, chance=0, ci_method="bca",
                  protocols=["paper", "graph"])
    return res.metametrics_frame()


def _check_bca(out, ref: pd.DataFrame, metrics) -> None:
    mm = pd.read_csv(out / "metametrics.csv")
    key = ["metric", "protocol", "meta_metric", "subset"]
    got = mm[mm["metric"].isin(metrics)].merge(ref, on=key, suffixes=("", "_ref"))
    assert len(got) == len(ref[ref["metric"].isin(metrics)]) > 0
    np.testing.assert_allclose(got["ci_low"], got["ci_low_ref"], equal_nan=True)
    np.testing.assert_allclose(got["ci_high"], got["ci_high_ref"], equal_nan=True)
    pct = analyze(ref.attrs["frame"], dataset=ts2.load_dataset("mini"), bootstrap=20, chance=0,
                  protocols=["paper", "graph"]).metametrics_frame()
    both = ref.merge(pct, on=key, suffixes=("", "_pct")).dropna(subset=["ci_low", "ci_low_pct"])
    assert not np.allclose(both["ci_low"], both["ci_low_pct"])  # bca is not the percentile interval


def test_report_takes_ci_method_bca(tmp_path, table):
    run = tmp_path / "scored"
    run.mkdir()
    table.to_csv(run / "scores.csv", index=False)  # a score-only folder: the report computes its meta-metrics
    out = tmp_path / "rep"
    r = _cli("report", f"results=[{run}]", "dataset=mini", "ci_method=bca", "bootstrap=20", "chance=0",
             "figures=[]", "explorer=false", f"output_dir={out}", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    ref = _bca_reference(table)
    ref.attrs["frame"] = table
    _check_bca(out, ref, ["good", "noise"])


def test_run_takes_ci_method_bca(tmp_path):
    out = tmp_path / "run"
    r = _cli("run", "ci_method=bca", "bootstrap=20", "chance=0", "progress=false", "figures=[]", "explorer=false",
             f"output_dir={out}", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    scores = pd.read_csv(out / "scores.csv", dtype={"seg_id": str, "node": str})
    metrics = ["geneval_shapes"]
    frame = scores[["seg_id", "node", "file_name", *metrics]]
    ref = _bca_reference(frame)
    ref.attrs["frame"] = frame
    _check_bca(out, ref, metrics)


def test_doctests_of_settings_and_session():
    import doctest

    import analysis.settings

    for mod in (analysis.settings, analysis.session):
        res = doctest.testmod(mod)
        assert res.failed == 0 and res.attempted > 0, mod.__name__


def test_reproduce_uses_chance_and_every_other_setting(monkeypatch, ts2_dir, tmp_path):
    """``ts2 reproduce chance=N`` was accepted and ignored; now every setting reaches the pipeline."""
    seen = {}

    class Stop(Exception):
        pass

    def pipeline(*args, **kwargs):
        seen.update(kwargs, args=args)
        raise Stop

    monkeypatch.setattr("analysis.pipeline.analyze", pipeline)
    with pytest.raises(Stop):
        ts2.reproduce(ts2_dir, tmp_path / "out", chance=7, ci_method="bca", min_segs_ci=3)
    got = seen.get("settings") or next(a for a in seen.get("args", ()) if isinstance(a, AnalysisSettings))
    assert (got.chance, got.ci_method, got.min_segs_ci) == (7, "bca", 3)
