"""Loader of human-judgment sets (seg_data/human.py): TIFA v1.0 JSON and our long CSV."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from seg_data.human import HumanJudgments, human_from_frame, load_human, load_human_csv, load_tifa_json, save_human_csv

CSV_HEADER = "item_id,prompt,image,rater,rating,clip,tifa\n"


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def tifa_records():
    return {
        "p1_a": {"text_id": "p1", "image_path": "p1_a.jpg", "text": "a red cube", "human_scores": [5, 4],
                 "human_avg": 4.5, "clipscore_vitb32": 30.1, "tifa_vilt": 1.0, "model": "sd"},
        "p1_b": {"text_id": "p1", "image_path": "p1_b.jpg", "text": "a red cube", "human_scores": [2, 3],
                 "human_avg": 2.5, "clipscore_vitb32": 28.0, "tifa_vilt": None, "model": "sd"},
        "p2_a": {"text_id": "p2", "text": "two dogs", "human_scores": [1, 1, 2],
                 "clipscore_vitb32": 25.5, "bleu": 0.1, "model": "dalle"},
    }


def test_tifa_json_small(tmp_path):
    p = write(tmp_path, "t.json", json.dumps(tifa_records()))
    h = load_human(p)
    assert list(h.items.index) == ["p1_a", "p1_b", "p2_a"]
    # Known TIFA metrics in Table 2 order (bleu before clipscore before tifa), "model" is not a metric.
    assert h.metrics == ("bleu", "clipscore_vitb32", "tifa_vilt")
    assert h.label("clipscore_vitb32") == "CLIPScore" and h.label("bleu") == "BLEU-4"
    np.testing.assert_allclose(h.human, [4.5, 2.5, 4 / 3])
    assert h.raters == ("r0", "r1", "r2")
    assert h.ratings.loc["p2_a"].tolist() == [1.0, 1.0, 2.0]
    assert math.isnan(h.ratings.loc["p1_a", "r2"])
    assert h.items["n_ratings"].tolist() == [2, 2, 3]
    assert math.isnan(h.scores("tifa_vilt")[1])  # null -> no score
    assert math.isnan(h.scores("bleu")[0])  # absent -> no score
    assert h.groups.tolist() == ["p1", "p1", "p2"]
    assert h.n_prompts == 2 and len(h) == 3
    assert h.items.loc["p2_a", "image"] == ""
    assert h.reliability_data().shape == (3, 3)
    with pytest.raises(KeyError, match="expected one of"):
        h.scores("clip")


@pytest.mark.parametrize("mutate,match", [
    (lambda d: d["p1_a"].pop("human_scores"), "missing \\['human_scores'\\]"),
    (lambda d: d["p1_a"].__setitem__("human_scores", []), "non-empty list"),
    (lambda d: d["p1_a"].__setitem__("human_scores", [5, "x"]), "non-empty list of finite numbers"),
    (lambda d: d["p1_a"].__setitem__("human_avg", 4.0), "expected 'human_avg' = mean\\(human_scores\\) = 4.5"),
    (lambda d: d["p1_b"].__setitem__("clipscore_vitb32", "high"), "expected a number for metric 'clipscore_vitb32'"),
    (lambda d: d["p1_a"].__setitem__("bleu", "n/a"), "record 'p1_a': expected a number for metric 'bleu'"),
    (lambda d: d.__setitem__("p9", [1, 2]), "record 'p9': expected an object"),
])
def test_tifa_json_errors_name_the_record(tmp_path, mutate, match):
    d = tifa_records()
    mutate(d)
    p = write(tmp_path, "t.json", json.dumps(d))
    with pytest.raises(ValueError, match=match):
        load_tifa_json(p)


def test_tifa_json_bad_files(tmp_path):
    with pytest.raises(ValueError, match="could not parse as JSON"):
        load_tifa_json(write(tmp_path, "a.json", "{not json"))
    with pytest.raises(ValueError, match="expected a JSON object"):
        load_tifa_json(write(tmp_path, "b.json", "[1, 2]"))
    with pytest.raises(ValueError, match="at least one record"):
        load_tifa_json(write(tmp_path, "c.json", "{}"))
    with pytest.raises(FileNotFoundError, match="found none"):
        load_human(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="expected a .json"):
        load_human(write(tmp_path, "d.txt", "x"))


def test_csv_format(tmp_path):
    p = write(tmp_path, "h.csv", CSV_HEADER +
              "i1,a red cube,i1.png,alice,4,0.31,0.75\n"
              "i1,a red cube,i1.png,bob,5,0.31,0.75\n"
              "i2,a red cube,i2.png,alice,2,0.20,\n"
              "i3,two dogs,,bob,3,0.5,0.5\n"
              "i3,two dogs,,carol,1,0.5,0.5\n")
    h = load_human(p)
    assert list(h.items.index) == ["i1", "i2", "i3"]
    assert h.metrics == ("clip", "tifa")
    assert h.raters == ("alice", "bob", "carol")
    np.testing.assert_allclose(h.human, [4.5, 2.0, 2.0])
    assert h.items["n_ratings"].tolist() == [2, 1, 2]
    assert h.groups.tolist() == ["a red cube", "a red cube", "two dogs"]  # prompt text as group id
    assert math.isnan(h.scores("tifa")[1])
    r = h.reliability_data()
    assert r.shape == (3, 3) and np.isnan(r[2, 0]) and r[2, 2] == 1.0


def test_csv_prompt_id_column_and_round_trip(tmp_path):
    p = write(tmp_path, "h.csv", "item_id,prompt_id,prompt,image,rater,rating,m\n"
              "i1,P1,same text,,r,4,1\n"
              "i2,P2,same text,,r,2,0\n")
    h = load_human_csv(p)
    assert h.groups.tolist() == ["P1", "P2"]  # prompt_id wins over the text
    tj = load_tifa_json(write(tmp_path, "t.json", json.dumps(tifa_records())))
    back = load_human_csv(save_human_csv(tj, tmp_path / "out" / "rt.csv"))
    pd.testing.assert_frame_equal(back.items, tj.items, check_dtype=False)
    pd.testing.assert_frame_equal(back.ratings, tj.ratings)
    assert back.metrics == tj.metrics


def test_csv_and_frame_give_the_same_judgments(tmp_path):
    # load_human_csv reads the cells as text and skips human_from_frame's normalising pass; a
    # frame of typed cells (floats, NaN, None) must give what the same data written as CSV gives.
    text = (" item_id,prompt,image,rater,rating,clip,tifa\n"  # a padded header name
            "i1,a red cube,i1.png,alice,4,0.31,0.75\n"
            "i1,a red cube,i1.png,bob,5,0.31,0.75\n"
            "i2,a red cube,,alice,2,0.2\n"  # a short row: the missing cell is empty
            "i3,two dogs,,bob,3.5,,\n")
    from_csv = load_human_csv(write(tmp_path, "h.csv", text))
    frame = pd.DataFrame({" item_id": ["i1", "i1", "i2", "i3"], "prompt": ["a red cube"] * 3 + ["two dogs"],
                          "image": ["i1.png", "i1.png", None, np.nan], "rater": ["alice", "bob", "alice", "bob"],
                          "rating": [4, 5, 2, 3.5], "clip": [0.31, 0.31, 0.2, None], "tifa": [0.75, 0.75, np.nan, np.nan]})
    from_frame = human_from_frame(frame, "<frame>")
    pd.testing.assert_frame_equal(from_frame.items, from_csv.items)
    pd.testing.assert_frame_equal(from_frame.ratings, from_csv.ratings)
    assert from_csv.metrics == from_frame.metrics == ("clip", "tifa")
    assert from_csv.items["image"].tolist() == ["i1.png", "", ""]
    np.testing.assert_allclose(from_csv.human, [4.5, 2.0, 3.5])
    assert math.isnan(from_csv.scores("tifa")[1]) and math.isnan(from_csv.scores("clip")[2])


@pytest.mark.parametrize("body,match", [
    ("i1,a,,alice,x,0.1,0.2\n", "row 2: expected a number in column 'rating', got 'x'"),
    ("i1,a,,alice,,0.1,0.2\n", "row 2: expected a number in column 'rating'"),
    ("i1,a,,alice,inf,0.1,0.2\n", "row 2: expected a finite number in column 'rating'"),
    ("i1,a,,alice,3,abc,0.2\n", "row 2: expected a number in column 'clip', got 'abc'"),
    ("i1,a,,alice,3,0.1,0.2\ni1,a,,alice,4,0.1,0.2\n", "row 3: rater 'alice' rated item 'i1' again \\(first on row 2\\)"),
    ("i1,a,,alice,3,0.1,0.2\ni1,a,,bob,4,0.9,0.2\n", "row 3: item 'i1' has clip = 0.9, expected 0.1 as on row 2"),
    ("i1,a,,alice,3,0.1,0.2\ni1,b,,bob,4,0.1,0.2\n", "row 3: item 'i1' has prompt_id = 'b'"),
    (",a,,alice,3,0.1,0.2\n", "row 2: expected a non-empty 'item_id'"),
    ("i1,a,,,3,0.1,0.2\n", "row 2: expected a non-empty 'rater'"),
    ("", "at least one rating row"),
])
def test_csv_errors_name_the_row(tmp_path, body, match):
    p = write(tmp_path, "h.csv", CSV_HEADER + body)
    with pytest.raises(ValueError, match=match) as e:
        load_human_csv(p)
    assert str(p) in str(e.value)


def test_csv_missing_columns(tmp_path):
    p = write(tmp_path, "h.csv", "item_id,prompt,score\ni1,a,3\n")
    with pytest.raises(ValueError, match="missing \\['rater', 'rating'\\]"):
        load_human_csv(p)


def test_dataclass_checks_alignment():
    items = pd.DataFrame({"prompt_id": ["p"], "prompt": ["x"], "image": [""], "human": [3.0], "n_ratings": [1]},
                         index=pd.Index(["a"], name="item_id"))
    with pytest.raises(ValueError, match="indexed like items"):
        HumanJudgments(items, pd.DataFrame({"r0": [3.0]}, index=["b"]), ())
    with pytest.raises(ValueError, match="at least one rating"):
        HumanJudgments(items, pd.DataFrame({"r0": [np.nan]}, index=items.index), ())
    with pytest.raises(ValueError, match="not columns"):
        HumanJudgments(items, pd.DataFrame({"r0": [3.0]}, index=items.index), ("clip",))
    h = HumanJudgments(items.assign(clip=[0.3]), pd.DataFrame({"r0": [3.0]}, index=items.index), ("clip",))
    with pytest.raises(KeyError, match="\\['clip'\\]"):
        h.select(["tifa"])
