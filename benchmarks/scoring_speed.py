"""Scoring speed: the engine vs a plain one-image-at-a-time loop, same model, same images.

    python benchmarks/scoring_speed.py [--n-images 64] [--per-prompt 8] [--batch-size 32]
                                       [--num-workers auto] [--rounds 3] [--arch ViT-B-32]
                                       [--image-size 512] [--breakdown] [--json FILE]

An open_clip ViT-B-32 with random weights (``pretrained=None``: speed does not depend on the
weights; both sides seed the same initialisation, so their scores must agree too) scores
``n-images`` JPEGs, ``per-prompt`` images per prompt as in a SEG. Model construction is
excluded from both timings.

- ``loop``: for each image: open, convert, preprocess, encode the image, tokenize and encode the
  prompt, cosine, ``max(cos, 0)`` -- what a script written without the engine does.
- ``engine``: :func:`metrics_adapters.engine.score_metric` end to end (file hashing, cache
  look-ups and writes to a fresh SQLite cache, decoding, batches, text-embedding reuse within a
  SEG, inference mode).

Each measurement runs in its own process (so its peak memory, ``ru_maxrss``, is its own) and
the modes alternate over ``rounds`` rounds, so that load from other processes on a shared
machine hits both alike. Reported per mode: the median wall-clock images/s, and images per
CPU-second of the process and its workers (insensitive to other processes' load; on an
otherwise idle machine it is the wall-clock rate divided by the cores used).

Target (issue 4): engine >= 3x the loop's images/s on a 2-core CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
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


class _Clock:
    """Wall and CPU time (this process + its finished children) over a block."""

    def __enter__(self):
        self.t, self.c = time.perf_counter(), self._cpu()
        return self

    def __exit__(self, *exc):
        self.wall, self.cpu = time.perf_counter() - self.t, self._cpu() - self.c

    @staticmethod
    def _cpu() -> float:
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system


def _result(mode: str, n: int, clock: _Clock, **extra) -> dict:
    return {"mode": mode, "seconds": clock.wall, "cpu_seconds": clock.cpu, "images_per_s": n / clock.wall,
            "images_per_cpu_s": n / clock.cpu,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "peak_rss_workers_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, **extra}


def run_loop(pairs, arch: str) -> dict:
    import open_clip
    import torch
    from PIL import Image

    torch.manual_seed(0)
    model, _, preprocess = open_clip.create_model_and_transforms(arch, pretrained=None)
    model.eval()
    tokenizer = open_clip.get_tokenizer(arch)
    scores = []
    with _Clock() as clock, torch.no_grad():
        for path, prompt in pairs:
            image = preprocess(Image.open(path).convert("RGB")).unsqueeze(0)
            img_f = model.encode_image(image)
            txt_f = model.encode_text(tokenizer([prompt]))
            cos = torch.nn.functional.cosine_similarity(img_f, txt_f).item()
            scores.append(max(cos, 0.0))
    return _result("loop", len(pairs), clock, scores=scores)


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
    settings = EngineSettings(device="cpu", batch_size=batch_size, num_workers=num_workers, progress=False)
    with tempfile.TemporaryDirectory() as d:
        cache = ScoreCache(Path(d) / "scores.sqlite")
        with _Clock() as clock:
            run = score_metric(metric, items, cache, settings)
        cache.close()
    if run.failures:
        raise RuntimeError(f"engine failed on {len(run.failures)} images: {run.failures[0]}")
    return _result("engine", len(pairs), clock, batch_size=batch_size, num_workers=settings.workers_for("cpu"),
                   scores=[s[0] for s in run.scores])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n-images", type=int, default=64)
    ap.add_argument("--per-prompt", type=int, default=8)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--num-workers", default="auto", type=lambda v: v if v == "auto" else int(v),
                    help="engine DataLoader workers (auto: the engine's default, 0 on the CPU)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating loop/engine measurements per mode")
    ap.add_argument("--arch", default="ViT-B-32")
    ap.add_argument("--image-size", type=int, default=512)
    ap.add_argument("--breakdown", action="store_true",
                    help="also run (once per round) the engine with 2 background workers, and with batch 1")
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

    variants = {"loop": ("loop", a.batch_size, a.num_workers), "engine": ("engine", a.batch_size, a.num_workers)}
    if a.breakdown:
        variants[f"engine batch {a.batch_size}, 2 workers"] = ("engine", a.batch_size, 2)
        variants["engine batch 1, 0 workers"] = ("engine", 1, 0)
    runs: dict[str, list[dict]] = {k: [] for k in variants}
    with tempfile.TemporaryDirectory() as d:
        pairs = make_images(Path(d), a.n_images, a.per_prompt, a.image_size)
        pairs_file = Path(d) / "pairs.json"
        pairs_file.write_text(json.dumps(pairs))
        for _ in range(a.rounds):
            for name, (mode, bs, nw) in variants.items():
                cmd = [sys.executable, __file__, "--mode", mode, "--pairs", str(pairs_file), "--arch", a.arch,
                       "--batch-size", str(bs), "--num-workers", str(nw)]
                out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
                runs[name].append(json.loads(out.strip().splitlines()[-1]))

    def med(name, key):
        return statistics.median(r[key] for r in runs[name])

    loop, engine = runs["loop"][0], runs["engine"][0]
    max_diff = float(np.max(np.abs(np.array(loop["scores"]) - np.array(engine["scores"]))))
    ratio_wall = med("engine", "images_per_s") / med("loop", "images_per_s")
    ratio_cpu = med("engine", "images_per_cpu_s") / med("loop", "images_per_cpu_s")
    lines = [f"{a.n_images} JPEGs {a.image_size}px, {a.per_prompt} per prompt, open_clip {a.arch} (random weights), "
             f"CPU ({os.cpu_count()} cores), medians of {a.rounds} alternating rounds"]
    for name in variants:
        rs = runs[name]
        walls = ", ".join(f"{r['images_per_s']:.2f}" for r in rs)
        workers = f", {rs[0]['num_workers']} workers" if "num_workers" in rs[0] else ""
        lines.append(
            f"{name:<30}: {med(name, 'images_per_s'):6.2f} img/s (runs: {walls}), "
            f"{med(name, 'images_per_cpu_s'):5.2f} img/CPU-s, peak RSS {max(r['peak_rss_mib'] for r in rs):.0f} MiB"
            + workers + (f", ratio {med(name, 'images_per_s') / med('loop', 'images_per_s'):.2f}x" if name != "loop" else ""))
    lines.append(f"ratio engine/loop: {ratio_wall:.2f}x wall-clock, {ratio_cpu:.2f}x per CPU-second (target >= 3x); "
                 f"max |score difference| {max_diff:.2e}")
    sys.stdout.write("\n".join(lines) + "\n")
    if a.json:
        for rs in runs.values():
            for r in rs:
                r.pop("scores", None)
        Path(a.json).write_text(json.dumps({"runs": runs, "ratio_wall": ratio_wall, "ratio_cpu": ratio_cpu,
                                            "max_score_diff": max_diff, "args": vars(a)}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
