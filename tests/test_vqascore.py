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
    m = VQAScore(vqa=_backend(kind, tiny_dirs[kind]))
    m.load("cpu")
    tok = _tokenizer_of(m.vqa)
    assert len(m.yes_ids) == 1 and tok.decode(m.yes_ids).strip().casefold() == "yes"
    if kind != "fuyu":
        assert m.yes_ids == [tok.convert_tokens_to_ids("yes")]  # the uncased BERT vocabulary: "Yes" -> "yes"
    yes, no = m.yes_ids[0], tok("no", add_special_tokens=False)["input_ids"][0]
    assert no != yes
    vocab = m.vqa._net.get_output_embeddings().out_features
    bias = torch.zeros(vocab)
    bias[yes], bias[no] = math.log(3.0), math.log(5.0)
    _set_output_bias(m.vqa._net, bias)
    # softmax over the whole vocabulary: e^log3 / (e^log3 + e^log5 + (V - 2) e^0)
    expected = 3.0 / (3.0 + 5.0 + (vocab - 2))
    got = m.score_batch(_items(PROMPTS), qa_tiny.noise_images(len(PROMPTS), seed=1))
    assert got == pytest.approx([expected] * len(PROMPTS), rel=1e-5)
    # counting "no" as well adds its mass: (3 + 5) / Z
    both = VQAScore(vqa=m.vqa, yes_words=["Yes", "no"])
    both.load("cpu")  # the backend is loaded already: only the token ids are looked up
    assert both.score_batch(_items(PROMPTS[:1]), qa_tiny.noise_images(1))[0] == pytest.approx(8.0 / (8.0 + vocab - 2))


@pytest.mark.parametrize("kind", KINDS)
def test_score_is_the_first_generated_step(kind, tiny_dirs):
    """Random weights: P("Yes") equals softmax(generate's first-step logits)[yes], padded batch or alone."""
    images = qa_tiny.noise_images(len(PROMPTS), seed=2)
    m = VQAScore(vqa=_backend(kind, tiny_dirs[kind], batch_size=3))  # batches of 3 and 1: mixed lengths
    m.load("cpu")
    got = np.array(m.score_batch(_items(PROMPTS), images))

    backend, ref = m.vqa, []
    for p, im in zip(PROMPTS, images, strict=True):  # one request at a time: no padding at all
        req = VQARequest(question=m.template.format(prompt=p), image=im)
        if kind == "llava":
            text = backend._proc.apply_chat_template(backend.conversation(req), add_generation_prompt=True,
                                                     tokenize=False)
        else:
            text = backend.template.format(question=req.question)
        inputs = backend._inputs([im], [text]) if kind == "fuyu" else backend._proc(images=[im], text=[text],
                                                                                    return_tensors="pt")
        with torch.no_grad():
            out = backend._net.generate(**inputs, max_new_tokens=1, do_sample=False, output_logits=True,
                                        return_dict_in_generate=True)
        ref.append(float(torch.softmax(out.logits[0][0].float(), -1)[m.yes_ids].sum()))
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-7)
    assert 0 < got.min() and got.max() < 1 and len(set(np.round(got, 9))) > 1
    # FLOPs: 2 N x the mean text tokens of the backend-formatted questions
    tok = _tokenizer_of(backend)
    n_text = np.mean([len(tok(backend.template.format(question=m.template.format(prompt=p)))["input_ids"])
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
    a, b = VQAScore(), VQAScore(template='Is "{prompt}" shown?')
    assert a.fingerprint_hash() != b.fingerprint_hash()
    assert VQAScore(vqa=InstructBlipVQA(template="{question}", max_new_tokens=5)).fingerprint_hash() == \
        VQAScore(vqa=InstructBlipVQA(template="{question}")).fingerprint_hash()  # decoding does not matter


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
