"""The presentation of analyses: what a person reads (HTML pages, figures, tables, report folders).

It uses the statistics of :mod:`analysis` (the meta-metrics, chance levels, comparisons, verdict)
and is never used by them: ``lint-imports`` checks that no statistics module imports this package
(the ``analysis`` layers contract in ``pyproject.toml``; docs/architecture.md). Only the entry
points that both compute and write, :mod:`analysis.session` and :mod:`analysis.reproduction`, sit
above it.

- :mod:`analysis.report.result_dirs`   ``ts2 report``: find, read and merge result folders,
  :func:`~analysis.report.result_dirs.build_report`
- :mod:`analysis.report.merged`        what a report draws from (:class:`~analysis.report.merged.MergedResults`)
- :mod:`analysis.report.page`          ``report.html`` and the report folder
  (:func:`~analysis.report.page.write_report`, :func:`~analysis.report.page.metametrics_html`)
- :mod:`analysis.report.figures`       the report's figures, chosen by metric role, and ``pareto.csv``
- :mod:`analysis.report.plots`         one figure per function (histograms, heatmaps, scatter);
  :mod:`analysis.report.plots_pareto` the Pareto figure
- :mod:`analysis.report.explorer`      the SEG explorer page (``ts2 explore``; its script and
  stylesheet in ``assets/``, package data)
- :mod:`analysis.report.tables`        paper-style tables (md/tex/csv)
- :mod:`analysis.report.outputs`       the files of ``ts2 analyze`` and its terminal summary

Import the module you need (``from analysis.report.result_dirs import build_report``); this
package imports none of them, so that reading a table does not load matplotlib or networkx.
"""
