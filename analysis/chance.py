"""Chance levels: what each meta-metric reads when scores carry no information about errors.

A meta-metric's floor is not 0: the KS statistic between two small samples drawn from one
distribution is far from 0, a metric that ties everything gets pair_acc 0.5, and so on. The null
"scores say nothing about error counts" is made concrete by permuting each metric's scores among
the images of each SEG (NaN cells stay where they are), which keeps every SEG's node sizes, walks
and score distribution, and recomputing the meta-metric with the protocol's own rules. The chance
level is the mean of the dataset values (Avg and subsets) over ``n_perm`` permutations, the band
their percentile interval (:func:`analysis.stats.percentile_ci`), ``mc_error`` the Monte-Carlo
standard error of the chance level itself (``std / sqrt(n_perm)``).

How the null is drawn without analysing permuted tables (same definition, same law):

- a within-SEG permutation moves the SEG's values, never the walks, so each permuted walk is a
  histogram per level slot over the SEG's distinct values
  (:class:`~analysis.metametrics.histstats.HistStats`), summed from per-node histograms; the
  registered walk kernels read it as they read sorted samples;
- permutations are an array axis: one draw gives every node's histogram for a batch of SEGs;
- order-only meta-metrics (``MetaMetricSpec.order_only``: rank, sep, kendall, pair_acc) see the
  scores of a SEG only through its missing cells and the sizes of its tie groups in score order,
  so metrics with the same pattern in a SEG share that SEG's draws; the others (delta) read each
  metric's own values off the same histograms.

The cost grows linearly with ``n_perm``.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .aggregate import seg_means
from .metametrics import get_meta_metric
from .metametrics.histstats import HistStats
from .protocols import Protocol
from .stats import percentile_ci
from .walks import Structure, WalkTable

__all__ = ["ChanceLevels", "NULL_DESCRIPTION", "chance_levels", "chance_adjusted"]

#: What the chance level is the expectation under (the report and the tables name it).
NULL_DESCRIPTION = ("each metric's own scores permuted within each SEG (its score distribution, ties and "
                    "missing cells kept)")


@dataclass(frozen=True)
class ChanceLevels:
    """Chance levels of one protocol: ``mean``/``low``/``high``/``mc_error`` are ``(metric, meta_metric,
    group)`` arrays (NaN where undefined), from ``n_perm`` within-SEG permutations; the band is at
    level ``confidence``, ``mc_error`` the Monte-Carlo standard error of ``mean``."""

    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray
    n_perm: int
    confidence: float
    mc_error: np.ndarray


@dataclass(frozen=True)
class _Task:
    """One SEG under one within-SEG pattern of scores (missing cells, tie-group sizes)."""

    seg: int  # index into the walk table's SEGs
    node: np.ndarray  # node (index in the SEG) of each valid image, in row order
    ranks: np.ndarray  # the dense ranks of the valid scores, sorted: what a permutation deals out
    metrics: tuple[int, ...]  # metric columns with this pattern in this SEG
    values: tuple[np.ndarray, ...]  # each one's distinct valid scores, increasing


def _tasks(scores: np.ndarray, segs: Sequence, n_m: int) -> list[_Task]:
    """Group the metrics of every SEG by pattern: missing cells and tie-group sizes in score order."""
    tasks = []
    for si, s in enumerate(segs):
        rows = np.concatenate(s.rows) if s.rows else np.zeros(0, dtype=np.int64)
        node = np.repeat(np.arange(len(s.rows)), [len(r) for r in s.rows])
        found: dict[tuple[bytes, bytes], list] = {}
        for j in range(n_m):
            x = scores[rows, j]
            ok = ~np.isnan(x)
            vals, inv, cnt = np.unique(x[ok], return_inverse=True, return_counts=True)
            key = (ok.tobytes(), cnt.tobytes())
            if key not in found:
                found[key] = [node[ok], np.sort(inv.ravel()), [], []]
            found[key][2].append(j)
            found[key][3].append(vals)
        for nd, ranks, ms, vals in found.values():
            tasks.append(_Task(si, nd, ranks.astype(np.int64), tuple(ms), tuple(vals)))
    return tasks


def _walk_slots(walks: Sequence[np.ndarray], levels: np.ndarray, present: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(walk, slot, node) of every node visit on the SEG's walks, nodes without a valid image left
    out; a slot is the dense rank of the level among the walk's remaining nodes. Also the number
    of slots."""
    w_idx, slot, nodes = [], [], []
    k = 1
    for w, nd in enumerate(walks):
        nd = nd[present[nd]]
        if not len(nd):
            continue
        _, sl = np.unique(levels[nd], return_inverse=True)
        w_idx.append(np.full(len(nd), w))
        slot.append(sl.ravel())
        nodes.append(nd)
        k = max(k, int(sl.max()) + 1)
    if not w_idx:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z, k
    return np.concatenate(w_idx), np.concatenate(slot), np.concatenate(nodes), k


