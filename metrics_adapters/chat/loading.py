"""Parameter counting for the chat models; loading itself lives in :mod:`metrics_adapters.hub`
(:func:`~metrics_adapters.hub.load_pretrained`, the one transformers loader of every family)."""

from __future__ import annotations

from typing import Any

__all__ = ["count_params"]


def count_params(net: Any) -> float | None:
    return None if net is None else float(sum(p.numel() for p in net.parameters()))
