"""SEGs from fine-grained human labels (seg_data.labels; issue 45): the rule on a hand-derived
fixture in EvalMuse's real format, the CSV format, malformed records, the CLI and analysis."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from seg_data import load_path
from seg_data.labels import (
    FORMATS,
    LabelFormatError,
    LabelRecord,
    LabelSettings,
    build_segs,
    covering_edges,
    from_labels,
    read_labels,
)
from ts2.cli import main

pytestmark = pytest.mark.light

A = "two cats on a red sofa"
B = "three red apples"
C = "a blue bird"
D = "a dog left of a cat"


def _rec(prompt, img, elements, as_string=True, total=(4, 5, 3)):
    es = str(elements) if as_string else elements  # EvalMuse writes a Python dict literal in a string
    return {"prompt": prompt, "img_path": img, "total_score": list(total), "element_score": es,
            "promt_meaningless": [0, 0, 0], "split_confidence": [1, 1, 1], "attribute_confidence": [1, 1, 1]}


def _full(cats=(1, 1, 1), two=(1, 1, 1), red=(1, 1, 1), sofa=(1, 1, 1)):
    return {"cats (animal)": list(cats), "two (counting)": list(two), "red (color)": list(red),
            "sofa (object)": list(sofa)}


FIXTURE = [
    _rec(A, "a/0.png", _full()),                                          # nothing fails -> 0
    _rec(A, "a/1.png", _full(two=(0, 0, 1))),                             # mean 1/3 -> {two}
    _rec(A, "a/2.png", {"cats (animal)": [1, 1], "two (counting)": [1, 1, 0], "red (color)": [0, 1],
                        "sofa (object)": [1]}, as_string=False),          # red mean 0.5: no failure -> 0
    _rec(A, "a/3.png", _full(two=(0, 0, 0), red=(0, 0, 1))),              # {two, red}
    _rec(A, "a/4.png", _full(red=(0, 0, 0))),                             # {red}
    _rec(A, "a/5.png", _full(two=(0, 0, 0), red=(0, 0, 0), sofa=(0, 1, 0))),  # {two, red, sofa}
    _rec(A, "a/6.png", _full(cats=(0, 0, 0))),                            # {cats}
    _rec(B, "b/0.png", {"three (counting)": [0, 0, 1], "apples (food)": [1, 1, 1]}),  # no error-free image
    _rec(B, "b/1.png", {"three (counting)": [0, 0, 0], "red (color)": [0, 0, 0]}),
    _rec(C, "c/0.png", {"bird (animal)": [1, 1, 1]}),                     # a single node: dropped
    _rec(C, "c/1.png", {"bird (animal)": [1, 0, 1]}),
    _rec(D, "d/0.png", {"dog (animal)": [1, 1, 1], "left of (spatial)": [1, 1, 0]}),
    _rec(D, "d/1.png", {"dog (animal)": [1, 1, 1], "left of (spatial)": [0, 0, 1]}),
    _rec(D, "d/2.png", {"dog (animal)": [1, 1, 1], "left of (spatial)": [0, 0, 0]}),
]

# Hand-derived: prompt A's failed sets {}, {cats}, {red}, {two}, {red, two}, {red, sofa, two};
# level-1 nodes ordered by their element names (cats < red < two).
EXPECTED_A_NODES = {"0": ["a/0.png", "a/2.png"], "1a": ["a/6.png"], "1b": ["a/4.png"], "1c": ["a/1.png"],
                    "2": ["a/3.png"], "3": ["a/5.png"]}
EXPECTED_A_EDGES = {("0", "1a"), ("0", "1b"), ("0", "1c"), ("1b", "2"), ("1c", "2"), ("2", "3")}
EXPECTED_A_ERRORS = {"0": [], "1a": ["cats (animal)"], "1b": ["red (color)"], "1c": ["two (counting)"],
                     "2": ["red (color)", "two (counting)"], "3": ["red (color)", "sofa (object)", "two (counting)"]}


@pytest.fixture()
def fixture_files(tmp_path) -> tuple[Path, Path]:
    labels = tmp_path / "train_list.json"
    labels.write_text(json.dumps(FIXTURE, indent=1))
    images = tmp_path / "imgs"
    images.mkdir()
    return labels, images


def _nodes(seg):
    return {n: sorted(im.image_id for im in seg.images(n)) for n in seg.nodes}


def test_evalmuse_fixture_builds_the_hand_derived_segs(fixture_files, tmp_path):
    labels, images = fixture_files
    ds, summary = from_labels("evalmuse", labels, tmp_path / "out", images=images)
    assert ds.seg_ids == ["0", "3"]  # prompts 1 (no error-free image) and 2 (one node) dropped
    a = ds["0"]
    assert a.prompt == A and _nodes(a) == EXPECTED_A_NODES
    assert set(a.graph.edges) == EXPECTED_A_EDGES
    assert {n: a.level(n) for n in a.nodes} == {"0": 0, "1a": 1, "1b": 1, "1c": 1, "2": 2, "3": 3}
    assert {n: list(a.graph.nodes[n]["errors"]) for n in a.nodes} == EXPECTED_A_ERRORS
    assert list(a.graph.edges["2", "3"]["errors"]) == ["sofa (object)"]
    assert a.subset == "mixed" and a.metadata["elements"]["two (counting)"] == "counting"
    d = ds["3"]
    assert _nodes(d) == {"0": ["d/0.png"], "1": ["d/1.png", "d/2.png"]} and set(d.graph.edges) == {("0", "1")}
    assert d.subset == "spatial"
    assert summary.n_prompts == 4 and summary.n_segs == 2 and summary.n_images == 10
    assert summary.n_images_dropped == 4
    assert summary.dropped_prompts == {"no image without a failed element": 1, "a single node": 1}
    assert summary.nodes_per_level == {0: 2, 1: 4, 2: 1, 3: 1}
    assert summary.at_threshold == 1  # a/2.png's red (color) [0, 1]
    # Agreement, by hand, over the 33 judgments of the built SEGs with >= 2 raters (A: 7 images x 4
    # elements less a/2.png's one-rater sofa; D: 3 x 2). Split: a/1 two, a/2 two, a/3 red, a/5 sofa,
    # d/0 left, d/1 left (2-1 of 3 raters) and a/2 red (1-1 of 2); unanimous: 25 of 3 raters + a/2 cats [1, 1].
    assert summary.n_judgments == 33 and summary.rater_unanimous == pytest.approx(26 / 33)
    # rater pairs (ordered): 3 raters 6, 2 raters 2; agreeing: unanimous all, a 2-1 split 2 of 6, a 1-1 split 0
    pairs = 25 * 6 + 6 * 6 + 2 + 2
    same = 25 * 6 + 6 * 2 + 0 + 2
    assert summary.rater_pairwise_agreement == pytest.approx(same / pairs)


def test_the_written_folder_loads_validates_and_counts(fixture_files, tmp_path, capsys):
    labels, images = fixture_files
    out = tmp_path / "segs"
    rc = main(["data", "from-labels", "format=evalmuse", f"labels={labels}", f"images={images}", f"out={out}"])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "SEGs built: 2" in text and "1 with no image without a failed element" in text
    assert (out / "images").is_symlink() and (out / "images").resolve() == images.resolve()
    ds = load_path(out)
    assert ds["0"].images("1c")[0].path == out.resolve() / "images" / "a/1.png"
    assert main(["data", "validate", f"path={out}"]) == 0
    assert "OK: 2 SEGs, 0 error(s)" in capsys.readouterr().out
    assert main(["data", "info", f"path={out}", "json=true"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["n_segs"] == 2 and info["n_images"] == 10
    assert info["segs_per_subset"] == {"mixed": 1, "spatial": 1}
    build = json.loads((out / "build.json").read_text())
    assert build["n_segs"] == 2 and build["settings"]["fail_below"] == 0.5


def test_threshold_is_a_setting(fixture_files, tmp_path):
    labels, _ = fixture_files
    records, _ = read_labels("evalmuse", labels)
    ds, summary = build_segs(records, LabelSettings(fail_below=0.6))  # a 0.5 mean now fails
    a = ds["0"]
    assert sorted(im.image_id for im in a.images("0")) == ["a/0.png"]  # a/2.png moved out of node 0
    assert summary.at_threshold == 0


def test_covering_edges_match_a_brute_force_transitive_reduction():
    import networkx as nx

    rng = np.random.default_rng(3)
    for _ in range(30):
        universe = "abcde"
        sets = {frozenset()} | {frozenset(c for c in universe if rng.random() < 0.4) for _ in range(8)}
        g = nx.DiGraph()
        g.add_nodes_from(sets)
        g.add_edges_from((a, b) for a in sets for b in sets if a < b)
        assert set(covering_edges(list(sets))) == set(nx.transitive_reduction(g).edges)


def test_csv_format_builds_the_same_segs(tmp_path):
    rows = []
    for r in FIXTURE:
        es = eval(r["element_score"]) if isinstance(r["element_score"], str) else r["element_score"]  # noqa: S307 - test data
        for el, labels in es.items():
            text, _, cat = el.rpartition(" (")
            for k, v in enumerate(labels):
                rows.append({"prompt": r["prompt"], "image": r["img_path"], "element": el, "rater": f"r{k}",
                             "label": v, "category": cat[:-1]})
    path = tmp_path / "labels.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    ds_csv, s_csv = build_segs(read_labels("csv", path)[0])
    fixture = tmp_path / "train_list.json"
    fixture.write_text(json.dumps(FIXTURE))
    ds_em, s_em = build_segs(read_labels("evalmuse", fixture)[0], source="csv")
    assert ds_csv.seg_ids == ds_em.seg_ids
    for sid in ds_csv.seg_ids:
        assert _nodes(ds_csv[sid]) == _nodes(ds_em[sid]) and set(ds_csv[sid].graph.edges) == set(ds_em[sid].graph.edges)
        assert ds_csv[sid].subset == ds_em[sid].subset
    assert s_csv.rater_pairwise_agreement == pytest.approx(s_em.rater_pairwise_agreement)


@pytest.mark.parametrize("mutate, message", [
    (lambda recs: recs[3].pop("img_path"), r"record 3: expected field 'img_path'"),
    (lambda recs: recs[4].update(element_score="{'red (color)': [0, 2, 1]}"),
     r"record 4 \(img_path 'a/4.png'\): element 'red \(color\)': expected labels 0 or 1, got 2"),
    (lambda recs: recs[5].update(element_score="{}"), r"record 5 \(img_path 'a/5.png'\): expected at least one element"),
    (lambda recs: recs[6].update(img_path="a/0.png"), r"record 6 \(img_path 'a/0.png'\): expected each image once, "
                                                      r"got it again \(first at record 0\)"),
    (lambda recs: recs[1].update(element_score="{'x': __import__('os')}"), r"record 1 .*expected 'element_score' "
                                                                           "to be a dict literal"),
    (lambda recs: recs[2].update(img_path="../../etc/passwd"), r"record 2: expected a relative image path"),
    (lambda recs: recs[2].update(total_score=["high"]), r"record 2 .*expected 'total_score' to be numbers"),
])
def test_malformed_records_name_the_record_and_write_nothing(tmp_path, mutate, message, capsys):
    recs = json.loads(json.dumps(FIXTURE))
    mutate(recs)
    labels = tmp_path / "train_list.json"
    labels.write_text(json.dumps(recs))
    out = tmp_path / "out"
    with pytest.raises(LabelFormatError, match=message):
        from_labels("evalmuse", labels, out, images=None)
    assert not out.exists() and not list(tmp_path.glob(".out.*"))
    rc = main(["data", "from-labels", f"labels={labels}", "images=false", f"out={out}"])
    assert rc == 2 and not out.exists()
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("text, message", [
    ("prompt,image,element,rater\n", r"expected columns .*missing \['label'\]"),
    ("prompt,image,element,rater,label,colour\n", r"unknown \['colour'\]"),
    ("prompt,image,element,rater,label\np,i.png,e,r1,0.5\n", r"line 2: element 'e': expected labels 0 or 1, got 0.5"),
    ("prompt,image,element,rater,label\np,i.png,e,r1,1\np,i.png,e,r1,0\n", r"line 3: expected one rating per image"),
    ("prompt,image,element,rater,label\np,i.png,e,r1,1\nq,i.png,f,r1,0\n", r"line 3: expected the same prompt as line 2"),
])
def test_malformed_csv_names_the_line(tmp_path, text, message):
    p = tmp_path / "l.csv"
    p.write_text(text)
    with pytest.raises(LabelFormatError, match=message):
        read_labels("csv", p)


def test_refusals_are_one_line(fixture_files, tmp_path, capsys):
    labels, images = fixture_files
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "keep.txt").write_text("mine")
    assert main(["data", "from-labels", f"labels={labels}", f"images={images}", f"out={taken}"]) == 2
    assert (taken / "keep.txt").read_text() == "mine"
    assert main(["data", "from-labels", f"labels={labels}", f"out={tmp_path / 'o'}"]) == 2  # images not given
    assert main(["data", "from-labels", "format=richhf", f"labels={labels}", "images=false",
                 f"out={tmp_path / 'o'}"]) == 2
    err = capsys.readouterr().err
    assert "expected out=" in err and "expected images=DIR" in err and "format=richhf" in err
    assert "evalmuse" in err and "Traceback" not in err
    with pytest.raises(ValueError, match=r"expected a label format among \['csv', 'evalmuse'\], got 'nope'"):
        read_labels("nope", labels)
    assert sorted(FORMATS) == ["csv", "evalmuse"]


def test_hub_unreachable_gives_the_offline_hint(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(RuntimeError, match=r"DY-Evalab/EvalMuse .*pass labels=FILE with a local copy"):
        read_labels("evalmuse", None)


def _synthetic_labels(n_prompts=40, per_prompt=10, n_elements=5, seed=0) -> tuple[list[dict], dict[str, int]]:
    """EvalMuse-format records and each image's number of failed elements (3 raters, majority)."""
    rng = np.random.default_rng(seed)
    recs, failed = [], {}
    for p in range(n_prompts):
        for i in range(per_prompt):
            es, n = {}, 0
            for e in range(n_elements):
                fail = i > 0 and rng.random() < 0.25  # image 0 of each prompt is error-free
                votes = [int(not fail)] * 3
                votes[int(rng.integers(3))] ^= int(rng.random() < 0.2)  # one rater disagrees now and then
                es[f"e{e} ({['object', 'counting', 'color'][e % 3]})"] = votes
                n += sum(votes) / 3 < 0.5
            img = f"p{p}/{i}.png"
            recs.append(_rec(f"prompt {p}", img, es))
            failed[img] = n
    return recs, failed


