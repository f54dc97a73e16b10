"""``ts2 score`` as a whole process with its default settings, then fully cached, vs the import floor.

    python benchmarks/gpu_process.py [--n-images 4096] [--image-size 512] [--arch ViT-L-14]
                                     [--device cuda] [--json FILE]

Writes ``--n-images`` JPEGs (8 per prompt, as in a SEG; the generator of
``benchmarks/scoring_speed.py``) and a ``ts2-seg/1`` dataset of them, then times three child
processes:

- ``ts2 score path=DIR metric=clipscore metric.arch=ARCH metric.pretrained=null device=DEVICE``
  with every engine setting at its default (``batch_size``, ``num_workers``, ``precision`` auto),
  an empty score cache: start-up, model build, decode, forward, cache and ``scores.csv`` writes;
- the same command again: every score from the cache (issue 48's "fully cached re-run");
- the floor: ``python -c "import pandas, scipy.stats"``.

It reports images/s of the first run (to compare with the in-process rows and ceilings of
``benchmarks/gpu_scoring.py``) and the cached run as a ratio to the floor (target: within 1.5x).
Random weights (``pretrained=null``): no hub access, the same compute as the released weights.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from scoring_speed import make_images  # noqa: E402


def write_dataset(root: Path, pairs: list[tuple[str, str]], per_prompt: int = 8) -> Path:
    """A ts2-seg/1 dataset over ``pairs``: each prompt's images spread over nodes 0, 1, 2."""
    sys.path.insert(0, str(REPO))
    from seg_data import SEG, ImageRecord, SEGDataset, build_graph, save_seg_file

    segs = []
    for s in range(0, len(pairs), per_prompt):
        group = pairs[s:s + per_prompt]
        nodes: dict[str, list[ImageRecord]] = {}
        for k, (path, _) in enumerate(group):
            nodes.setdefault(str(min(k * 3 // len(group), 2)), []).append(ImageRecord(Path(path).name, Path(path)))
        segs.append(SEG(seg_id=str(s // per_prompt), prompt=group[0][1], graph=build_graph(nodes)))
    return save_seg_file(SEGDataset(segs, name="gpu-bench"), root / "dataset.yaml")


def timed(cmd: list[str], env: dict) -> float:
    t = time.perf_counter()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stderr[-3000:]}")
    return dt


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n-images", type=int, default=4096)
    ap.add_argument("--image-size", type=int, default=512)
    ap.add_argument("--arch", default="ViT-L-14")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        (root / "images").mkdir()
        pairs = make_images(root / "images", a.n_images, 8, a.image_size)
        write_dataset(root, pairs)
        env = {**os.environ, "TS2_CACHE_DIR": str(root / "cache"), "PYTHONUNBUFFERED": "1"}
        cmd = [sys.executable, "-m", "ts2", "score", f"path={root}", "metric=clipscore", f"metric.arch={a.arch}",
               "metric.pretrained=null", f"device={a.device}", "progress=false"]
        cold = timed([*cmd, f"output_dir={root / 'cold'}"], env)
        warm = timed([*cmd, f"output_dir={root / 'warm'}"], env)
        floor = min(timed([sys.executable, "-c", "import pandas, scipy.stats"], env) for _ in range(3))
    rows = {"n_images": a.n_images, "image_size": a.image_size, "arch": a.arch, "device": a.device,
            "process_s": round(cold, 2), "process_img_s": round(a.n_images / cold, 1), "cached_s": round(warm, 2),
            "floor_s": round(floor, 2), "cached_vs_floor": round(warm / floor, 2)}
    print(f"ts2 score as a process, defaults, {a.arch}, {a.n_images} JPEGs of {a.image_size} px on {a.device}: "
          f"{cold:.1f} s = {a.n_images / cold:.1f} images/s")
    print(f"fully cached re-run: {warm:.2f} s = {warm / floor:.2f}x the floor `import pandas, scipy.stats` "
          f"({floor:.2f} s; target 1.5x)")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
