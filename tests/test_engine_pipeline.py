"""The engine's input pipeline (issue 15) and its hostile-input handling (issue 18).

Scores of the fast path (uint8 batches at the model's input size, normalised in the main
process) are compared with a plain one-image loop that uses the model's OWN preprocessing,
written here without the engine. CUDA-only tests skip with the reason where there is no GPU.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

torch = pytest.importorskip("torch")

import tiny_models as tm  # noqa: E402

from metrics_adapters import ScoreItem  # noqa: E402
from metrics_adapters.cache import ScoreCache  # noqa: E402
from metrics_adapters.engine import EngineSettings, check_device, items_from_table, score_metric  # noqa: E402
from metrics_adapters.pipeline import DecodeDataset, collate  # noqa: E402
from seg_data import load_path  # noqa: E402

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU (none on this machine)")
TESTS_DIR = Path(__file__).parent


@pytest.fixture(scope="module")
def mini_items(tmp_path_factory):
    from seg_data.synthetic import load_mini

    ds = load_mini(cache_dir=tmp_path_factory.mktemp("mini"))
    return items_from_table(ds.image_table())


def _open_clip_tiny():
    from metrics_adapters.embedding.clipscore import OpenCLIPScore

    return OpenCLIPScore(arch=f"local-dir:{tm.tiny('open_clip')}", pretrained=None)


def _loop_open_clip(items):
    """A plain one-image loop with open_clip's own model, transform and tokenizer."""
    import open_clip

    model, _, transform = open_clip.create_model_and_transforms(f"local-dir:{tm.tiny('open_clip')}", pretrained=None)
    model.eval()
    tok = open_clip.get_tokenizer(f"local-dir:{tm.tiny('open_clip')}")
    out = []
    with torch.no_grad():
        for it in items:
            img = model.encode_image(transform(Image.open(it.image_path).convert("RGB"))[None])
            txt = model.encode_text(tok([it.prompt]))
            out.append(max(torch.nn.functional.cosine_similarity(img, txt).item(), 0.0))
    return np.array(out)


def _loop_hf(model_dir, cls_name, items, score):
    """A plain one-image loop with a transformers model, its processor and its tokenizer."""
    import transformers

    model = getattr(transformers, cls_name).from_pretrained(model_dir).eval()
    proc = transformers.AutoImageProcessor.from_pretrained(model_dir)
    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    pad = "max_length" if cls_name == "SiglipModel" else "longest"
    out = []
    with torch.no_grad():
        for it in items:
            pix = proc(images=Image.open(it.image_path).convert("RGB"), return_tensors="pt")["pixel_values"]
            img = model.get_image_features(pixel_values=pix)
            img = img if hasattr(img, "shape") else img.pooler_output
            enc = tok([it.prompt], padding=pad, truncation=True, max_length=tok.model_max_length, return_tensors="pt")
            kw = {"input_ids": enc["input_ids"]}
            if cls_name != "SiglipModel":
                kw["attention_mask"] = enc["attention_mask"]
            txt = model.get_text_features(**kw)
            txt = txt if hasattr(txt, "shape") else txt.pooler_output
            cos = torch.nn.functional.cosine_similarity(img, txt)
            out.append(float(score(model, cos)))
    return np.array(out)


def test_cpu_fp32_engine_equals_a_plain_loop_on_mini(mini_items):
    """Issue 15: CPU fp32 scores of the new pipeline agree with a one-image loop to 1e-6."""
    metric = _open_clip_tiny()
    run = score_metric(metric, mini_items, None, EngineSettings(device="cpu", progress=False))
    assert run.precision == "fp32" and run.n_scored == len(mini_items) == 397 and not run.failures
    assert run.load_time_s is not None and run.load_time_s > 0
    ref = _loop_open_clip(mini_items)
    got = np.array([s[0] for s in run.scores])
    np.testing.assert_allclose(got, ref, atol=1e-6, rtol=0)
    assert ref.min() > 0 and np.ptp(ref) > 0.05  # a real spread of values, none clamped


def test_the_fast_path_is_the_one_tested():
    m = _open_clip_tiny()
    m.load("cpu")
    spec = m.pixel_spec()
    assert spec is not None and spec.scale is None and spec.dtype == "float32"
    assert spec.mean == pytest.approx((0.48145466, 0.4578275, 0.40821073))
    im = Image.fromarray(np.random.default_rng(0).integers(0, 256, (50, 70, 3), dtype=np.uint8))
    u8 = spec.to_uint8(im)
    assert u8.dtype == torch.uint8 and tuple(u8.shape) == (3, 32, 32)


@pytest.mark.parametrize("kind,cls_name,metric_cls", [("hf_siglip", "SiglipModel", "SigLIPScore"),
                                                      ("hf_clip", "CLIPModel", "HFCLIPScore")])
