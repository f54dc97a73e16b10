"""ImageReward (Xu et al. 2023): BLIP image-grounded text encoder + MLP head trained on human rankings.

The published model (``THUDM/ImageReward``: ``ImageReward.pt`` + ``med_config.json``) is BLIP's
ViT-L/16 image encoder and a BERT-base text encoder with cross-attention to the image patches
(BLIP's "med" model); the reward is an MLP (768 -> 1024 -> 128 -> 64 -> 16 -> 1, no
nonlinearities) on the text encoder's first-token state, standardised with the training
set's mean and std::

    r = (MLP(BERT(prompt | ViT(image))[CLS]) - 0.16717362830052426) / 1.0333394966054072

The ``image-reward`` package does not install next to ours (it pins ``timm==0.6.13`` and needs
``fairscale``, and its vendored BERT imports helpers transformers 5 removed), so this module runs
the same computation on transformers' BLIP modules: ``BlipVisionModel`` for the ViT (LayerNorm
eps 1e-6, as BLIP's ViT) and ``BlipTextModel`` for the text encoder, with the published state
dict's keys renamed by :func:`convert_state_dict`. Preprocessing as ImageReward's: bicubic resize
of the short side, centre crop, CLIP mean/std; the prompt padded to 35 tokens with the
bert-base-uncased tokenizer (plus BLIP's ``[DEC]``/``[ENC]`` tokens). A reward model trained on
human preference, not faithfulness: see docs/metrics.md.
"""

from __future__ import annotations

import json
import logging
import pickle
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from ..base import Metric, MetricError, ScoreItem
from ..embedding.base import local_signature
from ..hub import HubModel, hub_file, load_processor

__all__ = ["REWARD_MEAN", "REWARD_STD", "ImageReward", "convert_state_dict"]

log = logging.getLogger(__name__)

REWARD_MEAN = 0.16717362830052426  # ImageReward.mean / .std in the published code
REWARD_STD = 1.0333394966054072
MAX_TEXT_TOKENS = 35
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)

# BLIP ViT names -> transformers BlipVisionModel names (as transformers' own BLIP conversion script).
_VISION_RENAMES = [
    (r"^cls_token$", "embeddings.class_embedding"),
    (r"^pos_embed$", "embeddings.position_embedding"),
    (r"^patch_embed\.proj\.", "embeddings.patch_embedding."),
    (r"^blocks\.(\d+)\.norm1\.", r"encoder.layers.\1.layer_norm1."),
    (r"^blocks\.(\d+)\.norm2\.", r"encoder.layers.\1.layer_norm2."),
    (r"^blocks\.(\d+)\.attn\.qkv\.", r"encoder.layers.\1.self_attn.qkv."),
    (r"^blocks\.(\d+)\.attn\.proj\.", r"encoder.layers.\1.self_attn.projection."),
    (r"^blocks\.(\d+)\.mlp\.fc(\d)\.", r"encoder.layers.\1.mlp.fc\2."),
    (r"^norm\.", "post_layernorm."),
]
# Keys of the published file the reward does not use (BLIP's contrastive projections and
# BERT's position-id buffer).
_UNUSED = re.compile(r"^blip\.(vision_proj|text_proj)\.|^blip\.text_encoder\.embeddings\.position_ids$")


