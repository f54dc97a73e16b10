"""Construct-validity controls, the composite and the quality metrics, on tiny inputs."""

from __future__ import annotations

import hashlib
import sys
import types

import numpy as np
import pytest
from PIL import Image, ImageFilter
from scipy import stats

from metrics_adapters.base import Metric, ScoreItem
from metrics_adapters.composite import CompositeMetric, add_composite, composite_scores, minmax
from metrics_adapters.controls import RandomScore, ShuffledImage, ShuffledText, item_uniform, shuffle_words
from metrics_adapters.qa.vqa import VQABackend, VQARequest


def _item(i, seg="0", prompt="p", path=None):
    return ScoreItem(seg_id=str(seg), node="0", file_name=f"f{i}.png", prompt=prompt, image_path=path)


class RedMean(Metric):
    """Mean red channel of the image / 255 (knows nothing about prompts)."""

    def settings(self):
        return {"v": 1}

    def score_batch(self, items, images):
        return [float(np.asarray(im)[..., 0].mean()) / 255.0 for im in images]


class Recorder(Metric):
    """Two columns, first lower-is-better; records the prompts it sees; score = prompt length."""

    columns = ("errors", "rating")
    needs_images = False

    def __init__(self, name="rec"):
        super().__init__(name)
        self.seen = []

    def directions(self):
        e, r = self.output_columns()
        return {e: False, r: True}

    def score_batch(self, items, images):
        self.seen += [it.prompt for it in items]
        return [(float(len(it.prompt.split())), float(len(it.prompt))) for it in items]


# -- random ---------------------------------------------------------------------------------------------
def test_random_is_seeded_per_item_and_uniform():
    items = [_item(i) for i in range(2000)]
    m = RandomScore(seed=7)
    s = m.score_batch(items, None)
    # independent reference: the documented hash
    h = hashlib.sha256(b"7\x00f3.png").digest()
    assert s[3] == (int.from_bytes(h[:8], "big") >> 11) / 2.0 ** 53
    # batch order and size do not matter
    rev = m.score_batch(items[::-1], None)[::-1]
    assert rev == s and m.score_batch(items[3:4], None) == [s[3]]
    assert RandomScore(seed=8).score_batch(items[:50], None) != s[:50]
    assert stats.kstest(s, "uniform").pvalue > 1e-3
    lo_hi = RandomScore(seed=7, low=-2, high=2).score_batch(items[:100], None)
    assert min(lo_hi) >= -2 and max(lo_hi) < 2 and np.allclose(np.array(lo_hi), -2 + 4 * np.array(s[:100]))
    assert not RandomScore.needs_images
    with pytest.raises(ValueError, match="low < high"):
        RandomScore(low=1, high=1)
    assert item_uniform(0, "a") != item_uniform(0, "b")


# -- shuffled text --------------------------------------------------------------------------------------
def test_shuffle_words_is_a_seeded_permutation():
    t = "is the red circle left of the blue square ?"
    a = shuffle_words(t, 0)
    assert a != t and sorted(a.split()) == sorted(t.split())
    assert shuffle_words(t, 0) == a and shuffle_words(t, 1) != a
    assert shuffle_words("same same", 0) == "same same" and shuffle_words("one", 0) == "one"


def test_shuffled_text_wraps_any_metric_and_keeps_its_columns():
    inner = Recorder()
    w = ShuffledText(name="st", inner=inner, seed=3)
    prompts = ["two red circles left of a blue square", "a green star"]
    out = w.score_batch([_item(i, prompt=p) for i, p in enumerate(prompts)], None)
    assert inner.seen == [shuffle_words(p, 3) for p in prompts] and inner.seen != prompts
    assert out == [(8.0, 37.0), (3.0, 12.0)]  # word count and length survive a shuffle
    assert w.output_columns() == ("st_errors", "st_rating")
    assert w.directions() == {"st_errors": False, "st_rating": True}
    assert not w.needs_images
    assert ShuffledText(inner=Recorder(), seed=4).fingerprint_hash() != ShuffledText(inner=Recorder(), seed=3).fingerprint_hash()


