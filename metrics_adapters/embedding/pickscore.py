"""PickScore (Kirstain et al. 2023, "Pick-a-Pic"): a CLIP ViT-H/14 fine-tuned on human preferences.

``score = exp(logit_scale) * cos(CLIP_I(image), CLIP_T(prompt))``, as in the PickScore repository's
inference example (``model.logit_scale.exp() * text_embs @ image_embs.T``); the processor
(tokenizer + image transform) is the base model's, ``laion/CLIP-ViT-H-14-laion2B-s32B-b79K``.
A reward model trained to predict which of two images people prefer for a prompt, not a
faithfulness metric: see docs/metrics.md.
"""

from __future__ import annotations

from typing import Any, ClassVar

from .base import local_signature
from .hf import HFEmbeddingMetric

__all__ = ["PickScore"]


class PickScore(HFEmbeddingMetric):
    """PickScore on a transformers ``CLIPModel``.

    Parameters
    ----------
    name : str
        Column name.
    model : str
        Hub id (default ``yuvalkirstain/PickScore_v1``) or a local ``save_pretrained`` folder.
    processor : str or None
        Where the tokenizer and image processor come from (default the LAION ViT-H/14 the
        PickScore repository uses); ``None``: the ``model`` folder.
    revision, processor_revision : str or None
        Hub revisions of the two (part of the fingerprint; pin commits for reproducible caches).
    template, text_cache_size
        See :class:`~metrics_adapters.embedding.hf.HFEmbeddingMetric`.

    Notes
    -----
    The score is unbounded in principle: ``[-s, s]`` with ``s = exp(logit_scale)`` of the
    checkpoint, so the class declares no range and a loaded instance declares ``(-s, s)``.
    Typical PickScore values lie around 18-23.
    """

    model_class = "CLIPModel"
    family: ClassVar[str] = "reward"
    paper: ClassVar[str] = "Kirstain et al. 2023, Pick-a-Pic (arXiv:2305.01569)"
    score_range: ClassVar[tuple[float, float] | None] = None

    def __init__(self, name: str = "pickscore", model: str = "yuvalkirstain/PickScore_v1",
                 processor: str | None = "laion/CLIP-ViT-H-14-laion2B-s32B-b79K", revision: str | None = None,
                 processor_revision: str | None = None, template: str = "{prompt}",
                 text_cache_size: int = 4096) -> None:
        super().__init__(name, model=model, revision=revision, w=1.0, template=template,
                         text_cache_size=text_cache_size)
        self.processor = None if processor in (None, "") else str(processor)
        self.processor_revision = None if processor_revision in (None, "") else str(processor_revision)

    def settings(self) -> dict[str, Any]:
        s = super().settings()
        s.pop("w")
        return {**s, "processor": self.processor, "processor_revision": self.processor_revision,
                "processor_files": local_signature(self.processor)}

    def model_ids(self) -> dict[str, Any]:
        return {**super().model_ids(), "processor": self.processor or self.model,
                "processor_revision": self.processor_revision}

    def _processor_source(self) -> tuple[str, dict[str, Any]]:
        if self.processor is None:
            return super()._processor_source()
        return self.processor, ({"revision": self.processor_revision} if self.processor_revision else {})

    def _load(self, device: str, dtype: str | None) -> None:
        super()._load(device, dtype)
        s = float(self._model.logit_scale.detach().float().exp())
        self.score_range = (-s, s)

    def _score_from_cos(self, cos):
        return cos * self._model.logit_scale.detach().float().exp().to(cos.device)