def test_analyze_on_built_segs_orders_a_good_metric_and_not_a_random_one(tmp_path, capsys):
    recs, failed = _synthetic_labels()
    labels = tmp_path / "train_list.json"
    labels.write_text(json.dumps(recs))
    out = tmp_path / "segs"
    assert main(["data", "from-labels", f"labels={labels}", "images=false", f"out={out}"]) == 0
    ds = load_path(out)
    frame = ds.image_table()
    rng = np.random.default_rng(1)
    frame["good"] = [-failed[f] + rng.normal(0, 0.05) for f in frame["file_name"]]
    frame["exact"] = [-failed[f] for f in frame["file_name"]]
    frame["random"] = rng.random(len(frame))
    scores = tmp_path / "scores.csv"
    frame[["seg_id", "node", "file_name", "good", "exact", "random"]].to_csv(scores, index=False)
    res = tmp_path / "res"
    capsys.readouterr()
    rc = main(["analyze", f"scores={scores}", f"path={out}", f"output_dir={res}", "bootstrap=0", "chance=20",
               "reference=null"])
    assert rc == 0, capsys.readouterr().err
    mm = pd.read_csv(res / "metametrics.csv")
    avg = mm[(mm.subset == "Avg") & (mm.protocol == "paper")].set_index(["metric", "meta_metric"])
    # minus the failed count orders every walk: exactly (ties where the levels tie) 1.0; with noise,
    # the images of one node (2.4 error-free ones per prompt here) are no longer tied, so less
    assert avg.loc[("exact", "rank"), "value"] == pytest.approx(1.0)
    assert avg.loc[("exact", "sep"), "value"] == pytest.approx(1.0)
    assert avg.loc[("good", "rank"), "value"] > 0.8 and avg.loc[("good", "sep"), "value"] == pytest.approx(1.0)
    r = avg.loc[("random", "rank")]
    assert abs(r["value"] - r["chance"]) < 0.1  # a random column reads its chance level
    assert avg.loc[("good", "sep"), "value"] > avg.loc[("random", "sep"), "value"]
    assert {"counting", "color", "object", "mixed"} & set(mm.subset)  # per-category subsets reported


