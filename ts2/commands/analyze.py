"""``ts2 analyze scores=FILE [dataset=... | path=DIR] [protocol=paper|graph] [output_dir=DIR]``.

Writes ``metametrics.csv``, ``per_seg.csv``, ``table.md/.tex/.csv``, ``analysis.json``,
``verdict.csv`` (:mod:`analysis.verdict`) and, when asked, ``compare.csv`` / ``ranking.csv`` /
``pairs.csv`` into ``output_dir``, and prints a short summary ending with one verdict line per
metric under evaluation. ``human=FILE`` hands over to :mod:`ts2.commands.analyze_human`. Imports neither
torch nor :mod:`metrics_adapters`.
"""

from __future__ import annotations

import logging
import sys

from omegaconf import DictConfig, OmegaConf

from ts2.common import output_dir

log = logging.getLogger(__name__)




def _protocols(cfg: DictConfig) -> list:
    names = cfg.get("protocols")
    if names:
        return [str(n) for n in names]
    proto = OmegaConf.to_container(cfg.protocol, resolve=True) if cfg.get("protocol") is not None else "paper"
    if isinstance(proto, dict):
        from hydra.utils import instantiate

        return [instantiate(cfg.protocol)]
    return [proto]


def _list(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def _reference(cfg: DictConfig):
    """The reference score file: ``reference=FILE``; with ``reference=auto`` (default), the
    released per-image scores of the paper (``released/scores_subset.csv``) when they lie in the
    dataset folder given by ``path=``; ``reference=null`` for none."""
    from pathlib import Path

    ref = cfg.get("reference", None)
    if ref in (None, "", "none", "null"):
        return None
    if ref != "auto":
        return Path(str(ref))
    if cfg.get("path"):
        p = Path(str(cfg.path))
        cand = (p if p.is_dir() else p.parent) / "released" / "scores_subset.csv"
        if cand.is_file() and cand.resolve() != Path(str(cfg.scores)).resolve():
            return cand
    return None


def main(cfg: DictConfig) -> int:
    if cfg.get("human"):
        from ts2.commands.analyze_human import human_main

        return human_main(cfg)
    if not cfg.get("scores"):
        log.error("expected scores=FILE (a score table: seg_id, node, [file_name], one column per metric), got none")
        return 2

    from analysis.compare import compare_metrics, rank_metrics
    from analysis.outputs import compare_text, summary_text, write_outputs
    from analysis.pipeline import MIN_SEGS_CI, analyze
    from analysis.scores_io import apply_lower_is_better, prepare_inputs, read_scores
    from seg_data import SEGValidationError

    out = output_dir(cfg)
    try:
        table = read_scores(str(cfg.scores), metrics=_list(cfg.get("metrics")) or None)
        from seg_data.results import run_record_beside

        run = run_record_beside(str(cfg.scores))
        roles = {m: (run.roles.get(m, "metric") if run else "metric") for m in table.metrics}
        ref = _reference(cfg)
        auto = cfg.get("reference", None) == "auto"
        reference = None
        if ref is not None:
            try:
                reference = read_scores(str(ref))
            except ValueError as e:
                if not auto:
                    raise
                log.warning("not analysing the reference metrics of %s (reference=auto): %s", ref, e)
                ref = None
        # lower_is_better applies to every column of that name: yours, the reference's, or both.
        table, reference = apply_lower_is_better(_list(cfg.get("lower_is_better")), table, reference)
        if reference is not None:
            from analysis.scores_io import with_reference

            try:
                table = with_reference(table, reference)
                log.info("analysing the reference metrics of %s beside %s", ref, cfg.scores)
                roles |= {m: "reference" for m in table.metrics if m not in roles}
            except ValueError as e:
                if not auto:  # a reference you named must join; the automatic one never fails a run
                    raise
                log.warning("not analysing the reference metrics of %s (reference=auto; reference=null turns "
                            "this off): %s", ref, e)
                ref = None
        dataset = None
        if cfg.get("path") or cfg.get("dataset") is not None:
            from ts2.common import load_dataset

            dataset = load_dataset(cfg)
        from seg_data.graph import MAX_WALKS

        max_walks = cfg.get("max_walks", MAX_WALKS)
        if max_walks is not None and (isinstance(max_walks, bool) or not isinstance(max_walks, int) or max_walks < 1):
            raise ValueError(f"expected max_walks to be a positive integer or null, got {max_walks!r}")
        inputs = prepare_inputs(table, dataset, str(cfg.get("subsets", "auto")), max_walks)
        result = analyze(inputs, protocols=_protocols(cfg), meta_metrics=_list(cfg.meta_metrics),
                         bootstrap=int(cfg.bootstrap), seed=int(cfg.seed), confidence=float(cfg.confidence),
                         chance=int(cfg.get("chance") or 0), ci_method=str(cfg.get("ci_method", "percentile")),
                         bootstrap_scheme=str(cfg.get("bootstrap_scheme", "rescaled")),
                         min_segs_ci=int(cfg.get("min_segs_ci", MIN_SEGS_CI)))
    except (FileNotFoundError, ValueError, SEGValidationError, RuntimeError) as e:
        log.error("%s", e)
        return 2

    extra = {}
    n_perm = int(cfg.get("permutations", 9999))
    compare = _list(cfg.get("compare"))
    if compare:
        if len(compare) != 2:
            log.error("expected compare=[metric_a,metric_b] (two metric names), got %s", compare)
            return 2
        try:
            frames = [compare_metrics(result, compare[0], compare[1], protocol=p, n_permutations=n_perm, seed=int(cfg.seed))
                      for p in result.protocols]
        except ValueError as e:
            log.error("%s", e)
            return 2
        import pandas as pd

        extra["compare"] = pd.concat(frames, ignore_index=True)
    rk = cfg.get("ranking") or {}
    if rk.get("enabled", False) and len(result.metrics) >= 2:
        import pandas as pd

        rankings, pairs = [], []
        for p in result.protocols:
            for mm in _list(rk.get("meta_metrics")):
                if mm not in result.meta_metrics:
                    continue
                r, t = rank_metrics(result, mm, str(rk.get("subset", "Avg")), protocol=p, alpha=float(rk.get("alpha", 0.05)),
                                    n_permutations=n_perm, seed=int(cfg.seed))
                rankings.append(r)
                pairs.append(t)
        if rankings:
            extra["ranking"] = pd.concat(rankings, ignore_index=True)
            extra["pairs"] = pd.concat(pairs, ignore_index=True)
    from analysis.verdict import verdict

    # The verdict reuses the ranking's tests (and computes the places the ranking left out).
    try:
        vd = verdict(result, roles, meta_metrics=_list(rk.get("meta_metrics")) or ["rank", "sep", "delta"],
                     subset=str(rk.get("subset", "Avg")), alpha=float(rk.get("alpha", 0.05)), n_permutations=n_perm,
                     seed=int(cfg.seed), ranking=(extra["ranking"], extra["pairs"]) if "ranking" in extra else None)
    except (KeyError, ValueError) as e:  # e.g. ranking.alpha outside (0, 1), an unknown ranking.subset
        log.error("verdict: %s", e)
        return 2
    extra["verdict"] = vd.table
    if "ranking" in extra:  # ranking.enabled=false: the places stay in verdict.csv only
        extra["ranking"], extra["pairs"] = vd.ranking, vd.pairs
    write_outputs(result, out, extra, roles=roles,
                  dataset=getattr(dataset, "name", None) or (run.dataset if run else None),
                  score_files=[str(cfg.scores)] + ([str(ref)] if ref is not None else []))
    for note in result.notes:
        log.warning("%s", note)
    shown = _list(cfg.get("table_meta_metrics")) or ["rank", "sep", "delta"]
    absent = [m for m in shown if m not in result.meta_metrics]
    if absent:
        log.warning("table_meta_metrics names %s, not among the meta-metrics computed (meta_metrics=%s): "
                    "left out of the printed table", absent, list(result.meta_metrics))
        shown = [m for m in shown if m in result.meta_metrics] or list(result.meta_metrics[:3])
    text = summary_text(result, meta_metrics=shown)
    if "compare" in extra:
        text += "\n" + compare_text(extra["compare"], min_segs_ci=result.min_segs_ci)
    if "ranking" in extra:
        r = extra["ranking"]
        first = r[(r["meta_metric"] == r["meta_metric"].iloc[0]) & (r["protocol"] == r["protocol"].iloc[0])]
        best = ", ".join(first[first["group"] == 1]["metric"])
        text += (f"\nbest group ({first['protocol'].iloc[0]}, {first['meta_metric'].iloc[0]}, {first['subset'].iloc[0]}; "
                 f"not significantly different, Holm alpha={rk.get('alpha', 0.05)}): {best}\n")
    sys.stdout.write(text + f"\nwrote {out}/metametrics.csv, per_seg.csv, table.md|tex|csv"
                     + "".join(f", {k}.csv" for k in extra) + "\n")
    lines = vd.summary_lines()
    if lines:  # the last lines of the output: one verdict per metric under evaluation
        sys.stdout.write("\nverdict (verdict.csv):\n" + "\n".join(lines) + "\n")
    return 0
