"""VQAScore: P("Yes") from the first answer token's logits, on tiny random VQA models.

Three independent checks: a stubbed output layer whose logits are set by hand gives the exact
probability computed here; with random weights the score equals the softmax of the first step
of the model's own ``generate`` (which finds the answer position itself, for padded batches);
and ``ts2 score dataset=mini metric=vqascore`` runs end to end.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import qa_tiny  # noqa: E402

from metrics_adapters import ScoreItem, get_metric  # noqa: E402
from metrics_adapters.qa.vqa import ChatVQA, InstructBlipVQA, VQARequest  # noqa: E402
from metrics_adapters.qa.vqascore import (  # noqa: E402
    VQAScore,
    _tokenizer_of,
    yes_spellings,
    yes_token_ids,
)
from ts2.cli import main  # noqa: E402

PROMPTS = ["a cat", "two red apples on a long wooden kitchen table near the window", "a dog", "sunset"]


KINDS = ["llava", "instructblip", "fuyu"]


def _fuyu():
    """The Fuyu backend and its tiny model, once the chat-model layer's FuyuVQA is there."""
    try:
        from test_vqa_backends import build_tiny_fuyu

        from metrics_adapters.qa.vqa_generative import FuyuVQA
    except ImportError:
        pytest.skip("no Fuyu VQA backend in this tree yet (metrics_adapters.qa.vqa_generative)")
    return FuyuVQA, build_tiny_fuyu


class _Dirs(dict):
    def __init__(self, root):
        super().__init__()
        self.root = root

    def __missing__(self, kind):
        build = {"llava": qa_tiny.build_tiny_llava, "instructblip": qa_tiny.build_tiny_instructblip,
                 "fuyu": lambda d: _fuyu()[1](d)}[kind]
        self[kind] = build(self.root / kind)
        return self[kind]


@pytest.fixture(scope="module")
def tiny_dirs(tmp_path_factory):
    return _Dirs(tmp_path_factory.mktemp("vqascore"))


def _backend(kind, path, batch_size=8):
    if kind == "llava":
        return ChatVQA(model=str(path), template="{question}", batch_size=batch_size)
    if kind == "fuyu":
        return _fuyu()[0](model=str(path), batch_size=batch_size)
    return InstructBlipVQA(model=str(path), batch_size=batch_size)


def _items(prompts):
    return [ScoreItem(seg_id="s", node="0", file_name=f"f{i}.png", prompt=p) for i, p in enumerate(prompts)]


def _set_output_bias(net, bias):
    """Replace the language model's output layer by weight 0 + ``bias``: logits = bias at every position."""
    hits = 0
    for mod in net.modules():
        head = getattr(mod, "lm_head", None)
        if isinstance(head, torch.nn.Linear):
            stub = torch.nn.Linear(head.in_features, head.out_features, bias=True)
            with torch.no_grad():
                stub.weight.zero_()
                stub.bias.copy_(bias)
            mod.lm_head = stub
            hits += 1
    assert hits == 1


@pytest.mark.parametrize("kind", KINDS)
def test_hand_set_logits_give_the_exact_probability(kind, tiny_dirs):
    """yes = log 3, eos = log 2, every other logit 0, at every position: t2v_metrics' score is
    exp(mean(log 3/Z, log 2/Z)) = sqrt(3/Z * 2/Z); the first-token option gives 3/Z."""
    m = VQAScore(vqa=_backend(kind, tiny_dirs[kind]))
    m.load("cpu")
    tok = _tokenizer_of(m.vqa)
    yes, eos = m.answer_ids
    assert len(m.answer_ids) == 2 and tok.decode([yes]).strip() == ("yes" if kind != "fuyu" else "Yes")
    assert m.answer == ("yes" if kind == "instructblip" else "Yes")  # t2v_metrics' casing per family
    if kind != "fuyu":
        assert yes == tok.convert_tokens_to_ids("yes") and eos == tok.sep_token_id  # BERT vocabulary: [SEP] ends
    else:
        assert eos == tok.eos_token_id
    vocab = m.vqa._net.get_output_embeddings().out_features
    bias = torch.zeros(vocab)
    bias[yes], bias[eos] = math.log(3.0), math.log(2.0)
    _set_output_bias(m.vqa._net, bias)
    z = 3.0 + 2.0 + (vocab - 2)
    got = m.score_batch(_items(PROMPTS), qa_tiny.noise_images(len(PROMPTS), seed=1))
    assert got == pytest.approx([math.sqrt(3.0 / z * 2.0 / z)] * len(PROMPTS), rel=1e-6)
    if kind != "fuyu":
        assert vocab == 30523 and got[0] == pytest.approx(8.024e-5, abs=5e-9)  # the number of issue 30
    first = VQAScore(vqa=m.vqa, score="first_token")
    first.load("cpu")  # the backend is loaded already: only the token ids are looked up
    assert first.yes_ids == [yes]
    assert first.score_batch(_items(PROMPTS), qa_tiny.noise_images(len(PROMPTS), seed=1)) == \
        pytest.approx([3.0 / z] * len(PROMPTS), rel=1e-6)
    # counting the eos token's spelling as well adds its mass: (3 + 2) / Z
    both = VQAScore(vqa=m.vqa, score="first_token", yes_words=["Yes", tok.decode([eos]).strip()])
    both.load("cpu")
    assert both.score_batch(_items(PROMPTS[:1]), qa_tiny.noise_images(1))[0] == pytest.approx(5.0 / z)


