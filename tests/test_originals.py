"""Each adapter against its original authors' code, on the same tiny random weights (issue 30).

Where a registry package ships the original (``t2v-metrics``, ``hpsv2``, ``image-reward``), the
test runs that package's own code, fetched by the ``original`` fixture (skipped without network),
importing only the modules needed and standing in (shims, named in each test) for what needs
the full model zoo. Elsewhere the test transcribes the original's formula and cites its file and
line. Tolerance: 1e-5 relative in fp32 (plus 2e-7 absolute for cosines, whose random-model values
near 0 carry fp32 rounding of a batched against an unbatched forward). docs/metrics.md's fidelity table reports these results.
"""

from __future__ import annotations

import string
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import originals  # noqa: E402
import qa_tiny  # noqa: E402

from metrics_adapters import ScoreItem  # noqa: E402

PROMPTS = ["a cat", "two red apples on the table", "a photo of a dog", "sunset"]


def _items(prompts):
    return [ScoreItem(seg_id="s", node="0", file_name=f"f{i}.png", prompt=p) for i, p in enumerate(prompts)]


def _save(images, folder):
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, im in enumerate(images):
        paths.append(str(folder / f"{i}.png"))
        im.save(paths[-1])
    return paths


# ---------------------------------------------------------------------------------------------
# VQAScore: t2v_metrics' InstructBLIPModel.forward (t2v_metrics/models/vqascore_models/instructblip_model.py)
# ---------------------------------------------------------------------------------------------

