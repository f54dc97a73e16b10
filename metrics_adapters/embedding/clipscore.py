"""CLIPScore (TS2 section 4.1, eq. 6): ``w * max(cos(CLIP_I(image), CLIP_T(prompt)), 0)``.

Two backends with the same formula: open_clip (:class:`OpenCLIPScore`, the papers' ViT-L-14 /
openai weights by default) and transformers ``CLIPModel`` (:class:`HFCLIPScore`).
"""

from __future__ import annotations

import ast
import logging
import os
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..hub import HubModel, load_open_clip
from .base import EmbeddingMetric, local_signature
from .hf import HFEmbeddingMetric

__all__ = ["OpenCLIPScore", "HFCLIPScore", "open_clip_hub_file"]

# open_clip's weight files in a hub repository (constants.HF_WEIGHTS_NAME / HF_SAFE_WEIGHTS_NAME).
OPEN_CLIP_WEIGHTS = ("open_clip_model.safetensors", "open_clip_pytorch_model.bin")


def _hf_hub_of(node: ast.AST) -> str | None:
    """The ``hf_hub=`` string of a ``_pcfg(...)``-like call node, else None."""
    if isinstance(node, ast.Call):
        for kw in node.keywords:
            if kw.arg == "hf_hub" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                return kw.value.value or None
    return None


@lru_cache(maxsize=1)
def _open_clip_hub_table() -> dict[str, dict[str, str]]:
    """arch -> weights tag -> ``hf_hub`` entry, read from the installed ``open_clip/pretrained.py``
    WITHOUT importing open_clip (5 s, with torch): the table is a module-level literal
    (``_VITL14 = dict(openai=_pcfg(hf_hub=...), ...)``, ``_PRETRAINED = {"ViT-L-14": _VITL14, ...}``).
    Empty when open_clip is not installed or its file has another shape."""
    tree = _open_clip_pretrained_module()
    if tree is None:
        return {}
    named: dict[str, ast.AST] = {}
    table: ast.Dict | None = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            named[node.targets[0].id] = node.value
            if node.targets[0].id == "_PRETRAINED" and isinstance(node.value, ast.Dict):
                table = node.value
    if table is None:
        return {}
    out = {}
    for k, v in zip(table.keys, table.values, strict=True):
        if isinstance(k, ast.Constant) and isinstance(k.value, str):
            tags = _tag_entries(named.get(v.id) if isinstance(v, ast.Name) else v)
            if tags:
                out[k.value] = tags
    return out