def test_transformers_backends_equal_a_plain_loop(mini_items, kind, cls_name, metric_cls):
    from metrics_adapters.embedding.clipscore import HFCLIPScore
    from metrics_adapters.embedding.siglip import SigLIPScore

    items = mini_items[::4]
    model = str(tm.tiny(kind))
    metric = {"SigLIPScore": SigLIPScore, "HFCLIPScore": HFCLIPScore}[metric_cls](model=model)
    run = score_metric(metric, items, None, EngineSettings(device="cpu", progress=False, batch_size=16))
    if cls_name == "SiglipModel":
        def score(m, cos):
            return torch.sigmoid(cos * m.logit_scale.exp() + m.logit_bias)
    else:
        def score(m, cos):
            return cos.clamp(min=0)
    ref = _loop_hf(model, cls_name, items, score)
    np.testing.assert_allclose([s[0] for s in run.scores], ref, atol=1e-6, rtol=0)


def test_workers_collate_one_uint8_tensor_per_batch(tmp_path):
    path = tm.make_dataset(tmp_path / "d", n_segs=1, nodes=("0",), per_node=3, size=40)
    items = items_from_table(load_path(path).image_table())
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"not an image")
    items.append(ScoreItem("s9", "0", "bad.png", "x", str(bad)))
    m = _open_clip_tiny()
    m.load("cpu")
    ds = DecodeDataset(items, m, 4096, m.pixel_spec())
    batch = collate([ds[j] for j in range(len(ds))], raw=True)
    assert batch.indices == [0, 1, 2] and [j for j, _ in batch.errors] == [3]
    assert "expected a readable image" in batch.errors[0][1]
    assert isinstance(batch.pixels, torch.Tensor) and batch.pixels.dtype == torch.uint8
    assert tuple(batch.pixels.shape) == (3, 3, 32, 32) and batch.payloads is None
    # the uint8 pixels are exactly the model's own resize + crop of each image
    ref = torch.stack([m._preprocess(Image.open(it.image_path).convert("RGB")) for it in items[:3]])
    from metrics_adapters.pipeline import to_model_input

    assert torch.equal(to_model_input(batch.pixels, m.pixel_spec(), "cpu", torch.float32), ref)


def test_text_embeddings_once_per_distinct_prompt(mini_items):
    m = _open_clip_tiny()
    seen = []
    m.load("cpu")
    real = m._encode_texts

    def counting(texts):
        seen.extend(texts)
        return real(texts)

    m._encode_texts = counting
    score_metric(m, mini_items, None, EngineSettings(device="cpu", progress=False, batch_size=7), unload=False)
    assert len(seen) == len(set(seen)) == len({it.prompt for it in mini_items}) == 30


# -- issue 18: hostile image paths fail one item each, never hang or abort -------------------------------
def _hostile(tmp_path):
    path = tm.make_dataset(tmp_path / "d", n_segs=2, nodes=("0",), per_node=2)
    items = items_from_table(load_path(path).image_table())
    fifo = tmp_path / "fifo.png"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.png"
    zero.symlink_to("/dev/zero")
    loop_a, loop_b = tmp_path / "loop_a.png", tmp_path / "loop_b.png"
    loop_a.symlink_to(loop_b)
    loop_b.symlink_to(loop_a)
    extra = [ScoreItem("s9", "0", p.name, "a prompt", str(p)) for p in (fifo, zero, loop_a, tmp_path)]
    return items, extra


