"""Shared-prefix generation for chat VLMs: each image's system + image prefix computed once.

TIFA and DSG ask 5-15 questions about every image. In a LLaVA-style prompt the image's
hundreds of tokens (576 for LLaVA-1.5) and the system text come before the question, so a
plain batch runs the vision tower and the prefill of those tokens once per *question*.
:func:`shared_prefix_generate` instead

1. groups the requests of a batch by their images (object identity: the engine decodes an
   image once and hands the same object to every question about it);
2. runs one forward over each group's longest common token prefix (vision tower included, the
   group's image passed once), batched over the groups, keeping the key/value cache;
3. repeats each group's cache rows for its requests (``Cache.batch_select_indices``) and calls
   ``generate`` on the full prompts with that cache: transformers' prefill then only runs the
   question tokens.

Rows are laid out as ``[pad..., prefix, pad..., suffix]`` with the attention mask zero on the
pads; ``generate`` derives position ids from the mask (cumulative sum), so every real token keeps
the position it has in an unpadded prompt and greedy answers equal those of a plain batched
``generate`` (tested on a tiny LLaVA against one ``generate`` per question). It never passes
image tokens after the prefix: a batch whose suffixes would hold image tokens (an image after
the question) is refused with :class:`PrefixUnsupported`, and the caller generates it plainly.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

__all__ = ["PrefixUnsupported", "PREFIX_CACHE_MODEL_TYPES", "group_rows", "common_prefix_length",
           "shared_prefix_generate"]

#: Architectures whose inputs are ``input_ids``/``attention_mask``/``pixel_values`` with one
#: ``pixel_values`` row per image and plain 1-D positions; ``prefix_cache="auto"`` uses the
#: shared prefix for these only (others, e.g. Qwen2-VL's 3-D rope positions, generate plainly).
PREFIX_CACHE_MODEL_TYPES = frozenset({"llava"})


class PrefixUnsupported(ValueError):
    """This batch cannot share prefixes (see the message); generate it without."""


def group_rows(keys: Sequence[Hashable]) -> tuple[list[int], list[int]]:
    """Group index of every row and the first row of every group, in first-seen order.

    Examples
    --------
    >>> group_rows(["a", "b", "a", "c"])
    ([0, 1, 0, 2], [0, 1, 3])
    """
    index: dict[Hashable, int] = {}
    of_row, firsts = [], []
    for i, k in enumerate(keys):
        if k not in index:
            index[k] = len(firsts)
            firsts.append(i)
        of_row.append(index[k])
    return of_row, firsts


def common_prefix_length(rows: Sequence[Sequence[int]]) -> int:
    """Length of the longest common prefix of token rows, at most ``min(len) - 1`` (every row
    keeps at least one token for ``generate`` to prefill).

    Examples
    --------
    >>> common_prefix_length([[1, 2, 3, 4], [1, 2, 5]]), common_prefix_length([[1, 2], [1, 2]])
    (2, 1)
    """
    cap = min(len(r) for r in rows) - 1
    n = 0
    while n < cap and all(r[n] == rows[0][n] for r in rows[1:]):
        n += 1
    return n


def _left_pad(rows: list[list[int]], pad_id: int, torch) -> tuple[Any, Any]:
    width = max((len(r) for r in rows), default=0)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        if r:
            ids[i, width - len(r):] = torch.tensor(r, dtype=torch.long)
            mask[i, width - len(r):] = 1
    return ids, mask


def _image_token_id(config) -> int:
    for name in ("image_token_id", "image_token_index"):  # transformers 5 / 4 spelling
        if getattr(config, name, None) is not None:
            return int(getattr(config, name))
    raise PrefixUnsupported("the model config names no image token id")


def shared_prefix_generate(model, enc: dict[str, Any], image_keys: Sequence[Hashable], **gen_kw: Any):
    """Greedy/beam ``generate`` of a left-padded batch with one prefix forward per image group.

    Parameters
    ----------
    model
        A transformers image-text-to-text model (``PREFIX_CACHE_MODEL_TYPES``).
    enc : dict
        The processor's batch: ``input_ids``, ``attention_mask`` (left padding), ``pixel_values``
        with the same number of rows per request, in request order.
    image_keys : sequence
        One hashable per request; requests with equal keys show the same images.
    gen_kw
        Passed to ``generate`` (``max_new_tokens``, ``pad_token_id`` (required: it pads the
        prefix and question rows), ...).

    Returns
    -------
    (sequences, n_in)
        ``generate``'s output and the prompt width it starts after.

    Raises
    ------
    PrefixUnsupported
        Inputs other than ids, mask and ``pixel_values`` (or a number of ``pixel_values`` rows
        that is not a multiple of the batch), a config without an image token id, or image
        tokens outside the shared prefix.
    """
    import torch

    extra = sorted(set(enc) - {"input_ids", "attention_mask", "pixel_values"})
    if extra:
        raise PrefixUnsupported(f"expected only input_ids, attention_mask and pixel_values, got also {extra}")
    image_token_id = _image_token_id(model.config)
    pad_id = gen_kw["pad_token_id"]
    ids, mask = enc["input_ids"], enc["attention_mask"]
    rows = [row[m.bool()].tolist() for row, m in zip(ids.cpu(), mask.cpu(), strict=True)]
    of_row, firsts = group_rows(image_keys)
    members: list[list[int]] = [[] for _ in firsts]
    for i, g in enumerate(of_row):
        members[g].append(i)
    cut = [common_prefix_length([rows[i] for i in m]) for m in members]
    suffixes = [rows[i][cut[of_row[i]]:] for i in range(len(rows))]
    if any(image_token_id in s for s in suffixes):
        raise PrefixUnsupported("image tokens after the shared prefix (the template puts the image after the question)")
    pixels = enc.get("pixel_values")
    pre_ids, pre_mask = _left_pad([rows[i][:c] for i, c in zip(firsts, cut, strict=True)], pad_id, torch)
    pre_ids, pre_mask = pre_ids.to(ids.device), pre_mask.to(ids.device)
    kw: dict[str, Any] = {}
    if pixels is not None:
        images_per_row, rest = divmod(pixels.shape[0], len(rows))
        if rest:
            raise PrefixUnsupported(f"expected the same number of pixel_values rows per request, got {pixels.shape[0]} "
                                    f"rows for {len(rows)} requests")
        pick = torch.tensor([f * images_per_row + j for f in firsts for j in range(images_per_row)],
                            device=pixels.device)
        kw["pixel_values"] = pixels.index_select(0, pick)
    positions = (pre_mask.cumsum(-1) - 1).clamp(min=0)
    with torch.inference_mode():
        out = model(input_ids=pre_ids, attention_mask=pre_mask, position_ids=positions, use_cache=True,
                    logits_to_keep=1, **kw)
        cache = out.past_key_values
        cache.batch_select_indices(torch.tensor(of_row, device=ids.device))
        suf_ids, suf_mask = _left_pad(suffixes, pad_id, torch)
        full_ids = torch.cat([pre_ids[of_row], suf_ids.to(ids.device)], dim=1)
        full_mask = torch.cat([pre_mask[of_row], suf_mask.to(ids.device)], dim=1)
        seqs = model.generate(input_ids=full_ids, attention_mask=full_mask, past_key_values=cache, **gen_kw)
    return seqs, full_ids.shape[1]
