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


# -- a table keyed by file name alone, analysed with path= ------------------------------------------
def _hostile():
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    import hostile_cases as H

    return H


def _analyse(tmp_path, name: str, text: str, meta: str):
    import pandas as pd

    from ts2.api import analyze

    (tmp_path / "metadata.csv").write_text(meta)
    (tmp_path / name).write_text(text)
    res = analyze(str(tmp_path / name), str(tmp_path / "metadata.csv"), reference=None, bootstrap=0, chance=0,
                  protocols=["paper", "graph"])
    return pd.DataFrame(res.result.metametrics_frame())


@pytest.mark.light
@pytest.mark.parametrize("base_only", [False, True])
def test_file_name_only_table_same_numbers_as_keyed(tmp_path, base_only):
    import pandas as pd

    H = _hostile()
    keyed = _analyse(tmp_path, "keyed.csv", H.scores_csv(), H.meta_csv())
    rows = [r[2].rsplit("/", 1)[-1] if base_only else r[2] for r in H.BASE_META]
    text = "file_name,clip,tifa\n" + "".join(
        f"{f},{H.BASE_SCORES['clip'][i]},{H.BASE_SCORES['tifa'][i]}\n" for i, f in enumerate(rows))
    fn_only = _analyse(tmp_path, "fn.csv", text, H.meta_csv())
    assert len(keyed) and keyed["value"].notna().any()
    pd.testing.assert_frame_equal(fn_only, keyed)


@pytest.mark.light
def test_file_name_only_unknown_and_ambiguous_refused(tmp_path):
    H = _hostile()
    text = "file_name,clip\n" + "".join(f"{r[2]},{H.BASE_SCORES['clip'][i]}\n" for i, r in enumerate(H.BASE_META))
    with pytest.raises(ValueError, match=r"row 3: expected a file_name of the dataset's images .*got 'nope\.jpg', "
                                         r"which is none of its 7 images"):
        _analyse(tmp_path, "u.csv", text.replace("images/000-01.jpg", "nope.jpg"), H.meta_csv())
    meta = H.meta_csv([(s, p, f.replace("images/001-", "other/000-"), src, r) for s, p, f, src, r in H.BASE_META])
    with pytest.raises(ValueError, match=r"row 2: expected a file_name naming one image of the dataset, got '000-00\.jpg', "
                                         r"which matches 2 images \(images/000-00\.jpg, other/000-00\.jpg\)"):
        _analyse(tmp_path, "a.csv", text.replace("images/000-00.jpg", "000-00.jpg"), meta)


# -- a column identical to the reference it is named after is that reference, once -----------------
@pytest.mark.light
def test_copy_of_reference_analysed_once(tmp_path):
    import pandas as pd

    from ts2.api import analyze

    H = _hostile()
    ref = tmp_path / "ref.csv"
    ref.write_text(H.scores_csv())  # the reference: clip and tifa
    mine = pd.read_csv(ref, dtype=str)
    mine["mine"] = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]
    mine = mine.iloc[::-1]  # another row order: the join is on file_name
    mine.to_csv(tmp_path / "mine.csv", index=False)
    res = analyze(str(tmp_path / "mine.csv"), reference=str(ref), bootstrap=0, chance=0, protocols=["paper"])
    assert list(res.result.metrics) == ["clip", "tifa", "mine"]
    assert res.roles == {"clip": "reference", "tifa": "reference", "mine": "metric"}
    assert sum("identical to the reference" in n for n in res.result.notes) == 1
    # a column that differs from the reference in one cell is still kept beside it
    mine.loc[mine.index[0], "clip"] = "0.95"
    mine.to_csv(tmp_path / "mine2.csv", index=False)
    res = analyze(str(tmp_path / "mine2.csv"), reference=str(ref), bootstrap=0, chance=0, protocols=["paper"])
    assert list(res.result.metrics) == ["clip", "tifa", "mine", "clip_reference"]


# -- each control alone on the light install (torch and the model stack blocked) ---------------------
def _blocked(args):
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from test_light_install import _run_blocked

    return _run_blocked(args)


HINTS = {"shuffled_image": ("; it is needed by its inner metric clipscore: for a model-free inner metric pass "
                             "metric@metric.inner=geneval_shapes (what ts2 run uses on the light install)"),
         "shuffled_text": ("; it is needed by its inner metric clipscore, and no model-free metric can score for "
                           "shuffled_text on the light install: install the extra, or leave shuffled_text out")}


@pytest.mark.light
def test_sweep_of_controls_says_every_failed_job_and_what_to_do(tmp_path):
    r = _blocked(["score", "-m", "dataset=mini", "limit=6", "metric=random,shuffled_image,shuffled_text",
                  "progress=false", f"output_dir={tmp_path / 'sw'}"])
    assert r.returncode != 0
    for m, hint in HINTS.items():
        assert f'ts2 score: metric {m} needs open_clip, which is not installed: pip install "ts2[models]"' + hint \
            in r.stderr, r.stderr[-3000:]
    assert "ts2 score: 2 job(s) of the sweep failed (each said above): job 1 (dataset=mini limit=6 " \
           "metric=shuffled_image" in r.stderr, r.stderr[-2000:]
    assert "; job 2 (dataset=mini limit=6 metric=shuffled_text" in r.stderr, r.stderr[-2000:]
    assert (tmp_path / "sw" / "0" / "scores.csv").is_file()  # job 0 (random) finished and was kept


