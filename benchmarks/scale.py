"""Scale of the analysis: ``ts2 analyze`` (both protocols, no bootstrap) at 2.8k, 10k and 100k images.

    python benchmarks/scale.py [--sizes ts2,10k,100k] [--metrics 20] [--workdir DIR] [--ranking]
                               [--profile DIR] [--json FILE]

For each size, a SEG structure and a score table with ``--metrics`` columns of seeded uniform
random scores (one row per image):

- ``ts2``: the released TS2 structure (``../shared/ts2/metadata.csv``: 165 SEGs, 2840 images);
- ``10k``, ``100k`` (any ``<n>k``): ``ts2 data make-synthetic images=false`` (structure only,
  explicit edges) with enough SEGs for at least that many images (~13 images per SEG).

``ts2 analyze scores=... path=... protocols=[paper,graph] bootstrap=0`` then runs in its own
process: the wall time of that process (start-up, reading, joining, both protocols, writing every
output file) and its peak RSS (``ru_maxrss`` from ``os.wait4``) are the numbers reported, plus
the time per 1000 images (flat = linear scaling). The significance-grouped ranking (a permutation
test per metric pair) is off by default (``ranking.enabled=false``): it is a statistics option
like the bootstrap, costing O(permutations x SEGs x metric pairs); ``--ranking`` adds a run with it.

Targets (issue 8): 100k images x 20 metrics in under 60 s and 4 GB on this 2-core machine,
scaling linearly. ``--profile DIR`` writes a cProfile of each analysis run (``pstats``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_TS2 = REPO.parent / "shared" / "ts2"
IMAGES_PER_SEG = 12.8  # images per SEG of make-synthetic with the default 2-4 images per node (98,889 / 7,700 = 12.84)


def run_child(cmd: list[str], log: Path) -> dict:
    """Run ``cmd``; return its wall time, peak RSS (MiB) and exit code."""
    with open(log, "wb") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage
        wall = time.perf_counter() - t0
    rc = os.waitstatus_to_exitcode(status)
    if rc != 0:
        raise RuntimeError(f"{' '.join(cmd[:6])} ... exited with {rc}; see {log}:\n{log.read_text()[-3000:]}")
    return {"wall_s": wall, "peak_rss_mib": usage.ru_maxrss / 1024, "rc": rc}


def make_structure(size: str, work: Path) -> tuple[Path, dict]:
    """The dataset path for ``size`` and how it was made."""
    if size == "ts2":
        if not (SHARED_TS2 / "metadata.csv").is_file():
            raise FileNotFoundError(f"needs {SHARED_TS2}/metadata.csv (the released TS2 metadata)")
        return SHARED_TS2, {"source": str(SHARED_TS2 / "metadata.csv")}
    n_images = int(float(size.rstrip("kK")) * 1000)
    n_segs = math.ceil(n_images / IMAGES_PER_SEG)
    out = work / f"syn-{size}"
    if (out / "dataset.yaml").is_file():
        return out, {"n_segs": n_segs, "make_synthetic_s": None}
    r = run_child([sys.executable, "-m", "ts2", "data", "make-synthetic", f"out={out}", f"n_segs={n_segs}", "seed=0",
                   "images=false"], work / f"make-{size}.log")
    return out, {"n_segs": n_segs, "make_synthetic_s": r["wall_s"], "make_synthetic_rss_mib": r["peak_rss_mib"]}


def make_scores(dataset: Path, n_metrics: int, out: Path) -> int:
    """One row per image of ``dataset``, ``n_metrics`` columns of seeded uniform scores."""
    import numpy as np

    from seg_data import load_path

    table = load_path(dataset).image_table()
    rng = np.random.default_rng(0)
    df = table[["seg_id", "node", "file_name"]].copy()
    for k in range(n_metrics):
        df[f"m{k:02d}"] = rng.random(len(df))
    df.to_csv(out, index=False)
    return len(df)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="ts2,10k,100k")
    ap.add_argument("--metrics", type=int, default=20)
    ap.add_argument("--workdir", default=None, help="keep datasets here (reused between runs)")
    ap.add_argument("--ranking", action="store_true", help="also time a run with the permutation ranking on")
    ap.add_argument("--profile", default=None, help="write a cProfile of each analysis run into this folder")
    ap.add_argument("--json", default=None, help="write the results here")
    args = ap.parse_args(argv)

    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="ts2-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for size in args.sizes.split(","):
        dataset, made = make_structure(size, work)
        scores = work / f"scores-{size}-{args.metrics}.csv"
        n = make_scores(dataset, args.metrics, scores)
        variants = [("no ranking", ["ranking.enabled=false"])] + ([("ranking", [])] if args.ranking else [])
        for label, extra in variants:
            prof = []
            if args.profile:
                Path(args.profile).mkdir(parents=True, exist_ok=True)
                prof = ["-m", "cProfile", "-o", str(Path(args.profile) / f"analyze-{size}-{label.replace(' ', '_')}.prof")]
            out = work / f"analyze-{size}-{label.replace(' ', '_')}"
            cmd = [sys.executable, *prof, "-m", "ts2", "analyze", f"scores={scores}", f"path={dataset}",
                   "protocols=[paper,graph]", "bootstrap=0", f"output_dir={out}", *extra]
            r = run_child(cmd, work / f"analyze-{size}-{label.replace(' ', '_')}.log")
            row = {"size": size, "n_images": n, "n_metrics": args.metrics, "variant": label, **made,
                   "analyze_s": round(r["wall_s"], 2), "peak_rss_mib": round(r["peak_rss_mib"]),
                   "s_per_1k_images": round(r["wall_s"] / (n / 1000), 3)}
            rows.append(row)
            sys.stdout.write(json.dumps(row) + "\n")
            sys.stdout.flush()

    sys.stdout.write("\n| images | SEGs | metrics | variant | ts2 analyze (s) | s / 1k images | peak RSS (MiB) |\n"
                     "|---:|---:|---:|---|---:|---:|---:|\n")
    for r in rows:
        sys.stdout.write(f"| {r['n_images']:,} | {r.get('n_segs') or 165} | {r['n_metrics']} | {r['variant']} | "
                         f"{r['analyze_s']:.1f} | {r['s_per_1k_images']:.2f} | {r['peak_rss_mib']:,} |\n")
    big = [r for r in rows if r["n_images"] >= 100_000 and r["variant"] == "no ranking"]
    for r in big:
        ok = r["analyze_s"] < 60 and r["peak_rss_mib"] < 4096
        sys.stdout.write(f"\ntarget (100k images x {r['n_metrics']} metrics < 60 s and < 4 GB): "
                         f"{'MET' if ok else 'MISSED'} ({r['analyze_s']:.1f} s, {r['peak_rss_mib']} MiB)\n")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "cpus": os.cpu_count(), "load_avg": os.getloadavg()},
                                              indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
