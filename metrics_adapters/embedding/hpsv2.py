"""HPSv2 (Wu et al. 2023, "Human Preference Score v2"): open_clip ViT-H-14 fine-tuned on HPD v2.

``score = cos(E_I(image), E_T(prompt))``: the HPSv2 repository's ``image_features @
text_features.T`` on the L2-normalised features open_clip returns, with no clamp and no scale.
Its image transform is the one HPSv2 evaluates with (``resize_longest_max=True``: the longest
side resized to 224, then padded to a square), not CLIP's centre crop. The checkpoint
(``xswu/HPSv2``, ``HPS_v2.1_compressed.pt`` by default) is a ``{"state_dict": ...}`` file loaded
strictly into the architecture, as ``hpsv2.img_score`` does. A reward model trained to predict
human preference, not faithfulness: see docs/metrics.md.
"""

from __future__ import annotations

import logging
import pickle
from pathlib import Path
from typing import Any, ClassVar

from ..hub import HubModel
from .base import local_signature
from .clipscore import OpenCLIPScore, _quiet_root_info

__all__ = ["HPSv2Score"]

log = logging.getLogger(__name__)


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
                "weights": local_signature(self.model), "template": self.template}

    def model_ids(self) -> dict[str, Any]:
        return {"model": self.model, "filename": self.filename, "revision": self.revision, "arch": self.arch,
                "library": "open_clip"}

    def hub_models(self) -> tuple[HubModel, ...]:
        # The checkpoint (a local file or folder is not a hub id and is never checked) and an
        # hf-hub: architecture; pretrained is None, so no open_clip weights tag.
        return (*super().hub_models(), HubModel(self.model, "model", self.revision, files=(self.filename,),
                                                cache_dir=self.download_dir))

    def checkpoint_path(self) -> Path:
        """The local checkpoint file: ``model`` itself, ``model/filename``, or a hub download."""
        p = Path(self.model).expanduser()
        if p.is_file():
            return p
        if p.is_dir():
            if not (p / self.filename).is_file():
                raise FileNotFoundError(f"{self.name}: expected the checkpoint {self.filename!r} in {p}, found none")
            return p / self.filename
        from huggingface_hub import hf_hub_download

        try:
            return Path(hf_hub_download(self.model, self.filename, revision=self.revision, cache_dir=self.download_dir))
        except Exception as e:  # network, auth, missing file: one message naming what was asked for
            raise RuntimeError(f"{self.name}: could not download {self.filename!r} from {self.model!r}: "
                               f"{type(e).__name__}: {e}") from e

    def _load(self, device: str, dtype: str | None) -> None:
        import open_clip
        import torch

        ckpt = self.checkpoint_path()
        try:
            with _quiet_root_info():
                model, _, transform = open_clip.create_model_and_transforms(
                    self.arch, pretrained=None, load_weights=False, device="cpu", cache_dir=self.download_dir,
                    image_resize_mode="longest")
                self._tokenizer = open_clip.get_tokenizer(self.arch, cache_dir=self.download_dir)
        except (RuntimeError, OSError, ValueError) as e:
            raise RuntimeError(f"{self.name}: could not build open_clip {self.arch!r}: {e}") from e
        try:
            state = torch.load(ckpt, map_location="cpu", weights_only=True)
            state = state["state_dict"] if isinstance(state, dict) and "state_dict" in state else state
            model.load_state_dict(state, strict=True)
        except (RuntimeError, OSError, KeyError, TypeError, pickle.UnpicklingError) as e:
            raise RuntimeError(f"{self.name}: {ckpt} is not an HPSv2 checkpoint for {self.arch!r}: {e}") from e
        self._model = model.to(device).eval()
        self._transform = transform
        self._ctx = int(getattr(self._tokenizer, "context_length", None) or model.context_length)

    def _score_from_cos(self, cos):
        return cos