def tiny_t5_tokenizer():
    """A real T5 (SentencePiece unigram) tokenizer over a few words: ``</s>`` ends every encoding,
    as flan-t5's does, which is what t2v_metrics' answer labels ``[yes, </s>]`` rely on."""
    from transformers import T5Tokenizer

    words = ("Question: Does this figure show a cat dog photo of two red apples on the table sunset Please answer "
             "yes Yes or no No").split()
    chars = sorted(set(string.ascii_letters + string.digits + string.punctuation))
    vocab = ([("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)] + [("▁" + w, -2.0) for w in dict.fromkeys(words)]
             + [("▁", -4.0)] + [(c, -6.0) for c in chars])
    return T5Tokenizer(vocab=vocab, extra_ids=0)


def build_t5_instructblip(out, seed=0):
    """InstructBLIP with a tiny ViT at t2v_metrics' 224 px (patch 32), Q-Former and T5 (T5 tokenizer)."""
    from transformers import (
        AutoTokenizer,
        BlipImageProcessor,
        InstructBlipConfig,
        InstructBlipForConditionalGeneration,
        InstructBlipProcessor,
        T5Config,
    )

    tok = tiny_t5_tokenizer()
    qtok = AutoTokenizer.from_pretrained(str(qa_tiny.bert_vocab_dir()))
    # BlipImageProcessor's defaults: bicubic resize to 224 x 224, OpenAI CLIP mean and std (as LAVIS)
    proc = InstructBlipProcessor(image_processor=BlipImageProcessor(size={"height": 224, "width": 224}),
                                 tokenizer=tok, qformer_tokenizer=qtok, num_query_tokens=4)
    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, image_size=224,
                  patch_size=32)
    qformer = dict(vocab_size=len(qtok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                   intermediate_size=64, encoder_hidden_size=32, max_position_embeddings=128,
                   pad_token_id=qtok.pad_token_id)
    text = T5Config(vocab_size=len(tok), d_model=32, d_kv=16, d_ff=64, num_layers=2, num_decoder_layers=2,
                    num_heads=2, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                    decoder_start_token_id=tok.pad_token_id)
    cfg = InstructBlipConfig(vision_config=vision, qformer_config=qformer, text_config=text.to_dict(),
                             num_query_tokens=4, image_token_index=tok.convert_tokens_to_ids("<image>"))
    torch.manual_seed(seed)
    model = InstructBlipForConditionalGeneration(cfg).eval()
    model.save_pretrained(out)
    proc.save_pretrained(out)
    return out


class _LavisShim(torch.nn.Module):
    """The attributes of LAVIS' ``blip2_t5_instruct`` that InstructBLIPModel.forward reads
    (instructblip_model.py:82-137), served by the transformers modules holding the same weights.
    LAVIS' ``ln_vision`` is transformers' ``post_layernorm`` (inside ``last_hidden_state``)."""

    def __init__(self, net, proc):
        super().__init__()
        self.net = net
        self.ln_vision = torch.nn.Identity()
        self.query_tokens = net.query_tokens
        self.t5_proj = net.language_projection
        self.t5_model = net.language_model
        self.tokenizer = proc.qformer_tokenizer
        self.t5_tokenizer = self.t5_output_tokenizer = proc.tokenizer
        self.max_txt_len, self.max_output_txt_len = 128, 256  # blip2_t5_instruct's defaults
        self.Qformer = types.SimpleNamespace(bert=self._qformer)

    def visual_encoder(self, images):
        return self.net.vision_model(pixel_values=images).last_hidden_state

    def _qformer(self, input_ids, attention_mask, query_embeds, encoder_hidden_states, encoder_attention_mask,
                 return_dict=True):
        return self.net.qformer(input_ids=input_ids, attention_mask=attention_mask, query_embeds=query_embeds,
                                encoder_hidden_states=encoder_hidden_states,
                                encoder_attention_mask=encoder_attention_mask, return_dict=return_dict)


@pytest.fixture(scope="module")
def t5_instructblip(tmp_path_factory):
    return build_t5_instructblip(tmp_path_factory.mktemp("t5-instructblip"))


def t2v_instructblip(root, net, proc, tmp, monkeypatch):
    """t2v_metrics' own InstructBLIPModel, its LAVIS loader answering with the shim."""
    monkeypatch.setenv("TORCH_HOME", str(tmp / "torch"))  # its __init__ sets TORCH_HOME; restored after the test
    stubs = {"t2v_metrics.models.vqascore_models.lavis.models":
             originals.stub("lavis.models", load_model=lambda *a, **k: _LavisShim(net, proc))}
    with originals.import_module(root, "t2v_metrics.models.vqascore_models.instructblip_model", stubs) as mod:
        return mod.InstructBLIPModel(model_name="instructblip-flant5-xl", device="cpu", cache_dir=str(tmp / "hf")), mod


@pytest.mark.parametrize("shape", ["square", "non-square"])
def test_vqascore_matches_t2v_metrics_instructblip(shape, original, t5_instructblip, tmp_path, monkeypatch):
    """``VQAScore(vqa=InstructBlipVQA)`` by default = t2v_metrics' InstructBLIPModel.forward with its
    default question and answer (instructblip_model.py:11-12, 64-143) and its image transform
    (:44-50, Resize(224) of the shortest side + CenterCrop(224)), same weights."""
    from transformers import InstructBlipForConditionalGeneration, InstructBlipProcessor

    from metrics_adapters.qa.vqa import InstructBlipVQA
    from metrics_adapters.qa.vqascore import VQAScore

    root = original("t2v-metrics")
    net = InstructBlipForConditionalGeneration.from_pretrained(t5_instructblip).eval()
    proc = InstructBlipProcessor.from_pretrained(t5_instructblip)
    orig, mod = t2v_instructblip(root, net, proc, tmp_path, monkeypatch)
    images = (qa_tiny.noise_images(len(PROMPTS), seed=3, size=64) if shape == "square"
              else _rgb_images([(96, 48), (40, 80), (64, 64), (120, 60)], seed=3))
    paths = _save(images, tmp_path / "img")
    want = orig.forward(paths, PROMPTS).numpy()

    m = VQAScore(vqa=InstructBlipVQA(model=str(t5_instructblip), batch_size=3))
    m.load("cpu")
    assert m.template.format(prompt="{}") == mod.default_question_template and m.answer == mod.default_answer_template
    got = np.array(m.score_batch(_items(PROMPTS), images))
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert len(set(np.round(want, 9))) == len(PROMPTS)  # the prompts get different scores
    # the pixels: t2v_metrics' load_images against the crop step + the processor (PIL rounding apart)
    from metrics_adapters.qa.vqascore import center_crop_224

    theirs = orig.load_images(paths)
    ours = proc.image_processor([center_crop_224(im, m.vqa) for im in images], return_tensors="pt")["pixel_values"]
    assert float((theirs - ours).abs().mean()) < 1e-3 and float((theirs - ours).abs().max()) < 0.05
    squashed = proc.image_processor(images, return_tensors="pt")["pixel_values"]  # image_prep=backend
    assert (float((theirs - squashed).abs().mean()) > 0.1) == (shape == "non-square")
    # the first-token option is not t2v_metrics' score: sqrt(P(yes) P(</s> | yes)) differs from P(yes)
    first = VQAScore(vqa=m.vqa, score="first_token")
    first.load("cpu")
    ratio = np.array(first.score_batch(_items(PROMPTS), images)) / want
    assert np.all(np.abs(ratio - 1) > 1e-3)


# ---------------------------------------------------------------------------------------------
# HPSv2: hpsv2 1.2.0's own eval transform, CLIP model and score (hpsv2/img_score.py)
# ---------------------------------------------------------------------------------------------

HPS_SIZES = [(32, 32), (48, 20), (20, 40), (64, 64), (50, 33)]  # (32, 32): longest side already 32, no pad


@pytest.fixture(scope="module")
def hps_tiny(tmp_path_factory):
    """A tiny open_clip architecture both open_clips build (hpsv2's older CLIPTextCfg has no
    mlp_ratio: 4, the default of both) and an HPS-style checkpoint ``{"state_dict": ...}``."""
    import copy

    import tiny_models as tm
    from open_clip.model import CLIP

    cfg = copy.deepcopy(tm.OPEN_CLIP_TINY)
    del cfg["text_cfg"]["mlp_ratio"]
    d = tm.build_open_clip(tmp_path_factory.mktemp("hps") / "m", seed=0, cfg=cfg)
    torch.manual_seed(7)
    torch.save({"state_dict": CLIP(**cfg).eval().state_dict()}, d / "HPS_v2.1_compressed.pt")
    return d, cfg


def _hps_images():
    from PIL import Image

    rng = np.random.default_rng(11)
    return [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)) for w, h in HPS_SIZES]


