"""The scoring engine: order, batching, cache, resume, failure isolation, text-only metrics."""

from __future__ import annotations

import json
import multiprocessing as mp
import shutil
import sqlite3

import numpy as np
import pandas as pd
import pytest
from PIL import Image

torch = pytest.importorskip("torch")

import tiny_models as tm  # noqa: E402

from metrics_adapters import get_metric  # noqa: E402
from metrics_adapters.cache import ScoreCache  # noqa: E402
from metrics_adapters.engine import (  # noqa: E402
    BASE_COLUMNS,
    EngineSettings,
    cache_key,
    effective_precision,
    items_from_table,
    resolve_device,
    score_items,
    score_metric,
    scores_frame,
    write_outputs,
)
from metrics_adapters.pipeline import available_cpus  # noqa: E402
from seg_data import load_path  # noqa: E402

FAST = dict(device="cpu", num_workers=0, progress=False)


@pytest.fixture
def dataset(tmp_path):
    """4 SEGs x 3 nodes x 2 images = 24 items, prompts differ between SEGs."""
    path = tm.make_dataset(tmp_path / "data", n_segs=4, nodes=("0", "1a", "2"), per_node=2)
    return path, items_from_table(load_path(path).image_table())


def _expected_pixmean(item, offset=0.0):
    a = np.asarray(Image.open(item.image_path).convert("RGB"), dtype=np.float64)
    return a.mean() / 255.0 + offset + len(item.prompt) / 1000


def test_scores_in_item_order_equal_reference(dataset, tmp_path):
    path, items = dataset
    with ScoreCache(tmp_path / "c.sqlite") as cache:
        run = score_metric(tm.PixelMeanMetric(), items, cache, EngineSettings(batch_size=5, **FAST))
    assert run.n_items == 24 and run.n_scored == 24 and run.cache_hits == 0 and not run.failures
    np.testing.assert_allclose([s[0] for s in run.scores], [_expected_pixmean(it) for it in items], rtol=1e-12)
    df = scores_frame(items, [run])
    assert list(df.columns) == [*BASE_COLUMNS, "pixmean"]
    assert list(df.file_name) == [it.file_name for it in items]
    assert list(df.seg_id) == ["s0"] * 6 + ["s1"] * 6 + ["s2"] * 6 + ["s3"] * 6


def test_background_workers_give_the_same_scores(dataset, tmp_path):
    _, items = dataset
    a = score_metric(tm.PixelMeanMetric(), items, None, EngineSettings(batch_size=4, **FAST))
    b = score_metric(tm.PixelMeanMetric(), items, None,
                     EngineSettings(batch_size=4, device="cpu", num_workers=2, progress=True))
    assert a.scores == b.scores


def test_batch_size_does_not_change_clip_scores(dataset):
    """1 vs 7 vs 64 pairs per batch (and background workers) give the same CLIPScores."""
    _, items = dataset
    model = str(tm.tiny("hf_clip"))
    runs = {}
    for bs, workers in [(1, 0), (7, 2), (64, 0)]:
        runs[bs] = score_metric(get_metric("clipscore_hf", model=model), items, None,
                                EngineSettings(batch_size=bs, device="cpu", num_workers=workers, progress=False))
    direct = get_metric("clipscore_hf", model=model)
    direct.load("cpu")
    ref = direct.score_batch(items, [Image.open(it.image_path).convert("RGB") for it in items])  # one batch of 24
    for bs, run in runs.items():
        assert run.n_scored == 24 and not run.failures
        np.testing.assert_allclose([s[0] for s in run.scores], ref, atol=1e-6, err_msg=f"batch_size={bs}")
    assert max(ref) > 0  # not all clamped to zero


