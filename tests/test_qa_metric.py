"""The TIFA/DSG metric classes with scripted VQA answers: hand-computed scores, gating, caching, outputs."""

from __future__ import annotations

import pandas as pd
import pytest
from qa_tiny import noise_images

from metrics_adapters.base import ScoreItem
from metrics_adapters.qa.dsg import DSGScore
from metrics_adapters.qa.matching import AnswerMatcher
from metrics_adapters.qa.tifa import TIFAScore
from metrics_adapters.qa.vqa import ReplayVQA, VQABackend

TIFA_CSV = """id,prompt,question_id,question,choices,answer
0,A red ball on grass,0,is there a ball?,yes|no,yes
0,A red ball on grass,1,what color is the ball?,red|blue|green|yellow,red
0,A red ball on grass,2,is there grass?,yes|no,yes
1,Two cats,0,are there cats?,yes|no,yes
1,Two cats,1,how many cats are there?,1|2|3|4,2
"""

DSG_CSV = """id,prompt,question_id,parent_question_id,question,choices,answer
0,A red ball on grass,0,-1,Is there a ball?,yes|no,yes
0,A red ball on grass,1,-1,Is there grass?,yes|no,yes
0,A red ball on grass,2,0,Is the ball red?,yes|no,yes
0,A red ball on grass,3,0-1,Is the ball on the grass?,yes|no,yes
1,Two cats,0,-1,Are there cats?,yes|no,yes
1,Two cats,1,0,Are there two cats?,yes|no,yes
"""


class ScriptedVQA(VQABackend):
    """Answers from a table keyed by (image file stem, question); counts what the model was asked."""

    def __init__(self, table, tag="v1", n_params=None):
        super().__init__(batch_size=3)
        self.table, self.tag, self._np = table, tag, n_params
        self.asked = []

    def settings(self):
        return {"scripted": self.tag}

    def n_params(self):
        return self._np

    def _answer_batch(self, requests):
        out = []
        for r in requests:
            if r.image is None:
                raise AssertionError("expected an image")
            self.asked.append((r.image_id, r.question))
            out.append(self.table.get((r.image_id, r.question), "no"))
        return out


class NoEmbedding:
    """Encoder that must not be called (every test answer matches exactly)."""

    def __call__(self, texts):
        raise AssertionError(f"unexpected embedding of {texts}")


@pytest.fixture()
def data(tmp_path):
    (tmp_path / "images").mkdir()
    imgs = noise_images(4, seed=3)
    names = ["images/a.png", "images/b.png", "images/c.png", "images/d.png"]
    for im, n in zip(imgs, names, strict=True):
        im.save(tmp_path / n)
    (tmp_path / "tifa_questions.csv").write_text(TIFA_CSV)
    (tmp_path / "dsg_questions.csv").write_text(DSG_CSV)
    items = [ScoreItem("0", "0", names[0], "A red ball on grass", str(tmp_path / names[0])),
             ScoreItem("0", "1a", names[1], "A red ball on grass", str(tmp_path / names[1])),
             ScoreItem("1", "0", names[2], "Two cats", str(tmp_path / names[2])),
             ScoreItem("1", "1", names[3], "Two cats", str(tmp_path / names[3]))]
    return tmp_path, items


ANSWERS = {
    # a: everything right
    ("images/a.png", "is there a ball?"): "yes", ("images/a.png", "what color is the ball?"): "Red",
    ("images/a.png", "is there grass?"): "yes",
    ("images/a.png", "Is there a ball?"): "yes", ("images/a.png", "Is there grass?"): "yes",
    ("images/a.png", "Is the ball red?"): "yes", ("images/a.png", "Is the ball on the grass?"): "yes",
    # b: no ball, but "red" and "on the grass" answered yes -> gated away in DSG
    ("images/b.png", "is there a ball?"): "no", ("images/b.png", "what color is the ball?"): "red",
    ("images/b.png", "is there grass?"): "yeah",
    ("images/b.png", "Is there a ball?"): "no", ("images/b.png", "Is there grass?"): "yes",
    ("images/b.png", "Is the ball red?"): "yes", ("images/b.png", "Is the ball on the grass?"): "yes",
    # c: cats yes, count wrong
    ("images/c.png", "are there cats?"): "yes", ("images/c.png", "how many cats are there?"): "3",
    ("images/c.png", "Are there cats?"): "yes", ("images/c.png", "Are there two cats?"): "no",
    # d: nothing (scripted default "no"), count "2"
    ("images/d.png", "how many cats are there?"): "2", ("images/d.png", "Are there two cats?"): "yes",
}