def chance_levels(scores: np.ndarray, structure: Structure, walk_table: WalkTable, sigma: np.ndarray,
                  protocol: Protocol, metrics: Sequence[str], meta_metrics: Sequence[str],
                  lower_is_better: Sequence[str] = (), *, n_perm: int, seed: int = 0, confidence: float = 0.95,
                  max_cells: int = 3_000_000, progress: bool = False) -> ChanceLevels:
    """Chance level, band and Monte-Carlo error of every meta-metric of every metric under ``protocol``.

    Parameters
    ----------
    scores : ndarray, shape (n_rows, n_metrics)
        Oriented scores (higher is better), as analysed; NaN where missing.
    structure, walk_table : the analysis' structure and the protocol's walks (of the analysed SEGs).
    sigma : ndarray, shape (n_metrics,)
        The delta normaliser; a within-SEG permutation does not change it.
    protocol, metrics, meta_metrics, lower_is_better
        As in :func:`analysis.pipeline.run_protocol` (``magnitude`` deltas are taken as magnitudes
        in every permutation too, like the value they are compared with).
    n_perm : int
        Permutations (>= 1); the cost grows linearly with it. The default of the commands is
        ``chance`` in ``conf/analysis/default.yaml``.
    seed : int
        Seeds the permutations (``default_rng([seed, 16])``, a stream apart from the bootstrap's).
    confidence : float
        Level of the band.
    max_cells : int
        Histogram cells (permutations x walks x slots x values) held at once: the memory bound.
    progress : bool
        Show a progress bar.

    Returns
    -------
    ChanceLevels

    Raises
    ------
    ValueError
        ``n_perm < 1``, or ``scores`` not ``(n_rows, n_metrics)``.

    Notes
    -----
    Tie and NaN policy: missing cells never move (each metric's own); tied scores move as values,
    so a metric's ties stay ties. A meta-metric undefined in a permutation (NaN) is left out of
    that cell's mean, band and error; a cell undefined in every permutation is NaN.

    Examples
    --------
    >>> import pandas as pd
    >>> from analysis.pipeline import analyze
    >>> df = pd.DataFrame({"seg_id": ["0", "0"], "node": ["0", "1"], "m": [0.9, 0.1]})
    >>> c = analyze(df, protocols=["graph"], bootstrap=0, chance=200).get().chance
    >>> float(c.mean[0, 1, 0])  # sep of two single images is 1 whatever the order
    1.0
    """
    if n_perm < 1:
        raise ValueError(f"expected at least one permutation for the chance levels, got {n_perm}")
    scores = np.asarray(scores, dtype=float)
    n_m = len(metrics)
    if scores.ndim != 2 or scores.shape[1] != n_m:
        raise ValueError(f"expected scores of shape (n_rows, {n_m}), got {scores.shape}")
    specs = [get_meta_metric(name) for name in meta_metrics]
    k_shared = [k for k, s in enumerate(specs) if s.order_only]
    k_own = [k for k, s in enumerate(specs) if not s.order_only]
    n_k = len(specs)
    by_id = {s.seg_id: s for s in structure.segs}
    segs = [by_id[i] for i in walk_table.seg_ids]
    n_s = len(segs)
    subsets = list(dict.fromkeys(s for s in walk_table.subsets if s is not None))
    member = np.ones((n_s, 1 + len(subsets)), dtype=bool)  # SEG x group (Avg, then subsets)
    for g, name in enumerate(subsets, start=1):
        member[:, g] = [s == name for s in walk_table.subsets]
    n_g = member.shape[1]

    # Walks of every SEG as node indices (levels ascending along each walk).
    seg_walks: list[list[np.ndarray]] = [[] for _ in segs]
    index = [{lbl: t for t, lbl in enumerate(s.labels)} for s in segs]
    for si, nodes in zip(walk_table.walk_seg, walk_table.walk_nodes):
        seg_walks[si].append(np.fromiter((index[si][n] for n in nodes), dtype=np.int64, count=len(nodes)))

    tasks = sorted(_tasks(scores, segs, n_m), key=lambda t: len(t.values[0]))
    slots_cache: dict[tuple[int, bytes], tuple] = {}
    plans = []
    for t in tasks:
        s = segs[t.seg]
        present = np.bincount(t.node, minlength=len(s.rows)) > 0
        key = (t.seg, present.tobytes())
        if key not in slots_cache:
            slots_cache[key] = _walk_slots(seg_walks[t.seg], np.asarray(s.levels), present)
        plans.append(slots_cache[key])

    # Batches of tasks whose histograms of one permutation fill at most max_cells / 8 cells.
    batches, cur, cells = [], [], 0
    for i, t in enumerate(tasks):
        c = len(seg_walks[t.seg]) * plans[i][3] * max(len(t.values[0]), 1)
        if cur and cells + c > max_cells // 8:
            batches.append(cur)
            cur, cells = [], 0
        cur.append(i)
        cells += c
    if cur:
        batches.append(cur)

    rng = np.random.default_rng([seed, 16])
    flip = np.array([m in set(lower_is_better) for m in metrics], dtype=bool)
    magnitude = [k for k, s in enumerate(specs) if s.normalised] if protocol.lower_is_better_delta == "magnitude" else []
    total = np.zeros((n_perm, n_m, n_k, n_g))
    count = np.zeros((n_perm, n_m, n_k, n_g))
    work = [(b, lo) for b in batches for lo in range(0, n_perm, _perm_step(tasks, plans, b, seg_walks, max_cells))]
    if progress:
        from tqdm.auto import tqdm

        work = tqdm(work, desc=f"chance levels ({protocol.name})", leave=False)
    prepared: dict[int, dict] = {}
    for b, lo in work:
        key = id(b)
        if key not in prepared:
            prepared.clear()
            prepared[key] = _prepare(b, tasks, plans, seg_walks, segs, n_m)
        pb = prepared[key]
        p = min(_perm_step(tasks, plans, b, seg_walks, max_cells), n_perm - lo)
        _run_batch(pb, p, rng, protocol, specs, meta_metrics, k_shared, k_own, sigma, member,
                   total[lo:lo + p], count[lo:lo + p])
    with np.errstate(invalid="ignore", divide="ignore"):
        reps = np.where(count > 0, total / np.where(count > 0, count, 1), np.nan)
    for k in magnitude:
        reps[:, flip, k] = np.abs(reps[:, flip, k])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # cells undefined in every permutation: NaN
        mean = np.nanmean(reps, axis=0)
        n_ok = (~np.isnan(reps)).sum(axis=0)
        mc = np.where(n_ok > 1, np.nanstd(reps, axis=0, ddof=1) / np.sqrt(np.maximum(n_ok, 1)), np.nan)
    ci = percentile_ci(reps, confidence)
    return ChanceLevels(mean, np.asarray(ci.low), np.asarray(ci.high), int(n_perm), float(confidence), mc)