# -- shuffled image -------------------------------------------------------------------------------------
@pytest.fixture()
def pool(tmp_path):
    """3 SEGs x 4 images, each image one flat red level: 10 * (4 * seg + k)."""
    rows = []
    for seg in range(3):
        for k in range(4):
            p = tmp_path / f"s{seg}-{k}.png"
            Image.new("RGB", (6, 6), (10 * (4 * seg + k), 0, 0)).save(p)
            rows.append((str(seg), f"s{seg}-{k}.png", str(p)))
    return rows


def test_shuffled_image_scores_a_donor_from_another_seg(pool):
    m = ShuffledImage(inner=RedMean("red"), pool=pool, seed=0)
    items = [ScoreItem(seg_id=s, node="0", file_name=f, prompt="p", image_path=p) for s, f, p in pool]
    scores = m.score_batch(items, None)
    red = {f: 10 * (4 * int(s) + int(f[3])) / 255.0 for s, f, _ in pool}
    for it, sc in zip(items, scores, strict=True):
        seg, donor, _ = m.donor(it)
        assert seg != it.seg_id  # never the item's own SEG
        assert sc == pytest.approx(red[donor])  # the inner metric saw the donor's pixels
    assert m.score_batch(items[::-1], None)[::-1] == scores  # per item, not per batch
    assert [m.donor(it) for it in items] != [ShuffledImage(inner=RedMean("red"), pool=pool, seed=1).donor(it)
                                             for it in items]
    assert not m.needs_images  # keyed by file name: the item's own pixels never matter
    fp = m.fingerprint_hash()
    assert ShuffledImage(inner=RedMean("red"), pool=pool[:-1], seed=0).fingerprint_hash() != fp
    assert ShuffledImage(inner=RedMean("red"), pool=pool, seed=1).fingerprint_hash() != fp
    with pytest.raises(ValueError, match="at least two SEGs"):
        ShuffledImage(inner=RedMean("red"), pool=[r for r in pool if r[0] == "0"])


def test_shuffled_image_reports_an_unreadable_donor(pool, tmp_path):
    from metrics_adapters.base import MetricError

    bad = tmp_path / "bad.png"
    bad.write_bytes(b"not a png")
    m = ShuffledImage(inner=RedMean("red"), pool=[("1", "bad.png", str(bad))] + pool[:1])
    with pytest.raises(MetricError, match="donor image bad.png unreadable"):
        m.score_batch([ScoreItem("0", "0", "x.png", "p")], None)


# -- VQA controls -------------------------------------------------------------------------------------------
class RecordingVQA(VQABackend):
    def __init__(self):
        super().__init__(template="{question}")
        self.asked = []

    def settings(self):
        return {"rec": 1}

    def _answer_batch(self, requests):
        self.asked += [r.question for r in requests]
        return ["no"] * len(requests)


def test_always_yes_answers_yes_or_first_choice_without_looking():
    from metrics_adapters.controls import AlwaysYesVQA

    v = AlwaysYesVQA()
    reqs = [VQARequest("is there a dog?", ("yes", "no")), VQARequest("colour?", ("blue", "red", "green")),
            VQARequest("is it?", ("No", "Yes")), VQARequest("open question?", None)]
    assert v.answer(reqs) == ["yes", "blue", "yes", "yes"]
    assert not v.needs_images and not v.cacheable


def test_blind_qa_asks_a_text_lm_in_the_paper_format():
    from metrics_adapters.controls import BlindQA
    from metrics_adapters.qa.generation import CallableLM

    seen = []

    def fn(prompt, attempt):
        seen.append(prompt)
        if "fail" in prompt:
            raise RuntimeError("boom")
        return "  red\nQuestion: next one"

    v = BlindQA(lm=CallableLM(fn, name="t"))
    out = v.answer([VQARequest("what colour is the car?", ("red", "blue")), VQARequest("fail?", ("yes", "no"))])
    assert seen[0] == "Question: what colour is the car? Choices: red, blue Answer:"
    assert out[0] == "red" and type(out[1]).__name__ == "VQAError"
    assert not v.needs_images and v.uses_choices


