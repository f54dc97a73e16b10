"""Speed of the human view (``ts2 analyze human=...``) on TIFA v1.0, run by hand.

    python benchmarks/human_speed.py [--file ../shared/human/tifa_v1_human_annotations_with_scores.json]
                                     [--bootstrap 1000] [--permutations 1000] [--reference DIR]

Runs the whole command in a fresh process (imports, loading, every statistic, the tables) and
reports its wall time against the target (< 15 s on the 2-core dev machine with the defaults).
With ``--reference DIR`` (the output folder of an earlier run with the same options and seed)
it also reports the largest absolute difference over every numeric column of every CSV.

Measured 2026-11-23 on the shared 2-core machine (load average 2-3 from other jobs), defaults:
before vectorising (scipy per call, ~130k calls) 12 min 03 s wall / 215 s user CPU; after:
15.0-21.5 s wall (wall follows the other jobs' load), 13-14 s user + 1.5 s sys CPU, of which
~5 s are imports, Hydra and the point estimates (bootstrap=0 human_permutations=0);
max |difference| 7.1e-15 over every output CSV.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
TARGET_S = 15.0


def max_abs_difference(a: Path, b: Path) -> float:
    """Largest |difference| over the numeric columns of ``a``'s CSVs, found again in ``b`` (NaN = NaN).

    ``b`` may have more columns (``human_table.csv`` gained its interval columns).
    """
    worst = 0.0
    for f in sorted(a.glob("*.csv")):
        x, y = pd.read_csv(f), pd.read_csv(b / f.name)
        if not set(x.columns) <= set(y.columns) or len(x) != len(y):
            raise ValueError(f"expected {f.name} in {b} with the rows and columns of {a}, got columns "
                             f"{list(y.columns)} ({len(y)} rows) for {list(x.columns)} ({len(x)} rows)")
        for c in x.select_dtypes("number").columns:
            u, v = x[c].to_numpy(float), y[c].to_numpy(float)
            if not np.array_equal(np.isnan(u), np.isnan(v)):
                raise ValueError(f"{f.name} column {c}: NaN in different rows")
            worst = max(worst, float(np.nanmax(np.abs(u - v), initial=0.0)))
    return worst


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--file", default=str(REPO / ".." / "shared" / "human" / "tifa_v1_human_annotations_with_scores.json"))
    p.add_argument("--bootstrap", type=int, default=1000)
    p.add_argument("--permutations", type=int, default=1000)
    p.add_argument("--reference", type=Path, default=None)
    args = p.parse_args()
    out = Path(tempfile.mkdtemp(prefix="human-speed-"))
    cmd = [sys.executable, "-m", "ts2", "analyze", f"human={args.file}", f"output_dir={out}",
           f"bootstrap={args.bootstrap}", f"human_permutations={args.permutations}", "progress=false"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    t = time.perf_counter()
    subprocess.run(cmd, cwd=REPO, env=env, check=True, capture_output=True)
    wall = time.perf_counter() - t
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)  # CPU time: steadier than wall on a shared machine
    print(f"human view, bootstrap={args.bootstrap} permutations={args.permutations}: {wall:.1f} s wall, "
          f"{ru.ru_utime:.1f} s user + {ru.ru_stime:.1f} s sys CPU "
          f"(target < {TARGET_S:.0f} s: {'ok' if wall < TARGET_S else 'MISSED'}); outputs in {out}")
    if args.reference is not None:
        print(f"max |difference| vs {args.reference}: {max_abs_difference(args.reference, out):.3g}")


if __name__ == "__main__":
    main()
