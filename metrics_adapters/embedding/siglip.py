"""SigLIPScore: the sigmoid of SigLIP's image-text logit.

``sigmoid(exp(t) * cos(SigLIP_I(image), SigLIP_T(prompt)) + b)`` with the model's learned
temperature ``t`` and bias ``b`` (transformers ``SiglipModel``): SigLIP's own estimate of the
probability that the pair matches, in (0, 1).
"""

from __future__ import annotations

from typing import ClassVar

from .hf import HFEmbeddingMetric

__all__ = ["SigLIPScore"]


class SigLIPScore(HFEmbeddingMetric):
    """SigLIPScore.

    Parameters
    ----------
    name : str
        Column name.
    model : str
        Hub id or local folder of a ``SiglipModel`` (default ``google/siglip-base-patch16-224``).
    revision, template, text_cache_size
        See :class:`~metrics_adapters.embedding.hf.HFEmbeddingMetric`. There is no weight ``w``:
        the score is a probability.
    """

    paper = "Zhai et al. 2023, SigLIP (arXiv:2303.15343)"

    model_class = "SiglipModel"
    score_range: ClassVar[tuple[float, float] | None] = (0.0, 1.0)
    # SigLIP was trained on texts padded to the full context and without an attention mask: it
    # pools the LAST position, so shorter padding gives other embeddings.
    padding = "max_length"
    use_attention_mask = False
    vision_class_token = False

    def __init__(self, name: str = "siglip", model: str = "google/siglip-base-patch16-224",
                 revision: str | None = None, template: str = "{prompt}", text_cache_size: int = 4096) -> None:
        super().__init__(name, model=model, revision=revision, w=1.0, template=template,
                         text_cache_size=text_cache_size)

    def settings(self):
        s = super().settings()
        s.pop("w")
        return s

    def _score_from_cos(self, cos):
        import torch

        scale = self._model.logit_scale.detach().float().exp().to(cos.device)
        bias = self._model.logit_bias.detach().float().to(cos.device)
        return torch.sigmoid(cos * scale + bias)