def test_clip_as_vqa_picks_the_best_caption():
    from metrics_adapters.controls import ClipAsVQA

    class CaptionScore(Metric):
        """Scores a caption by a table (ties on purpose)."""

        def score_batch(self, items, images):
            table = {"is it red? yes": 0.2, "is it red? no": 0.3, "colour? blue": 0.5, "colour? red": 0.5,
                     "colour? green": 0.1}
            assert all(im is not None for im in images)
            return [table[it.prompt] for it in items]

    v = ClipAsVQA(embedding=CaptionScore("cs"))
    img = Image.new("RGB", (4, 4))
    out = v.answer([VQARequest("is it red?", ("yes", "no"), img), VQARequest("colour?", ("blue", "red", "green"), img)])
    assert out == ["no", "blue"]  # argmax; a tie goes to the earlier choice
    assert v.uses_choices and v.needs_images


def test_shuffled_question_vqa_shuffles_what_the_inner_model_reads():
    from metrics_adapters.controls import ShuffledQuestionVQA

    inner = RecordingVQA()
    v = ShuffledQuestionVQA(inner=inner, seed=5)
    qs = ["is the dog left of the cat?", "what colour is the big car?"]
    v.answer([VQARequest(q, ("yes", "no")) for q in qs])
    assert inner.asked == [shuffle_words(q, 5) for q in qs] and inner.asked != qs
    assert v.fingerprint() != ShuffledQuestionVQA(inner=RecordingVQA(), seed=6).fingerprint()


def test_always_yes_tifa_is_constant_within_each_seg(tmp_path):
    """TIFA + always_yes on rule-written questions: every image of a SEG gets the same score."""
    from metrics_adapters.controls import AlwaysYesVQA
    from metrics_adapters.qa.generation import CallableLM
    from metrics_adapters.qa.matching import AnswerMatcher
    from metrics_adapters.qa.tifa import TIFAScore
    from seg_data import load_seg_file
    from seg_data.synthetic import make_synthetic

    ds = load_seg_file(make_synthetic(tmp_path / "syn", n_segs=4, seed=1, images=False))
    def no_embedding(texts):
        raise AssertionError("always_yes answers match exactly: no embedding needed")

    m = TIFAScore(name="always_yes", vqa=AlwaysYesVQA(), questions="generate",
                  lm=CallableLM("metrics_adapters.geneval.questions:tifa_lm", name="rules"),
                  matcher=AnswerMatcher(encoder=no_embedding), cache=False)
    table = ds.image_table()
    items = [ScoreItem(r.seg_id, r.node, r.file_name, r.prompt) for r in table.itertuples()]
    m.load("cpu")
    scores = m.score_batch(items, None)
    assert scores == [1.0] * len(items)  # every expected answer is "yes" or the first choice


# -- composite --------------------------------------------------------------------------------------------
def test_minmax_and_composite_against_hand_values():
    assert minmax([1.0, 3.0, 2.0]).tolist() == [0.0, 1.0, 0.5]
    assert minmax([1.0, 3.0, 2.0], higher_is_better=False).tolist() == [1.0, 0.0, 0.5]
    assert minmax([5.0, 5.0]).tolist() == [0.5, 0.5]
    assert np.isnan(minmax([np.nan, 1.0, 2.0])).tolist() == [True, False, False]
    # align [0, 10, 5] -> [0, 1, .5]; quality blur [0.2, 0.6, 0.4] lower-better -> [1, 0, .5]
    s = composite_scores([0, 10, 5], [0.2, 0.6, 0.4], 0.7, 0.3, True, False)
    assert s == pytest.approx([0.3, 0.7, 0.5])
    with pytest.raises(ValueError, match="weights"):
        composite_scores([1], [1], 0, 0)
    with pytest.raises(ValueError, match="equal length"):
        composite_scores([1, 2], [1], 0.5, 0.5)


