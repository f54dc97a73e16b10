"""The one transformers loader of ts2's generative models: dtype names, device placement, errors.

Every transformers-backed chat, VQA and question-generation model loads through
:func:`load_pretrained`, so all of them read the same dtype names and fail the same way.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DTYPES", "torch_dtype", "load_pretrained", "count_params"]

# Accepted dtype names (the engine passes None for fp32: the checkpoint's own dtype).
DTYPES = ("fp32", "float32", "fp16", "float16", "bf16", "bfloat16")


def torch_dtype(name: str | None):
    """The ``torch.dtype`` for ``name`` (``None`` -> ``None``: the checkpoint's dtype).

    Raises
    ------
    ValueError
        An unknown name; the message lists the valid ones.

    Examples
    --------
    >>> str(torch_dtype("bf16")), torch_dtype(None)
    ('torch.bfloat16', None)
    """
    if name is None:
        return None
    import torch

    table = {"fp32": torch.float32, "float32": torch.float32, "fp16": torch.float16, "float16": torch.float16,
             "bf16": torch.bfloat16, "bfloat16": torch.bfloat16}
    try:
        return table[str(name)]
    except KeyError:
        raise ValueError(f"expected dtype one of {list(DTYPES)} (or null), got {name!r}") from None


def load_pretrained(model_cls: Any, processor_cls: Any, name: str, *, revision: str | None = None,
                    device: str = "cpu", dtype: str | None = None, trust_remote_code: bool = False,
                    owner: str = "model", option: str = "model", **model_kw: Any) -> tuple[Any, Any]:
    """``(model, processor)`` from a hub id or local folder, on ``device`` in eval mode.

    ``processor_cls`` may be ``None`` (no processor). ``model_kw`` goes to the model's
    ``from_pretrained`` (and ``gguf_file``, when given, to the processor's too). ``option`` is the
    config key naming the model, for :func:`metrics_adapters.hub.require_model`'s message.

    Raises
    ------
    ValueError
        An unknown dtype (before anything is read).
    metrics_adapters.hub.ModelUnavailableError
        A hub id that is neither cached nor reachable.
    RuntimeError
        The files cannot be loaded; names ``owner`` and the model, chained ``from`` the cause.
    """
    from ..hub import require_model

    td = torch_dtype(dtype)
    # Before the try: an uncached hub id on an offline machine gets its own one-line error, unwrapped.
    require_model(name, revision, option=option)
    kw: dict[str, Any] = {"trust_remote_code": True} if trust_remote_code else {}
    if revision:
        kw["revision"] = revision
    try:
        proc = None
        if processor_cls is not None:
            pkw = {**kw, **({"gguf_file": model_kw["gguf_file"]} if model_kw.get("gguf_file") else {})}
            proc = processor_cls.from_pretrained(name, **pkw)
        net = model_cls.from_pretrained(name, **kw, **model_kw, **({"dtype": td} if td is not None else {}))
    except Exception as e:
        raise RuntimeError(f"{owner}: could not load {name!r} (a hub id needs the network or the HF cache; a local "
                           f"folder needs config, weights and processor files): {type(e).__name__}: {e}") from e
    net.to(device).eval()
    return net, proc


def count_params(net: Any) -> float | None:
    return None if net is None else float(sum(p.numel() for p in net.parameters()))
