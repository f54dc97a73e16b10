"""Human view of a metric: correlation with human ratings, agreement, bootstrap CIs, paired tests.

Pure functions on arrays (numpy in, floats / small frozen dataclasses out), the meta-evaluation
that metric papers such as TIFA (Hu et al., 2023, Table 2) report, set beside the SEG view.

Two groupings
    ``"global"``  one statistic over all items (images) pooled, TIFA's Table 2 setting.
    ``"prompt"``  the statistic within each prompt's images, averaged over prompts where it is
                  defined: the setting closest to a SEG walk (images of one prompt ordered by
                  how wrong they are), free of between-prompt difficulty differences.

Statistics (registry :data:`STATISTICS`; each ``f(metric, human) -> float``)
    ``spearman``, ``kendall_b``, ``kendall_c``, ``pearson`` (scipy.stats), ``pairwise_acc``:
    the tie-calibrated pairwise accuracy ``acc_eq`` of Deutsch, Foster & Freitag (2023), "Ties
    Matter: Meta-Evaluating Modern Metrics with Pairwise Accuracy and Tie Calibration" (see
    :func:`tie_calibrated_pairwise_accuracy`), and ``roc_auc`` for 0/1 labels (SeeTRUE). Which
    apply to a set depends on its kind (:data:`KIND_STATISTICS`).

Conventions shared by all functions
    * Higher metric score and higher human rating both mean "better"; a metric where lower is
      better must be negated by the caller.
    * NaN policy: ``nan_policy="raise"`` (default) rejects NaN/inf with the positions;
      ``"omit"`` drops items whose metric or human value is not finite.
    * Undefined statistics are NaN, never an exception: fewer than 2 items, or a constant side
      (e.g. a prompt whose 5 images all got the same human rating). Grouped averages skip NaN
      groups and report how many groups were used.

Modules (one concern each; everything public is re-exported here, ``from analysis import human as H``)
    :mod:`.correlation` statistics, registry, within-prompt grouping; :mod:`.pairwise` tie-calibrated
    pairwise accuracy; :mod:`.agreement` Krippendorff's alpha; :mod:`.bootstrap` prompt-bootstrap
    intervals; :mod:`.ceiling` the leave-one-rater-out human ceiling; :mod:`.paired` Williams' and
    permutation tests (the significance clusters' tests); :mod:`.sets` many sets in one table;
    :mod:`.tables` metric-metric
    correlations and the TIFA-like tables; :mod:`.view` the whole human view as one call
    (:func:`run_human_view`, the library side of ``ts2 analyze human=FILE``).

This package imports numpy, scipy, pandas and (lazily) krippendorff only; never torch.
"""

from .agreement import krippendorff_alpha
from .bootstrap import (
                        BootstrapCI,
                        bootstrap_human_statistic,
                        bootstrap_krippendorff_alpha,
                        cluster_bootstrap,
                        draw_clusters,
)
from .ceiling import RaterCeiling, leave_one_rater_out, rater_ceiling
from .correlation import (
                        GLOBAL_ONLY,
                        GROUPINGS,
                        STATISTICS,
                        GroupedCorrelation,
                        get_statistic,
                        grouped_correlation,
                        human_statistic,
                        kendall_tau_b,
                        kendall_tau_c,
                        pearson,
                        roc_auc,
                        spearman,
)
from .paired import (
                        PairedTest,
                        bootstrap_paired_pvalue,
                        paired_test,
                        pairwise_acc_permutation_test,
                        permutation_test,
                        williams_test_metrics,
)
from .pairwise import (
                        PairwiseAccuracy,
                        grouped_pairwise_accuracy,
                        pairwise_accuracy,
                        tie_calibrated_pairwise_accuracy,
)
from .tables import (
                        STATISTIC_LABELS,
                        human_table,
                        metric_correlation_matrix,
                        metric_correlation_pvalues,
                        table_to_markdown,
                        write_human_table,
)
from .view import KIND_STATISTICS, HumanViewOutputs, run_human_view, significance_table

__all__ = [
    "STATISTICS", "GROUPINGS", "GLOBAL_ONLY", "KIND_STATISTICS", "get_statistic",
    "spearman", "kendall_tau_b", "kendall_tau_c", "pearson", "pairwise_accuracy", "roc_auc",
    "RaterCeiling", "leave_one_rater_out", "rater_ceiling",
    "PairwiseAccuracy", "tie_calibrated_pairwise_accuracy", "grouped_pairwise_accuracy",
    "GroupedCorrelation", "grouped_correlation", "human_statistic",
    "krippendorff_alpha",
    "BootstrapCI", "draw_clusters", "cluster_bootstrap", "bootstrap_human_statistic",
    "bootstrap_krippendorff_alpha",
    "PairedTest", "williams_test_metrics", "permutation_test", "pairwise_acc_permutation_test", "paired_test",
    "bootstrap_paired_pvalue",
    "metric_correlation_matrix", "metric_correlation_pvalues",
    "STATISTIC_LABELS", "human_table", "table_to_markdown", "write_human_table",
    "HumanViewOutputs", "run_human_view", "significance_table",
]