def test_killed_run_resumes_from_cache(dataset, tmp_path):
    _, items = dataset
    settings = EngineSettings(batch_size=4, **FAST)
    clean = score_metric(tm.PixelMeanMetric(), items, ScoreCache(tmp_path / "clean.sqlite"), settings)

    cache = ScoreCache(tmp_path / "c.sqlite")
    dying = tm.PixelMeanMetric(kill_after=3)
    with pytest.raises(tm.SimulatedKill):
        score_metric(dying, items, cache, settings)
    assert cache.count() == 12  # three finished batches were committed before the "kill"
    done = {f for b in dying.batches for f in b}

    again = tm.PixelMeanMetric()
    run = score_metric(again, items, cache, settings)
    assert (run.cache_hits, run.cache_misses, run.n_scored) == (12, 12, 12)
    recomputed = {f for b in again.batches for f in b}
    assert not (recomputed & done)  # nothing that finished is computed again
    assert run.scores == clean.scores
    df = scores_frame(items, [run])
    assert len(df) == 24 and not df.duplicated(["seg_id", "node", "file_name"]).any()
    # a third run computes nothing and does not even load the metric
    third = tm.PixelMeanMetric()
    run3 = score_metric(third, items, cache, settings)
    assert (run3.cache_hits, run3.n_scored, third.loads, third.batches) == (24, 0, 0, [])


def _killed_after(metric, n_batches):
    """``metric`` whose score_batch dies on call ``n_batches + 1``; same class, so same fingerprint."""
    real = metric.score_batch
    calls = [0]

    def score_batch(items, images):
        if calls[0] >= n_batches:
            raise tm.SimulatedKill("kill")
        calls[0] += 1
        return real(items, images)

    metric.score_batch = score_batch
    return metric


def test_killed_clip_run_restarted_gives_same_scores_csv(dataset, tmp_path):
    _, items = dataset
    model = str(tm.tiny("hf_clip"))
    settings = EngineSettings(batch_size=5, **FAST)
    clean = score_metric(get_metric("clipscore_hf", model=model), items, None, settings)
    write_outputs(tmp_path / "clean", items, [clean])

    cache = ScoreCache(tmp_path / "c.sqlite")
    with pytest.raises(tm.SimulatedKill):
        score_metric(_killed_after(get_metric("clipscore_hf", model=model), 2), items, cache, settings)
    assert cache.count() == 10
    run = score_metric(get_metric("clipscore_hf", model=model), items, cache, settings)
    assert (run.cache_hits, run.n_scored) == (10, 14)
    write_outputs(tmp_path / "resumed", items, [run])
    a, b = (pd.read_csv(tmp_path / d / "scores.csv") for d in ("clean", "resumed"))
    pd.testing.assert_frame_equal(a[list(BASE_COLUMNS)], b[list(BASE_COLUMNS)])
    np.testing.assert_allclose(a.clipscore_hf, b.clipscore_hf, atol=1e-6)
    assert len(b) == 24 and not b.duplicated(["seg_id", "node", "file_name"]).any()


def test_changed_setting_misses_the_cache(dataset, tmp_path):
    _, items = dataset
    settings = EngineSettings(batch_size=8, **FAST)
    with ScoreCache(tmp_path / "c.sqlite") as cache:
        first = score_metric(tm.PixelMeanMetric(offset=0.0), items, cache, settings)
        changed = score_metric(tm.PixelMeanMetric(offset=0.5), items, cache, settings)
        assert (changed.cache_hits, changed.n_scored) == (0, 24)
        np.testing.assert_allclose(np.array(changed.scores) - np.array(first.scores), 0.5)
        back = score_metric(tm.PixelMeanMetric(offset=0.0), items, cache, settings)
        assert (back.cache_hits, back.n_scored) == (24, 0) and back.scores == first.scores
        renamed = score_metric(tm.PixelMeanMetric(name="other_col"), items, cache, settings)
        assert renamed.cache_hits == 24  # the column name is not a setting
        resized = score_metric(tm.PixelMeanMetric(), items, cache,
                               EngineSettings(batch_size=8, max_image_side=16, **FAST))
        assert resized.cache_hits == 0  # the decode policy changes pixels, hence scores
        # a real model: changing w or the template misses too
        model = str(tm.tiny("hf_clip"))
        score_metric(get_metric("clipscore_hf", model=model), items[:6], cache, settings)
        assert score_metric(get_metric("clipscore_hf", model=model), items[:6], cache, settings).cache_hits == 6
        assert score_metric(get_metric("clipscore_hf", model=model, w=2.5), items[:6], cache, settings).cache_hits == 0
        assert score_metric(get_metric("clipscore_hf", model=model, template="a photo of {prompt}"), items[:6],
                            cache, settings).cache_hits == 0


