"""Reward models as metrics (PickScore, HPSv2) on tiny random models.

Each score is checked against an independent computation through the model's own ``forward``
and a hand-written preprocessing, and each metric runs end to end through ``ts2 score
dataset=mini``. Random weights test plumbing, never quality.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("open_clip")

import tiny_models as tm  # noqa: E402

from metrics_adapters import ScoreItem, get_metric  # noqa: E402
from ts2.cli import main  # noqa: E402

MINI = ["dataset=mini", "dataset.n_segs=2", "device=cpu", "num_workers=0", "progress=false", "batch_size=4"]


def _items(prompts):
    return [ScoreItem(seg_id="s", node="0", file_name=f"f{i}", prompt=p) for i, p in enumerate(prompts)]


@pytest.fixture(scope="module")
def images():
    rng = np.random.default_rng(11)
    return [tm.random_image(rng, size=s) for s in (40, 32, 56, 40)] + [
        tm.random_image(rng, size=40).resize((48, 24))]  # one landscape image: padding vs cropping matters


PROMPTS = [tm.PROMPTS[i % len(tm.PROMPTS)] for i in range(5)]


# -- PickScore ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pick_dir(tmp_path_factory):
    from transformers import CLIPModel

    d = tm.build_hf_clip(tmp_path_factory.mktemp("pick") / "m", seed=5)
    model = CLIPModel.from_pretrained(d)
    with torch.no_grad():
        model.logit_scale.fill_(math.log(7.0))  # not CLIP's init value: the test sees the scale used
    model.save_pretrained(d)
    return d


def test_pickscore_is_exp_logit_scale_times_cosine(pick_dir, images):
    from transformers import AutoImageProcessor, AutoTokenizer, CLIPModel

    model = CLIPModel.from_pretrained(pick_dir).eval()
    tok, proc = AutoTokenizer.from_pretrained(pick_dir), AutoImageProcessor.from_pretrained(pick_dir)
    # the PickScore repository's inference recipe (github.com/yuvalkirstain/PickScore, README.md
    # "Inference with PickScore": get_*_features, L2-normalise, model.logit_scale.exp() * text @ image.T)
    with torch.no_grad():
        img = model.get_image_features(pixel_values=proc(images=images, return_tensors="pt")["pixel_values"])
        img = getattr(img, "pooler_output", img)
        enc = tok(PROMPTS, padding=True, truncation=True, max_length=77, return_tensors="pt")
        txt = model.get_text_features(**enc)
        txt = getattr(txt, "pooler_output", txt)
        img, txt = img / img.norm(dim=-1, keepdim=True), txt / txt.norm(dim=-1, keepdim=True)
        expected = 7.0 * (img * txt).sum(-1)

    m = get_metric("pickscore", model=str(pick_dir), processor=None)
    m.load("cpu")
    got = np.array(m.score_batch(_items(PROMPTS), images))
    np.testing.assert_allclose(got, expected.numpy(), rtol=1e-5)  # issue 30: 1e-5 relative in fp32
    assert m.score_range == pytest.approx((-7.0, 7.0))
    assert np.abs(got).max() <= 7.0 and np.abs(got).max() > 0.05  # scaled, not a bare cosine
    # the processor's repository is part of the identity of the scores
    other = get_metric("pickscore", model=str(pick_dir), processor=str(pick_dir))
    assert other.fingerprint_hash() != m.fingerprint_hash()
    assert m.fingerprint()["model"] == str(pick_dir) and "revision" in m.fingerprint()


def test_pickscore_processor_comes_from_its_own_folder(pick_dir, images, tmp_path):
    """model= holds only the weights; tokenizer and image processor come from processor= (the LAION repo)."""
    import shutil

    weights = tmp_path / "weights"
    weights.mkdir()
    for f in pick_dir.iterdir():
        if f.name in ("config.json", "model.safetensors"):
            shutil.copy(f, weights / f.name)
    m = get_metric("pickscore", model=str(weights), processor=str(pick_dir))
    m.load("cpu")
    ref = get_metric("pickscore", model=str(pick_dir), processor=None)
    ref.load("cpu")
    np.testing.assert_allclose(m.score_batch(_items(PROMPTS), images), ref.score_batch(_items(PROMPTS), images),
                               rtol=1e-6)
    # processor=None: the tokenizer and image processor from the weights folder, which has none
    with pytest.raises(RuntimeError, match=r"pickscore: could not load Auto(Tokenizer|ImageProcessor) '.*weights'"):
        get_metric("pickscore", model=str(weights), processor=None).load("cpu")


def test_pickscore_mini_end_to_end(pick_dir, tmp_path):
    pytest.importorskip("seg_data.synthetic")
    out = tmp_path / "out"
    assert main(["score", *MINI, f"dataset.cache_dir={tmp_path / 'mini'}", "metric=pickscore",
                 f"metric.model={pick_dir}", f"metric.processor={pick_dir}", f"cache_dir={tmp_path / 'c'}",
                 f"output_dir={out}"]) == 0
    df = pd.read_csv(out / "scores.csv")
    assert df.pickscore.notna().all() and len(df) > 0
    assert df.pickscore.abs().max() <= 7.0 and df.pickscore.nunique() > 1


# -- HPSv2 --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def hps_dir(tmp_path_factory):
    """An open_clip local-dir architecture plus an HPS-style checkpoint with OTHER weights."""
    from open_clip.model import CLIP

    d = tm.build_open_clip(tmp_path_factory.mktemp("hps") / "m", seed=0)
    torch.manual_seed(123)
    tuned = CLIP(**tm.OPEN_CLIP_TINY).eval()
    torch.save({"state_dict": tuned.state_dict()}, d / "HPS_v2.1_compressed.pt")
    return d


def _pad_to_square(im, size):
    """HPSv2's eval transform by hand: to a tensor, its longest side -> size (bicubic, antialiased,
    on the tensor), zero-padded to a centred square, then CLIP's normalisation; nothing is resized or
    padded when the longest side is already ``size`` (tests/test_originals.py checks it against
    hpsv2's own code)."""
    import torchvision.transforms.functional as F

    x = torch.from_numpy(np.asarray(im.convert("RGB"), dtype=np.float32) / 255.0).permute(2, 0, 1)
    h, w = x.shape[1:]
    if max(h, w) != size:
        nh, nw = round(h * size / max(h, w)), round(w * size / max(h, w))
        x = F.resize(x, [nh, nw], F.InterpolationMode.BICUBIC, antialias=True)
        canvas = torch.zeros(3, size, size)
        top, left = (size - nh) // 2, (size - nw) // 2
        canvas[:, top:top + nh, left:left + nw] = x
        x = canvas
    mean = torch.tensor([0.48145466, 0.4578275, 0.40821073])[:, None, None]
    std = torch.tensor([0.26862954, 0.26130258, 0.27577711])[:, None, None]
    return (x - mean) / std


def test_hpsv2_is_cosine_of_the_checkpoint_weights(hps_dir, images):
    import open_clip
    from open_clip.model import CLIP

    model = CLIP(**tm.OPEN_CLIP_TINY).eval()
    model.load_state_dict(torch.load(hps_dir / "HPS_v2.1_compressed.pt")["state_dict"])
    tok = open_clip.get_tokenizer(f"local-dir:{hps_dir}")
    with torch.no_grad():  # the HPSv2 repository's recipe: normalised features, image @ text.T
        img_f, txt_f, _ = model(torch.stack([_pad_to_square(im, 32) for im in images]), tok(PROMPTS))
    expected = (img_f * txt_f).sum(-1).numpy()

    m = get_metric("hpsv2", model=str(hps_dir), arch=f"local-dir:{hps_dir}")
    m.load("cpu")
    got = np.array(m.score_batch(_items(PROMPTS), images))
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=2e-5)
    assert (got < 0).any() or (got > 0).any()
    # cosine, not CLIPScore's max(cos, 0): the tiny random model gives negative ones too
    assert m.score_range == (-1.0, 1.0) and np.all(np.abs(got) <= 1.0)
    # the folder's own (untuned) weights give other scores: the checkpoint was used
    base, _, _ = open_clip.create_model_and_transforms(f"local-dir:{hps_dir}")
    with torch.no_grad():
        b_img, b_txt, _ = base.eval()(torch.stack([_pad_to_square(im, 32) for im in images]), tok(PROMPTS))
    assert not np.allclose((b_img * b_txt).sum(-1).numpy(), got, atol=1e-3)


