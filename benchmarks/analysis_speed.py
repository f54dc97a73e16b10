"""Speed of the analysis on the TS2 structure (2840 images, 165 SEGs), run by hand.

    python benchmarks/analysis_speed.py [--ts2 ../shared/ts2] [--columns 20] [--bootstrap 1000]
                                        [--repeats 3] [--reference-columns 1]

Score columns: the four released ones (``released/scores_subset.csv``) plus derived columns
(seeded noise on the released scores, rounded to 2 or 1 decimals for realistic ties, some with
missing cells), so that every column differs.

Timings (best of ``--repeats``):
- ``table``: ``analyze`` end to end from a DataFrame (validation, join, walk construction,
  every meta-metric) for both protocols, no bootstrap. Target: < 2 s for 20 columns.
- ``bootstrap``: the same with ``--bootstrap`` replicates; the bootstrap share is reported
  separately. Target: < 30 s for 1000 replicates.
- ``reference`` (optional): the plain-loop scipy implementation on ``--reference-columns``
  columns under protocol=paper, extrapolated to ``--columns``, and the speed-up ratio.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
TARGET_TABLE_S = 2.0
TARGET_BOOTSTRAP_S = 30.0


def make_table(ts2: Path, n_columns: int, seed: int = 0) -> pd.DataFrame:
    df = pd.read_csv(ts2 / "released" / "scores_subset.csv", dtype={"seg_id": str, "node": str})
    base = ["clipscore", "alignscore", "blip1_tifa", "blip1_dsg"]
    rng = np.random.default_rng(seed)
    out = df[["seg_id", "file_name", "node"]].copy()
    for j in range(n_columns):
        src = df[base[j % 4]].to_numpy(dtype=float)
        if j < 4:
            col = src
        else:
            col = src + rng.normal(0, 0.05 * (1 + j % 3), len(src))
            col = np.round(col, 1 if j % 2 else 2)
            if j % 5 == 0:
                col[rng.random(len(col)) < 0.01] = np.nan
        out[f"{base[j % 4]}_{j}" if j >= 4 else base[j]] = col
    return out


def best_of(fn, repeats: int) -> tuple[float, object]:
    """Best wall time of ``repeats`` calls (and the last result); CPU time goes to CPU_TIMES."""
    best, best_cpu, result = float("inf"), float("inf"), None
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        result = fn()
        best = min(best, time.perf_counter() - t)
        best_cpu = min(best_cpu, time.process_time() - c)
    CPU_TIMES.append(best_cpu)
    return best, result


CPU_TIMES: list[float] = []


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ts2", type=Path, default=REPO.parent / "shared" / "ts2")
    ap.add_argument("--columns", type=int, default=20)
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--reference-columns", type=int, default=0,
                    help="also time the plain-loop reference on this many columns (about 8 s per column)")
    args = ap.parse_args(argv)
    if not (args.ts2 / "released" / "scores_subset.csv").is_file():
        sys.stderr.write(f"needs the released TS2 files at {args.ts2} (pass --ts2 DIR)\n")
        return 2

    sys.path.insert(0, str(REPO))
    from analysis.pipeline import analyze
    from analysis.stats import bootstrap_group_means, stratified_counts

    df = make_table(args.ts2, args.columns)
    both = ["paper", "graph"]
    t_table, res = best_of(lambda: analyze(df, protocols=both, bootstrap=0), args.repeats)
    t_boot_total, _ = best_of(lambda: analyze(df, protocols=both, bootstrap=args.bootstrap, seed=1), args.repeats)

    def boot_only():
        for pr in res.protocols.values():
            sv = pr.seg_values
            n_m, n_k, n_s = sv.values.shape
            draws = stratified_counts(sv.subsets, args.bootstrap, np.random.default_rng(1))
            bootstrap_group_means(sv.values.reshape(n_m * n_k, n_s), draws, sv.groups())

    t_boot_only, _ = best_of(boot_only, args.repeats)
    n_walks = {p: int(pr.seg_values.n_walks.sum()) for p, pr in res.protocols.items()}
    cpu_table, cpu_boot = CPU_TIMES[0], CPU_TIMES[1]
    load = Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"
    lines = [
        f"machine load average (1 min): {load} on {os.cpu_count()} cores (wall times grow with other jobs' load)",
        f"data: {len(df)} images, {df['seg_id'].nunique()} SEGs, {args.columns} metric columns, "
        f"{len(res.meta_metrics)} meta-metrics, walks {n_walks}",
        f"table (both protocols, no bootstrap): {t_table:.3f} s wall, {cpu_table:.3f} s CPU  target < {TARGET_TABLE_S} s  "
        f"[{'ok' if t_table < TARGET_TABLE_S else 'SLOW'}]",
        f"with bootstrap={args.bootstrap} (both protocols): {t_boot_total:.3f} s wall ({cpu_boot:.3f} s CPU), resampling alone "
        f"{t_boot_only:.3f} s  target < {TARGET_BOOTSTRAP_S} s  [{'ok' if t_boot_total < TARGET_BOOTSTRAP_S else 'SLOW'}]",
    ]
    if args.reference_columns:
        from analysis.pipeline import included_segs
        from analysis.protocols import PROTOCOLS
        sys.path.insert(0, str(REPO / "tests"))  # the plain-loop reference is test code
        from reference_impl import reference_seg_values

        from analysis.scores_io import prepare_inputs, read_scores

        inputs = prepare_inputs(read_scores(df))
        paper = PROTOCOLS["paper"]
        keep = set(included_segs(inputs, paper))
        segs = [s for s in inputs.structure.segs if s.seg_id in keep]
        k = min(args.reference_columns, args.columns)
        t = time.perf_counter()
        reference_seg_values(segs, inputs.scores[:, :k], paper)
        t_ref = (time.perf_counter() - t) / k * args.columns
        t_paper, _ = best_of(lambda: analyze(df, protocols=["paper"], bootstrap=0), args.repeats)
        lines.append(f"reference (plain loops, protocol=paper): {t_ref:.1f} s for {args.columns} columns "
                     f"(extrapolated from {k}); vectorised paper-only {t_paper:.3f} s; ratio {t_ref / t_paper:.0f}x")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