def test_cache_key_covers_precision_and_decode():
    m = tm.PixelMeanMetric()
    assert cache_key(m, "fp32", 4096) != cache_key(m, "fp16", 4096)
    assert cache_key(m, "fp32", 4096) != cache_key(m, "fp32", 1024)
    t = tm.PromptStatsMetric()
    assert cache_key(t, "fp32", 4096) == cache_key(t, "fp32", 1024)  # never decodes images


def test_corrupt_and_missing_images_are_reported_and_skipped(dataset, tmp_path):
    path, items = dataset
    corrupt, missing = items[3], items[10]
    open(corrupt.image_path, "wb").write(b"\x89PNG\r\n\x1a\n garbage")
    shutil.move(missing.image_path, tmp_path / "moved.png")
    cache = ScoreCache(tmp_path / "c.sqlite")
    run = score_metric(tm.PixelMeanMetric(), items, cache, EngineSettings(batch_size=4, num_workers=2, device="cpu",
                                                                          progress=False))
    assert run.n_scored == 22 and run.n_failed == 2
    reasons = {f.file_name: f.reason for f in run.failures}
    assert "expected a readable image file" in reasons[corrupt.file_name] and corrupt.image_path in reasons[corrupt.file_name]
    assert reasons[missing.file_name].startswith("missing image file")
    assert run.scores[3] is None and run.scores[10] is None
    np.testing.assert_allclose(run.scores[4][0], _expected_pixmean(items[4]))
    csv, js = write_outputs(tmp_path / "out", items, [run])
    df = pd.read_csv(csv)
    assert df.pixmean.isna().tolist() == [i in (3, 10) for i in range(24)]
    rec = json.loads(js.read_text())["metrics"][0]
    assert rec["n_failed"] == 2 and {f["file_name"] for f in rec["failures"]} == set(reasons)
    # failures are not cached: fixed files are scored on the next run, finished ones are hits
    shutil.move(tmp_path / "moved.png", missing.image_path)
    again = score_metric(tm.PixelMeanMetric(), items, cache, EngineSettings(batch_size=4, **FAST))
    assert (again.cache_hits, again.n_scored, again.n_failed) == (22, 1, 1)


def test_metric_errors_fail_only_their_item(dataset):
    _, items = dataset
    bad, nan = items[5].file_name, items[6].file_name
    m = tm.PixelMeanMetric(fail_on={bad}, nan_on={nan})
    run = score_metric(m, items, None, EngineSettings(batch_size=8, **FAST))
    reasons = {f.file_name: f.reason for f in run.failures}
    assert set(reasons) == {bad, nan}
    assert reasons[bad] == f"metric error: MetricError: cannot score {bad}"
    assert "non-finite" in reasons[nan]
    assert sum(s is not None for s in run.scores) == 22
    # the failing batch (items 0-7) was retried item by item; the other two ran whole
    assert [len(b) for b in m.batches] == [8] + [1] * 8 + [8, 8]