def _prompt_text(m, kind, req):
    """The text the backend reads for ``req`` under ``m``'s prompt format, built here from parts."""
    backend = m.vqa
    if kind == "llava":
        from metrics_adapters.chat import ChatRequest

        chat = ChatRequest(m.vqa_template.format(question=req.question), images=(req.image,), system=m.system)
        return backend._proc.apply_chat_template(backend.chat.conversation(chat), add_generation_prompt=True,
                                                 tokenize=False)
    return m.vqa_template.format(question=req.question)


def _inputs_alone(backend, kind, image, text):
    return backend._inputs([image], [text]) if kind == "fuyu" else backend._proc(images=[image], text=[text],
                                                                                 return_tensors="pt")


@pytest.mark.parametrize("kind", KINDS)
def test_score_is_the_models_own_loss_on_the_answer(kind, tiny_dirs):
    """Random weights: the default equals exp(-loss) of the model's own forward given the answer
    tokens as labels (T5: ``labels=[yes, eos]``; decoder-only: the answer appended to the prompt,
    every prompt position -100), one request at a time (no padding): t2v_metrics' formula through
    transformers' own loss, not through ts2's gather."""
    images = qa_tiny.noise_images(len(PROMPTS), seed=2)
    # image_prep=backend: the pixels are the processor's alone here (test_originals.py checks t2v_metrics' step)
    m = VQAScore(vqa=_backend(kind, tiny_dirs[kind], batch_size=3), image_prep="backend")  # batches of 3 and 1
    m.load("cpu")
    got = np.array(m.score_batch(_items(PROMPTS), images))
    backend, ref = m.vqa, []
    for p, im in zip(PROMPTS, images, strict=True):
        req = VQARequest(question=m.template.format(prompt=p), image=im)
        inputs = _inputs_alone(backend, kind, im, _prompt_text(m, kind, req))
        labels = torch.tensor([m.answer_ids])
        if kind != "instructblip":
            n = inputs["input_ids"].shape[1]
            inputs["input_ids"] = torch.cat([inputs["input_ids"], labels], 1)
            inputs["attention_mask"] = torch.cat([inputs["attention_mask"], torch.ones_like(labels)], 1)
            labels = torch.cat([torch.full((1, n), -100), labels], 1)
        with torch.no_grad():
            loss = backend._net(**inputs, labels=labels).loss
        ref.append(math.exp(-float(loss)))
    np.testing.assert_allclose(got, ref, rtol=1e-5)
    assert 0 < got.min() and got.max() < 1 and len(set(np.round(got, 12))) > 1