def _run(metric, items, tmp_path, **kw):
    from metrics_adapters.engine import EngineSettings, score_metric

    st = EngineSettings(device="cpu", batch_size=kw.pop("batch_size", 2), num_workers=0, progress=False)
    return score_metric(metric, items, settings=st, **kw)


def _metric(cls, root, vqa=None, **kw):
    return cls(name=kw.pop("name", cls.__name__.lower()), vqa=vqa or ScriptedVQA(ANSWERS),
               questions_file=str(root), matcher=AnswerMatcher(model="none", encoder=NoEmbedding()),
               cache_dir=str(root / "cache"), **kw)


def test_tifa_scores_by_hand(data):
    root, items = data
    run = _run(_metric(TIFAScore, root), items, root)
    # a: 3/3; b: ball no (wrong), color red (right), grass "yeah" (right) = 2/3;
    # c: cats yes, count 3 (wrong) = 1/2; d: cats "no" (wrong), count 2 (right) = 1/2.
    assert [s[0] for s in run.scores] == pytest.approx([1.0, 2 / 3, 0.5, 0.5])
    assert run.n_failed == 0


def test_dsg_scores_by_hand_with_multi_parent_gating(data):
    root, items = data
    run = _run(_metric(DSGScore, root), items, root)
    # b: ball no -> "red" (parent 0) and "on the grass" (parents 0-1) gated: only grass = 1/4.
    # d: cats "no" -> "two cats" gated although answered yes: 0/2.
    assert [s[0] for s in run.scores] == pytest.approx([1.0, 0.25, 0.5, 0.0])
    # TIFA accumulation of the same DSG answers (the Table 3 ablation) ignores the graph.
    run = _run(_metric(DSGScore, root, accumulation="tifa"), items, root)
    assert [s[0] for s in run.scores] == pytest.approx([1.0, 0.75, 0.5, 0.5])


def test_answer_cache_is_shared_between_runs_and_metrics(data):
    root, items = data
    v1 = ScriptedVQA(ANSWERS)
    _run(_metric(DSGScore, root, vqa=v1), items, root)
    assert len(v1.asked) == 12
    # Same backend, other accumulation: a score-cache miss, but every answer comes from the QA cache.
    v2 = ScriptedVQA(ANSWERS)
    m = _metric(DSGScore, root, vqa=v2, accumulation="tifa", name="dsg_tifa_acc")
    _run(m, items, root)
    assert v2.asked == [] and m.stats["vqa_model_calls"] == 0 and m.stats["vqa_cache_hits"] == 12
    # TIFA shares answers only where the question text is identical (none here: case differs) ...
    v3 = ScriptedVQA(ANSWERS)
    _run(_metric(TIFAScore, root, vqa=v3), items, root)
    assert len(v3.asked) == 10
    # ... and another backend setting never reuses them.
    v4 = ScriptedVQA(ANSWERS, tag="v2")
    _run(_metric(TIFAScore, root, vqa=v4, name="t2"), items, root)
    assert len(v4.asked) == 10


def test_identical_questions_are_shared_between_tifa_and_dsg(data):
    root, items = data
    (root / "dsg_questions.csv").write_text(DSG_CSV.replace("Is there a ball?", "is there a ball?"))
    v1, v2 = ScriptedVQA(ANSWERS), ScriptedVQA(ANSWERS)
    _run(_metric(TIFAScore, root, vqa=v1), items, root)
    _run(_metric(DSGScore, root, vqa=v2), items, root)
    assert ("images/a.png", "is there a ball?") not in v2.asked
    assert len(v2.asked) == 12 - 2  # images a and b reuse TIFA's answer


def test_needs_images_follows_the_backend(data, tmp_path):
    root, items = data
    assert _metric(TIFAScore, root).needs_images
    f = tmp_path / "ans.csv"
    f.write_text("0,a.png,0,yes\n")
    m = _metric(TIFAScore, root, vqa=ReplayVQA(str(f)))
    assert m.needs_images is False and TIFAScore.needs_images is True  # instance, not class


