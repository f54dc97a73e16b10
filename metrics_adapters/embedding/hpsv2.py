"""HPSv2 (Wu et al. 2023, "Human Preference Score v2"): open_clip ViT-H-14 fine-tuned on HPD v2.

``score = cos(E_I(image), E_T(prompt))``: the HPSv2 repository's ``image_features @
text_features.T`` on the L2-normalised features open_clip returns, with no clamp and no scale.
Its image transform is the one HPSv2 evaluates with (:func:`hpsv2_transform`): the image becomes a
tensor first, then its longest side is resized to 224 (bicubic, on the tensor) and the tensor is
padded with zeros to a square, before CLIP's normalisation; an image whose longest side is
already 224 is neither resized nor padded (hpsv2/src/open_clip/transform.py:26-49, 140-157 of
hpsv2 1.2.0), not CLIP's centre crop. ``hpsv2.img_score.score`` runs the fp32 model under
``torch.cuda.amp.autocast()`` (img_score.py:76, 92, 107): fp16 autocast on CUDA, which is the
engine's ``precision=auto`` (this class keeps fp32 weights whatever the precision). The checkpoint
(``xswu/HPSv2``, ``HPS_v2.1_compressed.pt`` by default) is a ``{"state_dict": ...}`` file loaded
strictly into the architecture, as ``hpsv2.img_score`` does. A reward model trained to predict
human preference, not faithfulness: see docs/metrics.md.
"""

from __future__ import annotations

import logging
import pickle
from pathlib import Path
from typing import Any, ClassVar

from ..hub import HubModel, hub_file, load_open_clip
from .base import local_signature
from .clipscore import OpenCLIPScore

__all__ = ["HPSv2Score", "ResizeMaxSize", "hpsv2_transform"]

log = logging.getLogger(__name__)

# hpsv2/src/open_clip/constants.py (OpenAI CLIP's), used by HPSv2's eval transform
OPENAI_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_STD = (0.26862954, 0.26130258, 0.27577711)