def _hpsv2_modules(root):
    """hpsv2's transform.py and model.py, imported alone (its tokenizer module, whose vocabulary
    file the wheel lacks, and factory.py's stray ``from turtle import forward`` stubbed)."""
    stubs = {"turtle": originals.stub("turtle", forward=None),
             "hpsv2.src.open_clip.tokenizer": originals.stub("tokenizer", HFTokenizer=None, tokenize=None,
                                                             SimpleTokenizer=None, decode=None)}
    return originals.import_module(root, "hpsv2.src.open_clip.model", stubs)


def test_hpsv2_matches_the_original_transform_model_and_score(original, hps_tiny):
    """ts2's HPSv2 = hpsv2's ``preprocess_val`` (transform.py:140-157, resize_longest_max=True as
    factory.py:368-375), its CLIP (model.py) with ``output_dict=True`` and img_score.py:77-81's
    ``image_features @ text_features.T`` diagonal, one image at a time as img_score.score does."""
    import open_clip

    from metrics_adapters import get_metric

    root = original("hpsv2")
    d, cfg = hps_tiny
    images = _hps_images()
    with _hpsv2_modules(root) as model_mod:
        import importlib

        transform_mod = importlib.import_module("hpsv2.src.open_clip.transform")
        preprocess_val = transform_mod.image_transform(32, is_train=False, mean=None, std=None,
                                                       resize_longest_max=True)
        net = model_mod.CLIP(**cfg, output_dict=True).eval()
        net.load_state_dict(torch.load(d / "HPS_v2.1_compressed.pt")["state_dict"])  # img_score.py:54-55
        tok = open_clip.get_tokenizer(f"local-dir:{d}")  # hpsv2's get_tokenizer: the same CLIP BPE, context 77
        want, pixels = [], []
        with torch.no_grad():
            for im, p in zip(images, PROMPTS + PROMPTS[:1], strict=True):
                x = preprocess_val(im).unsqueeze(0)
                pixels.append(x[0])
                out = net(x, tok([p]))
                want.append(float(torch.diagonal(out["image_features"] @ out["text_features"].T)[0]))

    m = get_metric("hpsv2", model=str(d), arch=f"local-dir:{d}")
    m.load("cpu")
    for im, ref in zip(images, pixels, strict=True):
        np.testing.assert_allclose(m.preprocess(im).numpy(), ref.numpy(), atol=1e-6)
    got = m.score_batch(_items(PROMPTS + PROMPTS[:1]), images)
    # a batch of 5 against one image at a time: fp32 rounding, ~1e-7 absolute on cosines near 0
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-7)
    # open_clip's own "longest" mode (ts2 before issue 30) resizes and pads the PIL image: other pixels
    _, _, longest = open_clip.create_model_and_transforms(f"local-dir:{d}", image_resize_mode="longest")
    assert float((longest(images[1]) - pixels[1]).abs().max()) > 1e-2
    # HPSv2's precision: fp32 weights (create_model_and_transforms(precision="amp"), img_score.py:23),
    # fp16 only through autocast on CUDA (img_score.py:76), which the engine's precision=auto applies
    m16 = get_metric("hpsv2", model=str(d), arch=f"local-dir:{d}")
    m16.load("cpu", "fp16")
    assert {p.dtype for p in m16._model.parameters()} == {torch.float32}


