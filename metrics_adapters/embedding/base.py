"""Shared machinery of the embedding-correlation metrics (CLIPScore, ALIGNScore, SigLIP).

Each of them embeds the image and the (templated) prompt, L2-normalises both and reads a score
off their cosine. Subclasses provide the model: loading, per-image preprocessing, the two
encoders, the tokenizer's context and token counts.
"""

from __future__ import annotations

import hashlib
import logging
from abc import abstractmethod
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from ..base import Metric, MetricError, ScoreItem, check_prompt_template

__all__ = ["EmbeddingMetric", "clip_s", "local_signature"]

log = logging.getLogger(__name__)


def clip_s(cos, w: float = 1.0):
    """TS2 eq. 6 (Hessel et al.'s CLIPScore with weight ``w``): ``w * max(cos, 0)``.

    Parameters
    ----------
    cos : torch.Tensor
        Cosine similarities of L2-normalised image and text embeddings, in [-1, 1].
    w : float
        Scale; 1.0 as in TS2, 2.5 for Hessel et al.'s reported scale.

    Examples
    --------
    >>> import torch
    >>> clip_s(torch.tensor([0.3, -0.2, 0.0]), w=2.5).tolist()
    [0.75, 0.0, 0.0]
    """
    return float(w) * cos.clamp(min=0.0)


