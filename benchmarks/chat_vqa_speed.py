"""Chat-VLM VQA throughput: one question per generate vs ts2's batches, with and without the shared prefix.

    python benchmarks/chat_vqa_speed.py [--images 6] [--questions 8] [--new-tokens 3] [--json FILE]

Self-contained (random weights, no hub). A LLaVA-shaped model (``LlavaConfig``: a CLIP vision
tower and a Llama decoder) answers ``--questions`` questions about each of ``--images`` images,
in question-image pairs/s:

- loop: ``ChatVQA`` with ``batch_size=1`` (one plain ``generate`` per question, what the papers'
  code does);
- ts2 batch B, ``prefix_cache=off``: B questions per left-padded ``generate``;
- ts2 batch B, ``prefix_cache=auto``: the questions of an image share one forward over the
  system + image prefix (``metrics_adapters/chat/prefix_cache.py``).

On CUDA the model is LLaVA-1.5-7b sized (ViT-L/14 at 336 px: 576 image tokens; Llama 7B) in
fp16; on a CPU it is small (ViT 224/14: 256 image tokens; 4 layers of 256/512 wide) and fp32. It
prints whether each row's answers equal the loop's.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
QUESTIONS = ["is there a dog?", "is the dog brown?", "is there a red car in the picture?", "is it raining?",
             "are there two people?", "is the sky blue?", "is anyone wearing a hat?", "is the photo taken indoors?",
             "is there a cat?", "is the table wooden?", "are there any trees?", "is it night?"]


def build_llava(cuda: bool):
    """A random LLaVA and its processor (:func:`qa_tiny.llava_parts`, the tests' builder)."""
    import torch

    sys.path.insert(0, str(REPO / "tests"))  # the tiny-model builders are test code
    from qa_tiny import llava_parts

    if cuda:  # LLaVA-1.5-7b: CLIP ViT-L/14-336 + Llama-2-7b
        vision = dict(hidden_size=1024, intermediate_size=4096, num_hidden_layers=24, num_attention_heads=16)
        text = dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
                    num_key_value_heads=32, max_position_embeddings=4096)
        return llava_parts(0, vision, text, image_size=336, patch_size=14, device="cuda", dtype=torch.float16)
    vision = dict(hidden_size=256, intermediate_size=1024, num_hidden_layers=4, num_attention_heads=4)
    text = dict(hidden_size=512, intermediate_size=1376, num_hidden_layers=4, num_attention_heads=8,
                num_key_value_heads=8, max_position_embeddings=4096)
    return llava_parts(0, vision, text, image_size=224, patch_size=14)


def run(model, proc, requests, batch_size: int, prefix_cache: str, new_tokens: int, device: str):
    """(pairs/s, answers) of ``ChatVQA`` over ``requests``."""
    import torch

    from metrics_adapters.qa.vqa import ChatVQA

    vqa = ChatVQA("benchmark-llava", max_new_tokens=new_tokens, batch_size=batch_size, prefix_cache=prefix_cache,
                  system_prompt="Answer the question with yes or no.")
    proc.tokenizer.padding_side = "left"
    vqa.chat.model, vqa.chat.processor, vqa.chat.device = model, proc, device  # the model stays in memory
    vqa._net, vqa._proc, vqa.device = model, proc, device
    vqa.answer(requests[:batch_size])  # warm-up
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    answers = vqa.answer(requests)
    if device == "cuda":
        torch.cuda.synchronize()
    return len(requests) / (time.perf_counter() - t0), answers


def main(argv=None) -> int:
    import numpy as np
    import torch
    from PIL import Image

    sys.path.insert(0, str(REPO))
    from metrics_adapters.qa.vqa import VQARequest

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", type=int, default=None)
    ap.add_argument("--questions", type=int, default=8)
    ap.add_argument("--new-tokens", type=int, default=3)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    n_img = a.images or (64 if cuda else 6)
    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 256, (384, 384, 3), dtype=np.uint8)) for _ in range(n_img)]
    requests = [VQARequest(q, image=im, image_id=f"img{i}") for i, im in enumerate(images)
                for q in QUESTIONS[:a.questions]]
    model, proc = build_llava(cuda)
    loop_rate, loop_ans = run(model, proc, requests, 1, "off", a.new_tokens, device)
    rows = [("one question per generate (batch 1)", loop_rate, True)]

    def save(partial: bool) -> None:  # after every row: a run stopped by its time limit keeps what it measured
        if a.json:
            Path(a.json).write_text(json.dumps({"rows": rows, "device": device, "images": n_img,
                                                "questions": a.questions, "partial": partial}))

    save(True)
    for bs in (8, 16):
        for mode in ("off", "auto"):
            rate, ans = run(model, proc, requests, bs, mode, a.new_tokens, device)
            rows.append((f"ts2 batch {bs}, prefix_cache={mode}", rate, ans == loop_ans))
            save(True)
    kind = "LLaVA-1.5-7b sized, fp16" if cuda else "small LLaVA (ViT 224/14, 4+4 layers), fp32"
    print(f"chat-VLM VQA, {kind}, {device} ({torch.cuda.get_device_name() if cuda else 'CPU'}), torch "
          f"{torch.__version__}; {n_img} images x {a.questions} questions, {a.new_tokens} new tokens")
    print(f"{'what':<42} {'pairs/s':>9} {'vs loop':>8}  answers = loop")
    for name, r, same in rows:
        print(f"{name:<42} {r:>9.2f} {r / loop_rate:>7.1f}x  {same}")
    save(False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
