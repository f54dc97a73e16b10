"""Scoring memory: peak RSS of ``ts2 score`` as the number of images grows (must stay flat).

    python benchmarks/scoring_memory.py [--limits 50,100,200,400] [--arch ViT-B-32] [--batch-size 32]
                                        [--num-workers 0] [--json FILE]

Each run is ``ts2 score dataset=mini limit=N metric=clipscore metric.arch=ARCH
metric.pretrained=null cache=false`` in its own process: an open_clip ViT-B-32-sized model with
random weights (``pretrained=null``: no download; memory does not depend on the weights) scores
the first N images of the bundled synthetic set, with an in-memory cache so every image is
really decoded and scored. The peak RSS of that process (``ru_maxrss`` from ``os.wait4``; with
``--num-workers > 0`` the decoding workers are separate processes and not included) is
reported per N, with the growth over the smallest N. Streaming means the growth is flat (only
the per-image score rows grow: a few hundred bytes each), not proportional to N.
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


def run(limit: int, args, work: Path) -> dict:
    out = work / f"score-{limit}"
    cmd = [sys.executable, "-m", "ts2", "score", "dataset=mini", f"limit={limit}", "metric=clipscore",
           f"metric.arch={args.arch}", "metric.pretrained=null", "cache=false", "device=cpu", "progress=false",
           f"batch_size={args.batch_size}", f"num_workers={args.num_workers}", f"output_dir={out}"]
    log = work / f"score-{limit}.log"
    with open(log, "wb") as f:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=REPO)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
    rc = os.waitstatus_to_exitcode(status)
    if rc != 0:
        raise RuntimeError(f"ts2 score limit={limit} exited with {rc}:\n{log.read_text()[-3000:]}")
    rec = json.loads((out / "run.json").read_text())["metrics"][0]
    return {"limit": limit, "n_images": rec["n_items"], "n_scored": rec["n_scored"], "wall_s": round(wall, 1),
            "images_per_s": round(rec["images_per_s"] or 0.0, 1), "peak_rss_mib": round(usage.ru_maxrss / 1024)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limits", default="50,100,200,400")
    ap.add_argument("--arch", default="ViT-B-32")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--num-workers", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    # Generate the mini set once, outside the measured runs.
    subprocess.run([sys.executable, "-m", "ts2", "data", "info", "dataset=mini"], cwd=REPO, check=True,
                   stdout=subprocess.DEVNULL)
    work = Path(tempfile.mkdtemp(prefix="ts2-scoremem-"))
    rows = []
    for limit in (int(x) for x in args.limits.split(",")):
        r = run(limit, args, work)
        rows.append(r)
        sys.stdout.write(json.dumps(r) + "\n")
        sys.stdout.flush()
    base = rows[0]["peak_rss_mib"]
    sys.stdout.write(f"\n{args.arch} (random weights), batch_size={args.batch_size}, num_workers={args.num_workers}\n"
                     "| images | wall (s) | images/s | peak RSS (MiB) | growth over the first |\n|---:|---:|---:|---:|---:|\n")
    for r in rows:
        sys.stdout.write(f"| {r['n_images']} | {r['wall_s']} | {r['images_per_s']} | {r['peak_rss_mib']:,} | "
                         f"{r['peak_rss_mib'] - base:+,} MiB |\n")
    n0, n1 = rows[0]["n_images"], rows[-1]["n_images"]
    per_image_kib = (rows[-1]["peak_rss_mib"] - base) * 1024 / max(1, n1 - n0)
    sys.stdout.write(f"\ngrowth per extra image: {per_image_kib:.1f} KiB (a decoded 224 x 224 RGB image alone is 147 KiB; "
                     f"flat = streamed)\n")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "arch": args.arch, "batch_size": args.batch_size,
                                               "num_workers": args.num_workers, "per_image_kib": per_image_kib}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
