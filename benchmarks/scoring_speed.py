"""Scoring speed: the engine vs a plain one-image-at-a-time loop, same model, same images.

    python benchmarks/scoring_speed.py [--n-images 128] [--per-prompt 8] [--batch-size 32]
                                       [--num-workers auto] [--arch ViT-B-32] [--image-size 512] [--breakdown]

An open_clip ViT-B-32 with random weights (``pretrained=None``: speed does not depend on the
weights; both sides seed the same initialisation, so their scores must agree too) scores
``n-images`` JPEGs, ``per-prompt`` images per prompt as in a SEG. Each mode runs in its own
process so that its peak memory (``ru_maxrss`` of the process and of its DataLoader workers)
is its own; model construction is excluded from both timings.

- ``loop``: for each image: open, convert, preprocess, encode the image, tokenize and encode the
  prompt, cosine, ``max(cos, 0)`` -- what a script written without the engine does.
- ``engine``: :func:`metrics_adapters.engine.score_metric` end to end (file hashing, cache
  look-up and writes to a fresh SQLite cache, background decoding, batches, text-embedding
  reuse within a SEG, inference mode).

Target (issue 4): engine >= 3x the loop's images/s on a 2-core CPU.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROMPTS = [
    "a red circle above a blue square", "two cats sleeping on a green sofa next to a window",
    "a lighthouse on a cliff at sunset", "an astronaut riding a horse on the moon",
    "three yellow bananas in a wooden bowl", "a man in a black hat reading a newspaper on a bench",
    "a bowl of soup with a spoon and a slice of bread", "a small boat on a calm lake under a full moon",
]


def make_images(root: Path, n: int, per_prompt: int, size: int) -> list[tuple[str, str]]:
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    pairs = []
    for i in range(n):
        # smooth random images compress like photos (pure noise would make unrealistically big JPEGs)
        small = rng.integers(0, 256, (size // 16, size // 16, 3), dtype=np.uint8)
        img = Image.fromarray(small).resize((size, size), Image.Resampling.BICUBIC)
        p = root / f"{i:04d}.jpg"
        img.save(p, quality=90)
        pairs.append((str(p), PROMPTS[(i // per_prompt) % len(PROMPTS)] + f" (scene {i // per_prompt})"))
    return pairs


def peak_rss_mib() -> dict[str, float]:
    self_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    child_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {"peak_rss_mib": self_kib / 1024, "peak_rss_workers_mib": child_kib / 1024}


def run_loop(pairs, arch: str) -> dict:
    import open_clip
    import torch
    from PIL import Image

    torch.manual_seed(0)
    model, _, preprocess = open_clip.create_model_and_transforms(arch, pretrained=None)
    model.eval()
    tokenizer = open_clip.get_tokenizer(arch)
    scores = []
    t0 = time.perf_counter()
    with torch.no_grad():
        for path, prompt in pairs:
            image = preprocess(Image.open(path).convert("RGB")).unsqueeze(0)
            img_f = model.encode_image(image)
            txt_f = model.encode_text(tokenizer([prompt]))
            cos = torch.nn.functional.cosine_similarity(img_f, txt_f).item()
            scores.append(max(cos, 0.0))
    dt = time.perf_counter() - t0
    return {"mode": "loop", "seconds": dt, "images_per_s": len(pairs) / dt, "scores": scores, **peak_rss_mib()}


def run_engine(pairs, arch: str, batch_size: int, num_workers: int | str) -> dict:
    import torch

    from metrics_adapters import ScoreItem
    from metrics_adapters.cache import ScoreCache
    from metrics_adapters.embedding.clipscore import OpenCLIPScore
    from metrics_adapters.engine import EngineSettings, score_metric

    items = [ScoreItem(seg_id=str(i // 8), node="0", file_name=Path(p).name, prompt=q, image_path=p)
             for i, (p, q) in enumerate(pairs)]
    torch.manual_seed(0)
    metric = OpenCLIPScore(arch=arch, pretrained=None)
    metric.load("cpu")  # model construction is outside both timings
    with tempfile.TemporaryDirectory() as d:
        cache = ScoreCache(Path(d) / "scores.sqlite")
        settings = EngineSettings(device="cpu", batch_size=batch_size, num_workers=num_workers, progress=False)
        t0 = time.perf_counter()
        run = score_metric(metric, items, cache, settings)
        dt = time.perf_counter() - t0
        cache.close()
    if run.failures:
        raise RuntimeError(f"engine failed on {len(run.failures)} images: {run.failures[0]}")
    return {"mode": "engine", "seconds": dt, "images_per_s": len(pairs) / dt, "batch_size": batch_size,
            "num_workers": settings.workers_for("cpu"), "scores": [s[0] for s in run.scores], **peak_rss_mib()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n-images", type=int, default=128)
    ap.add_argument("--per-prompt", type=int, default=8)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--num-workers", default="auto", type=lambda v: v if v == "auto" else int(v),
                    help="engine DataLoader workers (auto: the engine's default, 0 on the CPU)")
    ap.add_argument("--arch", default="ViT-B-32")
    ap.add_argument("--image-size", type=int, default=512)
    ap.add_argument("--breakdown", action="store_true",
                    help="also run the engine with 2 background workers, and with batch 1")
    ap.add_argument("--mode", choices=["loop", "engine"], help=argparse.SUPPRESS)
    ap.add_argument("--pairs", help=argparse.SUPPRESS)
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args(argv)

    if a.mode:  # child process: one measurement, JSON on stdout
        pairs = json.loads(Path(a.pairs).read_text())
        res = run_loop(pairs, a.arch) if a.mode == "loop" else run_engine(pairs, a.arch, a.batch_size, a.num_workers)
        sys.stdout.write(json.dumps(res) + "\n")
        return 0

    import numpy as np

    with tempfile.TemporaryDirectory() as d:
        pairs = make_images(Path(d), a.n_images, a.per_prompt, a.image_size)
        pairs_file = Path(d) / "pairs.json"
        pairs_file.write_text(json.dumps(pairs))

        def child(mode, bs=a.batch_size, nw=a.num_workers):
            cmd = [sys.executable, __file__, "--mode", mode, "--pairs", str(pairs_file), "--arch", a.arch,
                   "--batch-size", str(bs), "--num-workers", str(nw)]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            return json.loads(out.strip().splitlines()[-1])

        loop = child("loop")
        engine = child("engine")
        extra = [child("engine", a.batch_size, 2), child("engine", 1, 0)] if a.breakdown else []

    max_diff = float(np.max(np.abs(np.array(loop["scores"]) - np.array(engine["scores"]))))
    ratio = engine["images_per_s"] / loop["images_per_s"]
    lines = [
        f"{a.n_images} JPEGs {a.image_size}px, {a.per_prompt} per prompt, open_clip {a.arch} (random weights), CPU",
        f"loop   : {loop['images_per_s']:7.2f} img/s ({loop['seconds']:.1f} s), peak RSS {loop['peak_rss_mib']:.0f} MiB",
        f"engine : {engine['images_per_s']:7.2f} img/s ({engine['seconds']:.1f} s), batch {a.batch_size}, "
        f"{engine['num_workers']} workers ({a.num_workers}), peak RSS {engine['peak_rss_mib']:.0f} MiB"
        + (f" (+ each worker's peak RSS <= {engine['peak_rss_workers_mib']:.0f} MiB, mostly pages shared with "
           "the parent by fork)" if engine["num_workers"] else ""),
        f"ratio  : {ratio:.2f}x (target >= 3x); max |score difference| {max_diff:.2e}",
    ]
    for e in extra:
        lines.append(f"  engine batch {e['batch_size']:>2}, {e['num_workers']} workers: {e['images_per_s']:7.2f} img/s "
                     f"({e['images_per_s'] / loop['images_per_s']:.2f}x), peak RSS {e['peak_rss_mib']:.0f} MiB")
    sys.stdout.write("\n".join(lines) + "\n")
    if a.json:
        for r in (loop, engine, *extra):
            r.pop("scores")
        Path(a.json).write_text(json.dumps({"loop": loop, "engine": engine, "breakdown": extra, "ratio": ratio,
                                            "max_score_diff": max_diff}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
