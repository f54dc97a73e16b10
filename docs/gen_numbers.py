"""Generate the numbers the docs quote about the TS2 release, and write them into the docs.

Every number in ``docs/*.md`` that is computed from the released data (``../shared/ts2`` or
``--data DIR``) sits between two markers::

    <!-- numbers:NAME:start -->...<!-- numbers:NAME:end -->

and is rewritten from :func:`blocks` by ``python docs/gen_numbers.py``; ``--check`` only compares
and exits 1 when a doc differs (``tests/test_docs_numbers.py`` does the same). Everything runs
without bootstrap; the chance levels are seeded (``seed=0``), so every number is deterministic.

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
                    "random-discrete", "chance-errors", "chance-mini", "chance-sep", "chance-rank",
                    "chance-reading", "chance-above-random"),
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
    random_sep = _random_sep(Path(data), inputs)
    out["random-discrete"] = ("a random metric drawn image by image from the overall score distribution of "
                              + " and of ".join(LABELS.get(c, c) for c in random_sep) + " reads sep_m Avg "
                              + ", ".join(f"{LABELS.get(c, c)}'s {_pct(g[0])} (paper) / {_pct(g[1])} (graph)"
                                          for c, g in random_sep.items())
                              + f" (mean of {RANDOM_DRAWS} seeded draws each)")
    out.update(_chance_blocks(inputs, metrics, random_sep))
    out["chance-mini"] = _mini_chance()
    return out


#: The scores of ``ts2 run`` on the embedded mini set (what the mini sentence of the chance section reads).
MINI_SCORES = DOCS.parent / "tests" / "data" / "mini_run_scores.csv"


def _mini_chance() -> str:
    """The mini set's ``random`` control and ``geneval_shapes`` against their sep_m chance levels
    (paper protocol, the default number of permutations)."""
    from analysis.pipeline import analyze
    from analysis.scores_io import read_scores
    from analysis.settings import AnalysisSettings

    res = analyze(read_scores(MINI_SCORES), protocols=["paper"], meta_metrics=["sep"], bootstrap=0,
                  chance=AnalysisSettings().chance, seed=0)
    f = res.metametrics_frame().set_index(["metric", "meta_metric", "subset"])

    def c(m: str, col: str) -> str:
        return _pct(float(f.loc[(m, "sep", "Avg"), col]))

    return (f"`random` reads sep_m {c('random', 'value')} (paper protocol) against a chance level of "
            f"{c('random', 'chance')} [{c('random', 'chance_low')}, {c('random', 'chance_high')}]: chance-adjusted "
            f"{c('random', 'adjusted')}; `geneval_shapes` reads {c('geneval_shapes', 'value')} for a chance level of "
            f"{c('geneval_shapes', 'chance')}: adjusted {c('geneval_shapes', 'adjusted')}")


#: Permutations behind the chance table (``chance=200``: every Avg Monte-Carlo error below 0.1).
CHANCE_TABLE_N = 200
RANDOM_DRAWS = 5


def _chance_blocks(inputs, metrics: list[str], random_sep: dict[str, list[float]]) -> dict[str, str]:
    """The chance-level section: Monte-Carlo errors at the default N, the sep_m table at
    :data:`CHANCE_TABLE_N`, rank_m's level, and the reading of Table 2's sep column."""
    from analysis.paper_table2 import LABELS
    from analysis.pipeline import analyze
    from analysis.settings import AnalysisSettings

    def frame(n: int, mms: list[str]):
        res = analyze(inputs, protocols=["paper", "graph"], meta_metrics=mms, bootstrap=0, chance=n, seed=0)
        return res.metametrics_frame().set_index(["protocol", "metric", "meta_metric", "subset"])

    out: dict[str, str] = {}
    n_default = AnalysisSettings().chance
    f = frame(n_default, ["rank", "sep", "delta", "kendall", "pair_acc"])
    err = f["chance_mc_error"] * 100

    def top(p: str, mm: str, sub: bool = False) -> float:
        e = err.xs((p, mm), level=("protocol", "meta_metric"))
        return float(e[e.index.get_level_values("subset") != "Avg"].max() if sub else e.xs("Avg", level="subset").max())

    zero_graph = [mm for mm in ("rank", "delta", "kendall", "pair_acc") if top("graph", mm) == 0]
    zero_paper = [mm for mm in ("rank", "delta", "kendall", "pair_acc") if top("paper", mm) == 0]
    est_paper = [mm for mm in ("rank", "kendall") if mm not in zero_paper]
    out["chance-errors"] = (
        f"On TS2's {len(metrics)} released columns at the default N={n_default}, the largest error on Avg is 0 for "
        f"{', '.join(zero_graph)} under `graph` and {top('graph', 'sep'):.2f} points for its sep_m; under `paper` 0 for "
        f"{', '.join(zero_paper)}, " + "".join(f"{top('paper', mm):.2f} for {mm}, " for mm in est_paper)
        + f"{top('paper', 'sep'):.2f} for sep_m (up to {max(top(p, 'sep', True) for p in ('paper', 'graph')):.2f} "
        "on the subsets)")
    g = frame(CHANCE_TABLE_N, ["rank", "sep"])

    def c(p: str, m: str, mm: str, col: str) -> float:
        return float(g.loc[(p, m, mm, "Avg"), col])

    worst = max(c(p, m, mm, "chance_mc_error") for p in ("paper", "graph") for m in metrics for mm in ("rank", "sep"))
    out["chance-errors"] += f"; with `chance={CHANCE_TABLE_N}` every Avg error is at most {100 * worst:.2f}"
    rows = ["| metric | paper: value | chance [95% band] | adjusted | graph: value | chance [95% band] | adjusted |",
            "|---|---|---|---|---|---|---|"]
    for m in metrics:
        cells = []
        for p in ("paper", "graph"):
            cells += [_pct(c(p, m, "sep", "value")),
                      f"{_pct(c(p, m, 'sep', 'chance'))} [{_pct(c(p, m, 'sep', 'chance_low'))}, "
                      f"{_pct(c(p, m, 'sep', 'chance_high'))}]", _pct(c(p, m, "sep", "adjusted"))]
        rows.append(f"| {LABELS.get(m, m)} | " + " | ".join(cells) + " |")
    out["chance-sep"] = "\n" + "\n".join(rows) + "\n"
    rank_paper = max(abs(c("paper", m, "rank", "chance")) for m in metrics)
    exact_graph = all(c("graph", m, "rank", "chance_mc_error") == 0 and c("graph", m, "rank", "chance") == 0
                      for m in metrics)
    half = max((c(p, m, "rank", "chance_high") - c(p, m, "rank", "chance_low")) / 2 for p in ("paper", "graph")
               for m in metrics)
    out["chance-rank"] = (f"rank_m's chance level is 0 ({'exactly, under `graph`; ' if exact_graph else ''}within "
                          f"+-{100 * rank_paper:.1f} under `paper`) for all {len(metrics)}, its band about +-{100 * half:.0f}")
    cont, disc = "clipscore", "blip1_tifa"
    if cont in metrics and disc in metrics:
        adj = [c("paper", m, "sep", "adjusted") for m in metrics]
        raw_gap = c("paper", cont, "sep", "value") - c("paper", disc, "sep", "value")
        floor_gap = c("paper", cont, "sep", "chance") - c("paper", disc, "sep", "chance")
        above = {m: c("paper", m, "sep", "value") - c("paper", m, "sep", "chance") for m in (cont, disc)}
        out["chance-reading"] = (
            f"above chance, the metrics separate error levels {100 * min(adj):.0f}-{100 * max(adj):.0f}% of the way "
            f"from chance to perfect (paper protocol). CLIPScore's chance level is {_pct(c('paper', cont, 'sep', 'chance'))} "
            f"(paper) and {_pct(c('graph', cont, 'sep', 'chance'))} (graph); CLIPScore leads TIFA-BLIP1 by "
            f"{100 * raw_gap:.1f} raw points ({_pct(c('paper', cont, 'sep', 'value'))} vs "
            f"{_pct(c('paper', disc, 'sep', 'value'))}) while its floor is {100 * floor_gap:.1f} points higher; "
            f"TIFA-BLIP1 rises {100 * above[disc]:.1f} points above its floor, CLIPScore {100 * above[cont]:.1f}. "
            f"Relative to the room above chance, CLIPScore "
            f"{'still leads' if adj[metrics.index(cont)] > adj[metrics.index(disc)] else 'no longer leads'} (adjusted "
            f"{_pct(c('paper', cont, 'sep', 'adjusted'))} vs {_pct(c('paper', disc, 'sep', 'adjusted'))})")
        if disc in random_sep:
            beyond = c("paper", disc, "sep", "value") - random_sep[disc][0]
            out["chance-above-random"] = (f"TIFA-BLIP1's {100 * above[disc]:.1f} points above its floor are "
                                          f"{100 * beyond:.1f} above a random metric with its score distribution "
                                          "(paper protocol)")
    return out


def _random_sep(data: Path, inputs, draws: int = RANDOM_DRAWS) -> dict[str, list[float]]:
    """sep_m Avg (paper, graph) of random metrics drawn from the overall score distribution of each
    discrete released column (TIFA-BLIP1, DSG-BLIP1): no per-SEG ties like the metric's own, so
    another bar than its chance level. Mean of ``draws`` seeded draws."""
    import pandas as pd

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
    return {c: [float(np.mean([res.value(f"random_{c}_{d}", "sep", protocol=p) for d in range(draws)]))
                for p in ("paper", "graph")] for c in cols}


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
