"""The printed Table 2 of the T2IScoreScore paper (Saxon et al., 2024), as data.

Public numbers from the paper, kept so that ``ts2 reproduce`` can list the discrepancies between
a reproduction and the print, and so that the Pareto frontier of Figure 4 can be recomputed from
the paper's FLOPs row. Values are in % as printed (``rank``, ``sep``, ``delta`` x ``Avg``,
``Synth``, ``Nat``, ``Real``); :func:`table2` returns them as fractions, like
``metametrics.csv``.

Column names follow the released per-image scores (``released/scores_subset.csv``):
``clipscore``, ``alignscore``, ``<vlm>_tifa``, ``<vlm>_dsg``; the caption-based metrics are
``llmscore_ec``, ``llmscore_over``, ``viescore``. Only ``clipscore``, ``alignscore``,
``blip1_tifa`` and ``blip1_dsg`` have released per-image scores (:data:`RELEASED_METRICS`).

Known issues of the print (see the TS2 data README): the two LLMScore ``delta`` columns are
swapped, and the ``delta`` Synth/Nat/Real rows cannot be reproduced by any aggregation of the
released scores (:data:`IRREPRODUCIBLE`).
"""

from __future__ import annotations

__all__ = ["METRICS", "LABELS", "FAMILIES", "FLOPS", "RELEASED_METRICS", "IRREPRODUCIBLE", "table2", "printed",
           "compare_with_printed"]

METRICS: tuple[str, ...] = (
    "clipscore", "alignscore",
    "mplug_tifa", "llava15_tifa", "llava15alt_tifa", "instructblip_tifa", "blip1_tifa", "fuyu_tifa", "gpt4v_tifa",
    "mplug_dsg", "llava15_dsg", "llava15alt_dsg", "instructblip_dsg", "blip1_dsg", "fuyu_dsg", "gpt4v_dsg",
    "llmscore_ec", "llmscore_over", "viescore",
)

# Display names as in the paper's header.
LABELS: dict[str, str] = dict(zip(METRICS, (
    "CLIPScore", "ALIGNScore",
    "TIFA mPLUG", "TIFA LLaVA 1.5", "TIFA LLaVA 1.5 (alt)", "TIFA InstructBLIP", "TIFA BLIP1", "TIFA Fuyu", "TIFA GPT4-V",
    "DSG mPLUG", "DSG LLaVA 1.5", "DSG LLaVA 1.5 (alt)", "DSG InstructBLIP", "DSG BLIP1", "DSG Fuyu", "DSG GPT4-V",
    "LLMScore EC", "LLMScore Over", "VIEScore",
), strict=True))

FAMILIES: dict[str, str] = {m: ("Emb-based" if i < 2 else "TIFA" if i < 9 else "DSG" if i < 16 else "Caption-based")
                            for i, m in enumerate(METRICS)}

# The table body exactly as printed, one line per (meta-metric, subset), columns in METRICS order.
_PRINTED = """
rank  Avg   71.4 73.9  71.0 74.5 74.4 76.5 73.8 38.7 77.9  70.4 76.2 75.0 79.0 76.6 29.5 79.6  48.8 57.7 37.8
rank  Synth 75.0 77.6  72.6 79.2 79.2 80.2 78.8 44.5 83.6  74.6 80.1 81.6 85.1 81.6 35.4 82.6  50.2 61.6 42.5
rank  Nat   58.0 70.2  66.9 62.8 64.0 65.1 62.2 23.5 61.6  65.3 65.9 68.8 70.7 71.6 20.5 73.7  36.2 44.4 22.4
rank  Real  69.3 62.6  68.2 66.7 64.5 71.6 64.0 29.7 69.5  58.4 70.0 54.2 62.0 61.2 14.2 73.0  54.4 54.1 33.2
sep   Avg   90.7 92.8  80.6 82.5 81.9 85.0 81.8 67.2 83.2  78.4 83.1 80.3 84.2 80.8 63.6 84.2  73.6 73.5 51.8
sep   Synth 90.5 94.1  80.6 85.5 85.2 86.7 84.1 67.3 86.2  80.9 85.7 83.9 87.8 84.9 65.8 86.6  71.1 72.8 53.7
sep   Nat   91.5 92.6  84.2 75.1 75.6 82.8 77.9 75.7 80.5  71.2 80.9 76.7 81.8 73.3 68.6 81.7  80.5 76.7 44.5
sep   Real  90.3 87.9  77.4 76.8 74.4 80.5 76.4 59.3 73.7  75.1 74.5 69.4 71.9 70.8 50.3 76.6  77.3 73.6 50.7
delta Avg   89.7 95.6  92.4 97.5 97.1 99.8 94.0 43.9 92.3  94.2 104.7 102.0 110.6 103.7 37.7 110.2  66.9 56.3 45.9
delta Synth 89.9 95.6  92.5 97.6 97.3 99.9 93.9 44.6 92.5  94.4 104.7 102.1 110.7 103.6 37.8 110.1  67.2 56.7 46.7
delta Nat   92.5 98.6  94.4 98.7 98.8 101.1 95.5 46.1 93.9  96.0 105.5 103.0 111.6 104.6 39.3 111.5  66.2 56.4 46.6
delta Real  95.1 100.8  96.0 100.5 100.4 102.6 96.9 46.9 95.9  97.3 106.8 104.2 113.0 105.9 39.4 113.0  65.0 56.0 46.3
"""

