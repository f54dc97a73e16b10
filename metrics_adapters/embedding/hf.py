"""Embedding metrics on a transformers dual encoder (``CLIPModel``, ``AlignModel``, ``SiglipModel``)."""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from ..hub import HubModel, load_pretrained, load_processor
from .base import EmbeddingMetric, local_signature

__all__ = ["HFEmbeddingMetric"]

log = logging.getLogger(__name__)

_UNBOUNDED = 100_000  # tokenizers without a configured limit report ~1e30 as model_max_length


def _pooled(out):
    # transformers 5 returns a model output whose pooler_output holds the projected features;
    # transformers 4 returned the tensor itself.
    return out if hasattr(out, "shape") else out.pooler_output


class _ProcessorResize:
    """A transformers image processor's resize + crop only, back to an RGB PIL image."""

    def __init__(self, proc) -> None:
        self.proc = proc

    def __call__(self, image):
        import numpy as np
        from PIL import Image

        px = self.proc(images=image, do_rescale=False, do_normalize=False, return_tensors="np")["pixel_values"][0]
        px = np.asarray(px)
        if px.shape[0] == 3:
            px = px.transpose(1, 2, 0)
        rounded = np.rint(px)
        if np.abs(px - rounded).max() > 1e-3:  # not integral: uint8 would change pixels
            raise ValueError("the processor's resize does not give whole 8-bit values")
        return Image.fromarray(np.clip(rounded, 0, 255).astype(np.uint8), "RGB")


class HFEmbeddingMetric(EmbeddingMetric):
    """A transformers dual encoder loaded by :func:`metrics_adapters.hub.load_pretrained` (``model``
    at ``revision``, weights in the run's dtype).

    Parameters
    ----------
    model : str
        Hub id (``openai/clip-vit-large-patch14``) or a local folder holding the model, its
        tokenizer and its image processor (what ``save_pretrained`` writes).
    revision : str or None
        Hub revision (branch, tag or commit). Pin a commit for reproducible caches: the
        fingerprint holds the revision as given, so ``None`` ("main") cannot notice a new upload.
    w, template, text_cache_size
        See :class:`~metrics_adapters.embedding.base.EmbeddingMetric`.
    """

    model_class: ClassVar[str] = ""  # attribute of ``transformers``
    padding: ClassVar[str] = "longest"  # SigLIP was trained on max_length padding
    use_attention_mask: ClassVar[bool] = True
    vision_class_token: ClassVar[bool] = True
    # 2: the weights load in the run's dtype (fp16/bf16 on CUDA) instead of fp32 under autocast,
    # which changes scores at those precisions (fp32 scores are the same as version 1's).
    version: ClassVar[str] = "2"

    def __init__(self, name: str, model: str, revision: str | None = None, w: float = 1.0,
                 template: str = "{prompt}", text_cache_size: int = 4096) -> None:
        super().__init__(name, w=w, template=template, text_cache_size=text_cache_size)
        self.model = str(model)
        self.revision = None if revision in (None, "") else str(revision)
        self._model = self._tokenizer = self._image_processor = None

    def settings(self) -> dict[str, Any]:
        return {"model": self.model, "revision": self.revision, "weights": local_signature(self.model),
                **super().settings()}

    def model_ids(self) -> dict[str, Any]:
        return {"model": self.model, "revision": self.revision, "class": f"transformers.{self.model_class}"}

    def hub_models(self) -> tuple[HubModel, ...]:
        src, pkw = self._processor_source()
        extra = (HubModel(src, "processor", pkw.get("revision")),) if src != self.model else ()
        return (HubModel(self.model, "model", self.revision), *extra)

    def _load(self, device: str, dtype: str | None) -> None:
        import transformers

        key = self.config_key
        self._model, _ = load_pretrained(getattr(transformers, self.model_class), None, self.model,
                                         revision=self.revision, device=device, dtype=dtype, owner=self.name,
                                         option=f"{key}.model")
        src, pkw = self._processor_source()
        where = dict(revision=pkw.get("revision"), owner=self.name,
                     option=f"{key}.model" if src == self.model else f"{key}.processor")
        self._tokenizer = load_processor(transformers.AutoTokenizer, src, **where)
        self._image_processor = load_processor(transformers.AutoImageProcessor, src, **where)
        self._ctx = self._compute_context()

    def _processor_source(self) -> tuple[str, dict[str, Any]]:
        """Where the tokenizer and image processor come from (PickScore: another repository)."""
        return self.model, ({"revision": self.revision} if self.revision else {})

    def _compute_context(self) -> int:
        limits = [int(self._model.config.text_config.max_position_embeddings)]
        tok_max = getattr(self._tokenizer, "model_max_length", None)
        if tok_max is not None and tok_max < _UNBOUNDED:
            limits.append(int(tok_max))
        return min(limits)

    def context_length(self) -> int:
        return self._ctx

    def _preprocess(self, image):
        return self._image_processor(images=image, return_tensors="pt")["pixel_values"][0]

    def _split_preprocess(self):
        """Resize/crop by the processor itself (without rescale/normalise), the rest on the device."""
        from ..pipeline import PixelSpec

        proc = self._image_processor
        if not (getattr(proc, "do_rescale", False) and getattr(proc, "do_normalize", False)):
            return None
        mean, std = proc.image_mean, proc.image_std
        n = 3
        mean = tuple(float(m) for m in (mean if isinstance(mean, list | tuple) else [mean] * n))
        std = tuple(float(x) for x in (std if isinstance(std, list | tuple) else [std] * n))
        return PixelSpec(resize=_ProcessorResize(proc), mean=mean, std=std, scale=float(proc.rescale_factor),
                         dtype=str(next(self._model.parameters()).dtype).removeprefix("torch."))

    def _encode_images(self, pixels):
        # fp32 pixels from the processor meet fp16/bf16 weights outside autocast too.
        return _pooled(self._model.get_image_features(pixel_values=pixels.to(self._model.dtype)))

    def _encode_texts(self, texts: list[str]):
        enc = self._tokenizer(texts, padding=self.padding, truncation=True, max_length=self._ctx, return_tensors="pt")
        kw = {"input_ids": enc["input_ids"].to(self.device)}
        if self.use_attention_mask and "attention_mask" in enc:
            kw["attention_mask"] = enc["attention_mask"].to(self.device)
        return _pooled(self._model.get_text_features(**kw))

    def _token_counts(self, texts: list[str]) -> list[int]:
        enc = self._tokenizer(texts, truncation=False, verbose=False)
        return [len(ids) for ids in enc["input_ids"]]

    # -- cost --------------------------------------------------------------------------------------
    def _vision_tokens(self) -> int:
        vc = self._model.config.vision_config
        n = (int(vc.image_size) // int(vc.patch_size)) ** 2
        return n + (1 if self.vision_class_token else 0)

    def _vision_flops(self) -> float:
        from ..flops import dense_params, transformer_flops

        return transformer_flops(dense_params(self._model.vision_model), self._vision_tokens())

    def _estimate_flops(self) -> float:
        from ..flops import dense_params, transformer_flops

        text = transformer_flops(dense_params(self._model.text_model), self._ctx)
        return self._vision_flops() + text
