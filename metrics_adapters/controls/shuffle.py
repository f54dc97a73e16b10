"""Shuffling controls that wrap any metric: ``shuffled_image`` and ``shuffled_text``.

From "What makes a good metric?" (section 4): a metric that still orders images when each
prompt is scored against an image from another prompt (ablation 1) does not use the image; one
that is unmoved by shuffled word order (ablation 2) reads text as a bag of words. Both wrappers
take any metric config as ``inner`` and keep its columns and directions.
"""

from __future__ import annotations

import hashlib
import logging
import random
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from ..base import Metric, MetricError, ScoreItem
from ..hub import under

__all__ = ["MetricWrapper", "ShuffledImage", "ShuffledText", "shuffle_words"]

log = logging.getLogger(__name__)


def _instantiate(obj: Any, what: str) -> Any:
    if isinstance(obj, Metric) or obj is None:
        return obj
    try:
        from hydra.utils import instantiate
    except ImportError as e:  # pragma: no cover - hydra is a core dependency
        raise TypeError(f"expected a Metric for {what}, got {type(obj).__name__}") from e
    out = instantiate(obj)
    if not isinstance(out, Metric):
        raise TypeError(f"expected {what} to build a metrics_adapters.Metric, got {type(out).__name__}")
    return out


class MetricWrapper(Metric):
    """A metric that delegates to ``inner`` and keeps its columns, directions and range."""

    def __init__(self, name: str, inner: Metric | Any) -> None:
        super().__init__(name)
        self.inner = _instantiate(inner, "inner")
        if self.inner is None:  # the default: CLIPScore as configured in conf/metric/clipscore.yaml
            from ..embedding.clipscore import OpenCLIPScore

            self.inner = OpenCLIPScore()
        # Instance attributes shadow the class metadata: the wrapper reads like its inner metric.
        self.columns = self.inner.columns
        self.higher_is_better = self.inner.higher_is_better
        self.score_range = self.inner.score_range

    def directions(self) -> dict[str, bool]:
        inner = list(self.inner.directions().values())
        return dict(zip(self.output_columns(), inner, strict=True))

    def model_ids(self) -> dict[str, Any]:
        return self.inner.model_ids()

    def hub_models(self) -> tuple[Any, ...]:
        return under("inner", self.inner.hub_models())

    def flops_per_image(self) -> float | None:
        return self.inner.flops_per_image()

    def prepare(self, items: Sequence[ScoreItem]) -> None:
        self.inner.prepare(items)

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        self.inner.load(device, dtype)

    def unload(self) -> None:
        self.inner.unload()

    def run_info(self) -> dict[str, Any]:
        fn = getattr(self.inner, "run_info", None)
        return fn() if callable(fn) else {}


def shuffle_words(text: str, seed: int) -> str:
    """``text`` with its whitespace-separated words in a seeded random order.

    The order depends only on ``(seed, text)``. When the words can be reordered at all (two or
    more distinct words) the result differs from the input.

    Examples
    --------
    >>> shuffle_words("a red circle left of a blue square", 0) != "a red circle left of a blue square"
    True
    >>> sorted(shuffle_words("b a c", 3).split()) == ["a", "b", "c"]
    True
    """
    words = str(text).split()
    if len(set(words)) < 2:
        return str(text)
    rng = random.Random(f"shuffle/{int(seed)}/{text}")
    out = words[:]
    for _ in range(100):  # a few draws at most: the identity has probability <= 1/2
        rng.shuffle(out)
        if out != words:
            break
    return " ".join(out)


class ShuffledText(MetricWrapper):
    role = "control"
    """Scores each image against its prompt with the words shuffled (seeded, per prompt).

    For QA metrics (TIFA, DSG) the questions, not the prompt, are what the VQA model reads: wrap
    their VQA backend with :class:`~metrics_adapters.controls.vqa.ShuffledQuestionVQA` instead
    (config ``shuffled_text_tifa``).
    """

    # No model-free metric reads a shuffled prompt (geneval_shapes cannot parse one): the light
    # install's message says so instead of naming an override that fails on every image.
    model_free_inner: ClassVar[str | None] = None

    def __init__(self, name: str = "shuffled_text", inner: Metric | Any = None, seed: int = 0) -> None:
        super().__init__(name, inner)
        self.seed = int(seed)
        self.needs_images = self.inner.needs_images

    def settings(self) -> dict[str, Any]:
        return {"inner": self.inner.fingerprint(), "seed": self.seed, "control": "shuffled_text/1"}

    def preprocess(self, image: Any) -> Any:
        return self.inner.preprocess(image)

    def pixel_spec(self) -> Any:
        return self.inner.pixel_spec()

    def truncated_prompts(self, prompts: Sequence[str]) -> list[bool]:
        return self.inner.truncated_prompts([shuffle_words(p, self.seed) for p in prompts])

    def score_batch(self, items: Sequence[ScoreItem], images: Sequence[Any] | None):
        return self.inner.score_batch([replace(it, prompt=shuffle_words(it.prompt, self.seed)) for it in items], images)