# ---------------------------------------------------------------------------------------------
# Embedding metrics: transcriptions of the originals (no registry package ships them)
# ---------------------------------------------------------------------------------------------

def _rgb_images(sizes, seed):
    from PIL import Image

    rng = np.random.default_rng(seed)
    return [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)) for w, h in sizes]


EMB_SIZES = [(40, 40), (48, 30), (30, 52), (64, 64)]


def test_clipscore_matches_hessel_get_clip_score():
    """jmhessel/clipscore, clipscore.py: ``CLIPCapDataset(prefix='A photo depicts')`` (``prefix + ' '
    + caption``, ``clip.tokenize(truncate=True)``), ``CLIPImageDataset._transform_test(n_px)`` =
    Resize(n_px, bicubic), CenterCrop(n_px), RGB, ToTensor, Normalize(CLIP mean, std), and
    ``get_clip_score``: ``w * np.clip(np.sum(images * candidates, axis=1), 0, None)`` with w = 2.5
    on sklearn-L2-normalised features. ts2: ``metric=clipscore metric.w=2.5
    metric.template='A photo depicts {prompt}'``."""
    import open_clip
    import tiny_models as tm
    from PIL import Image
    from torchvision.transforms import CenterCrop, Compose, Normalize, Resize, ToTensor

    from metrics_adapters import get_metric

    d = tm.tiny("open_clip")
    n_px = 32  # the tiny model's input size (Hessel's code fixes 224 for ViT-B/32)
    transform = Compose([Resize(n_px, interpolation=Image.BICUBIC), CenterCrop(n_px), lambda im: im.convert("RGB"),
                         ToTensor(), Normalize((0.48145466, 0.4578275, 0.40821073),
                                               (0.26862954, 0.26130258, 0.27577711))])
    model, _, _ = open_clip.create_model_and_transforms(f"local-dir:{d}")
    tokenize = open_clip.get_tokenizer(f"local-dir:{d}")  # CLIP's BPE, context 77, truncating like clip.tokenize
    images = _rgb_images(EMB_SIZES, seed=5)
    with torch.no_grad():
        img = model.eval().encode_image(torch.stack([transform(im) for im in images])).numpy().astype(np.float64)
        txt = model.encode_text(tokenize(["A photo depicts " + p for p in PROMPTS])).numpy().astype(np.float64)
    img = img / np.linalg.norm(img, axis=1, keepdims=True)  # sklearn.preprocessing.normalize(axis=1)
    txt = txt / np.linalg.norm(txt, axis=1, keepdims=True)
    want = 2.5 * np.clip(np.sum(img * txt, axis=1), 0, None)

    m = get_metric("clipscore", arch=f"local-dir:{d}", w=2.5, template="A photo depicts {prompt}")
    m.load("cpu")
    got = np.array(m.score_batch(_items(PROMPTS), images))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-7)
    assert (want > 0).any()


def _ts2_repo_logits(model, processor, images, prompts):
    """T2IScoreScore's own scorer, one pair at a time: src/correlation_scores/run_simscore.py
    ``ScoreMethod.calculate_score`` (and src/T2IMetrics/correlation/base.py): ``processor(text=prompt,
    images=image, return_tensors="pt", padding=True)`` -> ``model(**input).logits_per_image.item()``."""
    out = []
    with torch.no_grad():
        for im, p in zip(images, prompts, strict=True):
            inp = processor(text=p, images=im, return_tensors="pt", padding=True)
            out.append(model(**inp).logits_per_image.item())
    return np.array(out)


