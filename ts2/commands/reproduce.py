"""``ts2 reproduce [path=DIR] [output_dir=DIR]``: the paper's Table 2 from the released scores.

Reads ``metadata.csv`` and ``released/scores_subset.csv`` from ``path`` (the TS2 release layout;
``scores=FILE_OR_URL`` points elsewhere), or downloads the release with ``huggingface_hub`` when
``path`` is null. Analyses the released per-image scores in every configured protocol (``paper``
and ``graph`` by default) and writes into ``output_dir``:

``table_<protocol>.md/.tex/.csv``
    Table 2 as reproduced under each protocol (``table.*`` is the first protocol's);
``discrepancies.csv`` / ``discrepancies.md``
    every printed Table 2 cell of the released metrics next to the reproduction, the
    difference in percentage points, whether it matches after rounding, and the known reason
    when the TS2 data README documents one;
``report.html`` + ``figures/``
    the report of :mod:`analysis.report.page`, with the Pareto frontiers drawn at the paper's FLOPs
    row (Figure 4 of the paper) and the discrepancy list;
``metametrics.csv``, ``per_seg.csv``, ``scores.csv``.

The work is :func:`analysis.reproduction.reproduce` (also ``ts2.reproduce``); this handler parses
the config and prints. Exit code 0, 2 for missing/unreadable input. Never imports torch.
"""

from __future__ import annotations

import logging
import sys

from omegaconf import DictConfig

from ts2.common import output_dir

log = logging.getLogger(__name__)


def reproduce_from_config(cfg: DictConfig, out) -> dict:
    """:func:`analysis.reproduction.reproduce` with the settings of a reproduce config
    (``ts2 reproduce`` and ``ts2.reproduce``; defaults in ``conf/reproduce.yaml`` and the
    :class:`analysis.settings.AnalysisSettings` of ``conf/analysis/default.yaml``)."""
    from analysis.reproduction import reproduce
    from analysis.settings import AnalysisSettings

    return reproduce(cfg.get("path"), out, AnalysisSettings.from_config(cfg), scores=cfg.get("scores"),
                     revision=cfg.get("revision"), figures=None if cfg.get("figures") is None else list(cfg.figures),
                     pareto=None if cfg.get("pareto") is None else list(cfg.pareto))


def main(cfg: DictConfig) -> int:
    try:
        r = reproduce_from_config(cfg, output_dir(cfg))
    except (FileNotFoundError, ValueError, RuntimeError) as e:
        log.error("%s", e)
        return 2
    disc = r["discrepancies"]
    for proto, d in disc.groupby("protocol", sort=False):
        bad = d[~d["match"]]
        line = f"protocol {proto}: {int(d['match'].sum())}/{len(d)} printed Table 2 cells reproduced"
        absent = [m for m in r.get("missing", {}) if m in set(d["metric"])]
        if absent:
            n_abs = int(d["metric"].isin(absent).sum())
            line += (f"; {n_abs} not reproduced because published column(s) {absent} are missing or empty in "
                     f"the score file")
            bad = bad[~bad["metric"].isin(absent)]
        irreproducible = int(bad["known"].str.startswith("delta subset rows").sum())
        if proto == "paper" and len(bad) and irreproducible == len(bad):
            line += f" (the other {len(bad)} are the delta subset rows no aggregation of the released scores gives)"
        elif proto == "paper" and len(bad):
            line += f" ({len(bad) - irreproducible} unexpected difference(s): see discrepancies.md)"
        elif proto != "paper":
            line += (" (this protocol follows the paper's equations; the printed table follows the authors' "
                     "code, so differences are expected)")
        sys.stdout.write(line + "\n")
        for note in r["failure_codes"].get(str(proto), ()):
            sys.stdout.write(f"  {note}\n")
    for proto, paths in r["tables"].items():
        sys.stdout.write(f"table ({proto}): {', '.join(str(p) for p in paths)}\n")
    sys.stdout.write(f"discrepancies: {r['discrepancy_files'][1]}\nreport: {r['report'].html}\n")
    return 0
