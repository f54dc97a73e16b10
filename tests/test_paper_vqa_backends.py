"""mPLUG-Owl2 and Fuyu as the T2IScoreScore authors ran them, checked against their code.

The authors' strings and steps are copied here from github.com/michaelsaxon/T2IScoreScore (commit
93ebf89; the Fuyu script that wrote the released answers is ``vqa_scores/fuyu_gen_raw_all.py`` of
commit 398fa40) and github.com/X-PLUG/mPLUG-Owl (commit 0f3068f, ``mPLUG-Owl2/mplug_owl2``). Tiny
random models are built from configs and saved locally (no hub); they test the plumbing, never
answer quality.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")

HERE = Path(__file__).parent
QUESTIONS = ["is there a dog?", "what colour is the ball?", "how many cats are there?"]

# Small mPLUG-Owl2: a 2-layer LLaMA-2 body, a 2-layer ViT at 28 px (2x2 patches of 14) and a 2-layer
# abstractor with 4 queries (5 image tokens with vit_eos).
TINY_OWL2 = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, rms_norm_eps=1e-5,
                 max_position_embeddings=512,
                 visual_config={"visual_model": dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                                     num_attention_heads=2, image_size=28, patch_size=14),
                                "visual_abstractor": dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                                          num_attention_heads=2, encoder_hidden_size=32,
                                                          num_learnable_queries=4, grid_size=2)})


def llama_like_tokenizer():
    """A word-level tokenizer that behaves like LLaMA's SentencePiece one where the prompt depends on it:
    ``<unk>, <s>, </s>`` are ids 0-2, every call prepends ``<s>``, a word after a space is ``▁word``
    and a text's first word gets the ``▁`` too (SentencePiece's dummy prefix)."""
    from qa_tiny import bert_vocab_dir
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    lines = (bert_vocab_dir() / "vocab.txt").read_text(encoding="utf-8").splitlines()
    words = [w.strip() for w in lines if w.strip().isalpha() and w.strip().isascii()][:1500]
    vocab: dict[str, int] = {}
    for w in ["<unk>", "<s>", "</s>", "▁", ":", "?", ".", ",", "▁USER", "▁ASSISTANT", "USER", "ASSISTANT",
              *("▁" + w for w in words), *(w for w in words[:300])]:
        vocab.setdefault(w, len(vocab))
    t = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    t.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    t.pre_tokenizer = pre_tokenizers.Split(Regex(r"▁?[^▁:?.,]+|▁|[:?.,]"), "isolated")
    t.decoder = decoders.Metaspace()
    t.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=t, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                                   pad_token="<unk>")


def build_tiny_mplug_owl2(out: Path, seed: int = 0) -> Path:
    """A random :class:`MplugOwl2ForCausalLM` with :func:`llama_like_tokenizer` and a 28-px CLIP processor."""
    import torch
    from transformers import CLIPImageProcessor

    from metrics_adapters.qa.mplug_owl2 import MplugOwl2Config, MplugOwl2ForCausalLM

    tok = llama_like_tokenizer()
    torch.manual_seed(seed)
    net = MplugOwl2ForCausalLM(MplugOwl2Config(vocab_size=len(tok), pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                               **TINY_OWL2)).eval()
    with torch.no_grad():  # wider weights than the 0.02 init, so that the image and the prompt move the logits
        for p in net.parameters():
            p.normal_(0, 0.3)
    out.mkdir(parents=True, exist_ok=True)
    net.save_pretrained(out)
    tok.save_pretrained(out)
    CLIPImageProcessor(size={"shortest_edge": 28}, crop_size={"height": 28, "width": 28}).save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from test_vqa_backends import build_tiny_fuyu

    d = tmp_path_factory.mktemp("paper_vqa")
    return {"mplug_owl2": build_tiny_mplug_owl2(d / "owl2"), "fuyu": build_tiny_fuyu(d / "fuyu")}


def _reqs(n=3, seed=4, size=(40, 40)):
    from qa_tiny import noise_images

    from metrics_adapters.qa.vqa import VQARequest

    ims = [im.resize(size) for im in noise_images(n, seed=seed, size=max(size))]
    return [VQARequest(QUESTIONS[i % 3], ("yes", "no"), image=im, image_id=f"{i}.png") for i, im in enumerate(ims)]


def _compose(vqa: str, *overrides: str):
    from hydra import compose, initialize_config_module
    from hydra.utils import instantiate

    with initialize_config_module(config_module="conf", version_base="1.3"):
        cfg = compose("score", overrides=["metric=tifa", f"metric.vqa={vqa}", *overrides])
        return instantiate(cfg.metric, _convert_="all").vqa


# ---- mPLUG-Owl2 --------------------------------------------------------------------------------------
def test_mplug_owl2_prompt_is_the_authors():
    from metrics_adapters.qa.vqa import VQARequest

    # conv_templates["mplug_owl2"] (mplug_owl2/conversation.py:277-287, get_prompt :64-73) after
    # append_message("USER", "<|image|>" + question) and append_message("ASSISTANT", None)
    # (src/_old/vqa_scores/mplug.py:30-42) gives exactly this string:
    authors = "USER: <|image|>is there a dog? ASSISTANT:"
    for vqa in ("mplug_owl2", "mplug_owl2_paper"):
        b = _compose(vqa)
        assert b.prompt(VQARequest("is there a dog?")) == authors, vqa
        assert b.model == "MAGAer13/mplug-owl2-llama2-7b" and b.max_new_tokens == 50  # mplug.py:50, run_vqascore.py:73
    paper, default = _compose("mplug_owl2_paper"), _compose("mplug_owl2")
    # mplug.py:49-58: do_sample=True, temperature=0.7
    assert (paper.decoding, paper.temperature, paper.cleaning) == ("sample", 0.7, "paper")
    assert (default.decoding, default.cleaning) == ("greedy", "none")
    s_paper, s_default = paper.settings(), default.settings()
    assert s_paper["decoding"] == "sample" and s_paper["seed"] == 0 and "seed" not in s_default
    assert paper.fingerprint() != default.fingerprint()  # their answers never share a cache entry
    assert _compose("fuyu").fingerprint() != _compose("fuyu_paper").fingerprint()
    # the old name is refused with the new ones
    with pytest.raises(Exception, match="metric.vqa=mplug was renamed: use metric.vqa=mplug_owl2"):
        _compose("mplug")


def test_mplug_owl2_tokenises_as_tokenizer_image_token(tiny):
    from metrics_adapters.qa.mplug_owl2 import IMAGE_TOKEN_INDEX
    from metrics_adapters.qa.vqa_generative import MplugOwl2VQA

    b = MplugOwl2VQA(str(tiny["mplug_owl2"]))
    b.load("cpu")
    tok = b._proc
    ids = b.token_ids("USER: <|image|>is there a dog? ASSISTANT:")
    # mm_utils.py:53-72 by hand: each side tokenised alone (each gets a BOS), one BOS kept, one -200
    left, right = tok("USER: ").input_ids, tok("is there a dog? ASSISTANT:").input_ids
    assert left[0] == right[0] == tok.bos_token_id == 1
    assert ids == [1, *left[1:], IMAGE_TOKEN_INDEX, *right[1:]]
    assert tok.convert_ids_to_tokens(right[1:3]) == ["▁is", "▁there"]  # the right side starts a new piece
    # the model sees 5 image slots (4 queries + vit_eos) in place of the one -200
    enc = b._encode(_reqs(1))
    assert int((enc["input_ids"] == IMAGE_TOKEN_INDEX).sum()) == b._net.config.n_image_tokens == 5


def test_mplug_owl2_stretches_to_a_square_without_padding(tiny):
    from metrics_adapters.qa.vqa_generative import MplugOwl2VQA

    b = MplugOwl2VQA(str(tiny["mplug_owl2"]))
    b.load("cpu")
    wide = _reqs(1, size=(60, 20))[0].image
    # mplug.py:33-34: image.resize((max_edge, max_edge)), then the CLIP processor (mm_utils.py:40-44)
    want = b._image_processor.preprocess(wide.resize((60, 60)), return_tensors="pt")["pixel_values"][0]
    np.testing.assert_array_equal(b.pixel_values(wide).numpy(), want.numpy())
    # what expand2square (padding, mm_utils.py:15-26) would give differs: the resize is the authors'
    padded = wide.crop((0, -20, 60, 40))
    other = b._image_processor.preprocess(padded, return_tensors="pt")["pixel_values"][0]
    assert not np.allclose(other.numpy(), want.numpy())


def test_mplug_owl2_greedy_and_sampled_answers_do_not_depend_on_batch(tiny):
    from metrics_adapters.qa.vqa_generative import MplugOwl2VQA

    reqs = _reqs(3)
    path = str(tiny["mplug_owl2"])
    one, three = MplugOwl2VQA(path, batch_size=1, max_new_tokens=6), MplugOwl2VQA(path, batch_size=3, max_new_tokens=6)
    a, b = one.answer(reqs), three.answer(reqs)
    assert a == b and all(isinstance(x, str) and x for x in a)
    assert one.n_params() > 10_000
    s1 = MplugOwl2VQA(path, decoding="sample", batch_size=1, max_new_tokens=6, seed=1)
    s3 = MplugOwl2VQA(path, decoding="sample", batch_size=3, max_new_tokens=6, seed=1)
    x1, x3 = s1.answer(reqs), s3.answer(list(reversed(reqs)))
    assert x1 == list(reversed(x3))  # per-question seeds: same answers in any batch and order
    import torch

    before = torch.random.get_rng_state()
    s1.answer(reqs[:1])
    assert torch.equal(before, torch.random.get_rng_state())  # the caller's RNG is left alone
    other = MplugOwl2VQA(path, decoding="sample", batch_size=3, max_new_tokens=6, seed=2).answer(reqs)
    assert other != x1  # another seed samples other words (6 tokens from a 1,800-word vocabulary)
    assert x1 != a  # and sampling at 0.7 is not greedy here


def test_mplug_owl2_answer_text_plain_and_as_released(tiny):
    from metrics_adapters.qa.vqa_generative import MplugOwl2VQA

    plain, paper = MplugOwl2VQA(str(tiny["mplug_owl2"])), MplugOwl2VQA(str(tiny["mplug_owl2"]), cleaning="paper")
    plain.load("cpu")
    paper.load("cpu")
    tok = plain._proc
    ids = tok("yes, there is a man.", add_special_tokens=False).input_ids
    eos, pad = tok.eos_token_id, tok.pad_token_id
    # the released answers look like this (output/raw_answers/TIFA/mplug_tifa.csv): "</s>" kept,
    # commas gone (run_vqascore.py:53); what follows the first </s> (batch padding) never counts
    assert paper._decode([*ids, eos, pad, pad]) == "yes there is a man.</s>"
    assert plain._decode([*ids, eos, pad, pad]) == "yes, there is a man."


def test_mplug_owl2_without_weights_fails_clearly(tmp_path):
    from metrics_adapters.qa.vqa_generative import MplugOwl2VQA

    with pytest.raises(RuntimeError, match="MplugOwl2VQA: could not load"):
        MplugOwl2VQA(str(tmp_path)).load("cpu")
    with pytest.raises(ValueError, match="expected decoding in"):
        MplugOwl2VQA("x", decoding="beam")


ORIGINAL_SIDE = r"""
import json, sys, numpy as np, torch
from safetensors.torch import load_file
from mplug_owl2.model.configuration_mplug_owl2 import (MPLUGOwl2Config, MplugOwlVisionConfig,
                                                        MplugOwlVisualAbstractorConfig)
