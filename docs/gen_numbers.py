"""Generate the numbers the docs quote about the TS2 release, and write them into the docs.

Every number in ``docs/*.md`` that is computed from the released data (``../shared/ts2`` or
``--data DIR``) sits between two markers::

    <!-- numbers:NAME:start -->...<!-- numbers:NAME:end -->

and is rewritten from :func:`blocks` by ``python docs/gen_numbers.py``; ``--check`` only compares
and exits 1 when a doc differs (``tests/test_docs_numbers.py`` does the same). Everything runs
without bootstrap or chance levels, so it is fast and deterministic; numbers that depend on
chance levels (the chance-level section of ``docs/analysis.md``) are not generated here.

Usage::

    python docs/gen_numbers.py [--data ../shared/ts2] [--check]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np

DOCS = Path(__file__).resolve().parent
DEFAULT_DATA = DOCS.parent.parent / "shared" / "ts2"
# Which doc holds which blocks (a block name appears in exactly one doc).
DOC_BLOCKS: dict[str, tuple[str, ...]] = {
    "analysis.md": ("table2-paper", "failure-codes", "min-ranks", "seg103-skip", "delta-subsets", "graph-clip",
                    "random-discrete"),
}
SUBSETS = ("Avg", "Synth", "Nat", "Real")
_MARK = re.compile(r"<!-- numbers:(?P<name>[\w-]+):start -->(?P<body>.*?)<!-- numbers:(?P=name):end -->", re.S)


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _inputs(data: Path):
    from analysis.scores_io import prepare_inputs, read_scores
    from seg_data import load_ts2_release

    scores = data / "released" / "scores_subset.csv"
    if not scores.is_file():
        raise FileNotFoundError(f"expected the released scores at {scores}, found none (--data DIR)")
    table = read_scores(scores)
    return table, prepare_inputs(table, load_ts2_release(data), "ts2")


def blocks(data: Path = DEFAULT_DATA) -> dict[str, str]:
    """Block name -> its generated text, computed from the release at ``data``.

    Parameters
    ----------
    data : Path
        A TS2 release folder (``metadata.csv``, ``released/scores_subset.csv``).

    Returns
    -------
    dict of str to str
    """
    from analysis.paper_table2 import LABELS
    from analysis.pipeline import analyze
    from analysis.protocols import FAILURE_CODES, PROTOCOLS, failure_cells

    table, inputs = _inputs(Path(data))
    metrics = list(table.metrics)
    paper, graph = PROTOCOLS["paper"], PROTOCOLS["graph"]
    res = analyze(inputs, protocols=[paper, graph, paper.replace(name="min", tie_method="min"),
                                     graph.replace(name="graph_min", tie_method="min"),
                                     paper.replace(name="skip", degenerate_walk="skip")],
                  meta_metrics=["rank", "sep", "delta"], bootstrap=0, chance=0)

    def v(m: str, mm: str, s: str = "Avg", p: str = "paper") -> float:
        return res.value(m, mm, s, protocol=p)

    out: dict[str, str] = {}
    lab = [LABELS.get(m, m) for m in metrics]
    rows = ["| % | " + " | ".join(lab) + " |", "|---|" + "---|" * len(metrics)]
    for mm in ("rank", "sep"):
        rows.append(f"| {mm} Avg/Synth/Nat/Real | "
                    + " | ".join(" / ".join(_pct(v(m, mm, s)) for s in SUBSETS) for m in metrics) + " |")
    rows.append("| delta Avg | " + " | ".join(_pct(v(m, "delta")) for m in metrics) + " |")
    out["table2-paper"] = "\n" + "\n".join(rows) + "\n"

    counts = {c: int(failure_cells(table.frame[c].to_numpy(dtype=float), FAILURE_CODES[c]).sum())
              for c in FAILURE_CODES if c in metrics}
    if counts:
        out["failure-codes"] = "; ".join(f"`{c}` has {n} cell(s) holding its failure code" for c, n in counts.items())
    else:
        out["failure-codes"] = (f"the released `scores_subset.csv` has none of the columns that declare one "
                                f"({', '.join(f'`{c}`' for c in FAILURE_CODES)}), so 0 cells")

    spans = []
    for base, alt in (("paper", "min"), ("graph", "graph_min")):
        drops = [100 * (v(m, "rank", p=base) - v(m, "rank", p=alt)) for m in metrics]
        spans.append(f"{min(drops):.1f}-{max(drops):.1f} points under `{base}`")
    out["min-ranks"] = " and ".join(spans)

    out["seg103-skip"] = (f"{_pct(v('clipscore', 'sep', p='skip'))} (Avg) / {_pct(v('clipscore', 'sep', 'Synth', 'skip'))} "
                          f"(Synth) and delta {_pct(v('clipscore', 'delta', p='skip'))}")

    # delta_m per subset: SEG means with one normaliser (the paper protocol), and with each
    # subset normalised by the std of its own images' scores.
    ps = res.per_seg_frame()
    d = ps[(ps.protocol == "paper") & (ps.metric == "clipscore") & (ps.meta_metric == "delta")]
    j = metrics.index("clipscore")
    x = inputs.scores[:, j]
    sigma_all = float(np.nanstd(x, ddof=1))
    own = []
    for s in SUBSETS[1:]:
        segs = [g for g in inputs.structure.segs if g.subset == s]
        rows_s = np.unique(np.concatenate([np.concatenate(g.rows) for g in segs]))
        sigma_s = float(np.nanstd(x[rows_s], ddof=1))
        own.append(d[d.subset == s]["value"].mean() * sigma_all / sigma_s)
    out["delta-subsets"] = (" / ".join(_pct(v("clipscore", "delta", s)) for s in SUBSETS[1:])
                            + " for CLIPScore (SEG means, one normaliser; normalising each subset by its own std "
                            + "gives " + " / ".join(_pct(o) for o in own) + ", no closer)")

    lead = {p: LABELS.get(max(metrics, key=lambda m: v(m, "rank", p=p)), "?") for p in ("paper", "graph")}
    same = "holds in both" if lead["paper"] == lead["graph"] else "differs"
    out["graph-clip"] = (f"CLIPScore rank {' / '.join(_pct(v('clipscore', 'rank', s, 'graph')) for s in SUBSETS)} and "
                         f"sep {' / '.join(_pct(v('clipscore', 'sep', s, 'graph')) for s in SUBSETS)} "
                         f"(Avg/Synth/Nat/Real): the equations and the published code are different computations, "
                         f"and the ranking of the {len(metrics)} metrics on rank_m Avg ({lead['paper']} first) {same}")
    out["random-discrete"] = _random_discrete(Path(data), inputs)
    return out


def _random_discrete(data: Path, inputs, draws: int = 5) -> str:
    """sep_m Avg of random metrics drawn from the overall score distribution of each discrete
    released column (TIFA-BLIP1, DSG-BLIP1): no per-SEG ties like the metric's own, so another bar
    than its chance level. Mean of ``draws`` seeded draws, both protocols."""
    import pandas as pd

    from analysis.paper_table2 import LABELS
    from analysis.pipeline import analyze
    from analysis.scores_io import prepare_inputs, read_scores
    from seg_data import load_ts2_release

    df = pd.read_csv(data / "released" / "scores_subset.csv", dtype={"seg_id": str, "node": str})
    rng = np.random.default_rng(0)
    cols = [c for c in ("blip1_tifa", "blip1_dsg") if c in df.columns]
    names = []
    for c in cols:
        pool = df[c].dropna().to_numpy()
        for d in range(draws):
            df[f"random_{c}_{d}"] = rng.choice(pool, size=len(df))
            names.append(f"random_{c}_{d}")
    inp = prepare_inputs(read_scores(df[["seg_id", "file_name", "node", *names]]), load_ts2_release(data), "ts2")
    res = analyze(inp, protocols=["paper", "graph"], meta_metrics=["sep"], bootstrap=0, chance=0)
    parts = []
    for c in cols:
        got = [np.mean([res.value(f"random_{c}_{d}", "sep", protocol=p) for d in range(draws)]) for p in ("paper", "graph")]
        parts.append(f"{LABELS.get(c, c)}'s {_pct(got[0])} (paper) / {_pct(got[1])} (graph)")
    return ("a random metric drawn image by image from the overall score distribution of " + " and of ".join(
        f"{LABELS.get(c, c)}" for c in cols) + " reads sep_m Avg " + ", ".join(parts)
        + f" (mean of {draws} seeded draws each)")


def current(text: str) -> dict[str, str]:
    """Block name -> the text between its markers in ``text``."""
    return {m["name"]: m["body"] for m in _MARK.finditer(text)}


def rewrite(text: str, new: dict[str, str]) -> str:
    """``text`` with every marked block whose name is in ``new`` replaced."""
    def sub(m: re.Match) -> str:
        name = m["name"]
        body = new.get(name, m["body"])
        return f"<!-- numbers:{name}:start -->{body}<!-- numbers:{name}:end -->"

    return _MARK.sub(sub, text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="TS2 release folder (default ../shared/ts2)")
    ap.add_argument("--check", action="store_true", help="only compare; exit 1 when a doc differs")
    args = ap.parse_args(argv)
    new = blocks(args.data)
    stale = []
    for doc, names in DOC_BLOCKS.items():
        path = DOCS / doc
        text = path.read_text(encoding="utf-8")
        have = current(text)
        missing = [n for n in names if n not in have]
        if missing:
            sys.stderr.write(f"{path}: expected the marked blocks {missing}, found none\n")
            return 2
        if any(have[n] != new[n] for n in names):
            stale.append(doc)
            if not args.check:
                path.write_text(rewrite(text, {n: new[n] for n in names}), encoding="utf-8")
    verb = "differ from the data" if args.check else "rewritten"
    sys.stdout.write(f"{len(stale)} doc(s) {verb}: {stale}\n")
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