def test_hpsv2_bad_checkpoint_is_named(hps_dir, tmp_path):
    (tmp_path / "HPS_v2.1_compressed.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(RuntimeError, match="is not an HPSv2 checkpoint"):
        get_metric("hpsv2", model=str(tmp_path), arch=f"local-dir:{hps_dir}").load("cpu")
    with pytest.raises(FileNotFoundError, match="HPS_v2_compressed.pt"):
        get_metric("hpsv2", model=str(hps_dir), filename="HPS_v2_compressed.pt", arch=f"local-dir:{hps_dir}").load("cpu")


def test_hpsv2_mini_end_to_end(hps_dir, tmp_path):
    pytest.importorskip("seg_data.synthetic")
    out = tmp_path / "out"
    assert main(["score", *MINI, f"dataset.cache_dir={tmp_path / 'mini'}", "metric=hpsv2",
                 f"metric.model={hps_dir}", f"metric.arch=local-dir:{hps_dir}", f"cache_dir={tmp_path / 'c'}",
                 f"output_dir={out}"]) == 0
    df = pd.read_csv(out / "scores.csv")
    assert df.hpsv2.notna().all() and df.hpsv2.abs().max() <= 1.0 and df.hpsv2.nunique() > 1


@pytest.mark.parametrize("name", ["pickscore", "hpsv2"])
def test_reward_flops_are_analytic_after_load(name, pick_dir, hps_dir):
    from metrics_adapters.flops import dense_params, transformer_flops

    kw = {"pickscore": {"model": str(pick_dir), "processor": None},
          "hpsv2": {"model": str(hps_dir), "arch": f"local-dir:{hps_dir}"}}[name]
    m = get_metric(name, **kw)
    assert m.flops_per_image() is None
    m.load("cpu")
    net = m._model
    if name == "pickscore":  # 2 x N x tokens: (32/8)^2 patches + CLS, text context 77
        expected = transformer_flops(dense_params(net.vision_model), 17) + transformer_flops(dense_params(net.text_model), 77)
    else:
        text = sum(dense_params(c) for n, c in net.named_children() if n != "visual")
        expected = transformer_flops(dense_params(net.visual), 17) + transformer_flops(text, 77)
    assert m.flops_per_image() == pytest.approx(expected) and expected > 0