@pytest.mark.parametrize("kind", KINDS)
def test_first_token_is_the_first_generated_step(kind, tiny_dirs):
    """Random weights: P("Yes") equals softmax(generate's first-step logits)[yes], padded batch or alone."""
    images = qa_tiny.noise_images(len(PROMPTS), seed=2)
    m = VQAScore(vqa=_backend(kind, tiny_dirs[kind], batch_size=3), score="first_token", image_prep="backend")
    m.load("cpu")
    got = np.array(m.score_batch(_items(PROMPTS), images))

    backend, ref = m.vqa, []
    for p, im in zip(PROMPTS, images, strict=True):  # one request at a time: no padding at all
        req = VQARequest(question=m.template.format(prompt=p), image=im)
        inputs = _inputs_alone(backend, kind, im, _prompt_text(m, kind, req))
        with torch.no_grad():
            out = backend._net.generate(**inputs, max_new_tokens=1, do_sample=False, output_logits=True,
                                        return_dict_in_generate=True)
        ref.append(float(torch.softmax(out.logits[0][0].float(), -1)[m.yes_ids].sum()))
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-7)
    assert 0 < got.min() and got.max() < 1 and len(set(np.round(got, 9))) > 1
    # FLOPs: 2 N x the mean text tokens of the backend-formatted questions
    tok = _tokenizer_of(backend)
    n_text = np.mean([len(tok(m.vqa_template.format(question=m.template.format(prompt=p)))["input_ids"])
                      for p in PROMPTS])
    assert m.flops_per_image() == pytest.approx(2 * backend.n_params() * n_text) and n_text > 10
    m.input_tokens = 600.0
    assert m.flops_per_image() == pytest.approx(2 * backend.n_params() * 600.0)


class _FakeTok:
    """A SentencePiece-like tokenizer: " Yes" -> ["▁", "Yes"], "Yes" -> ["▁Yes"]."""

    text: ClassVar[dict[int, str]] = {0: " ", 1: "Yes", 2: " Yes", 3: " yes"}

    def __call__(self, s, add_special_tokens=False):
        return {"input_ids": [0, 1] if s.startswith(" ") else [2]}

    def decode(self, ids):
        return "".join(self.text[i] for i in ids)


def test_yes_token_rule():
    assert yes_token_ids(_FakeTok(), ["Yes"]) == [2]  # the bare space piece is not counted
    assert yes_spellings(_FakeTok(), ["Yes", "yes"]) == {"Yes": 2}  # "yes" -> ▁Yes again: counted once
    with pytest.raises(ValueError, match="single token"):
        yes_token_ids(_FakeTok(), ["Maybe"])


def test_bad_settings_are_named():
    with pytest.raises(ValueError, match="non-empty list of words, got \\[True\\]"):
        VQAScore(yes_words=[True])  # what an unquoted YAML `Yes` becomes
    with pytest.raises(ValueError, match="containing '\\{prompt\\}'"):
        VQAScore(template="Is this right?")
    with pytest.raises(ValueError, match="vqascore: template .* has fields other than \\{prompt\\}"):
        VQAScore(template="Is {prompt} a {thing}?")
    from metrics_adapters.qa.vqa import ReplayVQA

    with pytest.raises(TypeError, match="generative VQA backend.*got ReplayVQA"):
        VQAScore(vqa=ReplayVQA(answers="recorded.csv"))
    with pytest.raises(ValueError, match="expected score in \\['sequence', 'first_token'\\], got 'p_yes'"):
        VQAScore(score="p_yes")
    with pytest.raises(ValueError, match="expected prompt_format in .*got 'lavis'"):
        VQAScore(prompt_format="lavis")
    with pytest.raises(ValueError, match="non-empty answer"):
        VQAScore(answer=" ")
    with pytest.raises(ValueError, match="expected image_prep in .*got 'crop'"):
        VQAScore(image_prep="crop")
    a, b = VQAScore(), VQAScore(template='Is "{prompt}" shown?')
    assert a.fingerprint_hash() != b.fingerprint_hash()
    assert VQAScore(vqa=InstructBlipVQA(template="{question}", max_new_tokens=5)).fingerprint_hash() == \
        VQAScore(vqa=InstructBlipVQA(template="{question}")).fingerprint_hash()  # decoding does not matter
    # the formula keys the cache: the first-token scores of earlier runs are never served as t2v_metrics'
    assert VQAScore(score="first_token").fingerprint_hash() != a.fingerprint_hash()
    # the t2v_metrics prompt replaces the backend's template, which then does not key the cache ...
    assert VQAScore(vqa=InstructBlipVQA(template="Q: {question} A:")).fingerprint_hash() == a.fingerprint_hash()
    # ... unless the backend's own format is asked for
    own = VQAScore(prompt_format="backend")
    assert own.fingerprint_hash() != VQAScore(vqa=InstructBlipVQA(template="Q: {question} A:"),
                                              prompt_format="backend").fingerprint_hash()
    assert (own.vqa_template, own.system) == ("Question: {question} Short answer:", None)


