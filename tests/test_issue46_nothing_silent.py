"""Issue 46 (and issue 42's "Losses"): nothing silent on the way to a verdict.

The output/input clash rule (:func:`ts2.config_check.output_clash`), checked on its own; the
command lines are the ``clash-*`` cases of the hostile corpus (refused, nothing changed on disk).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ts2.config_check import output_clash


@pytest.fixture
def run(tmp_path) -> Path:
    d = tmp_path / "run"
    d.mkdir()
    (d / "scores.csv").write_text("seg_id,node,m\n0,0,1\n")
    (d / "manifest.json").write_text("{}")
    return d


@pytest.mark.light
def test_folder_output_clashes(run, tmp_path):
    scores = run / "scores.csv"
    assert "is the input results=" in output_clash({"output_dir": run}, {"results": [run]})
    assert "overlaps the input scores=" in output_clash({"output_dir": run}, {"scores": [scores]})
    # a folder holding a result set that holds the input: the set would be swapped away
    assert output_clash({"output_dir": tmp_path}, {"scores": [scores]}) is not None
    # an output folder inside an input result set
    assert output_clash({"output_dir": run / "sub"}, {"results": [run]}) is not None


@pytest.mark.light
def test_folder_output_apart_from_inputs_passes(run, tmp_path):
    data = tmp_path / "data"
    (data / "images").mkdir(parents=True)
    (data / "images" / "a.png").write_bytes(b"x")
    assert output_clash({"output_dir": tmp_path / "out"}, {"results": [run]}) is None
    # a dataset folder is no result set: an output folder inside it leaves its files alone
    assert output_clash({"output_dir": data / "out"}, {"path": [data]}) is None
    # a user's own file deeper in the output folder (not in a result set) is kept by result_set
    assert output_clash({"output_dir": tmp_path}, {"path": [data / "images" / "a.png"]}) is None


@pytest.mark.light
def test_file_output_clashes(run, tmp_path):
    assert "is the input scores=" in output_clash({"out": run / "scores.csv"}, {"scores": [run / "scores.csv"]})
    assert "lies in the input results=" in output_clash({"out": run / "explorer.html"}, {"results": [run]})
    # a file of a complete result set that is not an input of this command
    assert "lies in the result set" in output_clash({"out": run / "explorer.html"}, {"results": [tmp_path / "x"]})
    assert output_clash({"out": tmp_path / "explorer.html"}, {"results": [run]}) is None


# -- missing scores said: one line per metric and protocol, on stdout, in analysis.json and the report --
def _blanked(tmp_path) -> Path:
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    import hostile_cases as H

    p = tmp_path / "scores.csv"
    # tifa blank on SEG 0's node 1a and SEG 1's node 1: by hand, 2 of 7 cells, both SEGs; the walks
    # are 0-1a-2, 0-1b-2 (SEG 0) and 0-1-2 (SEG 1) under both protocols, 2 of 3 through a blank.
    p.write_text(H.scores_csv({"clip": H.BASE_SCORES["clip"], "tifa": [0.4, "", 0.5, 0.9, 0.3, "", 0.7]}))
    return p


@pytest.mark.light
def test_missing_summary_everywhere(tmp_path, capsys):
    import json

    from ts2.cli import main

    line = ("protocol {}: metric 'tifa' has 2 of 7 cells missing (blank, NaN or a failure code read as missing), "
            "in 2 of 2 SEGs; 2 of 3 walks pass through one")
    out = tmp_path / "out"
    assert main(["analyze", f"scores={_blanked(tmp_path)}", f"output_dir={out}", "bootstrap=0", "chance=0",
                 "reference=null"]) == 0
    stdout = capsys.readouterr().out
    for proto in ("paper", "graph"):
        assert "  " + line.format(proto) + "\n" in stdout, stdout
        assert line.format(proto) in json.loads((out / "analysis.json").read_text())["notes"]
    assert "'clip' has" not in stdout  # a complete metric gets no line
    assert main(["report", f"results=[{out}]", f"output_dir={tmp_path / 'rep'}", "figures=[]"]) == 0
    assert line.format("graph") in (tmp_path / "rep" / "report.html").read_text().replace("&#x27;", "'")


def test_missing_summary_on_the_release(tmp_path):
    """The issue's case: 406 of the released clipscore cells blanked at random; the counts are
    checked against pandas on the blanked rows (paper leaves SEG 164 out, graph keeps it)."""
    import re

    import numpy as np
    import pandas as pd
    from conftest import shared_path

    from ts2.api import analyze

    shared_dir = shared_path("ts2")

    df = pd.read_csv(shared_dir / "released" / "scores_subset.csv", dtype={"seg_id": str, "node": str})
    rng = np.random.default_rng(46)
    blank = rng.choice(len(df), 406, replace=False)
    df.loc[blank, "clipscore"] = np.nan
    p = tmp_path / "s.csv"
    df[["seg_id", "file_name", "node", "clipscore"]].to_csv(p, index=False)
    res = analyze(str(p), str(shared_dir), reference=None, bootstrap=0, chance=0, protocols=["paper", "graph"])
    notes = " | ".join(res.result.notes)
    for proto, keep in (("paper", df.seg_id != "164"), ("graph", df.seg_id == df.seg_id)):
        miss = df[keep & df.clipscore.isna()]
        m = re.search(rf"protocol {proto}: metric 'clipscore' has (\d+) of (\d+) cells missing .*?, in (\d+) of (\d+) "
                      r"SEGs; (\d+) of (\d+) walks", notes)
        assert m, notes
        assert (int(m[1]), int(m[2]), int(m[3]), int(m[4])) == (len(miss), int(keep.sum()), miss.seg_id.nunique(),
                                                               df[keep].seg_id.nunique())
        assert 0 < int(m[5]) < int(m[6])
