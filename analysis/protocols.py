"""Protocols: the explicit options that decide how TS2 meta-metrics are computed.

Two named protocols exist (``conf/protocol/paper.yaml`` and ``conf/protocol/graph.yaml``):

``paper``
    What the authors' code did to produce Table 2 (see ``docs/analysis.md``): walks are one node
    per present level with the level-0 choice made twice (root duplication), Spearman with
    average ranks, KS between *all* level pairs of a walk, walk averages weighted by sample
    count, single-level walks scoring 0, delta divided by the std of every score in the table,
    TS2's SEG 164 left out (on the TS2 release only).
``graph``
    The paper's equations (2, 4, 5) on the SEG's DAG: root-to-sink walks, no duplicated root,
    Spearman with average ranks for ties (see below), KS between
    adjacent nodes of a walk, plain mean over walks, every SEG included, failure codes read as
    missing scores. Ties are ranked with
    ``average`` ranks (``scipy.stats.spearmanr``), not eq. 1's ``min`` ranks: ``min`` ranks give
    the paper's own section 6.4 example (errors 0,1,1,2; scores 1,.5,.5,0), a perfect ordering,
    rank_m 0.895 instead of 1, and make the value depend on the sign convention
    (``rho(-N, m) != -rho(N, m)``). ``protocol.tie_method=min`` restores eq. 1.

Every difference between the two is one field of :class:`Protocol`, so any single rule can be
ablated (``ts2 analyze protocol=paper protocol.ks_pairs=adjacent``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

import numpy as np

__all__ = ["Protocol", "PROTOCOLS", "get_protocol", "OPTION_VALUES", "FAILURE_CODES", "failure_cells"]

# Per metric column: score values that are failure codes, not scores. VIEScore writes -1 when the
# judge's reply cannot be parsed. Whether such a cell is a score or missing is the protocol's
# ``failure_codes`` option; readers only count them (analysis.scores_io).
FAILURE_CODES: dict[str, tuple[float, ...]] = {"viescore": (-1.0,)}

# Allowed values of each categorical option; the first word of each docstring line in
# Protocol says what they mean.
OPTION_VALUES: dict[str, tuple[str, ...]] = {
    "walks": ("levels", "dag"),
    "tie_method": ("average", "min", "max", "dense"),
    "walk_weighting": ("samples", "uniform"),
    "ks_pairs": ("all", "adjacent"),
    "degenerate_walk": ("zero", "skip"),
    "delta_norm": ("std_all", "std_included", "none"),
    "lower_is_better_delta": ("magnitude", "signed"),
    "failure_codes": ("score", "missing"),
}


@dataclass(frozen=True)
class Protocol:
    """How walks are built and how walk values become SEG and dataset values.

    Parameters
    ----------
    name : str
        Label written to the ``protocol`` column of every output.
    walks : {"levels", "dag"}
        ``levels``: every combination of one node per present error level (the paper's code;
        equals the DAG walks of the TS2 label convention). ``dag``: root-to-sink paths of the
        SEG's graph (explicit edges when the dataset has them).
    root_duplication : bool
        Make the first node choice twice: each walk starts with an ordered pair of root nodes
        of its lowest level (the same node twice when there is one root), so root images count
        twice. The paper's code does this.
    tie_method : {"average", "min", "max", "dense"}
        Ranking of tied values for Spearman (``scipy.stats.rankdata`` methods). ``average`` is
        ``scipy.stats.spearmanr``; ``min`` is eq. 1 of the paper.
    walk_weighting : {"samples", "uniform"}
        SEG value = mean of walk values weighted by each walk's number of (valid) samples, or
        the plain mean over walks (eq. 2, 4, 5).
    ks_pairs : {"all", "adjacent"}
        KS statistic averaged over all pairs of levels in a walk, or over adjacent levels only
        (eq. 4).
    degenerate_walk : {"zero", "skip"}
        A walk whose valid samples sit on one level has no ordering to test. ``zero``: rank,
        kendall, sep and delta count it as 0 (the paper's code: ``spearmanr`` gives NaN -> 0,
        no KS pair -> 0); ``skip``: leave it out. ``pair_acc`` always skips it (no
        cross-level pair), and every meta-metric skips a walk with no valid sample; rank and
        kendall skip walks with a single valid sample.
    delta_norm : {"std_all", "std_included", "none"}
        Divide delta by the sample std (ddof=1) of the metric over every scored image of the
        table (also SEGs left out, as the paper's code), over the images of the analysed SEGs
        only (eq. 5), or not at all.
    lower_is_better_delta : {"magnitude", "signed"}
        Scores of lower-is-better metrics are negated before analysis, so every meta-metric
        reads "higher is better". ``magnitude`` then reports the absolute value of the dataset
        delta (the paper, for LLMScore), ``signed`` keeps the sign.
    include_seg_164 : bool
        The paper's code iterates ``range(164)`` and so drops TS2's last SEG (id ``"164"``).
        ``False`` reproduces that on the TS2 release only, recognised by its data
        (:func:`analysis.release.is_ts2_release`), with a log line and a record in
        ``analysis.json``; any other dataset keeps every SEG.
    failure_codes : {"score", "missing"}
        Cells holding a metric's failure code (:data:`FAILURE_CODES`, e.g. VIEScore's ``-1``):
        ``score`` analyses them as the score they are written as (the paper's code, which read
        the column as numbers), ``missing`` drops them like an empty cell.
    """

    name: str = "custom"
    walks: str = "levels"
    root_duplication: bool = True
    tie_method: str = "average"
    walk_weighting: str = "samples"
    ks_pairs: str = "all"
    degenerate_walk: str = "zero"
    delta_norm: str = "std_all"
    lower_is_better_delta: str = "magnitude"
    include_seg_164: bool = False
    failure_codes: str = "score"

    def __post_init__(self) -> None:
        for key, allowed in OPTION_VALUES.items():
            value = getattr(self, key)
            if value not in allowed:
                raise ValueError(f"protocol {self.name!r}: expected {key} to be one of {list(allowed)}, got {value!r}")
        for key in ("root_duplication", "include_seg_164"):
            if not isinstance(getattr(self, key), bool):
                raise ValueError(f"protocol {self.name!r}: expected {key} to be true or false, got {getattr(self, key)!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def replace(self, **changes: Any) -> "Protocol":
        """A copy with some options changed (unknown option names are an error)."""
        known = {f.name for f in fields(self)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise ValueError(f"expected protocol options among {sorted(known)}, got unknown {unknown}")
        return replace(self, **changes)


PROTOCOLS: dict[str, Protocol] = {
    "paper": Protocol(name="paper"),
    "graph": Protocol(name="graph", walks="dag", root_duplication=False, tie_method="average", walk_weighting="uniform",
                      ks_pairs="adjacent", degenerate_walk="skip", delta_norm="std_included",
                      lower_is_better_delta="signed", include_seg_164=True, failure_codes="missing"),
}


def failure_cells(values: np.ndarray, codes: tuple[float, ...]) -> np.ndarray:
    """Where ``values`` (raw scores, as written) hold one of the failure ``codes``.

    Parameters
    ----------
    values : ndarray
        Scores of one metric, before any negation.
    codes : tuple of float
        The metric's failure codes (:data:`FAILURE_CODES`); empty for none.

    Returns
    -------
    ndarray of bool
        Same shape as ``values``.

    Examples
    --------
    >>> failure_cells(np.array([0.5, -1.0, np.nan]), (-1.0,)).tolist()
    [False, True, False]
    """
    values = np.asarray(values, dtype=float)
    if not codes:
        return np.zeros(values.shape, dtype=bool)
    return np.isin(values, np.asarray(codes, dtype=float))


def get_protocol(protocol: str | Protocol | dict) -> Protocol:
    """A :class:`Protocol` from a name (``paper``/``graph``), a mapping of options, or itself.

    Raises
    ------
    ValueError
        Unknown name (the message lists the valid ones) or option.
    """
    if isinstance(protocol, Protocol):
        return protocol
    if isinstance(protocol, str):
        try:
            return PROTOCOLS[protocol]
        except KeyError as e:
            raise ValueError(f"expected a protocol among {sorted(PROTOCOLS)}, got {protocol!r}") from e
    if isinstance(protocol, dict):
        opts = {k: v for k, v in protocol.items() if k != "_target_"}
        base = PROTOCOLS.get(str(opts.get("name")), Protocol())
        return base.replace(**opts)
    raise TypeError(f"expected a protocol name, mapping or Protocol, got {type(protocol).__name__}")