# "FLOP/run" row: estimated FLOPs to score one image (paper section A.3: ~2N per forward pass).
_FLOPS_PRINTED = "604M 688M  224T 224T 224T 224T 224T 224T 1.66P  140T 140T 140T 140T 140T 140T 860T  7.01T 7.01T 2.6T"
_SUFFIX = {"M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
FLOPS: dict[str, float] = {m: float(v[:-1]) * _SUFFIX[v[-1]] for m, v in zip(METRICS, _FLOPS_PRINTED.split(), strict=True)}

RELEASED_METRICS: tuple[str, ...] = ("clipscore", "alignscore", "blip1_tifa", "blip1_dsg")

# (meta_metric, subset) cells that no aggregation of the released scores reproduces.
IRREPRODUCIBLE: frozenset[tuple[str, str]] = frozenset({("delta", "Synth"), ("delta", "Nat"), ("delta", "Real")})


def _parse() -> dict[tuple[str, str, str], float]:
    out: dict[tuple[str, str, str], float] = {}
    for line in _PRINTED.strip().splitlines():
        mm, subset, *vals = line.split()
        if len(vals) != len(METRICS):  # a transcription slip must not shift columns silently
            raise RuntimeError(f"Table 2 row {mm}/{subset}: expected {len(METRICS)} values, got {len(vals)}")
        for m, v in zip(METRICS, vals, strict=True):
            out[(m, mm, subset)] = float(v)
    return out


_TABLE = _parse()


def printed(metric: str, meta_metric: str, subset: str) -> float:
    """One printed cell, in % (as in the paper).

    Raises
    ------
    KeyError
        Unknown metric / meta-metric / subset; the message lists the valid names.
    """
    try:
        return _TABLE[(metric, meta_metric, subset)]
    except KeyError as e:
        raise KeyError(f"Table 2 has no cell ({metric!r}, {meta_metric!r}, {subset!r}); expected metric in "
                       f"{list(METRICS)}, meta_metric in ['rank', 'sep', 'delta'], subset in "
                       f"['Avg', 'Synth', 'Nat', 'Real']") from e


def table2(metrics=None):
    """Table 2 as a long :class:`pandas.DataFrame` in the ``metametrics.csv`` layout.

    Columns ``metric, meta_metric, subset, value, printed, flops, label, family``: ``value`` is the
    printed number as a fraction (``71.4`` -> ``0.714``), ``printed`` the number as printed (%).

    Parameters
    ----------
    metrics : sequence of str, optional
        Restrict to these columns (e.g. :data:`RELEASED_METRICS`); default all 19.
    """
    import pandas as pd

    keep = METRICS if metrics is None else tuple(metrics)
    unknown = [m for m in keep if m not in METRICS]
    if unknown:
        raise KeyError(f"not in Table 2: {unknown}; expected names from {list(METRICS)}")
    rows = [{"metric": m, "meta_metric": mm, "subset": s, "value": v / 100.0, "printed": v, "flops": FLOPS[m],
             "label": LABELS[m], "family": FAMILIES[m]}
            for (m, mm, s), v in _TABLE.items() if m in keep]
    return pd.DataFrame(rows)


def _unreproduced_rows(metametrics, missing: dict) -> list[dict]:
    """The printed cells of each metric of ``missing`` that ``metametrics`` lacks, per protocol of
    ``metametrics`` (input order), unreproduced (NaN) with the reason in ``known``."""
    import numpy as np

    rows = []
    for proto in dict.fromkeys(metametrics["protocol"]) if missing else ():
        for m, why in missing.items():
            if m in set(metametrics["metric"]):
                continue
            rows += [{"metric": m, "protocol": str(proto), "meta_metric": key[1], "subset": key[2], "printed": p,
                      "reproduced": np.nan, "difference": np.nan, "match": False, "known": why}
                     for key, p in _TABLE.items() if key[0] == m]
    return rows


def _known_difference(key: tuple[str, str, str], protocol: str, missing: dict) -> str:
    """Why a reproduced (metric, meta_metric, subset) cell may differ from the print, when that is
    expected: the metric's values are missing, the delta subset rows, or another protocol ("" if none)."""
    if key[0] in missing:
        return missing[key[0]]
    if (key[1], key[2]) in IRREPRODUCIBLE:
        return "delta subset rows of the print cannot be reproduced from the released scores"
    if protocol != "paper":
        return "another protocol than the authors' code behind the print"
    return ""


def compare_with_printed(metametrics, tolerance: float = 0.05, missing=None):
    """Every cell of ``metametrics`` that Table 2 prints, next to the printed number.

    Parameters
    ----------
    metametrics : DataFrame
        ``metametrics.csv`` rows (``metric, protocol, meta_metric, subset, value``; values as
        fractions). Rows whose (metric, meta_metric, subset) is not in Table 2 are ignored.
    tolerance : float
        Largest difference in percentage points that still counts as equal. The default 0.05
        means "equal after rounding to the printed 0.1" (up to the half-way case).
    missing : mapping, optional
        Metric -> why it has no values (e.g. its column is missing from the score file): its
        printed cells are listed anyway, unreproduced, with that reason in ``known``.

    Returns
    -------
    DataFrame
        ``metric, protocol, meta_metric, subset, printed, reproduced, difference, match, known``:
        ``printed``/``reproduced`` in %, ``difference`` = reproduced - printed (percentage
        points), ``known`` explains a difference when it is expected: the delta subset rows
        (documented in the TS2 data README as irreproducible), or a protocol other than
        ``paper``. Sorted by protocol (input order), metric, meta-metric, subset.

    Examples
    --------
    >>> import pandas as pd
    >>> mm = pd.DataFrame({"metric": ["clipscore"], "protocol": ["paper"], "meta_metric": ["rank"],
    ...                    "subset": ["Avg"], "value": [0.71433]})
    >>> compare_with_printed(mm)[["printed", "match"]].values.tolist()
    [[71.4, True]]
    """
    import numpy as np
    import pandas as pd

    missing = dict(missing or {})
    rows = _unreproduced_rows(metametrics, missing)
    for r in metametrics.itertuples(index=False):
        key = (str(r.metric), str(r.meta_metric), str(r.subset))
        if key not in _TABLE:
            continue
        p = _TABLE[key]
        v = 100.0 * float(r.value)
        diff = v - p
        ok = bool(np.isfinite(v) and abs(diff) <= tolerance + 1e-9)
        known = "" if ok else _known_difference(key, str(r.protocol), missing)
        rows.append({"metric": key[0], "protocol": str(r.protocol), "meta_metric": key[1], "subset": key[2],
                     "printed": p, "reproduced": round(v, 4), "difference": round(diff, 4), "match": ok,
                     "known": known})
    cols = ["metric", "protocol", "meta_metric", "subset", "printed", "reproduced", "difference", "match", "known"]
    out = pd.DataFrame(rows, columns=cols)
    order = {"rank": 0, "sep": 1, "delta": 2}
    sub = {"Avg": 0, "Synth": 1, "Nat": 2, "Real": 3}
    if len(out):
        protos = list(dict.fromkeys(out["protocol"]))  # protocols keep their input order
        out = out.assign(_p=out["protocol"].map(protos.index), _m=out["metric"].map(METRICS.index),
                         _k=out["meta_metric"].map(order), _s=out["subset"].map(sub))
        out = out.sort_values(["_p", "_m", "_k", "_s"], kind="stable").drop(columns=["_p", "_m", "_k", "_s"])
        out = out.reset_index(drop=True)
    return out