def _perm_step(tasks, plans, batch, seg_walks, max_cells: int) -> int:
    """Permutations per step of a batch so that its histograms stay within ``max_cells``."""
    r = max(max(len(tasks[i].values[0]) for i in batch), 1)
    k = max(plans[i][3] for i in batch)
    w = max(sum(len(seg_walks[tasks[i].seg]) for i in batch), 1)
    return max(1, max_cells // (w * k * r))


def _prepare(batch, tasks, plans, seg_walks, segs, n_m) -> dict:
    """Index arrays of one batch of tasks: images, nodes, walk slots, values."""
    from scipy.sparse import csr_matrix

    ts = [tasks[i] for i in batch]
    r_max = max(max(len(t.values[0]) for t in ts), 1)
    k_max = max(plans[i][3] for i in batch)
    node_off = np.cumsum([0] + [len(segs[t.seg].rows) for t in ts])
    walk_off = np.cumsum([0] + [len(seg_walks[t.seg]) for t in ts])
    n_nodes, n_walks = int(node_off[-1]), int(walk_off[-1])
    pos_task = np.concatenate([np.full(len(t.node), q) for q, t in enumerate(ts)])
    pos_node = np.concatenate([t.node + node_off[q] for q, t in enumerate(ts)])
    pos_rank = np.concatenate([t.ranks for t in ts])
    wi, sl, nd = [], [], []
    for q, i in enumerate(batch):
        w, s, n, _ = plans[i]
        wi.append(w + walk_off[q])
        sl.append(s)
        nd.append(n + node_off[q])
    wi, sl, nd = (np.concatenate(a).astype(np.int64) for a in (wi, sl, nd))
    # walk-slot x node incidence: a node visited twice on a walk (a duplicated root) counts twice
    inc = csr_matrix((np.ones(len(wi)), (wi * k_max + sl, nd)), shape=(n_walks * k_max, n_nodes))
    inc.sum_duplicates()
    walk_task = np.repeat(np.arange(len(ts)), np.diff(walk_off))
    # the q-th metric of every task (None where a task has fewer), for the meta-metrics that read values
    n_own = max(len(t.metrics) for t in ts)
    own = []
    for q in range(n_own):
        vals = np.zeros((len(ts), r_max))
        metric = np.full(len(ts), -1)
        for a, t in enumerate(ts):
            if q < len(t.metrics):
                vals[a, :len(t.values[q])] = t.values[q]
                metric[a] = t.metrics[q]
        own.append((metric, vals[walk_task]))
    assign_task = np.concatenate([np.full(len(t.metrics), a) for a, t in enumerate(ts)])
    assign_metric = np.concatenate([np.array(t.metrics) for t in ts])
    return {"tasks": ts, "r": r_max, "k": k_max, "n_nodes": n_nodes, "n_walks": n_walks, "pos_task": pos_task,
            "pos_node": pos_node, "pos_rank": pos_rank, "inc": inc, "walk_task": walk_task, "own": own,
            "seg": np.array([t.seg for t in ts]), "assign_task": assign_task, "assign_metric": assign_metric,
            "n_metrics": n_m}


def _run_batch(pb: dict, p: int, rng: np.random.Generator, protocol: Protocol, specs, meta_metrics,
               k_shared, k_own, sigma, member, total, count) -> None:
    """``p`` permutations of one batch, added to the group sums ``total``/``count`` ``(p, metric, meta, group)``."""
    r, k, n_nodes, n_walks = pb["r"], pb["k"], pb["n_nodes"], pb["n_walks"]
    n_t = len(pb["tasks"])
    # One uniform order of every task's valid images per permutation (keys sort by task first);
    # the i-th image in that order receives the task's i-th smallest rank.
    order = np.argsort(pb["pos_task"][None, :] + rng.random((p, len(pb["pos_task"]))), axis=1)
    flat = (np.arange(p)[:, None] * n_nodes + pb["pos_node"][order]) * r + pb["pos_rank"][None, :]
    node_hist = np.bincount(flat.ravel(), minlength=p * n_nodes * r).reshape(p, n_nodes, r)
    hist = pb["inc"] @ node_hist.transpose(1, 0, 2).reshape(n_nodes, p * r)  # (walks * k, p * r)
    hist = np.ascontiguousarray(hist.reshape(n_walks, k, p, r).transpose(2, 0, 1, 3)).reshape(p * n_walks, k, r)
    stats = HistStats(hist)
    n_valid = stats.n.reshape(p, n_walks)
    per_task = np.full((p, n_t, len(specs)), np.nan)  # SEG values of the order-only meta-metrics
    if k_shared:
        wv = np.stack([specs[k](stats, protocol).reshape(p, n_walks) for k in k_shared], axis=1)
        per_task[:, :, k_shared] = seg_means(wv, n_valid, pb["walk_task"], n_t, protocol.walk_weighting
                                             ).transpose(0, 2, 1)
    # Every (task, metric) pair: its SEG values for the shared meta-metrics, its own for the others.
    vals = per_task[:, pb["assign_task"], :]  # (p, assignments, meta)
    if k_own:
        where = {(int(a), int(m)): i for i, (a, m) in enumerate(zip(pb["assign_task"], pb["assign_metric"]))}
        for metric, v in pb["own"]:
            st = stats.with_values(np.broadcast_to(v, (p,) + v.shape).reshape(p * n_walks, r))
            wv = np.stack([specs[k](st, protocol).reshape(p, n_walks) for k in k_own], axis=1)
            sv = seg_means(wv, n_valid, pb["walk_task"], n_t, protocol.walk_weighting)  # (p, own, task)
            for a in np.flatnonzero(metric >= 0):
                i = where[(int(a), int(metric[a]))]
                for c, kk in enumerate(k_own):
                    x = sv[:, c, a]
                    if specs[kk].normalised:
                        with np.errstate(invalid="ignore", divide="ignore"):
                            x = x / sigma[metric[a]]
                    vals[:, i, kk] = x
    ok = ~np.isnan(vals)
    z = np.where(ok, vals, 0.0)
    onehot = np.zeros((len(pb["assign_metric"]), pb["n_metrics"]))
    onehot[np.arange(len(onehot)), pb["assign_metric"]] = 1.0
    seg_of = pb["seg"][pb["assign_task"]]
    for g in range(member.shape[1]):
        w = onehot * member[seg_of, g][:, None]
        total[:, :, :, g] += np.einsum("pak,am->pmk", z, w)
        count[:, :, :, g] += np.einsum("pak,am->pmk", ok.astype(float), w)


def chance_adjusted(value, chance, maximum: float | None):
    """``(value - chance) / (maximum - chance)``: 0 at chance, 1 at the maximum.

    NaN where the meta-metric has no maximum (``maximum`` None: delta is unbounded) or where
    ``chance == maximum`` (nothing to gain over chance).

    Examples
    --------
    >>> float(chance_adjusted(0.75, 0.5, 1.0))
    0.5
    """
    v = np.asarray(value, dtype=float)
    c = np.asarray(chance, dtype=float)
    if maximum is None:
        return np.full(np.broadcast(v, c).shape, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(c < maximum, (v - c) / (maximum - c), np.nan)