def test_composite_metric_scores_raw_parts_and_finalizes(tmp_path):
    import pandas as pd

    class Fixed(Metric):
        def __init__(self, name, vals, hib=True):
            super().__init__(name)
            self.vals, self.higher_is_better = vals, hib

        def score_batch(self, items, images):
            return [self.vals[int(it.file_name[1])] for it in items]

    c = CompositeMetric(name="comp", align=Fixed("a", [0.1, 0.3, 0.2]), quality=Fixed("q", [5.0, 1.0, 3.0], False),
                        w_align=0.5, w_quality=0.5)
    items = [_item(i) for i in range(3)]
    rows = c.score_batch(items, [None] * 3)
    assert rows == [(0.1, 5.0), (0.3, 1.0), (0.2, 3.0)]
    assert c.output_columns() == ("comp_align", "comp_quality")
    assert c.directions() == {"comp_align": True, "comp_quality": False}
    frame = pd.DataFrame(rows, columns=list(c.output_columns()))
    out = c.finalize(frame)
    # align -> [0, 1, .5]; quality lower-better [5, 1, 3] -> [0, 1, .5]
    assert out["comp"].tolist() == pytest.approx([0.0, 1.0, 0.5])
    assert "comp" not in frame
    # weights are not part of the raw parts' fingerprint: a weight sweep reuses cached scores
    c2 = CompositeMetric(name="comp", align=Fixed("a", [0]), quality=Fixed("q", [0], False), w_align=0.9, w_quality=0.1)
    assert c2.fingerprint_hash() == c.fingerprint_hash()
    with pytest.raises(KeyError, match="expected columns"):
        add_composite(frame, "nope", "comp_quality", "x")


# -- quality ----------------------------------------------------------------------------------------------
def test_blur_effect_orders_blur_without_skimage():
    from metrics_adapters.quality import BlurEffect

    rng = np.random.default_rng(0)
    sharp = Image.fromarray((rng.random((48, 48, 3)) * 255).astype(np.uint8))
    blurred = [sharp.filter(ImageFilter.GaussianBlur(r)) for r in (1, 2, 4)]
    m = BlurEffect()
    m.load()
    s = m.score_batch([_item(i) for i in range(4)], [sharp, *blurred])
    assert s == sorted(s) and s[0] < s[-1]  # more blur, higher (worse) score
    assert all(0.0 <= v <= 1.0 for v in s)
    assert not m.higher_is_better and m.score_range == (0.0, 1.0)
    with pytest.raises(ValueError, match=r"expected an RGB image of shape \(H, W, 3\), got shape \(4, 4\)"):
        m.score_batch([_item(0)], [np.zeros((4, 4))])


def test_blur_effect_equals_skimage():
    # The port (metrics_adapters/quality/blur.py) against the function it reimplements.
    pytest.importorskip("skimage")
    from skimage.measure import blur_effect as skimage_blur_effect

    from metrics_adapters.quality.blur import blur_effect

    rng = np.random.default_rng(1)
    sharp = Image.fromarray((rng.random((37, 53, 3)) * 255).astype(np.uint8))
    images = [sharp, *(sharp.filter(ImageFilter.GaussianBlur(r)) for r in (0.7, 3)),
              Image.fromarray(np.tile(np.arange(53, dtype=np.uint8)[None, :, None] * 4, (37, 1, 3)))]
    for im in images:
        arr = np.asarray(im, dtype=np.float64)
        for h in (3, 11):
            assert blur_effect(arr, h_size=h) == pytest.approx(
                skimage_blur_effect(arr, h_size=h, channel_axis=-1), rel=1e-12, abs=1e-15)