def _run_with_deadline(fn, seconds=120):
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("r", fn()), daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        pytest.fail(f"the run hung for more than {seconds} s")
    return box["r"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs (POSIX)")
def test_fifo_dev_zero_symlink_loop_and_directory_fail_their_item_only(tmp_path):
    items, extra = _hostile(tmp_path)
    with ScoreCache(tmp_path / "c.sqlite") as cache:
        run = _run_with_deadline(lambda: score_metric(tm.PixelMeanMetric(), items + extra, cache,
                                                      EngineSettings(device="cpu", progress=False)))
    assert run.n_scored == len(items) and all(s is not None for s in run.scores[:len(items)])
    reasons = {f.file_name: f.reason for f in run.failures}
    assert set(reasons) == {"fifo.png", "zero.png", "loop_a.png", tmp_path.name}
    assert "FIFO" in reasons["fifo.png"] and "character device" in reasons["zero.png"]
    assert "symbolic links" in reasons["loop_a.png"] and "directory" in reasons[tmp_path.name]


def test_oversized_file_is_refused_without_reading_it_all(tmp_path):
    from metrics_adapters.images import ImageDecodeError, file_sha256

    p = tmp_path / "big.bin"
    p.write_bytes(b"x" * 1000)
    with pytest.raises(ImageDecodeError, match="at most 999 bytes, got 1000"):
        file_sha256(p, max_bytes=999)
    assert file_sha256(p, max_bytes=1000)[1].st_size == 1000


def test_file_hash_is_reused_by_path_size_and_mtime(tmp_path, monkeypatch):
    import metrics_adapters.cache as cache_mod

    p = tmp_path / "a.png"
    p.write_bytes(b"abc")
    calls = []
    real = cache_mod.file_sha256
    monkeypatch.setattr(cache_mod, "file_sha256", lambda q: calls.append(q) or real(q))
    with ScoreCache(tmp_path / "c.sqlite") as c:
        h1, h2 = c.file_hash(p), c.file_hash(p)
        os.utime(p, ns=(1, 1))  # touched: hashed again
        h3 = c.file_hash(p)
    assert h1 == h2 == h3 and len(calls) == 2


# -- issue 18: the shuffled_image control keys on its donors' content ------------------------------------
def test_shuffled_image_second_image_set_with_same_names_misses_the_cache(tmp_path):
    from metrics_adapters.controls.shuffle import ShuffledImage

    a = tm.make_dataset(tmp_path / "a", n_segs=3, nodes=("0", "1"), per_node=2, seed=1)
    b = tm.make_dataset(tmp_path / "b", n_segs=3, nodes=("0", "1"), per_node=2, seed=2)  # same names, other pixels
    settings = EngineSettings(device="cpu", progress=False)
    runs = []
    with ScoreCache(tmp_path / "c.sqlite") as cache:
        for path in (a, b):
            items = items_from_table(load_path(path).image_table())
            runs.append(score_metric(ShuffledImage(inner=tm.PixelMeanMetric(), dataset=str(path)), items, cache,
                                     settings))
    first, second = runs
    assert [it for it in first.scores] != [it for it in second.scores]
    assert (second.cache_hits, second.n_scored) == (0, 12) and first.cache_key != second.cache_key
    # the second set's scores are its own donors' pixels, not the first set's
    items_b = items_from_table(load_path(b).image_table())
    ctrl = ShuffledImage(inner=tm.PixelMeanMetric(), dataset=str(b))
    donor = ctrl.donor(items_b[0])
    a_px = np.asarray(Image.open(donor[2]).convert("RGB"), dtype=np.float64).mean() / 255
    assert second.scores[0][0] == pytest.approx(a_px + len(items_b[0].prompt) / 1000, abs=1e-12)


# -- issue 18: cache directory faults, clear during a run, invalid devices ---------------------------------
def test_unusable_cache_dir_is_a_clear_error_and_the_command_runs_uncached(tmp_path, capfd):
    from metrics_adapters.sqlite_store import StoreUnavailableError
    from ts2.cli import main

    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreUnavailableError, match="cannot create the folder of the ts2 score cache"):
        ScoreCache.at(tmp_path / "file" / "cache")
    path = tm.make_dataset(tmp_path / "d", n_segs=2, nodes=("0",), per_node=2)
    out = tmp_path / "out"
    rc = main(["score", "device=cpu", "progress=false", f"path={path}", "~metric",
               "+metrics.fake={_target_:tiny_models.PixelMeanMetric,name:fake}", f"cache_dir={tmp_path / 'file' / 'c'}",
               f"output_dir={out}"])
    assert rc == 0 and (out / "scores.csv").is_file()
    assert "running without the score cache" in capfd.readouterr().err


def test_cache_that_refuses_writes_mid_run_warns_and_keeps_scores(tmp_path, caplog):
    path = tm.make_dataset(tmp_path / "d", n_segs=2, nodes=("0",), per_node=2)
    items = items_from_table(load_path(path).image_table())
    cache = ScoreCache(tmp_path / "c.sqlite")
    cache._db.execute("PRAGMA query_only=ON")  # what a read-only or full file answers: writes refused
    run = score_metric(tm.PixelMeanMetric(), items, cache, EngineSettings(device="cpu", progress=False))
    assert run.n_scored == 4 and not run.failures
    assert "going on without caching" in caplog.text
    cache.close()


def test_cache_clear_during_a_run_leaves_no_unnamed_rows(tmp_path):
    a = ScoreCache(tmp_path / "c.sqlite")
    a.register("k1", "clip", {"x": 1})
    a.put_many("k1", [("sha256:1", "p", (0.5,), False)])
    with ScoreCache(tmp_path / "c.sqlite") as other:  # `ts2 cache clear` in another process
        assert other.clear() == 1
    a.put_many("k1", [("sha256:2", "p", (0.7,), False)])  # the run goes on writing
    with ScoreCache(tmp_path / "c.sqlite") as other:
        assert [m.name for m in other.info().metrics] == ["clip"]
        assert other.clear(name="clip") == 1 and other.count() == 0
    # rows orphaned by an older writer are removed by any targeted clear
    raw = sqlite3.connect(tmp_path / "c.sqlite")
    with raw:
        raw.execute("INSERT INTO scores VALUES ('orphan', 'sha256:3', 'p', '[1.0]', 0, 0)")
    raw.close()
    a.register("k2", "other", {})
    assert a.clear(name="other") == 1 and a.count() == 0
    a.close()