@pytest.mark.light
def test_shuffled_image_alone_with_the_named_override(tmp_path):
    import pandas as pd

    out = tmp_path / "si"
    r = _blocked(["score", "dataset=mini", "limit=12", "metric=shuffled_image", "metric@metric.inner=geneval_shapes",
                  "progress=false", f"output_dir={out}"])
    assert r.returncode == 0, r.stderr[-3000:]
    assert "IMPORTED []" in r.stdout
    s = pd.read_csv(out / "scores.csv")["shuffled_image"]
    assert len(s) == 12 and s.notna().all() and s.between(0, 1).all()


@pytest.mark.light
def test_always_yes_alone_says_the_override_and_leaves_no_empty_column(tmp_path):
    import json

    import pandas as pd

    out = tmp_path / "ay"
    r = _blocked(["score", "dataset=mini", "limit=6", "metric=always_yes", "progress=false", f"output_dir={out}"])
    assert r.returncode == 1
    assert "metric.questions=generate +qa_lm@metric.lm=geneval_rules" in r.stderr
    assert "always_yes failed on every one of its 6 images: no column written to scores.csv" in r.stderr
    assert "always_yes" not in pd.read_csv(out / "scores.csv").columns
    run = json.loads((out / "run.json").read_text())
    assert "always_yes" not in run["columns"] and "always_yes" not in run.get("directions", {})
    # the override it names works
    out2 = tmp_path / "ay2"
    r = _blocked(["score", "dataset=mini", "limit=6", "metric=always_yes", "metric.questions=generate",
                  "+qa_lm@metric.lm=geneval_rules", "progress=false", f"output_dir={out2}"])
    assert r.returncode == 0, r.stderr[-3000:]
    assert pd.read_csv(out2 / "scores.csv")["always_yes"].notna().all()


@pytest.mark.light
def test_progress_bars_quiet_in_a_non_tty(tmp_path):
    """stderr is a pipe here: the bars (on by default) write no carriage return."""
    r = _blocked(["score", "dataset=mini", "limit=40", "metric=blur", f"output_dir={tmp_path / 'b'}"])
    assert r.returncode == 0, r.stderr[-2000:]
    assert "\r" not in r.stderr and "img/s]" not in r.stderr, repr(r.stderr[-500:])


@pytest.mark.light
def test_progress_bar_shown_on_a_terminal():
    import io

    from seg_data.progress import tqdm

    class Tty(io.StringIO):
        def isatty(self):
            return True

    out = Tty()
    assert list(tqdm(range(3), file=out, desc="x")) == [0, 1, 2]
    assert "x: 100%" in out.getvalue()
    assert tqdm(range(3), file=out, disable=True).disable


@pytest.mark.light
def test_200_metric_columns_no_performance_warning(tmp_path):
    import warnings

    import numpy as np
    import pandas as pd

    from analysis.scores_io import read_scores

    rng = np.random.default_rng(0)
    keys = pd.DataFrame([{"seg_id": str(s), "node": n, "file_name": f"{s}-{n}.png"} for s in range(6) for n in "012"])
    cols = pd.DataFrame(rng.uniform(size=(len(keys), 200)), columns=[f"m{j}" for j in range(200)])
    pd.concat([keys, cols], axis=1).to_csv(tmp_path / "w.csv", index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", pd.errors.PerformanceWarning)
        t = read_scores(tmp_path / "w.csv")
    assert len(t.metrics) == 200
    np.testing.assert_allclose(t.frame["m17"].to_numpy(), cols["m17"].to_numpy(), rtol=1e-12)


@pytest.mark.light
def test_deleted_working_directory_is_one_line(tmp_path):
    import os
    import subprocess
    import sys

    gone = tmp_path / "gone"
    gone.mkdir()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    r = subprocess.run(["sh", "-c", f'cd "{gone}" && rmdir "{gone}" && exec "{sys.executable}" -m ts2 analyze '
                        f'scores="{tmp_path}/s.csv"'], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 2
    assert r.stderr.strip() == ("ts2 analyze: the current folder no longer exists (deleted or moved since this shell "
                                "entered it); cd into an existing folder and run the command again"), r.stderr


@pytest.mark.light
def test_analysis_json_records_the_dataset_folder_for_explore(tmp_path):
    import json

    from ts2.cli import main
    from ts2.result_views import recorded_dataset

    H = _hostile()
    data = tmp_path / "my data é"  # a space and a non-ASCII letter in the recorded path
    data.mkdir()
    (data / "metadata.csv").write_text(H.meta_csv())
    (tmp_path / "s.csv").write_text(H.scores_csv())
    out = tmp_path / "out"
    assert main(["analyze", f"scores={tmp_path / 's.csv'}", f"path='{data / 'metadata.csv'}'", f"output_dir={out}",
                 "bootstrap=0", "chance=0", "reference=null"]) == 0
    assert json.loads((out / "analysis.json").read_text())["dataset_path"] == str(data.resolve())
    ds = recorded_dataset([str(out)])
    assert ds is not None and [s.prompt for s in ds] == ["a red cube", "two cats"]