@pytest.mark.parametrize("name", ["clipscore_hf", "alignscore"])
def test_clip_and_align_are_the_ts2_repository_logits_unscaled_and_clamped(name):
    """The T2IScoreScore repository's CLIPScore/ALIGNScore are the models' ``logits_per_image``:
    ``exp(logit_scale) * cos`` (CLIP), ``cos / temperature`` (ALIGN). ts2 computes the paper's eq. 6
    (A.1), ``w * max(cos, 0)``; with w = 1 it is the repository's logit divided by that scale and
    clamped at 0: the same order of a SEG's images except that negative cosines tie at 0."""
    import tiny_models as tm
    from transformers import AlignModel, AlignProcessor, CLIPModel, CLIPProcessor

    from metrics_adapters import get_metric

    kind, model_cls, proc_cls = {"clipscore_hf": ("hf_clip", CLIPModel, CLIPProcessor),
                                 "alignscore": ("hf_align", AlignModel, AlignProcessor)}[name]
    d = tm.tiny(kind)
    model, proc = model_cls.from_pretrained(d).eval(), proc_cls.from_pretrained(d)
    images = _rgb_images(EMB_SIZES, seed=6)
    logits = _ts2_repo_logits(model, proc, images, PROMPTS)
    scale = float(model.logit_scale.exp()) if name == "clipscore_hf" else 1.0 / float(model.temperature)
    m = get_metric(name, model=str(d))
    m.load("cpu")
    got = np.array(m.score_batch(_items(PROMPTS), images))
    np.testing.assert_allclose(got, np.clip(logits / scale, 0, None), rtol=1e-5, atol=2e-7)
    assert np.ptp(logits) > 0


def test_siglip_matches_the_model_card_recipe():
    """google/siglip-base-patch16-224 model card: ``processor(text=texts, images=image,
    padding="max_length")``, ``probs = torch.sigmoid(outputs.logits_per_image)``; ts2's SigLIPScore
    is that probability for each (image, prompt) pair. (The T2IScoreScore repository's newer
    src/T2IMetrics/correlation/siglip.py returns the logit with ``padding=True``: no sigmoid, and
    without SigLIP's max-length padding the text embedding changes, since SigLIP has no attention mask.)"""
    import tiny_models as tm
    from transformers import AutoProcessor, SiglipModel

    from metrics_adapters import get_metric

    d = tm.tiny("hf_siglip")
    model, proc = SiglipModel.from_pretrained(d).eval(), AutoProcessor.from_pretrained(d)
    images = _rgb_images(EMB_SIZES, seed=7)
    want = []
    with torch.no_grad():
        for im, p in zip(images, PROMPTS, strict=True):
            # max_length: the real checkpoints' tokenizer length (64) is their text context; the tiny one's is 16
            inp = proc(text=[p], images=im, padding="max_length", return_tensors="pt",
                       max_length=model.config.text_config.max_position_embeddings)
            # the real SiglipTokenizer returns input_ids only (no attention mask); the tiny one is BERT's
            inp = {k: inp[k] for k in ("input_ids", "pixel_values")}
            want.append(float(torch.sigmoid(model(**inp).logits_per_image)[0, 0]))
    m = get_metric("siglip", model=str(d))
    m.load("cpu")
    got = np.array(m.score_batch(_items(PROMPTS), images))
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert np.ptp(got) > 0


# ---------------------------------------------------------------------------------------------
# Judges' parsers: VIEScore's mllm_output_to_dict (TIGER-AI-Lab/VIEScore, viescore/utils.py), transcribed
# ---------------------------------------------------------------------------------------------

def viescore_output_to_dict(input_string):
    """The parsing path of VIEScore's ``mllm_output_to_dict`` (viescore/utils.py, commit a35f13f)
    without its two lenient branches (``fix_json`` re-quoting and ``give_up_parsing``'s random
    guess): the text between two ``||V^=^V||`` delimiters, else from the first ``{`` to the last
    ``}``, else a bare ``[a, b]`` list or a bare 0-10 integer; newlines removed; ``json.loads``;
    ``score`` made a list. ``False`` when nothing parses."""
    import json
    import re

    delimiter = "||V^=^V||"
    if input_string.count(delimiter) == 2:
        start, end = input_string.find(delimiter) + len(delimiter), input_string.rfind(delimiter)
    else:
        start, end = input_string.find("{"), input_string.rfind("}") + 1
        if start == -1 or end == 0:
            start, end = input_string.find("["), input_string.rfind("]") + 1
            if re.match(r"^\[\d+, ?\d+\]$", input_string[start:end]):
                return {"score": json.loads(input_string[start:end])}
            try:
                if 0 <= int(input_string) <= 10:
                    return {"score": [int(input_string)]}
            except ValueError:
                pass
            return False
    try:
        data = json.loads(input_string[start:end].strip().replace("\n", ""))
    except json.JSONDecodeError:
        return False
    if not isinstance(data["score"], list):
        data["score"] = [data["score"]]
    return data


