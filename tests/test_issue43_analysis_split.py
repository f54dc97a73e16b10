"""Issue 43: analysis/scores_io.py split by meaning into the reading (scores_io), the table
(score_table), the join to SEG structure (inputs) and the join to a reference table (reference).
Callers keep importing every name from analysis.scores_io; the moved doctests still run."""

from __future__ import annotations

import doctest

import numpy as np
import pandas as pd
import pytest

from analysis import inputs, reference, score_table, scores_io

pytestmark = pytest.mark.light


@pytest.mark.parametrize("mod", [scores_io, inputs, reference, score_table])
def test_doctests_of_the_split_modules(mod):
    assert doctest.testmod(mod).failed == 0, mod.__name__


def test_scores_io_still_exports_the_moved_names_as_the_same_objects():
    assert scores_io.ScoreTable is score_table.ScoreTable
    for name in ("AnalysisInputs", "prepare_inputs", "degenerate_metrics", "SUBSET_SOURCES"):
        assert getattr(scores_io, name) is getattr(inputs, name)
    for name in ("with_reference", "reference_names", "identical_to_reference", "apply_lower_is_better",
                 "REFERENCE_SUFFIX"):
        assert getattr(scores_io, name) is getattr(reference, name)
    assert set(scores_io.__all__) <= set(dir(scores_io))


def test_subset_sources_resolve_as_before():
    # auto: a subset column wins when there is no dataset; an unknown source names the valid ones.
    t = scores_io.read_scores(pd.DataFrame({"seg_id": ["0", "0", "1", "1"], "node": ["0", "1", "0", "1"],
                                            "file_name": list("abcd"), "subset": ["x", "x", "y", "y"],
                                            "m": [0.9, 0.1, 0.8, 0.3]}))
    got = inputs.prepare_inputs(t)
    assert got.subset_source == "column"
    assert inputs.prepare_inputs(t, subsets="none").subset_source == "none"
    with pytest.raises(ValueError, match=r"expected subsets to be one of \['auto', 'dataset', 'column', 'ts2', "
                                         r"'none'\], got 'colum'"):
        inputs.prepare_inputs(t, subsets="colum")
    with pytest.raises(ValueError, match=r"SEG 0: expected one subset per SEG, got \['x', 'z'\]"):
        inputs.prepare_inputs(scores_io.read_scores(t.frame.assign(subset=["x", "z", "y", "y"])))
    np.testing.assert_array_equal(got.scores[:, 0], [0.9, 0.1, 0.8, 0.3])