@pytest.mark.parametrize("device", ["gpu", "cuda:x", "tpu", ""])
def test_invalid_device_is_refused_with_the_valid_ones(device):
    with pytest.raises(ValueError, match=r"expected device one of cpu, cuda, cuda:N .* or auto"):
        EngineSettings(device=device)
    assert check_device("CUDA:0") == "cuda:0"


def test_invalid_device_is_refused_before_any_work(tmp_path, capfd):
    from ts2.cli import main

    rc = main(["score", "device=gpu", "progress=false", f"output_dir={tmp_path / 'o'}",
               "dataset=mini", f"dataset.cache_dir={tmp_path / 'never'}"])
    err = capfd.readouterr().err
    # refused by the option check of ts2.options (or, called from Python, by EngineSettings)
    assert rc == 2 and "cpu, cuda, cuda:N" in err and "gpu" in err
    assert not (tmp_path / "never").exists()  # refused before the dataset was even generated


# -- fixed costs -------------------------------------------------------------------------------------
def test_fully_cached_score_imports_no_torch_and_loads_no_model(tmp_path):
    path = tm.make_dataset(tmp_path / "d", n_segs=2, nodes=("0", "1"), per_node=2)
    model = tm.tiny("open_clip")
    args = ["score", "device=auto", "progress=false", f"path={path}", f"metric.arch=local-dir:{model}",
            "metric.pretrained=null", f"cache_dir={tmp_path / 'c'}"]
    code = ("import sys, json; sys.path.insert(0, {tests!r}); from ts2.cli import main; "
            "rc = main({args!r} + [sys.argv[1]]); "
            "print(json.dumps({{'rc': rc, 'torch': 'torch' in sys.modules}}))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS_DIR.parent), str(TESTS_DIR)])}
    res = []
    for k in range(2):
        p = subprocess.run([sys.executable, "-c", code.format(tests=str(TESTS_DIR), args=args),
                            f"output_dir={tmp_path / f'o{k}'}"], capture_output=True, text=True, env=env, timeout=600)
        assert p.returncode == 0, p.stderr[-2000:]
        import json

        res.append(json.loads(p.stdout.strip().splitlines()[-1]))
    assert res[0] == {"rc": 0, "torch": True}   # the first run computes
    assert res[1] == {"rc": 0, "torch": False}  # the second finds everything cached
    rec = json.loads((tmp_path / "o1" / "run.json").read_text())["metrics"][0]
    assert (rec["cache_hits"], rec["n_scored"], rec["load_time_s"]) == (8, 0, None)
    rec0 = json.loads((tmp_path / "o0" / "run.json").read_text())["metrics"][0]
    assert rec0["load_time_s"] > 0
    assert (tmp_path / "o0" / "scores.csv").read_text() == (tmp_path / "o1" / "scores.csv").read_text()


# -- CUDA fast paths (skip without a GPU) ------------------------------------------------------------------
@needs_cuda
def test_cuda_scores_match_cpu_within_the_fp16_tolerance(mini_items):
    items = mini_items[:64]
    cpu = score_metric(_open_clip_tiny(), items, None, EngineSettings(device="cpu", progress=False))
    for precision, tol in (("fp32", 1e-5), ("auto", 2e-3)):
        gpu = score_metric(_open_clip_tiny(), items, None,
                           EngineSettings(device="cuda", precision=precision, progress=False))
        np.testing.assert_allclose([s[0] for s in gpu.scores], [s[0] for s in cpu.scores], atol=tol)


@needs_cuda
def test_cuda_batch_size_invariance(mini_items):
    items = mini_items[:64]
    runs = [score_metric(_open_clip_tiny(), items, None,
                         EngineSettings(device="cuda", precision="fp32", batch_size=bs, progress=False))
            for bs in (1, 7, 64)]
    for r in runs[1:]:
        np.testing.assert_allclose([s[0] for s in r.scores], [s[0] for s in runs[0].scores], atol=1e-5)


@needs_cuda
def test_cuda_collation_pins_one_uint8_tensor(mini_items):
    from torch.utils.data import DataLoader

    from metrics_adapters.pipeline import RawCollate

    m = _open_clip_tiny()
    m.load("cuda")
    loader = DataLoader(DecodeDataset(mini_items[:16], m, 4096, m.pixel_spec()), batch_size=8, num_workers=2,
                        collate_fn=RawCollate(True), pin_memory=True)
    batch = next(iter(loader))
    assert batch.pixels.dtype == torch.uint8 and batch.pixels.is_pinned() and tuple(batch.pixels.shape[:2]) == (8, 3)
