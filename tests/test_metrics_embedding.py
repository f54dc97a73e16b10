"""Embedding metrics on tiny random models: each score equals an independent computation.

The references go through each model's own ``forward`` (which returns the contrastive logits)
with the library's own processors and tokenizers, not through the adapters' code paths.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("open_clip")

import tiny_models as tm  # noqa: E402

from metrics_adapters import ScoreItem, get_metric  # noqa: E402
from metrics_adapters.engine import EngineSettings, score_metric  # noqa: E402

LONG_PROMPT = " ".join(["a small red cube on top of a large wooden table next to a window"] * 8)


@pytest.fixture(scope="module")
def images():
    rng = np.random.default_rng(7)
    return [tm.random_image(rng, size=s) for s in (40, 40, 33, 64, 40, 50, 40, 41, 40, 36)]


def _items(prompts):
    return [ScoreItem(seg_id="s", node="0", file_name=f"f{i}", prompt=p) for i, p in enumerate(prompts)]


PROMPTS10 = [tm.PROMPTS[i % len(tm.PROMPTS)] for i in range(10)]


# -- independent references ----------------------------------------------------------------------------
def ref_hf_clip(path, images, texts, w=1.0):
    from transformers import AutoImageProcessor, AutoTokenizer, CLIPModel

    model = CLIPModel.from_pretrained(path).eval()
    tok, proc = AutoTokenizer.from_pretrained(path), AutoImageProcessor.from_pretrained(path)
    enc = tok(texts, padding=True, truncation=True, max_length=77, return_tensors="pt")
    with torch.no_grad():
        out = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                    pixel_values=proc(images=images, return_tensors="pt")["pixel_values"])
        cos = torch.diagonal(out.logits_per_image / model.logit_scale.exp())
    return cos, w * cos.clamp(min=0)


def ref_open_clip(path, images, texts):
    import open_clip

    model, _, pre = open_clip.create_model_and_transforms(f"local-dir:{path}")
    tok = open_clip.get_tokenizer(f"local-dir:{path}")
    with torch.no_grad():
        img_f, txt_f, _ = model(torch.stack([pre(im) for im in images]), tok(texts))  # normalised features
    cos = (img_f * txt_f).sum(-1)
    return cos, cos.clamp(min=0)


def ref_align(path, images, texts):
    from transformers import AlignModel, AutoImageProcessor, AutoTokenizer

    model = AlignModel.from_pretrained(path).eval()
    tok, proc = AutoTokenizer.from_pretrained(path), AutoImageProcessor.from_pretrained(path)
    enc = tok(texts, padding="max_length", truncation=True, max_length=64, return_tensors="pt")  # AlignProcessor's
    with torch.no_grad():
        out = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                    pixel_values=proc(images=images, return_tensors="pt")["pixel_values"])
        cos = torch.diagonal(out.logits_per_image * model.temperature)
    return cos, cos.clamp(min=0)


def ref_siglip(path, images, texts):
    from transformers import AutoImageProcessor, AutoTokenizer, SiglipModel

    model = SiglipModel.from_pretrained(path).eval()
    tok, proc = AutoTokenizer.from_pretrained(path), AutoImageProcessor.from_pretrained(path)
    enc = tok(texts, padding="max_length", truncation=True, max_length=16, return_tensors="pt")
    with torch.no_grad():
        out = model(input_ids=enc["input_ids"], pixel_values=proc(images=images, return_tensors="pt")["pixel_values"])
    return None, torch.sigmoid(torch.diagonal(out.logits_per_image))


BACKENDS = {
    "clipscore_hf": ("hf_clip", lambda p: {"model": str(p)}, ref_hf_clip),
    "clipscore": ("open_clip", lambda p: {"arch": f"local-dir:{p}"}, ref_open_clip),
    "alignscore": ("hf_align", lambda p: {"model": str(p)}, ref_align),
    "siglip": ("hf_siglip", lambda p: {"model": str(p)}, ref_siglip),
}


_LOADED: dict = {}


def _metric(name, **kw):
    """A loaded metric, reused across tests (loading tokenizers dominates these tests' time)."""
    key = (name, tuple(sorted(kw.items())))
    if key not in _LOADED:
        kind, args, _ = BACKENDS[name]
        m = get_metric(name, **args(tm.tiny(kind)), **kw)
        m.load("cpu")
        _LOADED[key] = m
    return _LOADED[key]


@pytest.mark.parametrize("name", list(BACKENDS))
def test_scores_equal_independent_computation(name, images):
    kind, _, ref = BACKENDS[name]
    m = _metric(name)
    got = np.array(m.score_batch(_items(PROMPTS10), images))
    cos, expected = ref(tm.tiny(kind), images, PROMPTS10)
    np.testing.assert_allclose(got, expected.numpy(), atol=2e-6, rtol=1e-5)
    assert np.ptp(got) > 1e-4  # the scores differ between pairs: not a constant
    if name == "clipscore_hf":
        # eq. 6's clamp is exercised: some pairs have a negative cosine (score 0), others positive
        assert (cos < 0).any() and (cos > 0).any()
        assert np.all(got[(cos < 0).numpy()] == 0.0)


def test_weight_scales_and_template_is_applied(images):
    path = tm.tiny("hf_clip")
    base = np.array(_metric("clipscore_hf").score_batch(_items(PROMPTS10), images))
    scaled = np.array(_metric("clipscore_hf", w=2.5).score_batch(_items(PROMPTS10), images))
    np.testing.assert_allclose(scaled, 2.5 * base, rtol=1e-6, atol=1e-7)
    tmpl = _metric("clipscore_hf", template="A photo depicts {prompt}.")
    got = np.array(tmpl.score_batch(_items(PROMPTS10), images))
    _, expected = ref_hf_clip(path, images, [f"A photo depicts {p}." for p in PROMPTS10])
    np.testing.assert_allclose(got, expected.numpy(), atol=2e-6)
    assert not np.allclose(got, base)


def test_text_embeddings_memo_does_not_change_scores(images):
    m = _metric("clipscore_hf", text_cache_size=1)
    items = _items(PROMPTS10)
    first = m.score_batch(items, images)
    again = [m.score_batch([it], [im])[0] for it, im in zip(items, images, strict=True)]
    np.testing.assert_allclose(first, again, atol=2e-6)


@pytest.mark.parametrize("name,ctx", [("clipscore_hf", 77), ("clipscore", 77), ("siglip", 16), ("alignscore", 64)])
def test_long_prompts_are_truncated_and_counted(name, ctx, images):
    m = _metric(name)
    assert m.context_length() == ctx
    assert m.truncated_prompts([LONG_PROMPT, "a cat"]) == [True, False]
    # the score is the one of the explicitly truncated text, not an error
    got = m.score_batch(_items([LONG_PROMPT]), images[:1])
    assert np.isfinite(got).all()
    if name == "clipscore_hf":
        _, expected = ref_hf_clip(tm.tiny("hf_clip"), images[:1], [LONG_PROMPT])  # tokenizer cut at 77
        np.testing.assert_allclose(got, expected.numpy(), atol=2e-6)


def test_engine_counts_truncated_prompts(tmp_path):
    ds = tm.make_dataset(tmp_path, n_segs=3, nodes=("0", "1"), per_node=2, prompts=[LONG_PROMPT, "a cat", LONG_PROMPT + " x"])
    from metrics_adapters.engine import items_from_table
    from seg_data import load_path

    items = items_from_table(load_path(ds).image_table())
    run = score_metric(get_metric("clipscore_hf", model=str(tm.tiny("hf_clip"))), items,
                       settings=EngineSettings(device="cpu", batch_size=3, num_workers=0, progress=False))
    assert (run.truncated_prompts, run.truncated_items) == (2, 8)
    assert run.n_failed == 0


def test_flops_estimate_by_hand_and_measured():
    """2 x N x tokens (TS2 A.3) on the tiny open_clip model, counted by hand from its config.

    Per transformer layer (width 32, mlp ratio 2): attention 4*32*32 + MLP 2*32*64 = 8192 weights.
    Vision: 2 layers + patch conv 3*8*8*32 + projection 32*16 = 23040 weights over 4*4+1 = 17 tokens.
    Text: 2 layers = 16384 weights over 77 tokens (open_clip always runs the full context).
    """
    from metrics_adapters.flops import measure_flops

    m = _metric("clipscore")
    expected = 2 * 23040 * 17 + 2 * 16384 * 77
    assert m.flops_per_image() == expected
    rng = np.random.default_rng(0)
    measured = measure_flops(lambda: m.score_batch(_items(["a cat"]), [tm.random_image(rng)]))
    assert 0.5 * expected < measured < 1.5 * expected
    # HF CLIP: same layers, no projection inside the vision tower (22528 weights)
    hf = _metric("clipscore_hf")
    assert hf.flops_per_image() == 2 * 22528 * 17 + 2 * 16384 * 77


def test_align_flops_count_conv_layers():
    from metrics_adapters.flops import conv_tower_flops

    m = _metric("alignscore")
    # the EfficientNet tower is priced from its layer shapes; independent check with a 2x input:
    # conv work grows with the number of output positions (4x), so the estimate must too.
    tower = m._model.vision_model
    f1 = conv_tower_flops(tower, torch.zeros(1, 3, 32, 32))
    f2 = conv_tower_flops(tower, torch.zeros(1, 3, 64, 64))
    assert 3.0 < f2 / f1 <= 4.0
    assert m.flops_per_image() > f1


def test_preprocessed_and_pil_inputs_agree(images):
    m = _metric("clipscore")
    items = _items(PROMPTS10[:4])
    a = m.score_batch(items, images[:4])
    b = m.score_batch(items, [m.preprocess(im) for im in images[:4]])
    np.testing.assert_allclose(a, b, atol=1e-7)


def test_scoring_before_load_and_wrong_image_count_fail_clearly(images):
    from metrics_adapters import MetricError

    m = get_metric("clipscore_hf", model=str(tm.tiny("hf_clip")))
    with pytest.raises(MetricError, match="call load"):
        m.score_batch(_items(["x"]), images[:1])
    m.load("cpu")
    with pytest.raises(MetricError, match="expected one image per item"):
        m.score_batch(_items(["x", "y"]), images[:1])


def test_missing_model_gives_clear_error(tmp_path):
    from metrics_adapters.hub import ModelUnavailableError

    missing = tmp_path / "no-such-model"
    m = get_metric("clipscore_hf", model=str(missing))
    # A folder that is not there: one line naming it and the key that points at a local copy.
    with pytest.raises(ModelUnavailableError, match=rf"'{missing}' to be a local folder.*metric\.model=DIR"):
        m.load("cpu")
    missing.mkdir()  # there, but without the model's files: the loader's error, naming the class
    with pytest.raises(RuntimeError, match=f"could not load CLIPModel '{missing}'"):
        get_metric("clipscore_hf", model=str(missing)).load("cpu")


def test_local_weights_change_changes_fingerprint(tmp_path):
    d = tm.build_hf_siglip(tmp_path / "sig")
    before = get_metric("siglip", model=str(d)).fingerprint_hash()
    assert get_metric("siglip", model=str(d)).fingerprint_hash() == before
    tm.build_hf_siglip(d, seed=5)  # new weights under the same path
    import os

    st = (d / "model.safetensors").stat()
    os.utime(d / "model.safetensors", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert get_metric("siglip", model=str(d)).fingerprint_hash() != before
