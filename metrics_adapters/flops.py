"""Cost model: analytic FLOPs estimates and one-shot measurement.

TS2 (appendix A.3) prices a forward pass of a transformer at ``2 x N`` FLOPs per token, ``N`` the
parameter count (OpenAI's estimate). The helpers here apply that rule to the parameters that
are actually multiplied per token (weight matrices; not embedding tables, positional tables or
norms), give the same count for convolutional towers from their layer shapes, and measure the
real count with :class:`torch.utils.flop_counter.FlopCounterMode`. Attention's score matmuls
(``~4 x tokens^2 x width`` per layer) are left out of the estimate, as in A.3: they are small at
CLIP's sequence lengths.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["transformer_flops", "dense_params", "conv_tower_flops", "measure_flops", "api_flops"]

# Parameters named like these are looked up or added per token, never multiplied.
_NOT_MATMUL = ("positional_embedding", "position_embedding", "pos_embed", "class_embedding", "cls_token",
               "token_type_embeddings", "logit_scale", "logit_bias")


def transformer_flops(params: float, tokens: float) -> float:
    """``2 * params * tokens``: FLOPs of one forward pass over ``tokens`` tokens (TS2 A.3).

    Examples
    --------
    >>> transformer_flops(1e6, 77)
    154000000.0
    """
    if params < 0 or tokens < 0:
        raise ValueError(f"expected non-negative params and tokens, got {params} and {tokens}")
    return 2.0 * float(params) * float(tokens)


def api_flops(params: float, calls: float, tokens_per_call: float) -> float:
    """FLOPs of ``calls`` forward calls of ``tokens_per_call`` tokens to a model of ``params`` parameters.

    For API-backed models, whose parameter counts come from configuration (published estimates).
    """
    return float(calls) * transformer_flops(params, tokens_per_call)


def dense_params(module: Any) -> int:
    """Parameters of ``module`` that are multiplied once per token.

    Counts weight matrices (``ndim >= 2``) outside ``nn.Embedding`` modules and outside
    positional/class-token tables; biases and norms are negligible and left out.
    """
    import torch.nn as nn

    embedding_params = {id(m.weight) for m in module.modules() if isinstance(m, nn.Embedding)}
    total = 0
    for name, p in module.named_parameters():
        if p.ndim < 2 or id(p) in embedding_params:
            continue
        if any(tag in name for tag in _NOT_MATMUL):
            continue
        total += p.numel()
    return total


def conv_tower_flops(module: Any, example: Any) -> float:
    """FLOPs of one forward of a convolutional tower, from its layer shapes.

    Runs ``module(example)`` once (batch of 1) with forward hooks and adds, for every
    ``nn.Conv*`` and ``nn.Linear`` call, ``2 x output elements x (weight elements / output
    channels)``: the multiply-adds its weights do, the convolutional analogue of ``2 x N x tokens``.
    """
    import torch
    import torch.nn as nn

    total = [0.0]

    def hook(mod, _inputs, output):
        out = output[0] if isinstance(output, tuple) else output
        out_ch = mod.out_features if isinstance(mod, nn.Linear) else mod.out_channels
        total[0] += 2.0 * out.numel() * mod.weight.numel() / out_ch

    handles = [m.register_forward_hook(hook) for m in module.modules()
               if isinstance(m, nn.Linear | nn.Conv1d | nn.Conv2d | nn.Conv3d)]
    try:
        with torch.inference_mode():
            module(example)
    finally:
        for h in handles:
            h.remove()
    return total[0]


def measure_flops(fn: Callable[[], Any]) -> float:
    """FLOPs counted by :class:`torch.utils.flop_counter.FlopCounterMode` while ``fn()`` runs.

    Matrix products and convolutions are counted (2 FLOPs per multiply-add); elementwise work
    is not.
    """
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        fn()
    return float(counter.get_total_flops())