def test_label_record_is_the_common_form():
    r = LabelRecord(prompt="p", image="x.png", elements={"a (object)": (0.0, 0.0, 1.0)}, categories={"a (object)": "object"})
    ds, s = build_segs([r, LabelRecord(prompt="p", image="y.png", elements={"a (object)": (1.0, 1.0)})])
    assert ds["0"].nodes == ["0", "1"] and ds["0"].subset == "object"
    assert s.rater_pairwise_agreement == pytest.approx((2 + 2) / (6 + 2))  # 0-0 of x's 6 ordered pairs, y's 2


def test_built_folder_scores_and_the_python_door_gives_the_same_segs(tmp_path, capsys):
    from PIL import Image

    import ts2

    images = tmp_path / "imgs"
    for r in FIXTURE:
        (images / r["img_path"]).parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (16, 16), (len(r["img_path"]) * 9 % 255, 0, 0)).save(images / r["img_path"])
    labels = tmp_path / "train_list.json"
    labels.write_text(json.dumps(FIXTURE))
    ds, _ = ts2.from_labels("evalmuse", labels, tmp_path / "py", images=images)
    out = tmp_path / "cli"
    assert main(["data", "from-labels", f"labels={labels}", f"images={images}", f"out={out}"]) == 0
    import yaml

    py, cli = (yaml.safe_load((d / "dataset.yaml").read_text()) for d in (tmp_path / "py", out))
    assert py["segs"] == cli["segs"] and py["name"] == "py" and cli["name"] == "cli"  # the same SEGs either way
    assert main(["data", "validate", f"path={out}", "check_images=true"]) == 0
    res = tmp_path / "scored"
    assert main(["score", f"path={out}", "metric=random", f"output_dir={res}"]) == 0
    scored = pd.read_csv(res / "scores.csv", dtype={"seg_id": str})
    assert len(scored) == ds.n_images == 10 and scored["random"].notna().all()
    assert set(zip(scored.seg_id, scored.node, strict=True)) == {(s.seg_id, n) for s in ds for n in s.nodes}