def test_replay_scores_without_image_files(data, tmp_path):
    root, items = data
    f = tmp_path / "ans.csv"
    rows = [f"{it.seg_id},{it.file_name.split('/')[-1]},{q},{a}" for it, ans in
            zip(items, [("yes", "red", "yes"), ("no", "red", "yeah"), ("yes", "3"), ("no", "2")], strict=True)
            for q, a in enumerate(ans)]
    f.write_text("\n".join(rows) + "\n")
    for it in items:
        (root / it.file_name).unlink()  # no pixels anywhere
    run = _run(_metric(TIFAScore, root, vqa=ReplayVQA(str(f))), items, root)
    assert [s[0] for s in run.scores] == pytest.approx([1.0, 2 / 3, 0.5, 0.5])


def test_failures_are_per_image_and_named(data):
    root, items = data
    items = items + [ScoreItem("9", "0", "images/a.png", "A unicorn", items[0].image_path)]
    run = _run(_metric(TIFAScore, root), items, root, batch_size=5)
    assert [s is None for s in run.scores] == [False, False, False, False, True]
    assert "expected questions for SEG 9" in run.failures[0].reason


def test_missing_question_file_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="expected a question file"):
        TIFAScore(name="t", vqa=ScriptedVQA({}), questions_file=str(tmp_path))
    with pytest.raises(ValueError, match="questions=generate needs an lm"):
        TIFAScore(name="t", vqa=ScriptedVQA({}), questions="generate")
    with pytest.raises(ValueError, match="accumulation one of"):
        TIFAScore(name="t", vqa=ScriptedVQA({}), accumulation="mean")


def test_question_file_found_beside_the_dataset(data):
    root, items = data
    m = TIFAScore(name="t", vqa=ScriptedVQA(ANSWERS), matcher=AnswerMatcher(model="none", encoder=NoEmbedding()),
                  cache=False)
    assert m.settings()["questions_file"] == "<dataset>/tifa_questions.csv"
    assert m.score_batch(items[:1], [noise_images(4, seed=3)[0]]) == [1.0]
    assert m.questions_file == root / "tifa_questions.csv"
    # With dataset_root (the configs pass ${path}) the file is known up front and hashed.
    m2 = TIFAScore(name="t", vqa=ScriptedVQA(ANSWERS), dataset_root=str(root))
    assert "questions_sha256" in m2.settings()


def test_fingerprint_tracks_every_setting_that_changes_a_score(data):
    root, _ = data
    base = _metric(TIFAScore, root).fingerprint()
    assert base == _metric(TIFAScore, root).fingerprint()
    assert base != _metric(TIFAScore, root, accumulation="dsg").fingerprint()
    assert base != _metric(TIFAScore, root, vqa=ScriptedVQA(ANSWERS, tag="v2")).fingerprint()
    other = TIFAScore(name="tifascore", vqa=ScriptedVQA(ANSWERS), questions_file=str(root),
                      matcher=AnswerMatcher(model="other"))
    assert base != other.fingerprint()
    (root / "tifa_questions.csv").write_text(TIFA_CSV.replace("red|blue", "red|purple"))
    assert base != _metric(TIFAScore, root).fingerprint()


def test_flops_estimate(data):
    root, items = data
    m = _metric(TIFAScore, root, vqa=ScriptedVQA(ANSWERS, n_params=1e6), generator_params=1e9)
    m.load("cpu")
    m.question_sets(items)
    # 2.5 questions per prompt x (2 x 1e9 x 40 + 2 x 1e6 x 20)
    assert m.flops_per_image() == pytest.approx(2.5 * (2 * 1e9 * 40 + 2 * 1e6 * 20))
    d = _metric(DSGScore, root, vqa=ScriptedVQA(ANSWERS))
    d.load("cpu")
    d.question_sets(items)
    assert d.flops_per_image() is None  # nothing known


def test_answers_csv_one_row_per_image_and_question(data):
    root, items = data
    out = root / "out"
    items2 = items + [ScoreItem("9", "0", "images/a.png", "A unicorn", items[0].image_path)]
    m = _metric(DSGScore, root, answers_dir=str(out))
    _run(m, items2, root, batch_size=5)  # the failing batch is retried item by item
    m.unload()
    df = pd.read_csv(out / "answers.csv", dtype=str, keep_default_na=False)
    assert len(df) == 12 and set(df["metric"]) == {"dsgscore"}  # no duplicates from the retry
    b = df[df.file_name == "images/b.png"].set_index("question_id")
    assert b.loc["2", ["raw_answer", "matched", "correct", "satisfied"]].tolist() == ["yes", "yes", "True", "False"]
    assert b.loc["3", "parent_question_id"] == "0-1"
    assert (out / "usage_dsgscore.json").is_file()