def local_signature(path: str | None) -> str | None:
    """Cheap identity of a local model file or folder (names, sizes, mtimes), or ``None`` for hub ids.

    Goes into fingerprints so that weights replaced under the same path never reuse old scores;
    hashing gigabytes of weights on every run would cost more than it saves.
    """
    if not path:
        return None
    p = Path(str(path).removeprefix("local-dir:")).expanduser()
    if not p.exists():
        return None
    files = sorted(f for f in (p.rglob("*") if p.is_dir() else [p]) if f.is_file())
    h = hashlib.sha256()
    for f in files:
        st = f.stat()
        h.update(f"{f.relative_to(p) if p.is_dir() else f.name}|{st.st_size}|{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def _probe_images():
    """Two deterministic RGB images (smooth, odd sizes, both orientations) to check a split."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(12345)
    out = []
    for w, h in ((97, 61), (53, 131)):
        small = rng.integers(0, 256, (max(2, h // 8), max(2, w // 8), 3), dtype=np.uint8)
        out.append(Image.fromarray(small).resize((w, h), Image.Resampling.BICUBIC))
    return out


SPEC_TOLERANCE = 1e-5  # max |difference| of normalised pixels (float32 rounding is ~1e-7)


def _checked_spec(metric: EmbeddingMetric, spec: Any) -> Any:
    """``spec`` if it reproduces the metric's own preprocessing on probe images, else ``None``.

    A processor with a step the split does not know (e.g. EfficientNet's extra ``include_top``
    normalisation) then keeps its exact per-image path instead of changing scores.
    """
    if spec is None:
        return None
    import torch

    from ..pipeline import to_model_input

    try:
        for im in _probe_images():
            ref = metric._preprocess(im).float()
            fast = to_model_input(spec.to_uint8(im)[None], spec, "cpu", torch.float32)[0]
            if fast.shape != ref.shape or float((fast - ref).abs().max()) > SPEC_TOLERANCE:
                log.info("%s: split preprocessing differs from the model's own; using the per-image path",
                         metric.name)
                return None
    except Exception as e:  # any failure of the probe: keep the exact path
        log.info("%s: cannot split the preprocessing (%s: %s); using the per-image path", metric.name,
                 type(e).__name__, e)
        return None
    return spec


class EmbeddingMetric(Metric):
    """``score = f(cos(E_I(image), E_T(template(prompt))))``; ``f`` is eq. 6 unless overridden.

    Parameters
    ----------
    name : str
        Column name.
    w : float
        Weight of eq. 6 (the score range is ``[0, w]``).
    template : str
        Text given to the encoder; must contain ``{prompt}`` (e.g. ``"A photo depicts {prompt}"``).
    text_cache_size : int
        Text embeddings kept in memory by templated prompt: the images of a SEG share one prompt,
        so most batches need no text forward at all. Does not change scores.
    """

    higher_is_better: ClassVar[bool] = True
    score_range: ClassVar[tuple[float, float] | None] = (0.0, 1.0)  # for w = 1; instances set (0, w)

    def __init__(self, name: str, w: float = 1.0, template: str = "{prompt}", text_cache_size: int = 4096) -> None:
        super().__init__(name)
        check_prompt_template(name, template)
        self.w = float(w)
        if not self.w > 0:
            raise ValueError(f"{name}: expected a positive weight w, got {w}")
        self.template = str(template)
        if self.w != 1.0:
            self.score_range = (0.0, self.w)
        self.text_cache_size = int(text_cache_size)
        self.device = "cpu"
        self._loaded = False
        self._text_cache: OrderedDict[str, Any] = OrderedDict()
        self._flops: float | None = None
        self._spec: Any = None

    # -- subclass hooks --------------------------------------------------------------------------
    @abstractmethod
    def _load(self, device: str, dtype: str | None) -> None:
        """Load model, tokenizer and image transform."""

    @abstractmethod
    def _preprocess(self, image) -> Any:
        """PIL RGB image -> float tensor ``[3, H, W]`` the vision encoder takes."""

    @abstractmethod
    def _encode_images(self, pixels) -> Any:
        """``[B, 3, H, W]`` on ``self.device`` -> ``[B, D]`` (unnormalised)."""

    @abstractmethod
    def _encode_texts(self, texts: list[str]) -> Any:
        """Templated texts -> ``[B, D]`` (unnormalised); truncates to :meth:`context_length`."""

    @abstractmethod
    def _token_counts(self, texts: list[str]) -> list[int]:
        """Tokens of each text with special tokens and without truncation."""

    @abstractmethod
    def context_length(self) -> int:
        """Longest token sequence (with special tokens) the text encoder takes."""

    @abstractmethod
    def _estimate_flops(self) -> float:
        """Analytic FLOPs per image (see :mod:`metrics_adapters.flops`); called after loading."""

    def _score_from_cos(self, cos):
        return clip_s(cos, self.w)

    def _split_preprocess(self) -> Any:
        """The backend's preprocessing as a :class:`~metrics_adapters.pipeline.PixelSpec`, or ``None``."""
        return None

    # -- Metric API ------------------------------------------------------------------------------
    def settings(self) -> dict[str, Any]:
        return {"w": self.w, "template": self.template}

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        if self._loaded:
            return
        self.device = str(device)
        self._load(self.device, dtype)
        self._loaded = True
        self._flops = float(self._estimate_flops())
        self._spec = _checked_spec(self, self._split_preprocess())

    def unload(self) -> None:
        for attr in ("_model", "_tokenizer", "_image_processor", "_transform"):
            if hasattr(self, attr):
                setattr(self, attr, None)
        self._text_cache.clear()
        self._spec = None
        self._loaded = False

    def _require_loaded(self) -> None:
        if not self._loaded:
            raise MetricError(f"{self.name}: call load(device) before scoring")

    def flops_per_image(self) -> float | None:
        """Image tower forward + text tower forward over the full context (eq. 6 needs 2 calls).

        ``None`` until :meth:`load`. An upper bound for backends that pad texts only to the
        longest prompt of a batch, and prompt sharing across images is not discounted.
        """
        return self._flops

    def preprocess(self, image) -> Any:
        self._require_loaded()
        return self._preprocess(image)

    def pixel_spec(self) -> Any:
        """The split preprocessing (checked against :meth:`preprocess` at load), or ``None``."""
        self._require_loaded()
        return self._spec

    def truncated_prompts(self, prompts: Sequence[str]) -> list[bool]:
        self._require_loaded()
        ctx = self.context_length()
        counts = self._token_counts([self.template.format(prompt=p) for p in prompts])
        return [c > ctx for c in counts]

    def text_features(self, texts: Sequence[str]):
        """L2-normalised text embeddings of already templated ``texts``, memoised per text."""
        import torch

        missing = list(dict.fromkeys(t for t in texts if t not in self._text_cache))
        if missing:
            feats = self._encode_texts(missing).float()
            feats = feats / feats.norm(dim=-1, keepdim=True)
            for t, f in zip(missing, feats, strict=True):
                self._text_cache[t] = f
        for t in texts:
            self._text_cache.move_to_end(t)
        out = torch.stack([self._text_cache[t] for t in texts])
        while len(self._text_cache) > max(self.text_cache_size, len(texts)):
            self._text_cache.popitem(last=False)
        return out

    def image_features(self, images: Sequence[Any]):
        """L2-normalised image embeddings; ``images`` are PIL images, :meth:`preprocess` outputs,
        or one ``[B, 3, H, W]`` tensor of them (the engine's batches)."""
        import torch
        from PIL import Image

        if isinstance(images, torch.Tensor) and images.ndim == 4:
            pix = images
        else:
            pix = torch.stack([self._preprocess(im) if isinstance(im, Image.Image) else im for im in images])
        feats = self._encode_images(pix.to(self.device)).float()
        return feats / feats.norm(dim=-1, keepdim=True)

    def score_batch(self, items: Sequence[ScoreItem], images: Sequence[Any]) -> list[float]:
        self._require_loaded()
        if images is None or len(images) != len(items):
            raise MetricError(f"{self.name}: expected one image per item ({len(items)}), "
                              f"got {None if images is None else len(images)}")
        if not items:
            return []
        import torch

        with torch.inference_mode():  # also when called directly, outside the engine
            img = self.image_features(images)
            txt = self.text_features([self.template.format(prompt=it.prompt) for it in items])
            cos = (img * txt.to(img.device)).sum(dim=-1)
            return [float(x) for x in self._score_from_cos(cos).cpu()]
