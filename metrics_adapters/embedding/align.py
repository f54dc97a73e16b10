"""ALIGNScore (TS2 section 4.1): CLIPScore's formula on the ALIGN dual encoder.

``w * max(cos(ALIGN_I(image), ALIGN_T(prompt)), 0)`` with transformers ``AlignModel``
(``kakaobrain/align-base`` by default): an EfficientNet image tower and a BERT text tower.
"""

from __future__ import annotations

from typing import Any

from .hf import HFEmbeddingMetric

__all__ = ["ALIGNScore"]


class ALIGNScore(HFEmbeddingMetric):
    """ALIGNScore (not the text-only *AlignScore*).

    Parameters
    ----------
    name : str
        Column name.
    model : str
        Hub id or local folder of an ``AlignModel`` with tokenizer and image processor.
    max_text_tokens : int
        Text context: 64, what ``AlignProcessor`` uses (BERT's own limit is 512).
    revision, w, template, text_cache_size
        See :class:`~metrics_adapters.embedding.hf.HFEmbeddingMetric`.
    """

    paper = "Saxon et al. 2024, T2IScoreScore (ALIGN: Jia et al. 2021, arXiv:2102.05918)"

    model_class = "AlignModel"

    def __init__(self, name: str = "alignscore", model: str = "kakaobrain/align-base", revision: str | None = None,
                 max_text_tokens: int = 64, w: float = 1.0, template: str = "{prompt}",
                 text_cache_size: int = 4096) -> None:
        super().__init__(name, model=model, revision=revision, w=w, template=template,
                         text_cache_size=text_cache_size)
        self.max_text_tokens = int(max_text_tokens)

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "max_text_tokens": self.max_text_tokens}

    def _compute_context(self) -> int:
        return min(super()._compute_context(), self.max_text_tokens)

    def _encode_images(self, pixels):
        # AlignModel.get_image_features returns the vision model's output: pooled = image embeds.
        out = self._model.get_image_features(pixel_values=pixels)
        return out if hasattr(out, "shape") else out.pooler_output

    def _vision_flops(self) -> float:
        import torch

        from ..flops import conv_tower_flops

        size = int(self._model.config.vision_config.image_size)
        return conv_tower_flops(self._model.vision_model, torch.zeros(1, 3, size, size, device=self.device))
