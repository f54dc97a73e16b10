"""The GenEval-style metric: prompt parsing, requirement checks, the shapes detector against the
generator's ground truth, the OWLv2 plumbing on a tiny random model, and the must-show numbers on
dataset=mini through the engine and the analysis."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw

from metrics_adapters.base import MetricError, ScoreItem
from metrics_adapters.geneval import (
    Detection,
    GenEvalMetric,
    LMPromptParser,
    PromptParseError,
    ShapesDetector,
    check_requirements,
    fraction_met,
    parse_prompt,
    relation_holds,
)
from metrics_adapters.geneval.colours import COLOUR_NAMES, colour_index, dominant_colour
from metrics_adapters.geneval.detectors import classify_shape


# -- parsing -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("prompt, task, objects, relation", [
    ("a photo of a bench", "single_object", [("bench", 1, None, False)], None),
    ("a photo of a cow and a potted plant", "two_object", [("cow", 1, None, False), ("potted plant", 1, None, False)], None),
    ("a photo of three umbrellas", "counting", [("umbrella", 3, None, True)], None),
    ("a photo of an orange car", "colors", [("car", 1, "orange", False)], None),
    ("a photo of a dog right of a teddy bear", "position", [("dog", 1, None, False), ("teddy bear", 1, None, False)],
     "right of"),
    ("a photo of a red cup and a blue bowl", "color_attr", [("cup", 1, "red", False), ("bowl", 1, "blue", False)], None),
    ("two red circles left of a blue square", "position", [("circle", 2, "red", True), ("square", 1, "blue", False)],
     "left of"),
    ("a blue circle, a purple triangle and a yellow triangle", "multi",
     [("circle", 1, "blue", False), ("triangle", 1, "purple", False), ("triangle", 1, "yellow", False)], None),
    ("one purple star and three yellow triangles", "color_attr",
     [("star", 1, "purple", True), ("triangle", 3, "yellow", True)], None),
    ("a green star to the left of a grey square.", "position", [("star", 1, "green", False), ("square", 1, "gray", False)],
     "left of"),
])
def test_parse_prompt(prompt, task, objects, relation):
    s = parse_prompt(prompt)
    assert s.task == task and s.relation == relation
    assert [(o.name, o.count, o.colour, o.count_explicit) for o in s.objects] == objects


@pytest.mark.parametrize("prompt", ["a boy in a green shirt poses with some fruit", "dogs", "",
                                    "a cat left of a dog above a cow", "zero cats"])
def test_parse_prompt_rejects_free_form(prompt):
    with pytest.raises(PromptParseError):
        parse_prompt(prompt)


class ScriptedChat:
    """A ChatBackend stand-in replying from a list (then repeating the last reply)."""

    vision = False

    def __init__(self, replies):
        self.replies, self.prompts = list(replies), []

    def settings(self):
        return {"scripted": 1}

    def load(self, device="cpu", dtype=None):
        pass

    def usage(self):
        return {"calls": len(self.prompts)}

    def generate(self, requests):
        from metrics_adapters.judges import ChatResult

        out = []
        for r in requests:
            self.prompts.append(r.prompt)
            out.append(ChatResult(self.replies[min(len(self.prompts), len(self.replies)) - 1]))
        return out


def test_lm_parser_retries_then_records_failures():
    good = '{"objects": [{"name": "dog", "count": 2, "colour": "brown"}, {"name": "bench", "count": 1, "colour": null}], "relation": "to the left of"}'
    p = LMPromptParser(ScriptedChat(["I think there are dogs", good]), max_attempts=3)
    spec = p.parse(["two brown dogs sit left of a bench"])[0]
    assert spec.relation == "left of" and [(o.name, o.count, o.colour) for o in spec.objects] == [
        ("dog", 2, "brown"), ("bench", 1, None)]
    assert "could not be read" in p.backend.prompts[1]
    p2 = LMPromptParser(ScriptedChat(['{"objects": [{"name": "dog", "count": 0}]}']), max_attempts=2)
    err = p2.parse(["no dogs"])[0]
    assert isinstance(err, PromptParseError) and "after 2 attempts" in str(err) and "positive integer" in str(err)
    assert len(p2.backend.prompts) == 2
    p2.parse(["no dogs"])  # memoised: no new call
    assert len(p2.backend.prompts) == 2


# -- requirements ----------------------------------------------------------------------------------------
def D(label, x0, y0, x1, y1, colour=None, score=1.0):
    return Detection(label, (x0, y0, x1, y1), score, colour)


def test_relation_rule_with_margin():
    a, b = D("a", 0, 0, 10, 10), D("b", 12, 0, 22, 10)  # centres 5 and 17, widths 10+10: margin 0.1 -> 2
    assert relation_holds(a, b, "left of") and relation_holds(b, a, "right of")
    assert not relation_holds(a, b, "above") and not relation_holds(a, b, "below")
    near = D("b", 2, 0, 12, 10)  # centres 5 and 7: offset 2 is not > 2
    assert not relation_holds(a, near, "left of")
    assert relation_holds(a, near, "left of", margin=0.05)
    top, bottom = D("t", 0, 0, 10, 10), D("u", 0, 20, 10, 30)
    assert relation_holds(top, bottom, "above") and relation_holds(bottom, top, "below")


def test_check_requirements_by_hand():
    spec = parse_prompt("two red circles left of a blue square")
    dets = [D("circle", 0, 0, 9, 9, "red"), D("circle", 0, 20, 9, 29, "red"), D("square", 40, 0, 49, 9, "blue")]
    checks = check_requirements(spec, dets)
    assert [(c.kind, c.ok) for c in checks] == [("present", True), ("colour", True), ("count", True),
                                                 ("present", True), ("colour", True), ("count", True),
                                                 ("position", True)]
    # one circle green (colour still met by the other, count of red circles now 1), square moved left
    dets2 = [D("circle", 30, 0, 39, 9, "red"), D("circle", 30, 20, 39, 29, "green"), D("square", 0, 0, 9, 9, "blue")]
    c2 = check_requirements(spec, dets2)
    assert [c.ok for c in c2] == [True, True, False, True, True, True, False]
    assert fraction_met(c2) == pytest.approx(5 / 7)
    # "a blue square" with two blue squares: exact by default, GenEval's at_least on request
    spec1 = parse_prompt("a blue square")
    two = [D("square", 0, 0, 5, 5, "blue"), D("square", 10, 0, 15, 5, "blue")]
    assert fraction_met(check_requirements(spec1, two)) == pytest.approx(2 / 3)
    assert fraction_met(check_requirements(spec1, two, article_count="at_least")) == 1.0
    # counting ignores detections under count_threshold
    spec3 = parse_prompt("a photo of two dogs")
    dogs = [D("dog", 0, 0, 5, 5, score=0.95), D("dog", 9, 0, 15, 5, score=0.5)]
    assert [c.ok for c in check_requirements(spec3, dogs)] == [True, True]
    assert [c.ok for c in check_requirements(spec3, dogs, count_threshold=0.9)] == [True, False]
    assert np.isnan(fraction_met([]))


# -- colours and shapes from pixels -------------------------------------------------------------------------
def test_colour_names_of_generic_colours():
    rgb = {"red": (200, 20, 20), "orange": (250, 140, 10), "yellow": (240, 220, 30), "green": (20, 170, 40),
           "cyan": (10, 200, 210), "blue": (20, 40, 230), "purple": (130, 30, 200), "pink": (240, 60, 170),
           "brown": (120, 60, 20), "black": (10, 10, 10), "white": (250, 250, 245), "gray": (128, 128, 128)}
    got = [COLOUR_NAMES[i] for i in colour_index(np.array(list(rgb.values()), dtype=np.uint8))]
    assert got == list(rgb)
    px = np.array([[200, 20, 20]] * 30 + [[250, 250, 250]] * 70, dtype=np.uint8)
    assert dominant_colour(px) == "red" and dominant_colour(px, chromatic_first=False) == "white"


@pytest.mark.parametrize("size", [16, 20, 26, 40])
def test_classify_shape_on_drawn_shapes(size):
    def mask(draw_fn):
        img = Image.new("L", (size + 4, size + 4), 0)
        draw_fn(ImageDraw.Draw(img), 2, 2, size + 1, size + 1)
        m = np.asarray(img) > 0
        return m[np.ix_(m.any(1), m.any(0))]

    from seg_data.synthetic import _star  # the generator's star geometry, drawn here as a test input

    assert classify_shape(mask(lambda d, a, b, c, e: d.rectangle((a, b, c, e), fill=255)))[0] == "square"
    assert classify_shape(mask(lambda d, a, b, c, e: d.ellipse((a, b, c, e), fill=255)))[0] == "circle"
    assert classify_shape(mask(lambda d, a, b, c, e: d.polygon([(a, e), (c, e), ((a + c) / 2, b)], fill=255)))[0] == "triangle"
    assert classify_shape(mask(lambda d, a, b, c, e: d.polygon(_star(a, b, c, e), fill=255)))[0] == "star"


@pytest.fixture(scope="module")
def small_synthetic(tmp_path_factory):
    from seg_data import load_seg_file
    from seg_data.synthetic import make_synthetic

    return load_seg_file(make_synthetic(tmp_path_factory.mktemp("syn") / "d", n_segs=9, seed=11))


def test_shapes_detector_recovers_the_drawn_objects(small_synthetic):
    """Against the generator's ground truth (boxes.json, read here only): every object found with
    its shape, colour and exact box, nothing else."""
    from seg_data.synthetic import load_boxes

    truth = load_boxes(small_synthetic)
    det = ShapesDetector()
    n = 0
    for seg in small_synthetic:
        for _, rec in seg.iter_images():
            got = sorted((d.label, d.colour, *map(int, d.box)) for d in det.detect_one(Image.open(rec.path)))
            exp = sorted((s, c, x0, y0, x1, y1) for s, c, x0, y0, x1, y1 in truth[rec.image_id])
            assert [g[:2] for g in got] == [e[:2] for e in exp], rec.image_id
            for g, e in zip(got, exp, strict=True):
                if g[0] == "star":  # a star fills its box's width but not all of its height
                    assert g[2] >= e[2] and g[4] <= e[4] and g[3] >= e[3] and g[5] <= e[5]  # inside its box
                else:
                    assert g[2:] == e[2:], rec.image_id
            n += 1
    assert n > 50


def test_geneval_metric_scores_fails_and_logs(small_synthetic, tmp_path):
    from metrics_adapters.judges.records import read_answers

    seg = small_synthetic.segs[0]
    recs = list(seg.iter_images())
    items = [ScoreItem(seg.seg_id, node, r.image_id, seg.prompt, str(r.path)) for node, r in recs]
    m = GenEvalMetric(detector="shapes", answers_dir=str(tmp_path))
    m.load()
    imgs = [Image.open(it.image_path).convert("RGB") for it in items]
    s = m.score_batch(items, imgs)
    by_node = {}
    for (node, _), v in zip(recs, s, strict=True):
        by_node.setdefault(node, []).append(v)
    assert by_node["0"] == [1.0] * len(by_node["0"])  # the error-free node meets every requirement
    assert max(max(v) for k, v in by_node.items() if k != "0") < 1.0  # every ablation costs something
    ans = read_answers(tmp_path / "answers.csv")
    assert len(ans) == len(items) and (ans.score.to_numpy() == np.array(s)).all()
    bad = [ScoreItem("x", "0", "dog.png", "a photo of a dog"), ScoreItem("y", "0", "free.png", "a boy eats fruit")]
    with pytest.raises(MetricError) as e:
        m.score_batch(bad, imgs[:2])
    assert "outside the shapes detector's vocabulary" in str(e.value) and "prompt not parsed" in str(e.value)
    with pytest.raises(Exception, match="unknown detector 'yolo'"):
        GenEvalMetric(detector="yolo")


# -- OWLv2 plumbing on a tiny random model --------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_owl(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("open_clip")
    import tiny_models as tm

    return str(tm.build_hf_owlv2(tmp_path_factory.mktemp("tiny-owlv2")))


def test_owl_detector_plumbing(tiny_owl):
    import torch
    import transformers

    from metrics_adapters.geneval import OwlDetector

    det = OwlDetector(model=tiny_owl, threshold=0.0)
    img = Image.new("RGB", (48, 32), (245, 245, 240))
    ImageDraw.Draw(img).rectangle((5, 5, 20, 20), fill=(220, 30, 30))
    out = det.detect([img, img], [["square", "circle"], []])
    assert out[1] == []
    # independent reference: the model's raw boxes (cx, cy, w, h as fractions of the *padded square*
    # image, OWLv2 pads to 48 x 48), clipped to the real 48 x 32 image, empty ones dropped
    proc = transformers.AutoProcessor.from_pretrained(tiny_owl)
    model = transformers.AutoModelForZeroShotObjectDetection.from_pretrained(tiny_owl).eval()
    enc = proc(text=[["a photo of a square", "a photo of a circle"]], images=[img], return_tensors="pt")
    with torch.no_grad():
        raw = model(**enc)
    cx, cy, w, h = (raw.pred_boxes[0] * 48).T
    x0, y0 = (cx - w / 2).clamp(min=0), (cy - h / 2).clamp(min=0)
    x1, y1 = (cx + w / 2).clamp(max=47), (cy + h / 2).clamp(max=31)
    keep = (x1 > x0) & (y1 > y0)
    labels = raw.logits[0].argmax(-1)
    ref = sorted((["square", "circle"][int(lab)], round(float(a), 3), round(float(b), 3))
                 for lab, a, b, k in zip(labels, x0, y0, keep, strict=True) if k)
    assert sorted((d.label, round(d.box[0], 3), round(d.box[1], 3)) for d in out[0]) == ref
    for d in out[0]:
        assert 0 <= d.box[0] < d.box[2] <= 47 and 0 <= d.box[1] < d.box[3] <= 31 and d.colour in COLOUR_NAMES
    assert det.flops_per_image() > 0 and det.model_ids()["detector"] == tiny_owl
    m = GenEvalMetric(detector={"_target_": "metrics_adapters.geneval.detectors.OwlDetector", "model": tiny_owl,
                                "threshold": 0.5})
    m.load()
    [score] = m.score_batch([ScoreItem("0", "0", "a.png", "a photo of a red square")], [img])
    assert 0.0 <= score <= 1.0


# -- must show: dataset=mini through the engine and the analysis ------------------------------------------------
@pytest.mark.slow
def test_mini_rank_m_of_geneval_and_controls(tmp_path):
    pytest.importorskip("torch")
    from analysis.pipeline import analyze
    from metrics_adapters.controls import AlwaysYesVQA, RandomScore, ShuffledImage
    from metrics_adapters.engine import EngineSettings, items_from_table, score_metric, scores_frame
    from metrics_adapters.qa.generation import CallableLM
    from metrics_adapters.qa.matching import AnswerMatcher
    from metrics_adapters.qa.tifa import TIFAScore
    from seg_data.synthetic import load_mini

    ds = load_mini(cache_dir=tmp_path)
    items = items_from_table(ds.image_table())

    def no_embedding(texts):
        raise AssertionError("not needed")

    metrics = [
        GenEvalMetric(name="geneval", detector="shapes"),
        RandomScore(name="random", seed=0),
        ShuffledImage(name="shuffled_image", inner=GenEvalMetric(name="inner", detector="shapes"), dataset=ds, seed=0),
        TIFAScore(name="always_yes", vqa=AlwaysYesVQA(), questions="generate",
                  lm=CallableLM("metrics_adapters.geneval.questions:tifa_lm", name="rules"),
                  matcher=AnswerMatcher(encoder=no_embedding), cache=False),
    ]
    settings = EngineSettings(device="cpu", batch_size=64, num_workers=0, progress=False)
    runs = [score_metric(m, items, None, settings) for m in metrics]
    assert all(r.n_failed == 0 for r in runs)
    frame = scores_frame(items, runs)
    assert frame["always_yes"].nunique() == 1
    res = analyze(frame, dataset=ds, protocols=("graph",), meta_metrics=("rank",), bootstrap=0)
    est = res.protocols["graph"].estimates  # (metric, meta-metric, group); group 0 = Avg
    rank = {m: float(est[i, 0, 0]) for i, m in enumerate(res.metrics)}
    assert rank["geneval"] > 0.9
    assert abs(rank["random"]) < 0.15
    assert abs(rank["shuffled_image"]) < 0.15
    assert rank["always_yes"] == 0.0
