"""The engine's side of a metric: the Scorer protocol, and Metric.__call__ through engine.score_direct."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from PIL import Image

from metrics_adapters.base import Metric
from metrics_adapters.engine import score_direct
from metrics_adapters.scorer import Scorer

pytestmark = pytest.mark.light


class Grey(Metric):
    """Mean grey level of the image; with ``columns``, also the prompt's length."""

    def score_batch(self, items, images):
        grey = [float(np.asarray(im.convert("L"), dtype=float).mean()) / 255 for im in images]
        if self.columns:
            return [(g, float(len(it.prompt))) for g, it in zip(grey, items, strict=True)]
        return grey


class GreyAndLength(Grey):
    columns = ("grey", "length")


def _members(obj) -> set[str]:
    return {n for n in dir(obj) if not n.startswith("_")}


def test_metric_has_every_member_of_scorer_with_its_parameters():
    proto, metric = _members(Scorer), _members(Grey("g"))  # name is set by __init__
    assert proto <= metric, sorted(proto - metric)
    for name in proto:
        theirs = inspect.getattr_static(Scorer, name)
        if isinstance(theirs, property):
            continue
        ours = getattr(Metric, name)
        assert list(inspect.signature(ours).parameters) == list(inspect.signature(theirs).parameters), name
    assert isinstance(Grey("g"), Scorer)
    assert not isinstance(object(), Scorer)


def test_call_scores_pil_images_and_paths_like_score_direct(tmp_path):
    imgs = [Image.new("RGB", (8, 8), (v, v, v)) for v in (0, 51, 255)]
    paths = []
    for i, im in enumerate(imgs):
        paths.append(tmp_path / f"{i}.png")
        im.save(paths[-1])
    m = Grey("grey")
    got = m(images=imgs, prompts=["a", "bb", "ccc"], device="cpu")
    assert got.shape == (3,)
    np.testing.assert_allclose(got, [0.0, 0.2, 1.0], atol=1e-12)
    np.testing.assert_array_equal(m(images=paths, prompts=["a", "bb", "ccc"], device="cpu"), got)
    np.testing.assert_array_equal(score_direct(m, imgs, ["a", "bb", "ccc"], device="cpu"), got)
    two = GreyAndLength("gl")(images=imgs, prompts=["a", "bb", "ccc"], device="cpu", batch_size=2)
    np.testing.assert_allclose(two, [[0.0, 1.0], [0.2, 2.0], [1.0, 3.0]], atol=1e-12)


def test_call_errors_name_the_metric(tmp_path):
    m = Grey("grey")
    with pytest.raises(ValueError, match="grey: expected one prompt per image, got 2 images and 1 prompts"):
        m(images=[None, None], prompts=["a"], device="cpu")
    with pytest.raises(ValueError, match="grey: expected images as PIL images or file paths, got int at index 0"):
        m(images=[3], prompts=["a"], device="cpu")
    with pytest.raises(ValueError, match=r"grey: expected a score for every image, got 1 failure\(s\) of 1"):
        m(images=[tmp_path / "absent.png"], prompts=["a"], device="cpu")
