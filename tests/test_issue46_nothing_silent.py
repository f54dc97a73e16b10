"""Issue 46 (and issue 42's "Losses"): nothing silent on the way to a verdict.

The output/input clash rule (:func:`ts2.config_check.output_clash`), checked on its own; the
command lines are the ``clash-*`` cases of the hostile corpus (refused, nothing changed on disk).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ts2.config_check import output_clash

pytestmark = pytest.mark.light


@pytest.fixture
def run(tmp_path) -> Path:
    d = tmp_path / "run"
    d.mkdir()
    (d / "scores.csv").write_text("seg_id,node,m\n0,0,1\n")
    (d / "manifest.json").write_text("{}")
    return d


def test_folder_output_clashes(run, tmp_path):
    scores = run / "scores.csv"
    assert "is the input results=" in output_clash({"output_dir": run}, {"results": [run]})
    assert "overlaps the input scores=" in output_clash({"output_dir": run}, {"scores": [scores]})
    # a folder holding a result set that holds the input: the set would be swapped away
    assert output_clash({"output_dir": tmp_path}, {"scores": [scores]}) is not None
    # an output folder inside an input result set
    assert output_clash({"output_dir": run / "sub"}, {"results": [run]}) is not None


def test_folder_output_apart_from_inputs_passes(run, tmp_path):
    data = tmp_path / "data"
    (data / "images").mkdir(parents=True)
    (data / "images" / "a.png").write_bytes(b"x")
    assert output_clash({"output_dir": tmp_path / "out"}, {"results": [run]}) is None
    # a dataset folder is no result set: an output folder inside it leaves its files alone
    assert output_clash({"output_dir": data / "out"}, {"path": [data]}) is None
    # a user's own file deeper in the output folder (not in a result set) is kept by result_set
    assert output_clash({"output_dir": tmp_path}, {"path": [data / "images" / "a.png"]}) is None


def test_file_output_clashes(run, tmp_path):
    assert "is the input scores=" in output_clash({"out": run / "scores.csv"}, {"scores": [run / "scores.csv"]})
    assert "lies in the input results=" in output_clash({"out": run / "explorer.html"}, {"results": [run]})
    # a file of a complete result set that is not an input of this command
    assert "lies in the result set" in output_clash({"out": run / "explorer.html"}, {"results": [tmp_path / "x"]})
    assert output_clash({"out": tmp_path / "explorer.html"}, {"results": [run]}) is None