VIESCORE_REPLIES = [
    '||V^=^V||{"score": [7], "reasoning": "the dog is there, the ball is red"}||V^=^V||',
    'Here is my evaluation:\n{\n"score" : [4],\n"reasoning" : "two of the three objects are missing"\n}',
    '```json\n{"score": 9, "reasoning": "all good"}\n```',
    "8",
]


@pytest.mark.parametrize("reply", VIESCORE_REPLIES)
def test_viescore_parser_reads_what_the_original_reads(reply):
    """On VIEScore-format replies ts2's rating is VIEScore's SC score, ``min(score)``
    (viescore/__init__.py: ``SC_score = min(SC_dict['score'])``; one score for text-to-image)."""
    from metrics_adapters.judges.parsing import parse_rating

    want = viescore_output_to_dict(reply)
    assert want is not False
    assert parse_rating(reply, 0, 10).score == float(min(want["score"]))


@pytest.mark.parametrize("reply", ["[6, 0]", "The image gets a 6, I think.", '{"score": [6, 0]}'])
def test_viescore_parser_is_stricter_where_the_original_guesses(reply):
    """Where VIEScore reads two scores (its editing rubric) or, with ``give_up_parsing``, guesses a
    random one, ts2 records a parse failure instead: its rubric asks for one score."""
    from metrics_adapters.judges.parsing import ParseError, parse_rating

    with pytest.raises(ParseError):
        parse_rating(reply, 0, 10)


def llmscore_split(response):
    """LLMScore's reading of its evaluator's reply (YujieLu10/LLMScore,
    llm_evaluator/evaluation_instruction.py, ``generate_score_with_rationale``): blank lines dropped,
    ``overall, error_counting, overall_rationale, error_counting_rationale = response.split("\\n")[:4]``
    (its instruction asks for ``"X1\\nX2\\nZ1\\nZ2"``: rating 1-100, error count 0-9, two rationales)."""
    response = "\n".join(item for item in response.split("\n") if item)
    overall, error_counting, overall_rationale, error_counting_rationale = response.split("\n")[:4]
    return int(overall), int(error_counting)


def test_llmscore_judgement_reads_the_same_numbers_in_ts2s_format():
    """ts2's LLM judge asks for JSON (its own LLMScore-style prompt); given the same verdict, its
    parser reads the numbers LLMScore's line split reads from LLMScore's format. The bare
    ``X1\\nX2`` lines themselves are refused: ts2 does not guess which bare number is which."""
    from metrics_adapters.judges.parsing import ParseError, parse_judgement

    original = "85\n\n2\nThe car is red but the sheep is black.\nOne colour error, counted once."
    overall, errors = llmscore_split(original)
    ours = parse_judgement('{"error_count": 2, "rating": 85, "rationale": "The car is red but the sheep is black."}')
    assert (ours.rating, ours.error_count) == (overall, errors) == (85, 2)
    with pytest.raises(ParseError):
        parse_judgement(original)


def test_llava_image_step_is_t2v_metrics_expand2square(original):
    """t2v_metrics pads a LLaVA image to a square of the processor's mean colour before its
    processor (llava_model.py:214-215, mm_utils.py:128-139 ``expand2square``, run here as is)."""
    from metrics_adapters.qa.vqascore import pad_to_square_mean

    root = original("t2v-metrics")
    backend = types.SimpleNamespace(_proc=types.SimpleNamespace(
        image_processor=types.SimpleNamespace(image_mean=[0.48145466, 0.4578275, 0.40821073])))
    stubs = {"cv2": originals.stub("cv2")}  # imported by mm_utils for video frames only
    with originals.import_module(root, "t2v_metrics.models.vqascore_models.mm_utils", stubs) as mm:
        for im in _rgb_images([(50, 30), (30, 51), (40, 40)], seed=9):
            want = mm.expand2square(im, tuple(int(x * 255) for x in backend._proc.image_processor.image_mean))
            got = pad_to_square_mean(im, backend)
            assert got.size == want.size and np.array_equal(np.asarray(got), np.asarray(want))
        assert got is im  # a square image is left as it is, as the original returns it
