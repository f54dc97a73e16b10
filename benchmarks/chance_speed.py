"""Speed of the chance levels' permutation pass, run by hand.

    python benchmarks/chance_speed.py [--ts2 ../shared/ts2] [--n-perm N] [--repeats 3]

On the 19 derived Table-2 columns of ``analysis_speed.py`` (the released columns plus seeded,
rounded noise: every column its own tie pattern), for each protocol:

- ``kernel`` vs ``nodes``: the walk values of ``n_perm`` within-SEG permutations of every column
  (rank, sep, kendall, pair_acc), through the walk kernels (:func:`analysis.compute.walk_values`,
  a sort per walk and column) and through node-pair statistics
  (:class:`analysis.compute.NodeLayout`); their ratio, and that they agree;
- ``chance_levels``: the whole chance computation as ``ts2 analyze`` runs it (CPU seconds), and
  the largest Monte-Carlo error of a chance level on Avg per meta-metric.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))


def best(fn, repeats: int) -> tuple[float, object]:
    out, t_best = None, float("inf")
    for _ in range(repeats):
        t = time.process_time()
        out = fn()
        t_best = min(t_best, time.process_time() - t)
    return t_best, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ts2", type=Path, default=REPO.parent / "shared" / "ts2")
    ap.add_argument("--n-perm", type=int, default=None, help="permutations (default: ts2 analyze's, `chance`)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    if args.n_perm is None:
        from analysis.settings import AnalysisSettings

        args.n_perm = AnalysisSettings().chance
    logging.disable(logging.WARNING)

    from analysis_speed import make_table

    from analysis.chance import chance_levels, permute_within_segs
    from analysis.compute import NodeLayout, walk_values
    from analysis.paper_table2 import METRICS
    from analysis.protocols import get_protocol
    from analysis.scores_io import prepare_inputs, read_scores
    from analysis.walks import build_walk_table
    from seg_data import load_path

    t = make_table(args.ts2, 19)
    t.columns = list(t.columns[:3]) + list(METRICS)  # names as in Table 2, for lower_is_better
    lower = ["llmscore_ec", "llmscore_over"]
    inputs = prepare_inputs(read_scores(t, lower_is_better=lower), load_path(args.ts2), subsets="ts2")
    sigma = np.nanstd(inputs.scores, axis=0, ddof=1)
    order_only = ["rank", "sep", "kendall", "pair_acc"]
    mms = ["rank", "sep", "delta", "kendall", "pair_acc"]
    print(f"19 columns x {args.n_perm} permutations, CPU seconds (best of {args.repeats})")
    for name in ("paper", "graph"):
        proto = get_protocol(name)
        table = build_walk_table(inputs.structure, proto.walks, proto.root_duplication)
        by_id = {s.seg_id: s for s in inputs.structure.segs}
        perm = permute_within_segs(inputs.scores, [np.concatenate(by_id[i].rows) for i in table.seg_ids], args.n_perm,
                                   np.random.default_rng(0))
        layout = NodeLayout(table, inputs.structure)
        t_k, (a, _) = best(partial(walk_values, table, perm, proto, order_only), args.repeats)
        t_n, (b, _) = best(partial(layout.walk_values, perm, proto, order_only), args.repeats)
        same = np.array_equal(np.isnan(a), np.isnan(b)) and float(np.nanmax(np.abs(a - b))) < 1e-12
        t_c, levels = best(partial(chance_levels, inputs.scores, inputs.structure, table, sigma, proto, inputs.metrics,
                                   mms, lower, n_perm=args.n_perm), args.repeats)
        err = {m: round(100 * float(np.nanmax(levels.mc_error[:, k, 0])), 3) for k, m in enumerate(mms)}
        print(f"{name}: walk values kernel {t_k:.2f} s, nodes {t_n:.2f} s ({t_k / t_n:.1f}x; equal: {same}); "
              f"chance_levels {t_c:.2f} s; largest MC error on Avg (points) {err}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
