"""mPLUG-Owl2 (LLaMA-2) ported to current transformers: the architecture of the TS2 paper's mPLUG.

The authors of T2IScoreScore ran ``MAGAer13/mplug-owl2-llama2-7b`` through mPLUG-Owl2's own package
(``mplug_owl2``, github.com/X-PLUG/mPLUG-Owl, folder ``mPLUG-Owl2``). That package is not on PyPI, pins
transformers 4.31 and monkey-patches transformers' LLaMA classes at import
(``model/modeling_llama2.py: replace_llama_modality_adaptive``), and the checkpoint ships no remote
code, so it loads neither through ``trust_remote_code`` nor beside a current transformers. This
module re-implements the same modules under the same parameter names, so the checkpoint's weights
load as they are:

- ``model.vision_model``: a ViT-L/14 at 448 px with a class token, learned positions, pre- and
  post-LayerNorm, QuickGELU MLPs (``model/visual_encoder.py``: ``MplugOwlVisionModel``);
- ``model.visual_abstractor``: 64 learned queries cross-attending (with sin-cos positions) to the
  ViT tokens, SwiGLU MLPs with an inner LayerNorm, a projection to the LLM width and an end-of-image
  embedding ``vit_eos``: 65 image tokens (``MplugOwlVisualAbstractorModel``);
- ``model.layers``: LLaMA-2 decoder layers whose two RMSNorms and key/value projections have one
  copy for text and one for image tokens ("modality-adaptive", ``model/multiway.py``,
  ``model/modeling_llama2.py``); queries, output projection and MLP are shared.

One difference of form, none of arithmetic: the original splices the 65 image embeddings in
place of the single ``IMAGE_TOKEN_INDEX`` (-200) token inside ``forward``
(``model/modeling_mplug_owl2.py:66-197``), so the sequence grows inside the model; here the prompt
already holds 65 copies of -200 (:func:`expand_image_tokens`), so sequence, attention mask and
KV cache keep one length and transformers' ``generate`` runs unchanged. Positions count the
non-padding tokens (the original runs one unpadded prompt at a time: the same positions).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import nn
from transformers import GenerationMixin, PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutputWithPast

__all__ = ["IMAGE_TOKEN_INDEX", "MplugOwl2Config", "MplugOwl2ForCausalLM", "expand_image_tokens"]

IMAGE_TOKEN_INDEX = -200  # mplug_owl2/constants.py:8

# The sub-configs' defaults: mplug_owl2/model/configuration_mplug_owl2.py (MplugOwlVisionConfig,
# MplugOwlVisualAbstractorConfig), i.e. the 7b checkpoint's.
VISION_DEFAULTS = {"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24, "num_attention_heads": 16,
                   "image_size": 448, "patch_size": 14, "hidden_act": "quick_gelu", "layer_norm_eps": 1e-6,
                   "use_cls_token": True, "use_post_layernorm": True}
ABSTRACTOR_DEFAULTS = {"hidden_size": 1024, "num_hidden_layers": 6, "num_attention_heads": 16,
                       "intermediate_size": 2816, "layer_norm_eps": 1e-6, "encoder_hidden_size": 1024,
                       "num_learnable_queries": 64, "grid_size": 32, "use_cls_token": True, "add_v2t_pos_emb": False}


class MplugOwl2Config(PretrainedConfig):
    """LLaMA fields plus ``visual_config = {"visual_model": {...}, "visual_abstractor": {...}}``
    (``configuration_mplug_owl2.py: MPLUGOwl2Config``); reads the checkpoint's ``config.json``."""

    model_type = "mplug_owl2"

    def __init__(self, vocab_size: int = 32000, hidden_size: int = 4096, intermediate_size: int = 11008,
                 num_hidden_layers: int = 32, num_attention_heads: int = 32, num_key_value_heads: int | None = None,
                 hidden_act: str = "silu", max_position_embeddings: int = 4096, rms_norm_eps: float = 1e-5,
                 rope_theta: float = 10000.0, rope_scaling: dict | None = None, attention_bias: bool = False,
                 initializer_range: float = 0.02, visual_config: dict | None = None, pad_token_id: int | None = None,
                 bos_token_id: int = 1, eos_token_id: int = 2, tie_word_embeddings: bool = False, **kw: Any) -> None:
        self.vocab_size, self.hidden_size, self.intermediate_size = vocab_size, hidden_size, intermediate_size
        self.num_hidden_layers, self.num_attention_heads = num_hidden_layers, num_attention_heads
        self.num_key_value_heads = num_attention_heads if num_key_value_heads is None else num_key_value_heads
        self.hidden_act, self.max_position_embeddings, self.rms_norm_eps = hidden_act, max_position_embeddings, rms_norm_eps
        self.rope_theta, self.attention_bias = rope_theta, attention_bias
        if rope_scaling is not None:  # (transformers 5 warns on a rope_scaling attribute even when null)
            self.rope_scaling = rope_scaling
        self.initializer_range = initializer_range
        vc = visual_config or {}
        self.visual_config = {"visual_model": {**VISION_DEFAULTS, **vc.get("visual_model", {})},
                              "visual_abstractor": {**ABSTRACTOR_DEFAULTS, **vc.get("visual_abstractor", {})}}
        super().__init__(pad_token_id=pad_token_id, bos_token_id=bos_token_id, eos_token_id=eos_token_id,
                         tie_word_embeddings=tie_word_embeddings, **kw)

    def check(self) -> None:
        """Refuse variants this port does not implement (none of them is the 7b checkpoint's)."""
        v, a = self.visual_config["visual_model"], self.visual_config["visual_abstractor"]
        # transformers 5 turns rope_scaling null into {"rope_type": "default", ...}: plain RoPE either way
        rope = getattr(self, "rope_scaling", None) or {}
        bad = {k: x for k, x in (("rope_scaling", rope if rope.get("rope_type", rope.get("type", "default")) != "default"
                                  else None), ("visual_model.use_cls_token", not v["use_cls_token"]),
                                 ("visual_abstractor.use_cls_token", not a["use_cls_token"])) if x}
        if bad:
            raise ValueError(f"MplugOwl2Config: expected no rope_scaling and class tokens in the vision model and "
                             f"abstractor (as in MAGAer13/mplug-owl2-llama2-7b), got {bad}")
        if v["image_size"] // v["patch_size"] != a["grid_size"]:
            raise ValueError(f"MplugOwl2Config: expected visual_abstractor.grid_size = image_size // patch_size = "
                             f"{v['image_size'] // v['patch_size']}, got {a['grid_size']}")

    @property
    def n_image_tokens(self) -> int:
        """Embeddings one image becomes in the LLM: the learned queries plus ``vit_eos``."""
        return int(self.visual_config["visual_abstractor"]["num_learnable_queries"]) + 1