def _open_clip_pretrained_module() -> ast.Module | None:
    """The syntax tree of the installed ``open_clip/pretrained.py`` (found, not imported), or
    ``None`` when open_clip is not installed or the file cannot be read or parsed."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("open_clip")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        return ast.parse((Path(list(spec.submodule_search_locations)[0]) / "pretrained.py").read_text())
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None


def _tag_entries(node: ast.AST | None) -> dict[str, str]:
    """``dict(tag=_pcfg(hf_hub=...), ...)`` or ``{"tag": _pcfg(hf_hub=...)}`` -> tag -> hf_hub."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
        pairs = [(kw.arg, kw.value) for kw in node.keywords if kw.arg]
    elif isinstance(node, ast.Dict):
        pairs = [(k.value, v) for k, v in zip(node.keys, node.values, strict=True)
                 if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    else:
        return {}
    return {tag: hub for tag, value in pairs if (hub := _hf_hub_of(value))}


def open_clip_hub_file(arch: str, tag: str) -> tuple[str, str | None] | None:
    """``(repository, file)`` on the hub that open_clip downloads for ``arch`` / ``tag``
    (``file`` None: open_clip's default weight names), or None when the weights are not on the
    hub (a URL) or the pair is unknown. Reads open_clip's table without importing it.

    Examples
    --------
    >>> open_clip_hub_file("ViT-L-14", "openai")  # doctest: +SKIP
    ('timm/vit_large_patch14_clip_224.openai', None)
    """
    table = _open_clip_hub_table()
    arch = arch.replace("/", "-")
    entry = table.get(arch) or table.get(arch.removesuffix("-quickgelu")) or {}
    hub = entry.get(tag.lower().replace("-", "_"))  # open_clip's _clean_tag
    if not hub:
        return None
    repo, fname = os.path.split(hub)  # "org/name/" (default file names) or "org/name/file"
    return repo, (fname or None)

log = logging.getLogger(__name__)


class OpenCLIPScore(EmbeddingMetric):
    """CLIPScore on an open_clip model.

    Parameters
    ----------
    name : str
        Column name.
    arch : str
        open_clip model name (``ViT-L-14``, ``ViT-B-32``, ...) or ``hf-hub:org/repo`` or
        ``local-dir:/path`` (a folder with ``open_clip_config.json`` and weights).
    pretrained : str or None
        Weights tag (``openai``, ``laion2b_s32b_b82k``, ...) or a checkpoint file; ``None`` gives
        random weights (speed tests only). Ignored by open_clip for ``hf-hub:``/``local-dir:``.
    w, template, text_cache_size
        See :class:`~metrics_adapters.embedding.base.EmbeddingMetric`.
    download_dir : str or None
        Where open_clip keeps downloaded weights (does not change scores).
    """

    paper = "Hessel et al. 2021, CLIPScore (arXiv:2104.08718)"

    def __init__(self, name: str = "clipscore", arch: str = "ViT-L-14", pretrained: str | None = "openai",
                 w: float = 1.0, template: str = "{prompt}", text_cache_size: int = 4096,
                 download_dir: str | None = None) -> None:
        super().__init__(name, w=w, template=template, text_cache_size=text_cache_size)
        self.arch = str(arch)
        self.pretrained = None if pretrained in (None, "") else str(pretrained)
        self.download_dir = download_dir
        self._model = self._tokenizer = self._transform = None

    def settings(self) -> dict[str, Any]:
        sig = local_signature(self.arch) if self.arch.startswith("local-dir:") else local_signature(self.pretrained)
        return {"arch": self.arch, "pretrained": self.pretrained, "weights": sig, **super().settings()}

    def model_ids(self) -> dict[str, Any]:
        return {"arch": self.arch, "pretrained": self.pretrained, "library": "open_clip"}

    def hub_models(self) -> tuple[HubModel, ...]:
        if self.arch.startswith("hf-hub:"):
            return (HubModel(self.arch.removeprefix("hf-hub:"), "arch", local="local-dir:DIR",
                             files=OPEN_CLIP_WEIGHTS, cache_dir=self.download_dir),)
        if self.arch.startswith("local-dir:") or self.pretrained is None or Path(self.pretrained).expanduser().exists():
            return ()
        hub = open_clip_hub_file(self.arch, self.pretrained)
        if hub is None:  # weights from a URL (open_clip's own cache) or an unknown tag: open_clip decides
            return ()
        repo, fname = hub
        files = (fname,) if fname else OPEN_CLIP_WEIGHTS
        return (HubModel(repo, "pretrained", local=f"DIR/{files[0]}", files=files, cache_dir=self.download_dir),)

    def _load(self, device: str, dtype: str | None) -> None:

        if self.pretrained is None:
            log.warning("%s: open_clip %s with pretrained=None has RANDOM weights: scores are meaningless",
                        self.name, self.arch)
        model, transform, self._tokenizer = load_open_clip(self.arch, self.pretrained, device=device,
                                                           cache_dir=self.download_dir, owner=self.name)
        self._model = model.eval()
        self._transform = transform
        self._ctx = int(getattr(self._tokenizer, "context_length", None) or model.context_length)

    def context_length(self) -> int:
        return self._ctx

    def _preprocess(self, image):
        return self._transform(image)

    def _split_preprocess(self):
        from ..pipeline import split_torchvision_transform

        spec = split_torchvision_transform(self._transform)
        if spec is not None:
            spec = replace(spec, dtype=str(next(self._model.parameters()).dtype).removeprefix("torch."))
        return spec

    def _encode_images(self, pixels):
        return self._model.encode_image(pixels)

    def _encode_texts(self, texts: list[str]):
        # open_clip's tokenizers cut at the context themselves (keeping the end-of-text token);
        # the engine counts those cuts through truncated_prompts().
        return self._model.encode_text(self._tokenizer(texts, context_length=self._ctx).to(self.device))

    def _token_counts(self, texts: list[str]) -> list[int]:
        tok = self._tokenizer
        if hasattr(tok, "encode") and hasattr(tok, "sot_token_id"):  # open_clip SimpleTokenizer
            return [len(tok.encode(t)) + 2 for t in texts]
        inner = getattr(tok, "tokenizer", None)  # HFTokenizer / SigLipTokenizer wrap a transformers one
        if inner is not None:
            return [len(ids) for ids in inner(texts, truncation=False, verbose=False)["input_ids"]]
        raise TypeError(f"{self.name}: cannot count tokens with open_clip tokenizer {type(tok).__name__}")

    def _estimate_flops(self) -> float:
        import torch

        from ..flops import conv_tower_flops, dense_params, transformer_flops

        visual = self._model.visual
        grid = getattr(visual, "grid_size", None)
        if grid is not None and hasattr(visual, "transformer"):  # ViT tower: 2 x N x tokens
            tokens = int(grid[0]) * int(grid[1]) + (1 if getattr(visual, "class_embedding", None) is not None else 0)
            vision = transformer_flops(dense_params(visual), tokens)
        else:  # ResNet / timm towers: count from layer shapes
            size = getattr(visual, "image_size", 224)
            size = tuple(size) if isinstance(size, tuple | list) else (int(size), int(size))
            vision = conv_tower_flops(visual, torch.zeros(1, 3, *size, device=self.device))
        # Text tower: every child but the visual one (the final projection, a bare parameter
        # applied once per prompt, is left out like the other per-sequence work).
        text_params = sum(dense_params(m) for n, m in self._model.named_children() if n != "visual")
        return vision + transformer_flops(text_params, self._ctx)


class HFCLIPScore(HFEmbeddingMetric):
    """CLIPScore on a transformers ``CLIPModel`` (hub id or local folder).

    Parameters
    ----------
    name : str
        Column name.
    model : str
        Default ``openai/clip-vit-large-patch14`` (the papers' ViT-L/14).
    revision, w, template, text_cache_size
        See :class:`~metrics_adapters.embedding.hf.HFEmbeddingMetric`.
    """

    paper = "Hessel et al. 2021, CLIPScore (arXiv:2104.08718)"

    model_class = "CLIPModel"

    def __init__(self, name: str = "clipscore_hf", model: str = "openai/clip-vit-large-patch14",
                 revision: str | None = None, w: float = 1.0, template: str = "{prompt}",
                 text_cache_size: int = 4096) -> None:
        super().__init__(name, model=model, revision=revision, w=w, template=template,
                         text_cache_size=text_cache_size)
