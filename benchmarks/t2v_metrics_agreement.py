"""Check ``ts2 analyze human=`` on TIFA160 (DSG ratings) against t2v_metrics' own evaluation code, run by hand.

    python benchmarks/t2v_metrics_agreement.py --t2v-repo PATH/t2v_metrics [--shared ../shared] [--workdir DIR]

t2v_metrics' wheel does not ship its evaluation files, so this runs them from a checkout of
github.com/linzhiqiu/t2v_metrics: ``dataset.py``'s ``TIFA160_DSG`` (per-image mean of the DSG
ratings, ``evaluate_scores``: Pearson, Kendall tau-b, pairwise accuracy with tie optimisation from
``tau_optimization.py``) on each of the 10 metrics of the TIFA v1.0 release, and compares each
value with the global rows of ``ts2 analyze human=dsg_tifa160_anns.csv human_scores=<TIFA v1.0
JSON> bootstrap=0``'s ``human_metametrics.csv``. Prints every pair and the largest absolute gap.
Needs numpy, pandas, scipy, scikit-learn, Pillow and torch (dataset.py imports them; its ``cv2``
import, used only by video sets, is stubbed). The suite's ``tests/test_issue44_t2v_reference.py``
checks the same numbers against an independent re-implementation of those two files.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
METRICS = ("bleu", "rouge", "meteor", "spice", "clipscore_vitb32", "tifa_vilt", "tifa_ofa-large", "tifa_git-large",
           "tifa_blip2-flant5xl", "tifa_mplug-large")
#: t2v_metrics' result key, ts2's statistic, and the scale t2v_metrics prints it in (Pearson x100)
STATISTICS = (("pearson_no_grouping", "pearson", 100.0), ("kendall_b_no_grouping", "kendall_b", 1.0),
              ("pairwise_acc_no_grouping", "pairwise_acc", 1.0))


def t2v_values(t2v_repo: Path, tifa_json: Path) -> dict[tuple[str, str], float]:
    """Every metric's three global statistics as t2v_metrics' ``TIFA160_DSG.evaluate_scores`` computes them."""
    sys.modules.setdefault("cv2", types.ModuleType("cv2"))
    sys.path.insert(0, str(t2v_repo))
    here = Path.cwd()
    os.chdir(t2v_repo)  # TIFA160_DSG reads datasets/... relative to the working folder
    try:
        import dataset as t2v_dataset

        (t2v_repo / "tifa160").mkdir(exist_ok=True)  # the image folder it checks for; only scores are used here
        ds = t2v_dataset.TIFA160_DSG(root_dir="./", download=False)
        tifa = json.loads(tifa_json.read_text(encoding="utf-8"))
        out = {}
        for m in METRICS:
            scores = [[[float("nan") if tifa[k].get(m) is None else float(tifa[k][m])]] for k in ds.items]
            res = ds.evaluate_scores(scores)
            for key, stat, scale in STATISTICS:
                v = res[key][0] if isinstance(res[key], tuple) else res[key]
                out[(m, stat)] = float(v) / scale
        return out
    finally:
        os.chdir(here)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--t2v-repo", type=Path, required=True, help="a checkout of linzhiqiu/t2v_metrics")
    ap.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/ts2-t2v-agreement"))
    args = ap.parse_args()
    human = args.shared / "human"
    out = args.workdir / "out"
    subprocess.run([sys.executable, "-m", "ts2", "analyze", f"human={human / 'dsg_tifa160_anns.csv'}",
                    f"human_scores={human / 'tifa_v1_human_annotations_with_scores.json'}", "bootstrap=0",
                    f"output_dir={out}", "progress=false"], check=True, stdout=subprocess.DEVNULL)
    ours = pd.read_csv(out / "human_metametrics.csv")
    ours = ours[(ours.grouping == "global") & (ours.subset.fillna("all") == "all")].set_index(["metric", "statistic"])
    ref = t2v_values(args.t2v_repo.resolve(), human / "tifa_v1_human_annotations_with_scores.json")
    gaps = []
    for (m, stat), v in ref.items():
        mine = float(ours.loc[(m, stat), "value"])
        gaps.append(abs(mine - v))
        sys.stdout.write(f"{m:22s} {stat:13s} t2v_metrics={v:.12f} ts2={mine:.12f}\n")
    ceiling = ours.loc["rater_ceiling"] if "rater_ceiling" in ours.index.get_level_values(0) else None
    sys.stdout.write(f"largest absolute gap: {max(gaps):.3g} over {len(gaps)} values; rater ceiling rows: "
                     f"{0 if ceiling is None else len(ceiling)}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