# ---- sin-cos positions of the abstractor (visual_encoder.py:34-82, MAE's pos_embed.py) ------------------
def _sincos_1d(dim: int, pos: np.ndarray) -> np.ndarray:
    omega = np.arange(dim // 2, dtype=np.float32)
    omega /= dim / 2.0
    omega = 1.0 / 10000 ** omega
    out = np.einsum("m,d->md", pos.reshape(-1), omega)
    return np.concatenate([np.sin(out), np.cos(out)], axis=1)


def _sincos_2d(dim: int, grid_size: int, cls_token: bool) -> np.ndarray:
    grid = np.stack(np.meshgrid(np.arange(grid_size, dtype=np.float32), np.arange(grid_size, dtype=np.float32)), 0)
    grid = grid.reshape([2, 1, grid_size, grid_size])
    emb = np.concatenate([_sincos_1d(dim // 2, grid[0]), _sincos_1d(dim // 2, grid[1])], axis=1)
    return np.concatenate([np.zeros([1, dim]), emb], axis=0) if cls_token else emb


# ---- vision encoder (visual_encoder.py:85-457) -------------------------------------------------------
class _VisionEmbeddings(nn.Module):
    def __init__(self, c: dict) -> None:
        super().__init__()
        h = c["hidden_size"]
        self.cls_token = nn.Parameter(torch.randn(1, 1, h))
        self.patch_embed = nn.Conv2d(3, h, kernel_size=c["patch_size"], stride=c["patch_size"], bias=False)
        n = (c["image_size"] // c["patch_size"]) ** 2
        self.position_embedding = nn.Parameter(torch.randn(1, n + 1, h))
        self.pre_layernorm = nn.LayerNorm(h, eps=c["layer_norm_eps"])

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(pixel_values).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], 1, -1).to(x.dtype), x], dim=1)
        x = x + self.position_embedding[:, : x.shape[1]].to(x.dtype)
        return self.pre_layernorm(x)


class _VisionAttention(nn.Module):
    def __init__(self, c: dict) -> None:
        super().__init__()
        self.num_heads = c["num_attention_heads"]
        self.scale = (c["hidden_size"] // self.num_heads) ** -0.5
        self.query_key_value = nn.Linear(c["hidden_size"], 3 * c["hidden_size"])
        self.dense = nn.Linear(c["hidden_size"], c["hidden_size"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        # per head: [q | k | v] (the checkpoint's layout, visual_encoder.py:161-163)
        q, k, v = self.query_key_value(x).reshape(b, n, self.num_heads, 3, d // self.num_heads).permute(3, 0, 2, 1, 4)
        p = torch.softmax((q @ k.transpose(-1, -2)) * self.scale, dim=-1)
        return self.dense((p @ v).permute(0, 2, 1, 3).reshape(b, n, d))


class _VisionMLP(nn.Module):
    def __init__(self, c: dict) -> None:
        super().__init__()
        from transformers.activations import ACT2FN

        self.activation_fn = ACT2FN[c["hidden_act"]]
        self.fc1 = nn.Linear(c["hidden_size"], c["intermediate_size"])
        self.fc2 = nn.Linear(c["intermediate_size"], c["hidden_size"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.activation_fn(self.fc1(x)))


class _VisionLayer(nn.Module):
    def __init__(self, c: dict) -> None:
        super().__init__()
        self.self_attn = _VisionAttention(c)
        self.input_layernorm = nn.LayerNorm(c["hidden_size"], eps=c["layer_norm_eps"])
        self.mlp = _VisionMLP(c)
        self.post_attention_layernorm = nn.LayerNorm(c["hidden_size"], eps=c["layer_norm_eps"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class _VisionEncoder(nn.Module):
    def __init__(self, c: dict) -> None:
        super().__init__()
        self.layers = nn.ModuleList([_VisionLayer(c) for _ in range(c["num_hidden_layers"])])


class _VisionModel(nn.Module):
    def __init__(self, c: dict) -> None:
        super().__init__()
        self.embeddings = _VisionEmbeddings(c)
        self.encoder = _VisionEncoder(c)
        self.post_layernorm = nn.LayerNorm(c["hidden_size"], eps=c["layer_norm_eps"]) if c["use_post_layernorm"] else None

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        x = self.embeddings(pixel_values)
        for layer in self.encoder.layers:
            x = layer(x)
        return self.post_layernorm(x) if self.post_layernorm is not None else x


# ---- visual abstractor (visual_encoder.py:462-900) ---------------------------------------------------
class _AbstractorMLP(nn.Module):
    def __init__(self, c: dict) -> None:
        super().__init__()
        self.act = nn.SiLU()
        self.w1 = nn.Linear(c["hidden_size"], c["intermediate_size"])
        self.w2 = nn.Linear(c["intermediate_size"], c["hidden_size"])
        self.w3 = nn.Linear(c["hidden_size"], c["intermediate_size"])
        self.ffn_ln = nn.LayerNorm(c["intermediate_size"], eps=c["layer_norm_eps"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(self.ffn_ln(self.act(self.w1(x)) * self.w3(x)))


class _AbstractorMHA(nn.Module):
    def __init__(self, c: dict) -> None:
        super().__init__()
        h = c["hidden_size"]
        self.num_heads = c["num_attention_heads"]
        self.head_dim = h // self.num_heads
        self.query = nn.Linear(h, h)
        self.key = nn.Linear(c["encoder_hidden_size"], h)
        self.value = nn.Linear(c["encoder_hidden_size"], h)
        # The original's q_pos_embed/k_pos_embed buffers are fixed sin-cos tables: computed here, not
        # loaded (transformers 5 builds models on the meta device, where a computed buffer stays empty).
        self._n_queries, self._grid, self._cls = c["num_learnable_queries"], c["grid_size"], c["use_cls_token"]
        self._pos: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}

    def _pos_tables(self, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        key = (like.device, like.dtype)
        if key not in self._pos:
            h = self.num_heads * self.head_dim
            q = torch.from_numpy(_sincos_1d(h, np.arange(self._n_queries, dtype=np.float32))).float()
            k = torch.from_numpy(_sincos_2d(h, self._grid, cls_token=self._cls)).float()
            self._pos[key] = (q.to(like.device, like.dtype), k.to(like.device, like.dtype))
        return self._pos[key]

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(*x.shape[:-1], self.num_heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        # keys = [normed queries; normed image tokens]; the masks of the original are all zeros
        q_pos, k_pos = self._pos_tables(queries)
        k = self._heads(self.key(keys + torch.cat([q_pos, k_pos], dim=0).unsqueeze(0)))
        v = self._heads(self.value(keys))
        q = self._heads(self.query(queries + q_pos.unsqueeze(0)))
        p = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.head_dim), dim=-1)
        out = (p @ v).permute(0, 2, 1, 3).contiguous()
        return out.view(*out.shape[:-2], -1)


class _AbstractorOutput(nn.Module):
    def __init__(self, c: dict) -> None:
        super().__init__()
        d = c["encoder_hidden_size"]
        self.out_proj = nn.Linear(d, d)
        self.norm2 = nn.LayerNorm(d)  # default eps 1e-5, as in the original
        self.mlp = _AbstractorMLP(c)

    def forward(self, context: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        x = residual + self.out_proj(context)
        return x + self.mlp(self.norm2(x))


class _AbstractorCrossAttention(nn.Module):
    def __init__(self, c: dict) -> None:
        super().__init__()
        d = c["encoder_hidden_size"]
        self.attention = _AbstractorMHA(c)
        self.output = _AbstractorOutput(c)
        self.norm1 = nn.LayerNorm(d)
        self.normk = nn.LayerNorm(d)
        if c["add_v2t_pos_emb"]:  # unused in forward; kept so such a checkpoint's keys load
            self.q_pos_embed = nn.Parameter(torch.from_numpy(_sincos_1d(
                d, np.arange(c["num_learnable_queries"], dtype=np.float32))).float(), requires_grad=False)
            self.k_pos_embed = nn.Parameter(torch.from_numpy(_sincos_2d(d, c["grid_size"], c["use_cls_token"])).float(),
                                            requires_grad=False)

    def forward(self, queries: torch.Tensor, image: torch.Tensor) -> torch.Tensor:
        q = self.norm1(queries)  # the residual below is the normed queries (visual_encoder.py:660-678)
        keys = torch.cat([q, self.normk(image)], dim=1)
        return self.output(self.attention(q, keys), q)


class _AbstractorLayer(nn.Module):
    def __init__(self, c: dict) -> None:
        super().__init__()
        self.crossattention = _AbstractorCrossAttention(c)


class _AbstractorEncoder(nn.Module):
    def __init__(self, c: dict) -> None:
        super().__init__()
        self.layers = nn.ModuleList([_AbstractorLayer(c) for _ in range(c["num_hidden_layers"])])


class _VisualAbstractor(nn.Module):
    def __init__(self, c: dict, language_hidden_size: int) -> None:
        super().__init__()
        self.encoder = _AbstractorEncoder(c)
        self.visual_fc = nn.Linear(c["hidden_size"], language_hidden_size)
        self.query_embeds = nn.Parameter(torch.randn(1, c["num_learnable_queries"], c["hidden_size"]))
        self.vit_eos = nn.Parameter(torch.randn(1, 1, language_hidden_size))

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = self.query_embeds.repeat(image.shape[0], 1, 1)
        for layer in self.encoder.layers:
            x = layer.crossattention(x, image)
        x = self.visual_fc(x)
        return torch.cat([x, self.vit_eos.repeat(x.shape[0], 1, 1)], dim=1)


# ---- modality-adaptive LLaMA-2 (multiway.py, modeling_llama2.py) -------------------------------------
class _RMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return self.weight * h.to(dtype)


class _Multiway(nn.Module):
    """One module per modality (0 text, 1 image), each applied to its own tokens (multiway.py:8-34)."""

    def __init__(self, make, n: int = 2) -> None:
        super().__init__()
        self.multiway = nn.ModuleList([make() for _ in range(n)])

    def forward(self, x: torch.Tensor, modality: torch.Tensor) -> torch.Tensor:
        out = None
        for idx, sub in enumerate(self.multiway):
            sel = modality.eq(idx).nonzero(as_tuple=True)
            if sel[0].numel():
                y = sub(x[sel])
                if out is None:
                    out = x.new_empty(*x.shape[:-1], y.shape[-1])
                out[sel] = y
        return out


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class _Attention(nn.Module):
    def __init__(self, cfg: MplugOwl2Config, layer_idx: int) -> None:
        super().__init__()
        h, nh, nkv = cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads
        self.layer_idx, self.num_heads, self.num_kv, self.head_dim = layer_idx, nh, nkv, h // nh
        bias = cfg.attention_bias
        self.q_proj = nn.Linear(h, nh * self.head_dim, bias=bias)
        self.k_proj = _Multiway(lambda: nn.Linear(h, nkv * self.head_dim, bias=bias))
        self.v_proj = _Multiway(lambda: nn.Linear(h, nkv * self.head_dim, bias=bias))
        self.o_proj = nn.Linear(nh * self.head_dim, h, bias=bias)
        self.rope_theta = float(cfg.rope_theta)

    def forward(self, x, modality, positions, mask, cache) -> torch.Tensor:
        b, n, _ = x.shape
        q = self.q_proj(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x, modality).view(b, n, self.num_kv, self.head_dim).transpose(1, 2)
        v = self.v_proj(x, modality).view(b, n, self.num_kv, self.head_dim).transpose(1, 2)
        # RoPE as transformers 4.31's LlamaRotaryEmbedding (computed per call: see _AbstractorMHA)
        inv_freq = 1.0 / (self.rope_theta ** (torch.arange(0, self.head_dim, 2, device=x.device).float() / self.head_dim))
        freqs = positions[:, :, None].float() * inv_freq[None, None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().to(x.dtype)[:, None], emb.sin().to(x.dtype)[:, None]
        q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
        if cache is not None:
            k, v = cache.update(k, v, self.layer_idx)
        if self.num_kv != self.num_heads:
            k = k.repeat_interleave(self.num_heads // self.num_kv, dim=1)
            v = v.repeat_interleave(self.num_heads // self.num_kv, dim=1)
        w = (q @ k.transpose(2, 3)) / math.sqrt(self.head_dim) + mask
        w = torch.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        return self.o_proj((w @ v).transpose(1, 2).reshape(b, n, -1))


class _MLP(nn.Module):
    def __init__(self, cfg: MplugOwl2Config) -> None:
        super().__init__()
        from transformers.activations import ACT2FN

        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)
        self.act_fn = ACT2FN[cfg.hidden_act]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class _DecoderLayer(nn.Module):
    def __init__(self, cfg: MplugOwl2Config, layer_idx: int) -> None:
        super().__init__()
        self.self_attn = _Attention(cfg, layer_idx)
        self.mlp = _MLP(cfg)
        self.input_layernorm = _Multiway(lambda: _RMSNorm(cfg.hidden_size, cfg.rms_norm_eps))
        self.post_attention_layernorm = _Multiway(lambda: _RMSNorm(cfg.hidden_size, cfg.rms_norm_eps))

    def forward(self, x, modality, positions, mask, cache) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x, modality), modality, positions, mask, cache)
        return x + self.mlp(self.post_attention_layernorm(x, modality))


class _Model(nn.Module):
    """``model.*`` of the checkpoint: LLaMA body plus ``vision_model`` and ``visual_abstractor``."""

    def __init__(self, cfg: MplugOwl2Config) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size, cfg.pad_token_id)
        self.layers = nn.ModuleList([_DecoderLayer(cfg, i) for i in range(cfg.num_hidden_layers)])
        self.norm = _RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.vision_model = _VisionModel(cfg.visual_config["visual_model"])
        self.visual_abstractor = _VisualAbstractor(cfg.visual_config["visual_abstractor"], cfg.hidden_size)


class MplugOwl2ForCausalLM(PreTrainedModel, GenerationMixin):
    """``MPLUGOwl2LlamaForCausalLM`` (``model/modeling_mplug_owl2.py:213``) with the image tokens
    expanded in the prompt (see the module docstring).

    ``forward(input_ids, attention_mask, images, past_key_values)``: ``input_ids`` hold
    ``config.n_image_tokens`` copies of :data:`IMAGE_TOKEN_INDEX` per image, in prompt order, and
    ``images`` one ``(3, H, W)`` tensor per image (all images of the batch, in that order).
    """

    config_class = MplugOwl2Config
    base_model_prefix = "model"
    _no_split_modules = ["_DecoderLayer", "_VisionLayer"]
    _supports_cache_class = True
    # fixed tables the original saved with the weights (RoPE's inv_freq under transformers 4.31, the
    # abstractor's sin-cos positions): recomputed here
    _keys_to_ignore_on_load_unexpected = [r"rotary_emb\.inv_freq", r"\.attention\.[qk]_pos_embed"]

    def __init__(self, config: MplugOwl2Config) -> None:
        config.check()
        super().__init__(config)
        self.model = _Model(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def get_input_embeddings(self) -> nn.Module:
        return self.model.embed_tokens

    def set_input_embeddings(self, value: nn.Module) -> None:
        self.model.embed_tokens = value

    def get_output_embeddings(self) -> nn.Module:
        return self.lm_head

    def encode_images(self, images: torch.Tensor) -> torch.Tensor:
        """``(n, n_image_tokens, hidden)``: ViT -> abstractor (modeling_mplug_owl2.py:225-228)."""
        return self.model.visual_abstractor(self.model.vision_model(images))

    def forward(self, input_ids: torch.LongTensor, attention_mask: torch.Tensor | None = None,
                images: torch.Tensor | None = None, cache: Any = None, use_cache: bool | None = None,
                position_ids: torch.LongTensor | None = None, past_key_values: Any = None,
                **kwargs: Any) -> CausalLMOutputWithPast:
        from transformers import DynamicCache

        past_key_values = cache if cache is not None else past_key_values  # transformers >= 5.2 says cache

        b, n = input_ids.shape
        is_img = input_ids == IMAGE_TOKEN_INDEX
        x = self.model.embed_tokens(input_ids.clamp(min=0))
        if is_img.any():
            if images is None:
                raise ValueError(f"MplugOwl2ForCausalLM: expected images for {int(is_img.sum())} image tokens, got none")
            feats = self.encode_images(images.to(x.dtype)).reshape(-1, x.shape[-1])
            if feats.shape[0] != int(is_img.sum()):
                raise ValueError(f"MplugOwl2ForCausalLM: expected {int(is_img.sum())} image embeddings "
                                 f"({self.config.n_image_tokens} per image), got {feats.shape[0]}")
            x = x.masked_scatter(is_img[..., None], feats.to(x.dtype))
        if use_cache is not False and past_key_values is None:
            past_key_values = DynamicCache()
        past = past_key_values.get_seq_length() if past_key_values is not None else 0
        if attention_mask is None:
            attention_mask = torch.ones(b, past + n, dtype=torch.long, device=x.device)
        am = attention_mask.bool()
        # positions count real tokens (left padding gets the positions an unpadded prompt has)
        positions = (am.long().cumsum(-1) - 1).clamp(min=0)[:, -n:]
        q_abs = torch.arange(past, past + n, device=x.device)
        allowed = (torch.arange(past + n, device=x.device)[None, :] <= q_abs[:, None])[None] & am[:, None, :]
        mask = torch.zeros(allowed.shape, dtype=x.dtype, device=x.device).masked_fill(~allowed, torch.finfo(x.dtype).min)
        mask = mask[:, None]
        modality = is_img.long()
        for layer in self.model.layers:
            x = layer(x, modality, positions, mask, past_key_values)
        logits = self.lm_head(self.model.norm(x)).float()
        return CausalLMOutputWithPast(logits=logits, past_key_values=past_key_values)


def expand_image_tokens(ids: list[int], n_image_tokens: int) -> list[int]:
    """Each :data:`IMAGE_TOKEN_INDEX` of a tokenised prompt repeated ``n_image_tokens`` times (the
    slots the model fills with one image's embeddings)."""
    out: list[int] = []
    for t in ids:
        out.extend([t] * n_image_tokens if t == IMAGE_TOKEN_INDEX else [t])
    return out
