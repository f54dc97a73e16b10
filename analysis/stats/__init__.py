"""Shared statistics of both views (SEG meta-metrics and human judgments).

=====================  ============================================================================
module                 what
=====================  ============================================================================
:mod:`.resampling`     cluster draws, stratified cluster-bootstrap counts, weighted group means
:mod:`.intervals`      :func:`percentile_ci` and :func:`bca_ci` (BCa), one non-finite policy
:mod:`.significance`   sign-flip / permutation p-values (exact mode), Williams' test, Holm, clusters
=====================  ============================================================================

Pure functions on arrays; results are small frozen dataclasses.
"""

from .intervals import Interval, bca_ci, percentile_ci, withhold_small_cis
from .resampling import (
           BOOTSTRAP_SCHEMES,
           MAX_BOOTSTRAP,
           MAX_BOOTSTRAP_GIB,
           bootstrap_bytes,
           bootstrap_group_means,
           check_bootstrap_size,
           cluster_draws,
           draw_counts,
           group_means,
           stratified_counts,
)
from .significance import ALPHA, WilliamsResult, holm, sign_flip_pvalues, significance_clusters, williams_test

__all__ = ["Interval", "percentile_ci", "bca_ci", "withhold_small_cis", "BOOTSTRAP_SCHEMES", "MAX_BOOTSTRAP",
           "MAX_BOOTSTRAP_GIB", "bootstrap_bytes", "check_bootstrap_size", "bootstrap_group_means", "cluster_draws", "draw_counts", "group_means", "stratified_counts",
           "ALPHA", "WilliamsResult", "holm", "sign_flip_pvalues", "significance_clusters", "williams_test"]