def convert_state_dict(state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Published ImageReward keys -> ``{"vision": ..., "text": ..., "head": ...}`` state dicts.

    ``blip.visual_encoder.*`` is renamed for ``BlipVisionModel``; ``blip.text_encoder.*`` keeps its
    names (BLIP's BERT and transformers' ``BlipTextModel`` share them); ``mlp.layers.*`` is the head.

    Raises
    ------
    ValueError
        A key that is none of these (not an ImageReward checkpoint, or another version).
    """
    out: dict[str, dict[str, Any]] = {"vision": {}, "text": {}, "head": {}}
    unknown = []
    for key, value in state.items():
        if _UNUSED.search(key):
            continue
        if key.startswith("blip.visual_encoder."):
            name = key.removeprefix("blip.visual_encoder.")
            for pattern, repl in _VISION_RENAMES:
                new, n = re.subn(pattern, repl, name)
                if n:
                    out["vision"][new] = value
                    break
            else:
                unknown.append(key)
        elif key.startswith("blip.text_encoder."):
            out["text"][key.removeprefix("blip.text_encoder.")] = value
        elif key.startswith("mlp.layers."):
            out["head"][key.removeprefix("mlp.")] = value
        else:
            unknown.append(key)
    if unknown:
        raise ValueError(f"expected ImageReward checkpoint keys (blip.visual_encoder.*, blip.text_encoder.*, "
                         f"mlp.layers.*), got {len(unknown)} others, e.g. {unknown[:5]}")
    return out


def _load_strict(module, state: dict[str, Any], what: str) -> None:
    missing, unexpected = module.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.endswith("position_ids")]
    if missing or unexpected:
        raise ValueError(f"{what}: the checkpoint does not fit the architecture of med_config.json: "
                         f"missing {missing[:5]}{'...' if len(missing) > 5 else ''}, "
                         f"unexpected {unexpected[:5]}{'...' if len(unexpected) > 5 else ''}")


class ImageReward(Metric):
    """ImageReward v1.0.

    Parameters
    ----------
    name : str
        Column name.
    model : str
        Hub repository (default ``THUDM/ImageReward``) or a local folder holding ``filename`` and
        ``med_config``.
    filename, med_config : str
        Checkpoint and text-encoder configuration file names in ``model``.
    revision : str or None
        Hub revision of ``model`` (part of the fingerprint).
    tokenizer : str
        bert-base-uncased tokenizer (hub id or folder); BLIP's ``[DEC]`` and ``[ENC]`` are added.
    vision : dict
        BLIP ViT shape: ``image_size``, ``patch_size``, ``hidden_size``, ``num_hidden_layers``,
        ``num_attention_heads`` (default ViT-L/16 at 224, as ``BLIP_Pretrain(vit="large")``).
    download_dir : str or None
        Hub cache folder (does not change scores).
    """

    higher_is_better: ClassVar[bool] = True
    score_range: ClassVar[tuple[float, float] | None] = None  # a standardised logit: unbounded, ~N(0, 1)
    family: ClassVar[str] = "reward"
    paper: ClassVar[str] = "Xu et al. 2023, ImageReward (arXiv:2304.05977)"

    VIT_LARGE: ClassVar[dict[str, int]] = {"image_size": 224, "patch_size": 16, "hidden_size": 1024,
                                           "num_hidden_layers": 24, "num_attention_heads": 16}

    def __init__(self, name: str = "imagereward", model: str = "THUDM/ImageReward", filename: str = "ImageReward.pt",
                 med_config: str = "med_config.json", revision: str | None = None,
                 tokenizer: str = "google-bert/bert-base-uncased", vision: dict[str, int] | None = None,
                 download_dir: str | None = None) -> None:
        super().__init__(name)
        self.model, self.filename, self.med_config = str(model), str(filename), str(med_config)
        self.revision = None if revision in (None, "") else str(revision)
        self.tokenizer = str(tokenizer)
        self.vision = {**self.VIT_LARGE, **(vision or {})}
        unknown = set(self.vision) - set(self.VIT_LARGE)
        if unknown:
            raise ValueError(f"{name}: expected vision keys {sorted(self.VIT_LARGE)}, got also {sorted(unknown)}")
        self.download_dir = download_dir
        self.device = "cpu"
        self._vision = self._text = self._head = self._tok = self._transform = None
        self._flops: float | None = None

    def settings(self) -> dict[str, Any]:
        return {"model": self.model, "filename": self.filename, "med_config": self.med_config,
                "revision": self.revision, "weights": local_signature(self.model), "tokenizer": self.tokenizer,
                "tokenizer_files": local_signature(self.tokenizer), "vision": dict(sorted(self.vision.items())),
                "mean": REWARD_MEAN, "std": REWARD_STD, "max_text_tokens": MAX_TEXT_TOKENS}

    def model_ids(self) -> dict[str, Any]:
        return {"model": self.model, "filename": self.filename, "revision": self.revision, "tokenizer": self.tokenizer}

    def hub_models(self) -> tuple[HubModel, ...]:
        return (HubModel(self.model, "model", self.revision, files=(self.filename, self.med_config),
                         cache_dir=self.download_dir),
                HubModel(self.tokenizer, "tokenizer", files=("tokenizer_config.json", "vocab.txt")))

    def _file(self, fname: str) -> Path:
        # Two files (checkpoint and med_config) come from `model`: a folder or a hub id, never one file.
        return hub_file(self.model, fname, revision=self.revision, cache_dir=self.download_dir, owner=self.name,
                        option=f"{self.config_key}.model", file_ok=False)

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        if self._head is not None:
            return
        import torch
        from torchvision.transforms import (
            CenterCrop,
            Compose,
            InterpolationMode,
            Normalize,
            Resize,
            ToTensor,
        )
        from transformers import (
            AutoTokenizer,
            BlipTextConfig,
            BlipVisionConfig,
            BlipVisionModel,
        )
        from transformers.models.blip.modeling_blip_text import BlipTextModel

        med_path = self._file(self.med_config)  # its own errors name the model and the option
        try:
            med = json.loads(med_path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise RuntimeError(f"{self.name}: could not read {self.med_config}: {e}") from e
        v = self.vision
        vcfg = BlipVisionConfig(hidden_size=v["hidden_size"], intermediate_size=4 * v["hidden_size"],
                                num_hidden_layers=v["num_hidden_layers"], num_attention_heads=v["num_attention_heads"],
                                image_size=v["image_size"], patch_size=v["patch_size"], layer_norm_eps=1e-6,
                                hidden_act="gelu")
        try:  # BLIP_Pretrain sets the text encoder's encoder_width to the ViT's width
            tcfg = BlipTextConfig(vocab_size=med["vocab_size"], hidden_size=med["hidden_size"],
                                  intermediate_size=med["intermediate_size"],
                                  num_hidden_layers=med["num_hidden_layers"],
                                  num_attention_heads=med["num_attention_heads"],
                                  max_position_embeddings=med["max_position_embeddings"],
                                  layer_norm_eps=med.get("layer_norm_eps", 1e-12), hidden_act=med.get("hidden_act", "gelu"),
                                  pad_token_id=med.get("pad_token_id", 0), encoder_hidden_size=v["hidden_size"])
        except KeyError as e:
            raise ValueError(f"{self.name}: {self.med_config} lacks {e}") from e
        vision, text = BlipVisionModel(vcfg), BlipTextModel(tcfg, add_pooling_layer=False)
        h = tcfg.hidden_size
        head = torch.nn.Sequential(torch.nn.Linear(h, 1024), torch.nn.Dropout(0.2), torch.nn.Linear(1024, 128),
                                   torch.nn.Dropout(0.2), torch.nn.Linear(128, 64), torch.nn.Dropout(0.1),
                                   torch.nn.Linear(64, 16), torch.nn.Linear(16, 1))
        ckpt = self._file(self.filename)
        try:
            state = torch.load(ckpt, map_location="cpu", weights_only=True)
            parts = convert_state_dict(state)
            _load_strict(vision, parts["vision"], f"{ckpt} (image encoder)")
            _load_strict(text, parts["text"], f"{ckpt} (text encoder)")
            _load_strict(head, {k.removeprefix("layers."): t for k, t in parts["head"].items()}, f"{ckpt} (MLP head)")
        except (RuntimeError, OSError, ValueError, pickle.UnpicklingError, AttributeError) as e:
            raise RuntimeError(f"{self.name}: could not load the ImageReward checkpoint {ckpt}: {e}") from e
        tok = load_processor(AutoTokenizer, self.tokenizer, owner=self.name, option=f"{self.config_key}.tokenizer")
        tok.add_special_tokens({"bos_token": "[DEC]"})  # BLIP's init_tokenizer: ids 30522, 30523
        tok.add_special_tokens({"additional_special_tokens": ["[ENC]"]})
        self._tok = tok
        self.device = str(device)
        self._vision, self._text, self._head = (m.to(self.device).eval() for m in (vision, text, head))
        n = v["image_size"]
        self._transform = Compose([Resize(n, interpolation=InterpolationMode.BICUBIC), CenterCrop(n), ToTensor(),
                                   Normalize(CLIP_MEAN, CLIP_STD)])
        from ..flops import dense_params, transformer_flops

        tokens = (n // v["patch_size"]) ** 2 + 1
        self._flops = (transformer_flops(dense_params(self._vision), tokens)
                       + transformer_flops(dense_params(self._text) + dense_params(self._head), MAX_TEXT_TOKENS))

    def unload(self) -> None:
        self._vision = self._text = self._head = self._tok = self._transform = None

    def flops_per_image(self) -> float | None:
        """ViT over its patches + CLS, text encoder (with cross-attention) and head over 35 tokens."""
        return self._flops

    def preprocess(self, image) -> Any:
        if self._transform is None:
            raise MetricError(f"{self.name}: call load(device) before scoring")
        return self._transform(image.convert("RGB"))

    def truncated_prompts(self, prompts: Sequence[str]) -> list[bool]:
        if self._tok is None:
            raise MetricError(f"{self.name}: call load(device) before scoring")
        return [len(ids) > MAX_TEXT_TOKENS for ids in self._tok(list(prompts), truncation=False)["input_ids"]]

    def score_batch(self, items: Sequence[ScoreItem], images: Sequence[Any]) -> list[float]:
        if self._head is None:
            raise MetricError(f"{self.name}: call load(device) before scoring")
        if images is None or len(images) != len(items):
            raise MetricError(f"{self.name}: expected one image per item ({len(items)}), "
                              f"got {None if images is None else len(images)}")
        if not items:
            return []
        import torch
        from PIL import Image

        pix = torch.stack([self.preprocess(im) if isinstance(im, Image.Image) else im for im in images]).to(self.device)
        enc = self._tok([it.prompt for it in items], padding="max_length", truncation=True,
                        max_length=MAX_TEXT_TOKENS, return_tensors="pt").to(self.device)
        with torch.inference_mode():
            img = self._vision(pixel_values=pix).last_hidden_state
            out = self._text(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                             encoder_hidden_states=img,
                             encoder_attention_mask=torch.ones(img.shape[:-1], dtype=torch.long, device=img.device))
            reward = self._head(out.last_hidden_state[:, 0, :].float()).squeeze(-1)
        return [float(x) for x in ((reward - REWARD_MEAN) / REWARD_STD).cpu()]
