"""``ts2 reproduce``: Table 2 in both protocols from the released scores, with the discrepancy list."""

from __future__ import annotations

import re
import subprocess
import sys

import pandas as pd
import pytest

from analysis.paper_table2 import FLOPS, METRICS, RELEASED_METRICS, compare_with_printed, printed, table2

README_NAMES = {"CLIPScore": "clipscore", "ALIGNScore": "alignscore", "TIFA-BLIP1": "blip1_tifa", "DSG-BLIP1": "blip1_dsg"}


def test_table2_data_matches_the_targets_quoted_in_the_ts2_readme(ts2_dir):
    # An independent transcription: the example targets in ../shared/ts2/README.md.
    text = " ".join((ts2_dir / "README.md").read_text().split())
    pat = re.compile(r"(CLIPScore|ALIGNScore|TIFA-BLIP1|DSG-BLIP1) rank ([\d./]+)(?: \(Avg/Synth/Nat/Real\))?, "
                     r"sep ([\d./]+), delta Avg ([\d.]+)")
    found = pat.findall(text)
    assert len(found) == 4, found
    for name, rank, sep, delta in found:
        m = README_NAMES[name]
        for mm, vals in (("rank", rank), ("sep", sep)):
            assert [printed(m, mm, s) for s in ("Avg", "Synth", "Nat", "Real")] == [float(v) for v in vals.split("/")]
        assert printed(m, "delta", "Avg") == float(delta)


def test_table2_shape_and_flops_row():
    t = table2()
    assert len(t) == 19 * 12 and t["metric"].nunique() == 19
    assert t.set_index(["metric", "meta_metric", "subset"])["value"][("gpt4v_dsg", "rank", "Avg")] == pytest.approx(0.796)
    assert (FLOPS["clipscore"], FLOPS["gpt4v_tifa"], FLOPS["viescore"]) == (604e6, 1.66e15, 2.6e12)
    assert set(RELEASED_METRICS) <= set(METRICS)
    with pytest.raises(KeyError, match="expected metric in"):
        printed("clip", "rank", "Avg")


def test_compare_with_printed_rounding_and_known_rows():
    mm = pd.DataFrame({"metric": ["clipscore"] * 4, "protocol": "paper", "meta_metric": ["rank", "rank", "delta", "kendall"],
                       "subset": ["Avg", "Nat", "Nat", "Avg"], "value": [0.71449, 0.5806, 0.40, 0.5]})
    c = compare_with_printed(mm)
    assert c["match"].tolist() == [True, False, False]  # 71.449 -> 71.4 ok; 58.06 vs 58.0 off; kendall not printed
    assert c["difference"].round(2).tolist() == [0.05, 0.06, -52.5]
    assert c["known"].tolist()[:2] == ["", ""] and "cannot be reproduced" in c["known"].iloc[2]


def test_reproduce_writes_both_protocol_tables_and_the_discrepancy_list(ts2_dir, tmp_path):
    out = tmp_path / "repro"
    r = subprocess.run([sys.executable, "-m", "ts2", "reproduce", f"path={ts2_dir}", f"output_dir={out}",
                        "bootstrap=0"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "protocol paper: 36/48 printed Table 2 cells reproduced (12 of the others are the known" in r.stdout
    for proto in ("paper", "graph"):
        for ext in ("md", "tex", "csv"):
            assert (out / f"table_{proto}.{ext}").stat().st_size > 0
    disc = pd.read_csv(out / "discrepancies.csv", keep_default_na=False)
    paper = disc[disc.protocol == "paper"]
    assert len(paper) == 48 and paper["match"].sum() == 36
    bad = paper[~paper["match"]]
    # exactly the delta subset rows fail, and each says why
    assert set(zip(bad.meta_metric, bad.subset)) == {("delta", "Synth"), ("delta", "Nat"), ("delta", "Real")}
    assert (bad["known"] != "").all()
    graph = disc[disc.protocol == "graph"]
    assert len(graph) == 48 and graph["match"].sum() < 48  # the graph protocol really is another computation
    md = (out / "table_paper.md").read_text()
    assert "71.4" in md and "103.7" in md
    assert (out / "figures" / "pareto_rank.png").is_file()
    page = (out / "report.html").read_text()
    assert "Discrepancies with the printed Table 2" in page and "data:image/png;base64," in page
    assert "protocol graph:" in page


def test_reproduce_missing_input_is_a_clear_error(tmp_path):
    from ts2.commands.reproduce import locate_inputs

    with pytest.raises(FileNotFoundError, match="metadata.csv"):
        locate_inputs(tmp_path)
    (tmp_path / "metadata.csv").write_text("id,target_prompt,file_name,rank\n")
    with pytest.raises(FileNotFoundError, match="released/scores_subset.csv.*scores=FILE_OR_URL"):
        locate_inputs(tmp_path)