def _pool_from(dataset: Any) -> list[tuple[str, str, str]]:
    """``(seg_id, file_name, image_path)`` of every image with a path, in dataset order."""
    if dataset is None:  # the score command's default dataset
        from seg_data.synthetic import load_mini

        dataset = load_mini()
    if isinstance(dataset, (str, Path)):
        from seg_data import load_path

        dataset = load_path(str(dataset))
    table = dataset.image_table()
    return [(str(r.seg_id), str(r.file_name), str(r.image_path)) for r in table.itertuples(index=False)
            if isinstance(r.image_path, str) and r.image_path]


class ShuffledImage(MetricWrapper):
    role = "control"
    """Scores each prompt against an image drawn from a *different* SEG.

    The donor of an item is drawn uniformly from the pool's images of other SEGs with a
    generator seeded by ``(seed, file_name)``, so it does not depend on batching or order.

    Parameters
    ----------
    name : str
    inner : Metric or config, optional
        The metric to fool (default: ``clipscore``).
    dataset : SEGDataset, path or None
        The donor pool: the dataset being scored (the config passes ``${dataset}``; a path to a
        dataset file/folder also works). ``None``: the bundled mini set (``dataset=mini``, the
        score command's default).
    path : str, optional
        A dataset file/folder that takes precedence over ``dataset`` (the config passes the
        score command's ``path``, which overrides ``dataset`` there too).
    seed : int
    pool : list of (seg_id, file_name, image_path), optional
        An explicit donor pool (tests, scripts).

    Notes
    -----
    The wrapper reads pixels itself (the donor's), so it declares ``needs_images = False``: the
    engine keys its scores by the item's ``file_name``, so the fingerprint holds the seed, a hash
    of the pool's SEG ids and file names, and a hash of the donor images' CONTENT (computed once,
    when the fingerprint is first taken): a second image set with the same names and prompts, or
    a donor file changed in place, gets its own cache key.

    Raises
    ------
    ValueError
        A pool with fewer than two SEGs (no image from a different SEG exists).
    """

    needs_images = False

    # The inner metric ts2 run gives it on the light install (conf/run.yaml).
    model_free_inner: ClassVar[str | None] = "geneval_shapes"

    def __init__(self, name: str = "shuffled_image", inner: Metric | Any = None, dataset: Any = None, seed: int = 0,
                 pool: Sequence[Sequence[str]] | None = None, path: str | None = None,
                 max_image_side: int | None = 4096) -> None:
        super().__init__(name, inner)
        self.seed = int(seed)
        self.max_image_side = max_image_side
        if pool is not None:
            self.pool = [tuple(map(str, p)) for p in pool]
        else:
            self.pool = _pool_from(path if path not in (None, "") else dataset)
        if len({p[0] for p in self.pool}) < 2:
            raise ValueError(f"{name}: expected a donor pool with images of at least two SEGs, got "
                             f"{len(self.pool)} image(s) of {len({p[0] for p in self.pool})} SEG(s); "
                             "set metric.dataset (the scored dataset) or metric.pool")
        h = hashlib.sha256()
        for seg, f, _ in self.pool:
            h.update(f"{seg}\0{f}\n".encode())
        self._pool_hash = h.hexdigest()[:16]
        self._content_hash: str | None = None

    def pool_content_hash(self) -> str:
        """SHA-256 over the donor images' bytes in pool order (an unreadable file enters as its
        error, so it fails its items rather than the key)."""
        if self._content_hash is None:
            from ..images import ImageDecodeError, file_sha256

            h = hashlib.sha256()
            for _, f, path in self.pool:
                try:
                    digest = file_sha256(path)[0]
                except ImageDecodeError as e:
                    digest = f"unreadable:{type(e).__name__}"
                h.update(f"{f}\0{digest}\n".encode())
            self._content_hash = h.hexdigest()[:32]
        return self._content_hash

    def settings(self) -> dict[str, Any]:
        from ..images import decode_settings

        return {"inner": self.inner.fingerprint(), "seed": self.seed, "pool": self._pool_hash,
                "pool_content": self.pool_content_hash(), "decode": decode_settings(self.max_image_side),
                "control": "shuffled_image/1"}

    def donor(self, item: ScoreItem) -> tuple[str, str, str]:
        """The pool entry whose image replaces ``item``'s (never from ``item``'s SEG)."""
        rng = random.Random(f"shuffled_image/{self.seed}/{item.file_name}")
        n = len(self.pool)
        for _ in range(1000):
            cand = self.pool[rng.randrange(n)]
            if cand[0] != str(item.seg_id):
                return cand
        others = [p for p in self.pool if p[0] != str(item.seg_id)]  # a pool dominated by one SEG
        return others[rng.randrange(len(others))]

    def score_batch(self, items: Sequence[ScoreItem], images: Sequence[Any] | None):
        from ..images import ImageDecodeError, decode_image

        donors = [self.donor(it) for it in items]
        imgs = []
        for it, (_, f, path) in zip(items, donors, strict=True):
            try:
                imgs.append(self.inner.preprocess(decode_image(path, self.max_image_side)) if self.inner.needs_images
                            else None)
            except ImageDecodeError as e:
                raise MetricError(f"{it.file_name}: donor image {f} unreadable: {e}") from e
        inner_items = [replace(it, image_path=d[2]) for it, d in zip(items, donors, strict=True)]
        return self.inner.score_batch(inner_items, imgs if self.inner.needs_images else None)