def test_text_only_metric_runs_without_image_files(dataset, tmp_path):
    path, items = dataset
    shutil.rmtree(path.parent / "images")  # no image file left
    m = tm.PromptStatsMetric()
    with ScoreCache(tmp_path / "c.sqlite") as cache:
        run = score_metric(m, items, cache, EngineSettings(batch_size=10, num_workers=2, device="cpu", progress=False))
        keys = [r[0] for r in sqlite3.connect(cache.path).execute("SELECT image_key FROM scores")]
    assert run.n_failed == 0 and run.columns == ("pstats_chars", "pstats_words")
    assert all(x is None for x in m.seen_images)  # images=None, never decoded
    assert run.scores[0] == (float(len(items[0].prompt)), float(len(items[0].prompt.split())))
    assert sorted(keys) == sorted(f"name:{it.file_name}" for it in items)  # keyed by file_name, not content
    df = scores_frame(items, [run])
    assert list(df.columns)[-2:] == ["pstats_chars", "pstats_words"]


def test_identical_pairs_scored_once(tmp_path):
    path = tm.make_dataset(tmp_path, n_segs=2, nodes=("0", "1"), per_node=2)
    items = items_from_table(load_path(path).image_table())
    shutil.copy(items[0].image_path, items[1].image_path)  # same bytes, same prompt
    m = tm.PixelMeanMetric()
    run = score_metric(m, items, None, EngineSettings(batch_size=100, **FAST))
    assert run.n_pairs == 7 and run.n_scored == 7 and sum(len(b) for b in m.batches) == 7
    assert run.scores[0] == run.scores[1]


def test_metric_that_cannot_load_fails_all_items_and_does_not_raise(dataset, tmp_path):
    _, items = dataset
    (tmp_path / "nope").mkdir()  # a folder without model files: from_pretrained fails
    run = score_metric(get_metric("clipscore_hf", model=str(tmp_path / "nope")), items[:4], None,
                       EngineSettings(**FAST))
    assert run.n_failed == 4 and run.load_error and "could not load CLIPModel" in run.load_error
    assert all(f.reason.startswith("metric failed to load") for f in run.failures)


def test_model_loaded_on_first_use_that_cannot_load_stops_the_metric_once(dataset, caplog):
    # A model a metric loads lazily (the QA answer matcher) that is unavailable: one error, every
    # item failed with it, and no retry per batch or item (issue 28).
    from metrics_adapters.hub import ModelUnavailableError

    _, items = dataset

    class Lazy(tm.PixelMeanMetric):
        def score_batch(self, items, images):
            self.batches.append([it.file_name for it in items])
            raise ModelUnavailableError("model 'x' is not here: point metric.matcher.model=DIR at a local copy")

    m = Lazy()
    with caplog.at_level("WARNING"):
        run = score_metric(m, items, None, EngineSettings(batch_size=8, **FAST))
    assert len(m.batches) == 1  # the first batch only, not retried item by item, no later batch
    assert run.n_failed == len(items) == 24
    assert run.load_error == "ModelUnavailableError: model 'x' is not here: point metric.matcher.model=DIR at a local copy"
    assert {f.reason for f in run.failures} == {f"metric failed to load: {run.load_error}"}
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert errors == [f"{m.name}: could not load the metric: {run.load_error}"]
    assert not any("retrying item by item" in r.getMessage() for r in caplog.records)


def test_measure_flops_and_estimate_reach_the_run(dataset, tmp_path):
    _, items = dataset
    with ScoreCache(tmp_path / "c.sqlite") as cache:
        s = EngineSettings(batch_size=8, measure_flops=True, **FAST)
        run = score_metric(get_metric("clipscore", arch=f"local-dir:{tm.tiny('open_clip')}"), items[:6], cache, s)
        assert run.flops_per_image_estimate == 2 * 23040 * 17 + 2 * 16384 * 77
        assert 0.5 < run.flops_per_image_measured / run.flops_per_image_estimate < 1.5
        # fully cached: the estimate comes back from the cache without loading the model
        cached = score_metric(get_metric("clipscore", arch=f"local-dir:{tm.tiny('open_clip')}"), items[:6], cache,
                              EngineSettings(batch_size=8, **FAST))
        assert cached.n_scored == 0 and cached.flops_per_image_estimate == run.flops_per_image_estimate