def test_t2v_metrics_question_answer_and_prompt_per_backend(tiny_dirs):
    """The strings t2v-metrics 3.0 uses (t2v_metrics/models/vqascore_models/), copied here by hand."""
    ib = VQAScore(vqa=InstructBlipVQA())
    # instructblip_model.py:11-12
    assert ib.template.format(prompt="a cat") == 'Question: Does this figure show "a cat"? Please answer yes or no.'
    assert (ib.answer, ib.vqa_template, ib.system, ib.image_step) == ("yes", "{question}", None, "center_crop_224")
    llava = VQAScore(vqa=ChatVQA(model=str(tiny_dirs["llava"]), template="{question} Answer briefly."))
    # llava_model.py:10-11
    assert llava.template.format(prompt="a cat") == 'Does this figure show "a cat"? Please answer yes or no.'
    # constants.py:5, put before " USER: " by llava_model.py:17
    assert (llava.answer, llava.vqa_template, llava.image_step) == ("Yes", "{question}", "pad_to_square_mean")
    assert llava.system == ("A chat between a curious user and an artificial intelligence assistant. The assistant "
                            "gives helpful, detailed, and polite answers to the user's questions.")
    from metrics_adapters.qa.vqa import BlipVQA

    blip = VQAScore(vqa=BlipVQA(template="{question}?"))  # no t2v_metrics model: the backend's own format
    assert (blip.answer, blip.vqa_template, blip.system, blip.image_step) == ("Yes", "{question}?", None, None)
    assert VQAScore(image_prep="backend").fingerprint_hash() != ib.fingerprint_hash()


def test_cli_keeps_first_token_scores_apart_from_the_default(tiny_dirs, tmp_path):
    """``ts2 score metric=vqascore`` into a cache holding first-token scores computes t2v_metrics'
    scores afresh (no hit) and a rerun of either formula is served from the cache."""
    import json

    pytest.importorskip("seg_data.synthetic")
    base = ["score", "dataset=mini", "dataset.n_segs=1", f"dataset.cache_dir={tmp_path / 'mini'}", "device=cpu",
            "num_workers=0", "progress=false", "batch_size=4", "metric=vqascore", "metric.vqa=instructblip",
            f"metric.vqa.model={tiny_dirs['instructblip']}", f"cache_dir={tmp_path / 'c'}"]

    def run(tag, *extra):
        assert main([*base, *extra, f"output_dir={tmp_path / tag}"]) == 0
        rec = json.loads((tmp_path / tag / "run.json").read_text())["metrics"][0]
        return pd.read_csv(tmp_path / tag / "scores.csv").vqascore.to_numpy(), rec["cache_hits"], rec["n_scored"]

    old, hits0, n = run("old", "metric.score=first_token")
    new, hits1, n1 = run("new")
    assert (hits0, hits1) == (0, 0) and n == n1 == len(old) > 0
    assert np.all(np.abs(new / old - 1) > 0.1)  # sqrt(P(yes) P(eos | yes)) is not P(yes): not the old rows
    again, hits2, n2 = run("again")
    assert (hits2, n2) == (len(old), 0) and np.array_equal(again, new)
    old_again, hits3, _ = run("old_again", "metric.score=first_token")
    assert hits3 == len(old) and np.array_equal(old_again, old)


@pytest.mark.parametrize("kind", KINDS)
def test_vqascore_mini_end_to_end(kind, tiny_dirs, tmp_path):
    pytest.importorskip("seg_data.synthetic")
    out = tmp_path / "out"
    assert main(["score", "dataset=mini", "dataset.n_segs=2", f"dataset.cache_dir={tmp_path / 'mini'}",
                 "device=cpu", "num_workers=0", "progress=false", "batch_size=4", "metric=vqascore",
                 f"metric.vqa={kind}", f"metric.vqa.model={tiny_dirs[kind]}", f"cache_dir={tmp_path / 'c'}",
                 f"output_dir={out}"]) == 0
    df = pd.read_csv(out / "scores.csv")
    assert len(df) > 0 and df.vqascore.between(0, 1).all() and df.vqascore.nunique() > 1
    # the CLI's numbers are the metric's numbers
    m = get_metric("vqascore", vqa=_backend(kind, tiny_dirs[kind]))
    m.load("cpu")
    from PIL import Image

    row = df.iloc[0]
    direct = m.score_batch(_items([row.prompt]), [Image.open(row.image_path).convert("RGB")])
    assert direct[0] == pytest.approx(row.vqascore, rel=1e-4)
