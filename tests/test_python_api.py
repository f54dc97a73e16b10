"""The Python API (``import ts2``): same configs, cache keys, numbers and files as the command line."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from conftest import REPO

import ts2

N_IMAGES = 60  # images of mini scored in the callable tests (limit=): enough for two batches


@pytest.fixture(scope="module")
def mini():
    return ts2.load_dataset("mini")


def test_import_ts2_loads_no_heavy_package():
    code = ("import sys, ts2; heavy = ['torch', 'transformers', 'open_clip', 'matplotlib', 'hydra', 'pandas']; "
            "print([m for m in heavy if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]"
    assert set(ts2.__all__) >= {"load_dataset", "load_metric", "score", "analyze", "reproduce", "human"}


def test_load_dataset_mini_and_to_frame(mini, tmp_path):
    frame = mini.to_frame()
    assert len(mini) == 30 and len(frame) == sum(len(list(s.iter_images())) for s in mini)
    assert list(frame.columns[:4]) == ["seg_id", "node", "level", "file_name"]
    small = ts2.load_dataset("mini", n_segs=4, cache_dir=str(tmp_path))
    assert len(small) == 4
    # a path loads what ts2 data info path=... loads
    root = small.root
    again = ts2.load_dataset(root)
    assert [s.seg_id for s in again] == [s.seg_id for s in small]
    with pytest.raises(ValueError, match="unknown option 'n_seg' of dataset 'mini'; did you mean 'n_segs'"):
        ts2.load_dataset("mini", n_seg=4)


def _cli_metric(overrides, tmp_path):
    """The metric `ts2 score <overrides>` builds, the way its handler builds it."""
    from omegaconf import open_dict

    from ts2.config_check import compose_config
    from ts2.metric_configs import metrics_from_config as build_metrics

    cfg = compose_config("score", overrides)
    with open_dict(cfg):
        cfg.output_dir = str(tmp_path)
    return build_metrics(cfg)[0]


@pytest.mark.parametrize("name,options,cli", [
    ("geneval_shapes", {}, ["metric=geneval_shapes"]),
    ("clipscore_hf", {"model": "/some/local dir", "w": 2.5},
     ["metric=clipscore_hf", "metric.model='/some/local dir'", "metric.w=2.5"]),
])
def test_load_metric_has_the_cache_key_of_ts2_score(name, options, cli, tmp_path):
    from metrics_adapters.engine import cache_key

    m = ts2.load_metric(name, **options)
    ref = _cli_metric(cli, tmp_path)
    assert type(m) is type(ref)
    assert m.fingerprint() == ref.fingerprint()
    assert cache_key(m) == cache_key(ref)
    if options:
        assert m.fingerprint() != _cli_metric([f"metric={name}"], tmp_path).fingerprint()


def test_load_metric_unknown_name_and_key():
    with pytest.raises(ValueError, match="did you mean 'clipscore'"):
        ts2.load_metric("clipscor")
    with pytest.raises(ValueError, match="did you mean 'metric.model'"):
        ts2.load_metric("clipscore_hf", modle="x")


def test_load_metric_call_equals_ts2_score(mini, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import tiny_models as tm
    from PIL import Image

    from ts2.cli import main

    model = tm.tiny("hf_clip")
    out = tmp_path / "score"
    assert main(["score", "dataset=mini", "metric=clipscore_hf", f"metric.model={model}", "limit=24",
                 "cache=false", "device=cpu", "progress=false", f"output_dir={out}"]) == 0
    cli = pd.read_csv(out / "scores.csv")
    m = ts2.load_metric("clipscore_hf", model=str(model))
    got = m(images=[Image.open(p) for p in cli["image_path"]], prompts=list(cli["prompt"]), device="cpu",
            batch_size=5)
    assert got.shape == (24,)
    np.testing.assert_allclose(got, cli["clipscore_hf"].to_numpy(), atol=1e-6, rtol=0)
    # paths work too, and a second call reuses the loaded model
    again = m(images=list(cli["image_path"][:3]), prompts=list(cli["prompt"][:3]), device="cpu")
    np.testing.assert_allclose(again, got[:3], atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="expected one prompt per image, got 2 images and 1 prompts"):
        m(images=list(cli["image_path"][:2]), prompts=["a"], device="cpu")


def _brightness_counter():
    calls = []

    def brightness(images, prompts):
        calls.append(len(images))
        return [float(np.asarray(im.convert("L"), dtype=float).mean()) / 255 for im in images]

    return brightness, calls


def test_score_callable_is_cached_by_name_and_version(mini, tmp_path):
    fn, calls = _brightness_counter()
    opts = dict(name="bright", limit=N_IMAGES, batch_size=16, progress=False, cache_dir=str(tmp_path / "c"),
                device="cpu")
    first = ts2.score(fn, mini, version="1", **opts)
    assert sum(calls) == N_IMAGES and len(calls) == 4  # batched: 16+16+16+12
    assert list(first.columns) == ["seg_id", "node", "file_name", "image_path", "prompt", "bright"]
    # independently: the mean grey level of each image file
    from PIL import Image

    ref = [np.asarray(Image.open(p).convert("L"), dtype=float).mean() / 255 for p in first["image_path"]]
    np.testing.assert_allclose(first["bright"], ref, rtol=1e-12)
    calls.clear()
    second = ts2.score(fn, mini, version="1", **opts)
    assert calls == [] and second.attrs["run"]["cache_hits"] == second.attrs["run"]["n_pairs"]
    pd.testing.assert_frame_equal(first, second)
    third = ts2.score(fn, mini, version="2", **opts)
    assert sum(calls) == N_IMAGES
    np.testing.assert_allclose(third["bright"], first["bright"])


def test_score_callable_errors(mini, tmp_path):
    fn, _ = _brightness_counter()
    with pytest.raises(ValueError, match="expected name='...' to cache"):
        ts2.score(fn, mini)
    opts = dict(cache=False, limit=20, batch_size=8, progress=False, device="cpu")
    calls = []

    def short(images, prompts):
        calls.append(1)
        return [0.5] * (len(images) - 1)

    with pytest.raises(ValueError, match="short: expected 8 scores for 8 images, got 7"):
        ts2.score(short, mini, **opts)
    assert len(calls) == 1  # a broken function is not called again item by item

    def nan_on_third(images, prompts):
        return [float("nan") if i == 2 else 1.0 for i in range(len(images))]

    with pytest.raises(ValueError, match="expected finite scores, got nan"):
        ts2.score(nan_on_third, mini, name="n", **opts)

    bad_prompt = mini.to_frame()["prompt"].iloc[15]

    def fails_one(images, prompts):
        if bad_prompt in prompts:
            raise RuntimeError("boom")
        return [1.0] * len(images)

    # an exception fails its images only (the engine retries item by item and records the reason);
    # above max_failure_share that is an error
    with pytest.raises(ValueError, match=r"max_failure_share\), got 20 of 20: .*ZeroDivisionError"):
        ts2.score(lambda i, p: [1 / 0], mini, name="z", **opts)
    ok = ts2.score(fails_one, mini, name="f", max_failure_share=1.0, **opts)
    bad = ok["prompt"] == bad_prompt
    assert 0 < bad.sum() < 20
    assert ok.loc[bad, "f"].isna().all() and (ok.loc[~bad, "f"] == 1.0).all()
    assert ok.attrs["run"]["n_failed"] == bad.sum()
    assert "RuntimeError: boom" in ok.attrs["run"]["failures"][0]["reason"]


@pytest.fixture(scope="module")
def score_file(mini, tmp_path_factory):
    """Two synthetic metrics on mini: one that follows the error count, one that is noise."""
    rng = np.random.default_rng(3)
    f = mini.to_frame()[["seg_id", "node", "level", "file_name"]].copy()
    f["good"] = -f["level"].to_numpy(dtype=float) + rng.normal(0, 0.7, len(f))
    f["noise"] = rng.normal(0, 1, len(f))
    path = tmp_path_factory.mktemp("scores") / "scores.csv"
    f.drop(columns="level").to_csv(path, index=False)
    return path


OPTS = {"protocols": ["paper"], "bootstrap": 30, "chance": 5, "permutations": 99, "compare": ["good", "noise"]}


def test_analyze_api_writes_the_files_of_ts2_analyze(score_file, tmp_path):
    from ts2.cli import main

    cli_out, api_out = tmp_path / "cli", tmp_path / "api"
    args = [f"{k}=[{','.join(v)}]" if isinstance(v, list) else f"{k}={v}" for k, v in OPTS.items()]
    assert main(["analyze", f"scores={score_file}", "dataset=mini", *args, f"output_dir={cli_out}"]) == 0
    a = ts2.analyze(score_file, "mini", **OPTS)
    rep = a.to_report(api_out)
    assert rep.html.is_file() and (api_out / "scores.csv").is_file()
    # as ts2 run's report: the SEG explorer beside it, linked, and the synthetic-data caveat of mini
    page = rep.html.read_text()
    assert (api_out / "explorer.html").is_file() and "href='explorer.html'" in page
    assert "This dataset is synthetic" in page
    written = sorted(p.name for p in cli_out.iterdir() if p.is_file() and not p.name.startswith(".")
                     and p.suffix in (".csv", ".md", ".tex", ".json") and p.name != "manifest.json")
    assert {"metametrics.csv", "per_seg.csv", "table.md", "table.tex", "table.csv", "analysis.json",
            "compare.csv", "ranking.csv", "pairs.csv"} <= set(written)
    for name in written:
        assert (api_out / name).read_bytes() == (cli_out / name).read_bytes(), name
    # the DataFrames are those files
    pd.testing.assert_frame_equal(a.metametrics.reset_index(drop=True),
                                  pd.read_csv(cli_out / "metametrics.csv"), check_dtype=False)
    assert json.loads((api_out / "analysis.json").read_text())["bootstrap"] == 30


def test_analysis_object(score_file, mini):
    from analysis.compare import compare_metrics

    frame = pd.read_csv(score_file, dtype={"seg_id": str, "node": str})
    a = ts2.analyze(frame, mini, roles={"noise": "control"}, **OPTS)
    assert dict(a.roles) == {"good": "metric", "noise": "control"}
    mm = a.metametrics
    avg = mm[(mm["meta_metric"] == "rank") & (mm["subset"] == "Avg")].set_index("metric")["value"]
    assert avg["good"] > 0.5 > abs(avg["noise"])
    assert set(a.ranking["metric"]) == {"good", "noise"} and len(a.pairs)
    cmp = a.compare("good", "noise")
    ref = compare_metrics(a.result, "good", "noise", protocol="paper", n_permutations=99, seed=0)
    pd.testing.assert_frame_equal(cmp, ref)
    assert cmp.loc[(cmp["meta_metric"] == "rank") & (cmp["subset"] == "Avg"), "diff"].iloc[0] > 0
    html = a._repr_html_()
    assert "good" in html and "noise" in html and "<small>[" in html and "chance" in html
    assert "<small>control</small>" in html
    from matplotlib.figure import Figure

    for kind, kw in [("histograms", {}), ("heatmap", {"seg_id": "3"}), ("scatter", {}),
                     ("pareto", {"flops": {"good": 1e9, "noise": 1e6}})]:
        assert isinstance(a.plot(kind, **kw), Figure), kind
    with pytest.raises(ValueError, match="expected kind one of"):
        a.plot("pie")
    with pytest.raises(KeyError, match="expected a metric among"):
        a.compare("good", "nope")
    with pytest.raises(ValueError, match=r"expected columns 'seg_id' and 'node'.*missing \['seg_id'\]"):
        ts2.analyze(frame.drop(columns="seg_id"), mini, bootstrap=0)
    with pytest.raises(ValueError, match="did you mean 'bootstrap'"):
        ts2.analyze(frame, mini, bootstrp=0)


def test_score_then_analyze_a_callable_graph_protocol(mini, tmp_path):
    fn, _ = _brightness_counter()
    s = ts2.score(fn, mini, name="bright", version="1", progress=False, cache_dir=str(tmp_path), device="cpu")
    a = ts2.analyze(s, mini, protocol="graph", bootstrap=0, chance=0)
    assert list(a.result.protocols) == ["graph"] and a.metrics == ("bright",)
    assert a.metametrics["ci_low"].isna().all()


def test_human_api_file_and_frame(tmp_path):
    from seg_data.human import make_synthetic_human

    path = make_synthetic_human(tmp_path / "h.csv")
    res = ts2.human(path, tmp_path / "out", bootstrap=0, human_permutations=0, progress=False)
    assert res.results_path == tmp_path / "out" / "human_metametrics.csv" and res.results_path.is_file()
    assert res.table_md.is_file()
    same = ts2.human(pd.read_csv(path), tmp_path / "out2", bootstrap=0, human_permutations=0, progress=False)
    pd.testing.assert_frame_equal(res.results, same.results)
    with pytest.raises(ValueError, match="unknown metric"):
        ts2.human(path, tmp_path / "out3", metrics=["nope"], bootstrap=0, human_permutations=0)


def test_reproduce_api(ts2_dir, tmp_path):
    r = ts2.reproduce(ts2_dir, tmp_path / "rep", bootstrap=0, protocols=["paper"], figures=[])
    d = r["discrepancies"]
    assert set(d["protocol"]) == {"paper"} and d["match"].sum() > 0
    # under the paper's protocol every cell that differs from the print is a known delta subset row
    assert (d["match"] | d["known"].fillna("").str.startswith("delta subset rows")).all()
    assert r["report"].html.is_file()


def test_example_script_runs(tmp_path):
    """examples/validate_my_metric.py end to end (the walk-through of docs/python.md)."""
    pytest.importorskip("matplotlib")
    out = subprocess.run([sys.executable, str(REPO / "examples" / "validate_my_metric.py"), str(tmp_path / "ex")],
                         capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout
    for mm in ("rank", "sep", "delta"):
        for proto in ("paper", "graph"):  # each line says its protocol (issue 46: they looked printed twice)
            assert len(re.findall(rf"(?m)^\[{proto}\] colour_match {mm}_m = -?\d+\.\d \[-?\d+\.\d, -?\d+\.\d\] %, "
                                  r"chance -?\d+\.\d %, chance-adjusted (-?\d+\.\d %|-)$", text)) == 1, (mm, proto)
            assert re.search(rf"(?m)^\[{proto}\] colour_match - geneval_shapes, {mm}_m: [+-]\d+\.\d points", text), mm
    assert (tmp_path / "ex" / "histograms.png").stat().st_size > 1000
    assert (tmp_path / "ex" / "report" / "report.html").is_file()
    assert (tmp_path / "ex" / "report" / "metametrics.csv").is_file()


def test_callable_cache_key_follows_its_source_version_and_bound_arguments(tmp_path, monkeypatch):
    import functools
    import importlib

    from metrics_adapters.callable import CallableMetric

    mod = tmp_path / "user_fn.py"
    mod.write_text("def f(images, prompts):\n    return [0.25 for _ in prompts]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import user_fn

    k1 = CallableMetric(user_fn.f, name="f").fingerprint_hash()
    assert k1 == CallableMetric(user_fn.f, name="f").fingerprint_hash()
    assert k1 != CallableMetric(user_fn.f, name="f", version="2").fingerprint_hash()
    assert k1 != CallableMetric(user_fn.f, name="g").fingerprint_hash()  # with no source found, name+version remain
    mod.write_text("def f(images, prompts):\n    return [0.5 for _ in prompts]\n")
    importlib.reload(user_fn)
    assert CallableMetric(user_fn.f, name="f").fingerprint_hash() != k1

    def g(images, prompts, w=1.0):
        return [w] * len(prompts)

    assert (CallableMetric(functools.partial(g, w=2.0), name="g").fingerprint_hash()
            != CallableMetric(functools.partial(g, w=3.0), name="g").fingerprint_hash())


def test_analysis_verdict_and_explorer(score_file, mini, tmp_path):
    """``.verdict`` is ts2 analyze's verdict.csv as a frame; ``.explore()`` writes the SEG explorer."""
    frame = pd.read_csv(score_file, dtype={"seg_id": str, "node": str})
    a = ts2.analyze(frame, mini, roles={"noise": "control"}, **OPTS)
    v = a.verdict
    row = v[(v["metric"] == "good") & (v["meta_metric"] == "rank") & (v["against"] == "noise")]
    assert len(row) == 1
    assert row["diff"].iloc[0] == pytest.approx(a.result.value("good", "rank") - a.result.value("noise", "rank"))
    assert row["direction"].iloc[0] == "above" and row["p_holm"].iloc[0] < 0.05
    assert set(v["metric"]) == {"good"}  # a control is compared with, never judged
    lines = a.verdict_lines()
    assert len(lines) == 1 and lines[0].startswith("good: rank_m")
    assert a.summary().rstrip().endswith(lines[0])
    out = a.explore(tmp_path / "explorer.html", mini)
    assert out.html.is_file() and out.n_segs == len(list(mini)) and out.n_thumbnails == len(frame)
    assert "noise" in out.html.read_text(encoding="utf-8")