def _writer(path, start, n):
    c = ScoreCache(path, timeout=30)
    for i in range(start, start + n):
        c.put_many("k", [(f"sha256:{i}", "p", [float(i)], False)])  # one transaction per row
    c.close()


def test_two_processes_share_one_cache(tmp_path):
    path = tmp_path / "shared.sqlite"
    ScoreCache(path).close()
    ctx = mp.get_context("fork")  # no open connection is inherited: the parent's is closed above
    procs = [ctx.Process(target=_writer, args=(path, k * 300, 300)) for k in range(2)]
    for p in procs:
        p.start()
    reader = ScoreCache(path)
    seen = [reader.count() for _ in range(20)]  # reads while the writers write
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert reader.count() == 600 and seen == sorted(seen)
    got = reader.get_many("k", [("sha256:17", "p"), ("sha256:450", "p"), ("sha256:9999", "p")])
    assert got == {("sha256:17", "p"): ((17.0,), False), ("sha256:450", "p"): ((450.0,), False)}
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_cache_info_and_clear(dataset, tmp_path):
    _, items = dataset
    with ScoreCache(tmp_path / "c.sqlite") as cache:
        score_metric(tm.PixelMeanMetric(name="a"), items, cache, EngineSettings(**FAST))
        score_metric(tm.PixelMeanMetric(name="b", offset=1), items[:5], cache, EngineSettings(**FAST))
        info = cache.info()
        assert info.n_scores == 29 and {m.name: m.n_scores for m in info.metrics} == {"a": 24, "b": 5}
        assert info.n_file_hashes == 24 and info.size_bytes > 0
        assert cache.clear(name="b") == 5 and cache.count() == 24
        assert cache.clear() == 24 and cache.count() == 0 and cache.info().metrics == ()


def test_corrupt_cache_file_gives_clear_error(tmp_path):
    p = tmp_path / "scores.sqlite"
    p.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(RuntimeError, match="expected a ts2 score cache"):
        ScoreCache(p)


def test_score_items_rejects_clashing_columns(dataset):
    _, items = dataset
    with pytest.raises(ValueError, match="expected distinct score column names"):
        score_items([tm.PixelMeanMetric(name="x"), tm.PixelMeanMetric(name="x", offset=1)], items)
    with pytest.raises(ValueError, match="expected score column names other than the reserved .*got 'prompt'"):
        score_items([tm.PixelMeanMetric(name="prompt")], items)


def test_device_and_precision_resolution(caplog):
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="expected a CUDA device for device=cuda"):
            resolve_device("cuda")
    assert effective_precision("cpu", "fp16") == "fp32" and "only on CUDA" in caplog.text
    assert effective_precision("cuda", "bf16") == "bf16"
    with pytest.raises(ValueError, match="expected precision"):
        EngineSettings(precision="fp8")
    with pytest.raises(ValueError, match="batch_size"):
        EngineSettings(batch_size=0)
    assert EngineSettings().workers_for("cpu") == (1 if available_cpus() >= 2 else 0)
    assert 1 <= EngineSettings().workers_for("cuda") <= 16
    assert EngineSettings(num_workers=3).workers_for("cpu") == 3
    with pytest.raises(ValueError, match="num_workers"):
        EngineSettings(num_workers=-1)
    with pytest.raises(ValueError, match="num_workers"):
        EngineSettings(num_workers="many")


def test_preflight_rejects_unwritable_output_dir(tmp_path):
    from ts2.common import check_output_dir  # the one output-folder check (the engine's copy is gone)

    (tmp_path / "file").write_text("x")
    with pytest.raises(OSError, match="expected a writable output_dir"):
        check_output_dir(tmp_path / "file" / "out")
    assert check_output_dir(tmp_path / "a" / "b").is_dir()