from mplug_owl2.model.modeling_mplug_owl2 import MPLUGOwl2LlamaForCausalLM
d = sys.argv[1]
kw = json.load(open(d + "/kw.json"))
vc = kw.pop("visual_config")
kw["visual_config"] = {"visual_model": MplugOwlVisionConfig(**vc["visual_model"]).to_dict(),
                       "visual_abstractor": MplugOwlVisualAbstractorConfig(**vc["visual_abstractor"]).to_dict()}
m = MPLUGOwl2LlamaForCausalLM(MPLUGOwl2Config(**kw)).eval()
missing, unexpected = m.load_state_dict(load_file(d + "/w.safetensors"), strict=False)
x = torch.tensor([json.load(open(d + "/ids.json"))])
im = torch.from_numpy(np.load(d + "/im.npy"))
with torch.no_grad():
    lg = m(input_ids=x, images=im, use_cache=False).logits
    g = m.generate(x, images=im, max_new_tokens=8, do_sample=False, use_cache=True, eos_token_id=None)
np.save(d + "/orig_logits.npy", lg.numpy())
m.save_pretrained(d + "/orig_ckpt")  # a checkpoint as the authors' code writes it (config.json, buffers)
json.dump({"missing": missing, "unexpected": unexpected, "gen": g[0, x.shape[1]:].tolist()}, open(d + "/orig.json", "w"))
"""


def test_port_matches_the_authors_mplug_owl2_code(tmp_path):
    """The port against mPLUG-Owl2's own modules on the same random weights: logits of a prompt with
    an image and 8 greedy tokens; and a checkpoint saved by their code loads into the port. Needs the authors' package and the transformers it pins (4.31):
    TS2_MPLUG_OWL2_SRC=<mPLUG-Owl clone>/mPLUG-Owl2 and TS2_TRANSFORMERS_431=<folder with
    transformers 4.31 + tokenizers 0.13, e.g. pip install --no-deps --target DIR transformers==4.31.0
    tokenizers==0.13.3 icecream einops huggingface_hub==0.16.4 executing asttokens colorama pygments>."""
    import torch
    from safetensors.torch import save_file

    from metrics_adapters.qa.mplug_owl2 import (
        IMAGE_TOKEN_INDEX,
        MplugOwl2Config,
        MplugOwl2ForCausalLM,
        expand_image_tokens,
    )

    src, old = os.environ.get("TS2_MPLUG_OWL2_SRC"), os.environ.get("TS2_TRANSFORMERS_431")
    if not (src and old and Path(src, "mplug_owl2").is_dir() and Path(old, "transformers").is_dir()):
        pytest.skip("the authors' mplug_owl2 package (not on PyPI) and transformers 4.31 are needed: set "
                    "TS2_MPLUG_OWL2_SRC and TS2_TRANSFORMERS_431 (see this test's docstring)")
    kw = {**TINY_OWL2, "vocab_size": 64, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
    torch.manual_seed(0)
    net = MplugOwl2ForCausalLM(MplugOwl2Config(**kw)).eval()
    with torch.no_grad():
        for p in net.parameters():
            p.normal_(0, 0.3)
    save_file({k: v.contiguous() for k, v in net.state_dict().items()}, str(tmp_path / "w.safetensors"))
    (tmp_path / "kw.json").write_text(json.dumps(kw))
    raw = [1, 5, 6, 9, IMAGE_TOKEN_INDEX, 7, 8, 9, 11]
    (tmp_path / "ids.json").write_text(json.dumps(raw))
    torch.manual_seed(1)
    im = torch.randn(1, 3, 28, 28)
    np.save(tmp_path / "im.npy", im.numpy())
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([old, src])}
    r = subprocess.run([sys.executable, "-c", ORIGINAL_SIDE, str(tmp_path)], env=env, capture_output=True, text=True,
                       timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    orig = json.loads((tmp_path / "orig.json").read_text())
    # the port computes the fixed tables the original keeps as buffers (RoPE's inv_freq, the
    # abstractor's sin-cos positions); every weight has the same name
    assert orig["unexpected"] == [] and orig["missing"]
    assert all(k.endswith(("rotary_emb.inv_freq", "attention.q_pos_embed", "attention.k_pos_embed")) for k in orig["missing"])
    x = torch.tensor([expand_image_tokens(raw, net.config.n_image_tokens)])
    with torch.no_grad():
        mine = net(x, images=im, use_cache=False).logits.numpy()
        gen = net.generate(x, attention_mask=torch.ones_like(x), images=im, max_new_tokens=8, do_sample=False,
                           eos_token_id=None)[0, x.shape[1]:].tolist()
    theirs = np.load(tmp_path / "orig_logits.npy")
    assert theirs.shape == mine.shape == (1, len(raw) - 1 + 5, 64)
    np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-5 * np.abs(theirs).max())  # measured: 0.0
    assert gen == orig["gen"]
    loaded = MplugOwl2ForCausalLM.from_pretrained(tmp_path / "orig_ckpt").eval()
    with torch.no_grad():
        np.testing.assert_allclose(loaded(x, images=im, use_cache=False).logits.numpy(), theirs, rtol=1e-5,
                                   atol=1e-5 * np.abs(theirs).max())


# ---- Fuyu --------------------------------------------------------------------------------------------
class _Recording:
    """Wraps a processor and records the images and texts it is given."""

    def __init__(self, proc):
        self.proc, self.calls = proc, []

    def __call__(self, images=None, text=None, **kw):
        self.calls.append(([im.size for im in images], list(text)))
        return self.proc(images=images, text=text, **kw)

    def __getattr__(self, name):
        return getattr(self.proc, name)


def test_fuyu_paper_config_gives_the_authors_prompt_size_and_length(tiny):
    # fuyu_gen_raw_all.py:11-16: processor(text=text_prompt, images=[image.resize((512, 512))]) with
    # text_prompt the question as read from the CSV, max_new_tokens=out_len=30
    for vqa in ("fuyu", "fuyu_paper"):
        b = _compose(vqa, f"metric.vqa.model={tiny['fuyu']}")
        assert (b.template, b.image_size, b.max_new_tokens, b.num_beams) == ("{question}", (512, 512), 30, 1), vqa
        b.load("cpu")
        b._proc = _Recording(b._proc)
        reqs = _reqs(2, size=(40, 24))
        b.answer(reqs)
        assert b._proc.calls == [([(512, 512), (512, 512)], [r.question for r in reqs])], vqa
    assert _compose("fuyu_paper").cleaning == "paper" and _compose("fuyu").cleaning == "none"


def test_fuyu_paper_answers_equal_the_authors_procedure(tiny):
    """The authors' run_fuyu (fuyu_gen_raw_all.py:11-21) transcribed, one question at a time, on the
    tiny model; the backend, batched, gives the same answers."""
    import torch
    from transformers import FuyuForCausalLM, FuyuProcessor

    from metrics_adapters.qa.vqa_generative import FuyuVQA

    path = str(tiny["fuyu"])
    processor, model = FuyuProcessor.from_pretrained(path), FuyuForCausalLM.from_pretrained(path).eval()
    reqs = _reqs(3, size=(40, 24))
    out_len = 8  # their out_len=30; shorter keeps the tiny run quick, the steps are the same

    def run_fuyu(text_prompt, image):
        image = image.resize((512, 512))
        model_inputs = processor(text=text_prompt, images=[image], return_tensors="pt")
        with torch.no_grad():
            generation_output = model.generate(**model_inputs, max_new_tokens=out_len, do_sample=False)
        generation_text = processor.batch_decode(generation_output[:, -out_len:], skip_special_tokens=True)
        output = str(generation_text[0].strip().split("<s>")[-1].strip().replace("\n", " ").split("?")[-1]).strip(
            "\x04").strip()
        return str(output).replace(",", "").strip()  # the CSV line, fuyu_gen_raw_all.py:66

    theirs = [run_fuyu(r.question, r.image) for r in reqs]
    for bs in (1, 3):
        b = FuyuVQA(path, cleaning="paper", max_new_tokens=out_len, batch_size=bs)
        assert b.answer(reqs) == theirs, bs
    plain = FuyuVQA(path, max_new_tokens=out_len, batch_size=3).answer(reqs)
    assert all(isinstance(a, str) for a in plain)


def test_fuyu_paper_cleaning_on_the_authors_cases():
    from metrics_adapters.qa.vqa_generative import fuyu_paper_answer

    # the window reaches back into the question: what follows its "?" and \x04 is the answer
    assert fuyu_paper_answer("a dog in the image?\x04 Yes, there is a dog") == "Yes there is a dog"
    assert fuyu_paper_answer("<s> what is it?\x04 a cat\n on a mat") == "a cat  on a mat"
    # why it is not the default: an answer holding "?" is cut, a question without "?" leaks in
    assert fuyu_paper_answer("is it red?\x04 red? maybe blue") == "maybe blue"
    assert fuyu_paper_answer("count the cats\x04 two") == "count the cats\x04 two"


def test_fuyu_rejects_a_bad_size():
    from metrics_adapters.qa.vqa_generative import FuyuVQA

    with pytest.raises(ValueError, match="expected image_size"):
        FuyuVQA("x", image_size=[512])
    with pytest.raises(ValueError, match="expected cleaning in"):
        FuyuVQA("x", cleaning="authors")


def test_mplug_owl2_loads_to_the_model_it_saved(tmp_path):
    """Weights, and the fixed tables computed rather than loaded, survive save/from_pretrained."""
    import torch

    from metrics_adapters.qa.mplug_owl2 import (
        IMAGE_TOKEN_INDEX,
        MplugOwl2Config,
        MplugOwl2ForCausalLM,
        expand_image_tokens,
    )

    torch.manual_seed(0)
    net = MplugOwl2ForCausalLM(MplugOwl2Config(vocab_size=40, **TINY_OWL2)).eval()
    net.save_pretrained(tmp_path)
    x = torch.tensor([expand_image_tokens([1, 4, IMAGE_TOKEN_INDEX, 5, 6], net.config.n_image_tokens)])
    im = torch.randn(1, 3, 28, 28)
    with torch.no_grad():
        want = net(x, images=im).logits
        for _ in range(2):
            got = MplugOwl2ForCausalLM.from_pretrained(tmp_path).eval()(x, images=im).logits
            torch.testing.assert_close(got, want, rtol=0, atol=0)
    with pytest.raises(ValueError, match="expected visual_abstractor.grid_size = image_size // patch_size = 2"):
        MplugOwl2ForCausalLM(MplugOwl2Config(vocab_size=40, **{**TINY_OWL2, "visual_config": {
            "visual_model": TINY_OWL2["visual_config"]["visual_model"],
            "visual_abstractor": {**TINY_OWL2["visual_config"]["visual_abstractor"], "grid_size": 3}}}))
