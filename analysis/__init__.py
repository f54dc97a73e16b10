"""TS2 meta-metrics of score tables: does a metric order and separate images by how wrong they are?

Where things are (one module per concern):

- :mod:`analysis.scores_io`       reading and validating wide/long score tables (also re-exports the three below)
- :mod:`analysis.score_table`     :class:`~analysis.score_table.ScoreTable`, the validated table the readers return
- :mod:`analysis.inputs`          a score table joined to its SEG structure (:func:`~analysis.inputs.prepare_inputs`)
- :mod:`analysis.reference`       a score table beside a reference one (TS2's released scores), joined on file_name
- :mod:`analysis.protocols`       the ``paper`` and ``graph`` protocols and their options
- :mod:`analysis.walks`           walk construction per protocol, packed for the kernels
- :mod:`analysis.metametrics`     one module per meta-metric: ``rank`` (rank_m), ``sep`` (sep_m),
  ``delta`` (delta_m), ``kendall``, ``pair_acc``; shared sorted statistics in ``walkstats``
- :mod:`analysis.compute`         all walks x all metric columns through the kernels
- :mod:`analysis.aggregate`       walk -> SEG (weighting), SEG -> subsets, delta normaliser
- :mod:`analysis.chance`          chance levels of every meta-metric (within-SEG permutations)
- :mod:`analysis.release`         the TS2 release recognised by its data (its SEG-164 rule)
- :mod:`analysis.stats`           shared statistics: cluster bootstrap, percentile intervals, tests
- :mod:`analysis.compare`         paired comparisons, permutation p-values, Holm, ranking groups
- :mod:`analysis.verdict`         per metric under evaluation: place, group, comparison with references/controls
- :mod:`analysis.pipeline`        :func:`~analysis.pipeline.analyze`: the whole thing in one call
- :mod:`analysis.settings`        :class:`~analysis.settings.AnalysisSettings`: the settings of the
  computation (``conf/analysis/default.yaml``), taken by every entry point
- :mod:`analysis.pareto`          Pareto frontier in (meta-metric, cost)
- :mod:`analysis.views`           the SEG view and the human view side by side (rank agreement)
- :mod:`analysis.human`           the human view: correlation with human ratings, agreement, paired tests
- :mod:`analysis.report`          the presentation: report page, figures, tables, explorer, result
  folders, the files of ``ts2 analyze``; it uses the modules above and none of them imports it
- :mod:`analysis.session`         :func:`~analysis.session.run_analysis`: one analysis as an object
  that computes, draws and writes; :mod:`analysis.reproduction` the paper's Table 2 reproduced

This package never imports torch or :mod:`metrics_adapters`: costs and scores reach it as numbers.
"""
