"""``ts2 analyze human=SET`` or ``human=[A,B,...]``: the human-judgment view of metrics on one or many sets.

Called by the ``ts2 analyze`` handler when ``cfg.human`` is set. Each entry is a path, ``NAME:PATH``
or a set ``NAME`` loaded from the hub (:func:`seg_data.human.resolve_human`); ``human_scores``
joins metric scores by item (one file for every set, or a list, one per entry). Every set gets the
files of :func:`analysis.human.run_human_view` (``human_metametrics.csv``, ``human_table.md/.csv``,
``human_metric_correlations.csv``, ``human_paired_tests.csv``): in ``output_dir`` itself for a
single set, in ``output_dir/<set name>/`` for several. Across the sets
(:func:`analysis.human.sets.write_sets`) ``output_dir`` also holds ``human_sets.csv`` (one long
table: set, metric, statistic, grouping, subset, value, CI, cluster), ``human_summary.md/.csv``
(metrics x sets) and ``human_report.html``.

Config keys read (all optional but ``human``; keys of ``conf/analyze.yaml``): ``human``,
``human_scores``, ``output_dir`` (default ``.``), ``metrics`` (list, null = all), ``bootstrap``
(replicates, 1000; 0 = no intervals), ``seed`` (0), ``confidence`` (0.95), ``human_permutations``
(1000; 0 = no paired tests and no clusters; the SEG analysis' ``permutations`` is not used),
``human_clusters.statistics`` / ``.alpha``, ``progress`` (true).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from analysis.human.view import RESULT_COLUMNS  # noqa: F401  (the file's schema, for callers and tests)

log = logging.getLogger(__name__)


def _get(cfg, key, default):
    v = cfg.get(key, default) if hasattr(cfg, "get") else default
    return default if v is None else v


def human_main(cfg) -> int:
    """Run the human-judgment meta-evaluation described in the module docstring.

    Returns
    -------
    int
        0 on success, 2 on bad input (missing/malformed file, unknown set or metric, a failed
        hub download), logged.
    """
    from analysis.human.settings import HumanSettings
    from ts2.human_sets import human_entries, human_views, load_human_sets, score_files

    entries = human_entries(cfg.get("human"))
    if not entries:
        log.error("expected human=SET or human=[A,B,...] (a file or folder, NAME:PATH, or a set name from "
                  "the hub), got none")
        return 2
    out = Path(str(_get(cfg, "output_dir", ".")))
    try:
        sets = load_human_sets(entries, score_files(cfg.get("human_scores"), len(entries)))
        res = human_views(sets, out, HumanSettings.from_mapping(cfg))
    except (FileNotFoundError, KeyError, ValueError, RuntimeError, ImportError) as e:
        log.error("%s", e.args[0] if isinstance(e, KeyError) and e.args else e)
        return 2
    if len(res.views) == 1:
        sys.stdout.write(res.views[0].table_md.read_text(encoding="utf-8"))
    sys.stdout.write(res.summary_md.read_text(encoding="utf-8"))
    sys.stdout.write(f"wrote {res.long_path} and {res.html}\n")
    return 0