class ResizeMaxSize:
    """HPSv2's ``ResizeMaxSize`` on a ``[C, H, W]`` tensor (hpsv2/src/open_clip/transform.py:26-49):
    scale ``max_size / max(H, W)``, new sides ``round(side * scale)``, bicubic resize of the tensor
    (antialiased, torchvision's default since 0.17, which the original inherits), then zero padding
    ``[left, top, right, bottom] = [pad_w // 2, pad_h // 2, pad_w - pad_w // 2, pad_h - pad_h // 2]``.
    When the scale is exactly 1 nothing happens (no resize, no pad), as in the original.
    """

    def __init__(self, max_size: int, fill: float = 0.0) -> None:
        if not isinstance(max_size, int) or max_size < 1:
            raise ValueError(f"ResizeMaxSize: expected a positive int size, got {max_size!r}")
        self.max_size = max_size
        self.fill = fill

    def __call__(self, img):
        import torchvision.transforms.functional as F
        from torchvision.transforms import InterpolationMode

        height, width = img.shape[1:]
        scale = self.max_size / float(max(height, width))
        if scale == 1.0:
            return img
        new_size = [round(dim * scale) for dim in (height, width)]
        img = F.resize(img, new_size, InterpolationMode.BICUBIC, antialias=True)
        pad_h, pad_w = self.max_size - new_size[0], self.max_size - new_size[1]
        return F.pad(img, padding=[pad_w // 2, pad_h // 2, pad_w - pad_w // 2, pad_h - pad_h // 2], fill=self.fill)

    def __repr__(self) -> str:
        return f"ResizeMaxSize(max_size={self.max_size}, fill={self.fill})"


def _to_rgb(image):
    return image if image.mode == "RGB" else image.convert("RGB")


def hpsv2_transform(image_size: int, mean=OPENAI_MEAN, std=OPENAI_STD):
    """HPSv2's eval transform (transform.py:140-157 with ``resize_longest_max=True``, as its
    factory.py:368-375 builds ``preprocess_val`` under img_score.py:33's ``light_augmentation=True``):
    RGB, ``ToTensor``, :class:`ResizeMaxSize`, ``Normalize``.

    The original keeps RGBA images as RGBA (``_convert_to_rgb_or_rgba``); ts2's decoder hands
    every image over as RGB already, so both see the same pixels.
    """
    from torchvision.transforms import Compose, Normalize, ToTensor

    return Compose([_to_rgb, ToTensor(), ResizeMaxSize(int(image_size)), Normalize(mean=mean, std=std)])


class HPSv2Score(OpenCLIPScore):
    """HPSv2 / HPSv2.1.

    Parameters
    ----------
    name : str
        Column name.
    model : str
        Hub repository of the checkpoint (default ``xswu/HPSv2``), a local folder holding
        ``filename``, or a local checkpoint file.
    filename : str
        Checkpoint file in the repository or folder: ``HPS_v2.1_compressed.pt`` (v2.1, default)
        or ``HPS_v2_compressed.pt`` (v2.0).
    revision : str or None
        Hub revision of the checkpoint (part of the fingerprint).
    arch : str
        open_clip architecture the checkpoint fits (``ViT-H-14``), or ``local-dir:/path``.
    template, text_cache_size, download_dir
        See :class:`~metrics_adapters.embedding.clipscore.OpenCLIPScore`.
    """

    family: ClassVar[str] = "reward"
    paper: ClassVar[str] = "Wu et al. 2023, Human Preference Score v2 (arXiv:2306.09341)"
    score_range: ClassVar[tuple[float, float] | None] = (-1.0, 1.0)

    def __init__(self, name: str = "hpsv2", model: str = "xswu/HPSv2", filename: str = "HPS_v2.1_compressed.pt",
                 revision: str | None = None, arch: str = "ViT-H-14", template: str = "{prompt}",
                 text_cache_size: int = 4096, download_dir: str | None = None) -> None:
        super().__init__(name, arch=arch, pretrained=None, w=1.0, template=template,
                         text_cache_size=text_cache_size, download_dir=download_dir)
        if not model or not filename:
            raise ValueError(f"{name}: expected a checkpoint model and filename, got {model!r} and {filename!r}")
        self.model = str(model)
        self.filename = str(filename)
        self.revision = None if revision in (None, "") else str(revision)

    def settings(self) -> dict[str, Any]:
        return {"arch": self.arch, "arch_files": local_signature(self.arch) if self.arch.startswith("local-dir:")
                else None, "model": self.model, "filename": self.filename, "revision": self.revision,
                "weights": local_signature(self.model), "template": self.template,
                "transform": "hpsv2:tensor-resize-max-pad/v2"}

    def model_ids(self) -> dict[str, Any]:
        return {"model": self.model, "filename": self.filename, "revision": self.revision, "arch": self.arch,
                "library": "open_clip"}

    def hub_models(self) -> tuple[HubModel, ...]:
        # The checkpoint (a local file or folder is not a hub id and is never checked) and an
        # hf-hub: architecture; pretrained is None, so no open_clip weights tag.
        return (*super().hub_models(), HubModel(self.model, "model", self.revision, files=(self.filename,),
                                                cache_dir=self.download_dir))

    def checkpoint_path(self) -> Path:
        """The local checkpoint file: ``model`` itself, ``model/filename``, or a hub download
        (:func:`metrics_adapters.hub.hub_file`)."""
        return hub_file(self.model, self.filename, revision=self.revision, cache_dir=self.download_dir,
                        owner=self.name, option=f"{self.config_key}.model")

    def _load(self, device: str, dtype: str | None) -> None:
        import torch

        ckpt = self.checkpoint_path()
        # The architecture only (its own transform below); the weights come from the checkpoint.
        model, _, self._tokenizer = load_open_clip(self.arch, None, weights=False, cache_dir=self.download_dir,
                                                   owner=self.name)
        try:
            state = torch.load(ckpt, map_location="cpu", weights_only=True)
            state = state["state_dict"] if isinstance(state, dict) and "state_dict" in state else state
            model.load_state_dict(state, strict=True)
        except (RuntimeError, OSError, KeyError, TypeError, pickle.UnpicklingError) as e:
            raise RuntimeError(f"{self.name}: {ckpt} is not an HPSv2 checkpoint for {self.arch!r}: {e}") from e
        self._model = model.to(device).eval()
        size = model.visual.image_size
        self._transform = hpsv2_transform(size[0] if isinstance(size, (tuple, list)) else size)
        self._ctx = int(getattr(self._tokenizer, "context_length", None) or model.context_length)

    def _score_from_cos(self, cos):
        return cos
