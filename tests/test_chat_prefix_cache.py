"""Shared-prefix generation for chat VLMs (metrics_adapters/chat/prefix_cache.py) on a tiny LLaVA.

Reference: one plain transformers ``generate`` per question (no padding, no cache reuse).
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch  # noqa: E402

from metrics_adapters.chat.base import ChatRequest  # noqa: E402
from metrics_adapters.chat.prefix_cache import (  # noqa: E402
    PrefixUnsupported,
    common_prefix_length,
    group_rows,
    shared_prefix_generate,
)

QUESTIONS = ["is there a dog?", "what color is the big red car in the picture?", "how many?",
             "is it a cat, a dog or a bird?"]
GEN = {"max_new_tokens": 3, "do_sample": False, "return_dict_in_generate": True, "output_logits": True}


@pytest.fixture(scope="module")
def llava(tmp_path_factory):
    from qa_tiny import build_tiny_llava

    from metrics_adapters.chat.local import TransformersChatModel

    path = build_tiny_llava(tmp_path_factory.mktemp("tiny-llava-prefix"), seed=3)
    chat = TransformersChatModel(str(path), kind="vlm", max_new_tokens=3, system_prompt="Answer briefly.")
    chat.load("cpu")
    return chat


@pytest.fixture(scope="module")
def images():
    from qa_tiny import noise_images

    return noise_images(3, seed=4)


def _requests(images):
    return [ChatRequest(q, images=(im,)) for im in images for q in QUESTIONS]


def _reference_logits(chat, requests):
    """First-step and second-step logits of each request generated alone."""
    pad = chat.tokenizer.pad_token_id
    out = []
    for r in requests:
        o = chat.model.generate(**chat.encode([r]), pad_token_id=pad, **GEN)
        out.append(torch.stack([o.logits[0][0], o.logits[1][0]]))
    return torch.stack(out)


def test_helpers_by_hand():
    assert group_rows([7, 8, 7, 7, 9]) == ([0, 1, 0, 0, 2], [0, 1, 4])
    assert common_prefix_length([[5, 6, 7, 8], [5, 6, 9], [5, 6, 7]]) == 2
    # every row keeps a token to prefill, even when the rows are equal
    assert common_prefix_length([[1, 2, 3], [1, 2, 3]]) == 2
    assert common_prefix_length([[4, 1], [3, 1]]) == 0


def test_shared_prefix_logits_equal_one_generate_per_question(llava, images):
    """Each image's prefix is computed once, and every request's logits at the first two answer
    steps equal those of a plain generate of that request alone."""
    requests = _requests(images)
    ref = _reference_logits(llava, requests)
    enc = llava.encode(requests)
    out, n_in = shared_prefix_generate(llava.model, enc, [id(r.images[0]) for r in requests],
                                       pad_token_id=llava.tokenizer.pad_token_id, **GEN)
    got = torch.stack([torch.stack([out.logits[0][i], out.logits[1][i]]) for i in range(len(requests))])
    assert float((got - ref).abs().max()) < 1e-5
    # the test can fail: logits differ between questions of one image and between images
    assert float((ref[0] - ref[1]).abs().max()) > 1e-3 and float((ref[0] - ref[len(QUESTIONS)]).abs().max()) > 1e-3
    assert n_in == out.sequences.shape[1] - 3


def _count_vision_images(chat):
    seen = []
    tower = chat.model.model.vision_tower
    handle = tower.register_forward_hook(lambda mod, args, kw_out: seen.append(int(args[0].shape[0])))
    return seen, handle


@pytest.mark.parametrize("batch_size,expected_tower_images", [(12, 3), (4, 3), (2, 6), (1, 12)])
def test_chat_vqa_answers_and_vision_tower_calls(llava, images, batch_size, expected_tower_images):
    """ChatVQA (prefix_cache=auto) gives the answers of prefix_cache=off and of one generate per
    question; the vision tower sees each image once per batch it appears in."""
    from metrics_adapters.qa.vqa import ChatVQA, VQARequest

    def backend(mode, bs):
        vqa = ChatVQA(llava.model_name, max_new_tokens=3, batch_size=bs, system_prompt="Answer briefly.",
                      prefix_cache=mode)
        vqa.chat.model, vqa.chat.processor = llava.model, llava.processor  # share the loaded weights
        vqa._net, vqa._proc, vqa.device = llava.model, llava.processor, "cpu"
        return vqa

    reqs = [VQARequest(q, image=im, image_id=f"img{i}") for i, im in enumerate(images) for q in QUESTIONS]
    seen, handle = _count_vision_images(llava)
    try:
        shared = backend("auto", batch_size).answer(reqs)
        n_shared = sum(seen)
        seen.clear()
        plain = backend("off", batch_size).answer(reqs)
        n_plain = sum(seen)
        seen.clear()
        alone = backend("off", 1).answer(reqs)
    finally:
        handle.remove()
    assert shared == plain == alone
    assert n_shared == expected_tower_images and n_plain == len(reqs)


def test_fingerprint_and_option_check():
    from metrics_adapters.chat.local import TransformersChatModel
    from metrics_adapters.qa.vqa import ChatVQA

    assert ChatVQA("x").fingerprint() != ChatVQA("x", prefix_cache="off").fingerprint()
    with pytest.raises(ValueError, match="expected prefix_cache 'auto', 'on' or 'off', got 'yes'"):
        TransformersChatModel("x", prefix_cache="yes")


def test_unsupported_batches_are_refused(llava, images):
    """A prompt whose image tokens come after the question cannot share a prefix (the chat model
    then generates the batch plainly); neither can inputs beyond ids, mask and pixels."""
    proc, pad = llava.processor, llava.tokenizer.pad_token_id
    texts = [f"USER: {q} <image> ASSISTANT:" for q in QUESTIONS[:2]]
    enc = dict(proc(images=[images[0]] * 2, text=texts, return_tensors="pt", padding=True))
    with pytest.raises(PrefixUnsupported, match="image tokens after the shared prefix"):
        shared_prefix_generate(llava.model, enc, ["a", "a"], pad_token_id=pad, max_new_tokens=2)
    with pytest.raises(PrefixUnsupported, match="expected only input_ids, attention_mask and pixel_values"):
        shared_prefix_generate(llava.model, {**enc, "image_sizes": torch.zeros(2, 2)}, ["a", "a"], pad_token_id=pad)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (none on this machine); "
                    "benchmarks/gpu_all.sh runs it on a lent one")
@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_cuda_prefix_cache_answers_equal_plain_generate(images, tmp_path, dtype):
    """On CUDA, ChatVQA with the shared prefix answers as plain generate does, one question at a
    time (issue 48): the same check as on the CPU, with CUDA kernels and fp16 too."""
    from qa_tiny import build_tiny_llava

    from metrics_adapters.chat.local import TransformersChatModel
    from metrics_adapters.qa.vqa import ChatVQA, VQARequest

    path = build_tiny_llava(tmp_path / "tiny-llava-cuda", seed=3)
    chat = TransformersChatModel(str(path), kind="vlm", max_new_tokens=3, system_prompt="Answer briefly.")
    chat.load("cuda", dtype=dtype)

    def backend(mode, bs):
        vqa = ChatVQA(chat.model_name, max_new_tokens=3, batch_size=bs, system_prompt="Answer briefly.",
                      prefix_cache=mode)
        vqa.chat.model, vqa.chat.processor, vqa.chat.device = chat.model, chat.processor, "cuda"
        vqa._net, vqa._proc, vqa.device = chat.model, chat.processor, "cuda"
        return vqa

    reqs = [VQARequest(q, image=im, image_id=f"img{i}") for i, im in enumerate(images) for q in QUESTIONS]
    shared = backend("auto", 12).answer(reqs)
    alone = backend("off", 1).answer(reqs)
    assert shared == alone