def test_generator_subsets_and_one_seg_per_prompt_and_generator(tmp_path, capsys):
    rows = []
    for gen in ("sdxl", "dalle3"):
        for i, fails in enumerate([(), ("two (counting)",), ("two (counting)", "red (color)")]):
            for el in ("two (counting)", "red (color)"):
                for r in range(3):
                    rows.append({"prompt": "two red cats", "image": f"{gen}/{i}.png", "element": el, "rater": f"r{r}",
                                 "label": int(el not in fails), "category": el.split("(")[1][:-1], "generator": gen})
    path = tmp_path / "l.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    records, _ = read_labels("csv", path)
    mixed, _ = build_segs(records, LabelSettings(subset_by="generator"))
    assert mixed.seg_ids == ["0"] and mixed["0"].subset == "mixed" and mixed["0"].n_images == 6
    per, summary = build_segs(records, LabelSettings(subset_by="generator", group_by="prompt_generator"))
    assert [s.subset for s in per] == ["sdxl", "dalle3"] and [s.metadata["generator"] for s in per] == ["sdxl", "dalle3"]
    assert all(s.nodes == ["0", "1", "2"] and set(s.graph.edges) == {("0", "1"), ("1", "2")} for s in per)
    assert summary.n_prompts == 1 and summary.n_segs == 2
    out = tmp_path / "out"
    assert main(["data", "from-labels", "format=csv", f"labels={path}", "images=false", f"out={out}",
                 "subset_by=generator", "group_by=prompt_generator"]) == 0
    assert "SEGs per subset: dalle3: 1, sdxl: 1" in capsys.readouterr().out
    assert main(["data", "from-labels", "format=csv", f"labels={path}", "images=false", f"out={tmp_path / 'x'}",
                 "group_by=model"]) == 2
    assert "group_by=model: expected one of prompt, prompt_generator" in capsys.readouterr().err