def test_pyiqa_adapter_plumbing_with_a_stand_in_module(monkeypatch):
    torch = pytest.importorskip("torch")
    calls = {}

    class FakeNet:
        lower_better = True

        def __call__(self, x):
            calls["shape"], calls["max"] = tuple(x.shape), float(x.max())
            return torch.tensor([[x.mean().item()]])

    fake = types.SimpleNamespace(create_metric=lambda name, device=None, as_loss=False: calls.setdefault("name", name) and FakeNet())
    monkeypatch.setitem(sys.modules, "pyiqa", fake)
    from metrics_adapters.quality import PyIQAMetric

    m = PyIQAMetric(model="brisque", max_side=16)
    m.load("cpu")
    img = Image.new("RGB", (32, 20), (255, 0, 0))
    s = m.score_batch([_item(0)], [img])
    assert calls["name"] == "brisque" and calls["shape"] == (1, 3, 10, 16) and calls["max"] == 1.0
    assert s == [pytest.approx(1 / 3)]  # mean of a red image in [0, 1]
    assert m.higher_is_better is False  # pyiqa's lower_better, read after loading
    assert PyIQAMetric(model="musiq", lower_better=False).higher_is_better is True


@pytest.mark.parametrize("overrides, check", [
    (["metric=vlm_judge", "judge_backend@metric.backend=openai"], lambda m: type(m.backend).__name__ == "HTTPChatBackend"),
    (["metric=vlm_judge", "judge_backend@metric.backend=llava"], lambda m: m.backend.kind == "vlm"),
    (["metric=llm_judge", "judge_backend@metric.evaluator=transformers_lm"], lambda m: m.evaluator.kind == "lm"),
    (["metric=llm_judge"], lambda m: m.evaluator.vision is False and m.captioner.vision is True),
    (["metric=dsg", "metric.vqa=always_yes"], lambda m: type(m.vqa).__name__ == "AlwaysYesVQA"),
    (["metric=tifa", "metric.vqa=blind_qa"], lambda m: type(m.vqa).__name__ == "BlindQA" and not m.needs_images),
    (["metric=tifa", "metric.vqa=clip_as_vqa", "metric@metric.vqa.embedding=siglip"],
     lambda m: type(m.vqa.embedding).__name__ == "SigLIPScore"),
    (["metric=tifa", "metric.vqa=shuffled_blip"], lambda m: type(m.vqa.inner).__name__ == "BlipVQA"),
    (["metric=always_yes", "metric.questions=generate", "+qa_lm@metric.lm=geneval_rules"],
     lambda m: m.lm.name == "geneval-rules-tifa-v1"),
    (["metric=dsg", "metric.questions=generate", "+qa_lm@metric.lm=geneval_rules_dsg"],
     lambda m: m.lm.name == "geneval-rules-dsg-v1"),
    (["metric=geneval", "+geneval_parser@metric.parser=lm"], lambda m: type(m.parser).__name__ == "LMPromptParser"),
    (["metric=geneval", "metric.detector=shapes"], lambda m: type(m.detector).__name__ == "ShapesDetector"),
    (["metric=shuffled_image", "metric@metric.inner=geneval_shapes"], lambda m: m.inner.name == "geneval_shapes"),
    (["metric=composite", "metric@metric.quality=iqa", "metric.w_align=0.8"],
     lambda m: type(m.quality).__name__ == "PyIQAMetric" and m.w_align == 0.8),
])
def test_control_judge_and_geneval_configs_compose_and_instantiate(overrides, check):
    """Every config group of this area composes into the intended object (no model is loaded)."""
    from hydra import compose, initialize_config_module
    from hydra.utils import instantiate

    with initialize_config_module(config_module="conf", version_base="1.3"):
        cfg = compose("score", overrides=overrides)
    m = instantiate(cfg.metric, _convert_="all")
    assert isinstance(m, Metric) and check(m)
    assert len(m.fingerprint_hash()) == 32
