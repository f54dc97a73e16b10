"""Validate a new text-to-image metric against TS2, from Python, in one script.

The metric is a plain function ``f(images, prompts) -> scores``. It is scored on the bundled
synthetic SEGs (``mini``: rendered shapes, generated on first use), analysed with the TS2
meta-metrics (rank_m, sep_m, delta_m with SEG-bootstrap CIs and chance levels), compared with a
built-in metric (``geneval_shapes``) and a control (``random``), and the figures and the report
are saved. Run it with ``python examples/validate_my_metric.py [OUTPUT_DIR]``; see docs/python.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import ts2

# Shape and colour words the toy metric looks for (mini's prompts name coloured shapes).
COLOURS = {"red": (220, 40, 40), "green": (40, 170, 60), "blue": (40, 80, 220), "yellow": (230, 210, 40),
           "purple": (140, 60, 190), "orange": (240, 140, 30)}


def colour_match(images, prompts):
    """A toy faithfulness metric: the share of the colours named in the prompt that cover at
    least 1% of the image (pixels within a distance of 60 of the named colour)."""
    scores = []
    for image, prompt in zip(images, prompts, strict=True):
        px = np.asarray(image.convert("RGB").resize((64, 64)), dtype=float).reshape(-1, 3)
        named = [c for c in COLOURS if c in prompt.lower()]
        if not named:
            scores.append(0.0)
            continue
        found = [np.mean(np.linalg.norm(px - COLOURS[c], axis=1) < 60) > 0.01 for c in named]
        scores.append(float(np.mean(found)))
    return scores


def main(out: Path) -> None:
    ds = ts2.load_dataset("mini")
    mine = ts2.score(colour_match, ds, name="colour_match", version="1", progress=False)
    builtin = ts2.score("geneval_shapes", ds, progress=False)
    control = ts2.score("random", ds, progress=False)
    # a list of score frames is joined on the key columns; each keeps its role (random is a control)
    a = ts2.analyze([mine, builtin, control], ds, bootstrap=200, chance=20,
                    compare=["colour_match", "geneval_shapes"])
    print(a.summary())
    mm = a.metametrics
    own = mm[(mm["metric"] == "colour_match") & (mm["subset"] == "Avg") & mm["meta_metric"].isin(["rank", "sep", "delta"])]
    for r in own.itertuples():
        # delta_m is unbounded above: it has a chance level but no chance-adjusted value
        adjusted = "-" if np.isnan(r.adjusted) else f"{100 * r.adjusted:.1f} %"
        print(f"[{r.protocol}] colour_match {r.meta_metric}_m = {100 * r.value:.1f} [{100 * r.ci_low:.1f}, {100 * r.ci_high:.1f}] %, "
              f"chance {100 * r.chance:.1f} %, chance-adjusted {adjusted}")
    cmp = a.compare("colour_match", "geneval_shapes")
    for r in cmp[cmp["subset"] == "Avg"].itertuples():
        print(f"[{r.protocol}] colour_match - geneval_shapes, {r.meta_metric}_m: {100 * r.diff:+.1f} points "
              f"[{100 * r.ci_low:+.1f}, {100 * r.ci_high:+.1f}], p = {r.p_value:.3g}")

    out.mkdir(parents=True, exist_ok=True)
    a.plot("histograms").savefig(out / "histograms.png")
    a.plot("scatter", metrics=["colour_match", "geneval_shapes"]).savefig(out / "scatter_rank.png")
    report = a.to_report(out / "report")
    print(f"figures in {out}, report: {report.html}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("outputs/validate_my_metric"))
