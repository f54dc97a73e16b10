"""``ts2 score`` and ``ts2 cache`` end to end on the CPU (in-process, plus one real SIGKILL)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import tiny_models as tm  # noqa: E402

from ts2.cli import main  # noqa: E402

TESTS_DIR = Path(__file__).parent
FAKE = "+metrics.fake={_target_:tiny_models.PixelMeanMetric,name:fake%s}"


def _score(*args) -> int:
    return main(["score", "device=cpu", "progress=false", *args])


def _run_json(out: Path) -> dict:
    return json.loads((out / "run.json").read_text())


def test_score_mini_end_to_end_on_cpu(tmp_path):
    pytest.importorskip("seg_data.synthetic", reason="the mini dataset (seg_data.synthetic) is not there yet")
    model = tm.tiny("hf_clip")
    common = ["dataset=mini", "dataset.n_segs=3", f"dataset.cache_dir={tmp_path / 'mini'}", "metric=clipscore_hf",
              f"metric.model={model}", f"cache_dir={tmp_path / 'cache'}", "batch_size=8", "measure_flops=true"]
    out = tmp_path / "run1"
    assert _score(*common, f"output_dir={out}") == 0

    from seg_data.synthetic import load_mini

    table = load_mini(n_segs=3, seed=0, cache_dir=tmp_path / "mini").image_table()
    df = pd.read_csv(out / "scores.csv", dtype={"seg_id": str, "node": str})
    assert list(df.columns) == ["seg_id", "node", "file_name", "image_path", "prompt", "clipscore_hf"]
    assert list(df.file_name) == list(table.file_name) and list(df.seg_id) == list(table.seg_id.astype(str))
    assert df.clipscore_hf.between(0, 1).all() and df.clipscore_hf.notna().all()
    # the CLI's numbers are the metric's numbers
    from PIL import Image

    from metrics_adapters import ScoreItem, get_metric

    m = get_metric("clipscore_hf", model=str(model))
    m.load("cpu")
    rows = df.iloc[[0, 5, len(df) - 1]]
    direct = m.score_batch([ScoreItem(r.seg_id, r.node, r.file_name, r.prompt) for r in rows.itertuples()],
                           [Image.open(p).convert("RGB") for p in rows.image_path])
    np.testing.assert_allclose(rows.clipscore_hf, direct, atol=1e-6)

    rec = _run_json(out)
    r = rec["metrics"][0]
    assert (r["name"], r["device"], r["precision"], r["n_items"], r["cache_misses"], r["n_scored"]) == \
        ("clipscore_hf", "cpu", "fp32", len(df), len(df), len(df))
    assert r["model_ids"]["model"] == str(model) and r["fingerprint"]["model"] == str(model)
    assert r["flops_per_image_estimate"] == 2 * 22528 * 17 + 2 * 16384 * 77 and r["flops_per_image_measured"] > 0
    assert r["images_per_s"] > 0 and r["truncated_prompts"] == 0 and r["failures"] == []
    assert rec["config"]["metric"]["model"] == str(model) and rec["packages"]["torch"]
    assert rec["dataset"]["n_images"] == len(df)
    assert (out / "ts2.log").is_file()

    out2 = tmp_path / "run2"  # same settings: everything from the cache, identical file
    assert _score(*common, f"output_dir={out2}") == 0
    r2 = _run_json(out2)["metrics"][0]
    assert (r2["cache_hits"], r2["n_scored"]) == (len(df), 0)
    assert (out2 / "scores.csv").read_text() == (out / "scores.csv").read_text()


def test_two_metrics_in_one_run(tmp_path):
    ds = tm.make_dataset(tmp_path / "d", n_segs=2, nodes=("0", "1"), per_node=2)
    out = tmp_path / "out"
    rc = _score(f"path={ds}", "metric=clipscore_hf", f"metric.model={tm.tiny('hf_clip')}",
                "+metric@metrics.sig=siglip", f"metrics.sig.model={tm.tiny('hf_siglip')}",
                f"output_dir={out}", f"cache_dir={tmp_path / 'c'}")
    assert rc == 0
    df = pd.read_csv(out / "scores.csv")
    assert list(df.columns)[-2:] == ["clipscore_hf", "siglip"] and len(df) == 8
    assert [m["name"] for m in _run_json(out)["metrics"]] == ["clipscore_hf", "siglip"]


def test_failure_share_decides_exit_code(tmp_path):
    ds = tm.make_dataset(tmp_path / "d", n_segs=2, nodes=("0", "1", "2"), per_node=4)  # 24 images
    first = sorted((tmp_path / "d" / "images").rglob("*.png"))[0]
    first.write_bytes(b"corrupt")
    args = [f"path={ds}", "~metric", FAKE % "", f"cache_dir={tmp_path / 'c'}"]
    assert _score(*args, f"output_dir={tmp_path / 'strict'}", "max_failure_share=0.02") == 1  # 1/24 > 2%
    assert _score(*args, f"output_dir={tmp_path / 'lax'}", "max_failure_share=0.05") == 0
    rec = _run_json(tmp_path / "strict")["metrics"][0]
    assert rec["n_failed"] == 1 and "expected a readable image file" in rec["failures"][0]["reason"]
    df = pd.read_csv(tmp_path / "lax" / "scores.csv")
    assert df.fake.isna().sum() == 1 and len(df) == 24


def test_config_errors_exit_2_before_scoring(tmp_path, capfd):
    ds = tm.make_dataset(tmp_path / "d", n_segs=1, nodes=("0",), per_node=1)
    clash = [f"path={ds}", "~metric", FAKE % "", "+metrics.again={_target_:tiny_models.PixelMeanMetric,name:fake}"]
    assert _score(*clash, f"output_dir={tmp_path / 'o'}") == 2
    assert not (tmp_path / "o" / "scores.csv").exists()
    assert _score(f"path={ds}", "~metric", f"output_dir={tmp_path / 'o2'}") == 2  # no metric at all
    import torch

    if not torch.cuda.is_available():
        assert main(["score", f"path={ds}", "~metric", FAKE % "", "device=cuda", f"output_dir={tmp_path / 'o3'}"]) == 2
        assert "expected a CUDA device for device=cuda" in capfd.readouterr().err


def test_handler_preflight_refuses_unwritable_output_dir(tmp_path):
    """Called directly (as `ts2 run` will), the handler checks output_dir before loading anything."""
    from hydra import compose, initialize_config_module

    from ts2.commands.score import main as handler

    (tmp_path / "file").write_text("x")
    with initialize_config_module(config_module="conf", version_base="1.3"):
        cfg = compose("score", overrides=[f"path={tmp_path / 'missing.yaml'}", "metric=clipscore_hf",
                                          f"output_dir={tmp_path / 'file' / 'out'}"])
    assert handler(cfg) == 2  # not a dataset or model error: those would come later


def test_unknown_metric_config_lists_the_options(tmp_path, capfd):
    assert _score("metric=clipscroe", f"output_dir={tmp_path}") != 0
    err = capfd.readouterr().err
    assert "clipscroe" in err and "clipscore_hf" in err and "siglip" in err


def test_list_metrics(tmp_path, capsys):
    assert main(["score", "list_metrics=true", f"output_dir={tmp_path}"]) == 0
    out = capsys.readouterr().out
    for name in ("clipscore", "clipscore_hf", "alignscore", "siglip"):
        assert f"  {name} " in out
    assert "clipscore_b32" in out


def test_cache_info_and_clear_commands(tmp_path, capsys):
    ds = tm.make_dataset(tmp_path / "d", n_segs=2, nodes=("0", "1"), per_node=2)
    cache = f"cache_dir={tmp_path / 'c'}"
    assert _score(f"path={ds}", "~metric", FAKE % "", cache, f"output_dir={tmp_path / 'o1'}") == 0
    assert _score(f"path={ds}", "~metric", FAKE.replace("fake%s", "other,offset:1"), cache,
                  f"output_dir={tmp_path / 'o2'}") == 0
    capsys.readouterr()
    assert main(["cache", "info", cache, "json=true"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["n_scores"] == 16 and sorted((m["name"], m["n_scores"]) for m in info["metrics"]) == \
        [("fake", 8), ("other", 8)]
    assert main(["cache", "info", cache]) == 0
    assert "16 scores under 2 metric key(s)" in capsys.readouterr().out
    assert main(["cache", "clear", cache, "name=other"]) == 0
    assert "deleted 8 cached score(s) (name=other)" in capsys.readouterr().out
    assert main(["cache", "clear", cache]) == 0
    assert "deleted 8 cached score(s) (all metrics)" in capsys.readouterr().out
    assert main(["cache", "info", cache, "json=true"]) == 0
    assert json.loads(capsys.readouterr().out)["n_scores"] == 0


def _cache_rows(path: Path) -> int:
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(path, timeout=5) as db:
            return db.execute("SELECT COUNT(*) FROM scores").fetchone()[0]
    except sqlite3.OperationalError:  # table not created yet
        return 0


def test_sigkill_mid_run_then_restart(tmp_path):
    """A real `kill -9` between batches: the restart recomputes nothing that was committed."""
    ds = tm.make_dataset(tmp_path / "d", n_segs=4, nodes=("0", "1", "2"), per_node=2)  # 24 images
    cache_dir = tmp_path / "c"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS_DIR), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "ts2", "score", f"path={ds}", "~metric", FAKE % ",delay:0.4", "batch_size=2",
           "num_workers=0", "device=cpu", "progress=false", f"cache_dir={cache_dir}", f"output_dir={tmp_path / 'killed'}"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    db = cache_dir / "scores.sqlite"
    deadline = time.monotonic() + 180
    try:
        while _cache_rows(db) < 6 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    done = _cache_rows(db)
    assert 6 <= done < 24
    assert not (tmp_path / "killed" / "scores.csv").exists()

    # restart in-process (no delay: the delay is not a setting, so the cache key is the same)
    assert _score(f"path={ds}", "~metric", FAKE % "", "batch_size=2", f"cache_dir={cache_dir}",
                  f"output_dir={tmp_path / 'resumed'}") == 0
    r = _run_json(tmp_path / "resumed")["metrics"][0]
    assert (r["cache_hits"], r["n_scored"]) == (done, 24 - done)
    assert _score(f"path={ds}", "~metric", FAKE % "", f"cache_dir={tmp_path / 'fresh'}",
                  f"output_dir={tmp_path / 'clean'}") == 0
    resumed = (tmp_path / "resumed" / "scores.csv").read_text()
    assert resumed == (tmp_path / "clean" / "scores.csv").read_text()
    assert len(pd.read_csv(tmp_path / "resumed" / "scores.csv")) == 24


def test_empty_shard_is_a_finished_job(tmp_path):
    """More shards than images: the empty shards exit 0 with a header-only scores.csv, and the
    shards together hold every image once."""
    ds = tm.make_dataset(tmp_path / "d", n_segs=1, nodes=("0", "1"), per_node=1)  # 2 images
    outs = []
    for i in range(5):
        out = tmp_path / f"s{i}"
        assert _score(f"path={ds}", "metric=random", f"shard={i}/5", f"output_dir={out}",
                      f"cache_dir={tmp_path / 'c'}") == 0
        outs.append(pd.read_csv(out / "scores.csv"))
    sizes = sorted(len(o) for o in outs)
    assert sum(sizes) == 2 and sizes[0] == 0  # 2 images in 5 shards: some shards are empty
    from seg_data import load_path

    assert sorted(pd.concat(outs)["file_name"]) == sorted(load_path(ds).image_table()["file_name"])
