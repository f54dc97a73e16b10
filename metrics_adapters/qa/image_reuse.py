"""One vision-tower pass per distinct image in a batch of VQA requests.

TIFA and DSG ask 5 to 30 questions of every image, and the engine hands a VQA backend the
questions of an image next to each other. BLIP-style models (BLIP VQA, InstructBLIP) run the
image through their vision tower, then condition a text model on the features; the tower is most
of the cost (ViT-B/16 at 384 px is 577 tokens, a question 10 to 20). So a batch is preprocessed
and encoded once per *distinct* image and the features are repeated for each question.

BLIP VQA indexes the tower's output itself (:meth:`~.vqa.BlipVQA._question_states`, which also
masks question padding). InstructBLIP keeps its own ``generate`` and gets the repetition from a
forward hook on the vision tower (:func:`repeat_vision_outputs`), so the model's code still runs
every other step. Either way an answer is the one ``generate`` gives for the question alone
(tested against it).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import contextmanager
from typing import Any

__all__ = ["distinct_images", "repeat_vision_outputs", "blip_question_states"]


def distinct_images(images: Sequence[Any]) -> tuple[list[Any], list[int]]:
    """The distinct images of a batch (by object identity, first-seen order) and, for each input
    position, the index of its image in that list.

    Identity, not content: the engine decodes an image once and passes the same object with each
    of its questions; two equal but separate arrays are encoded twice, which costs time, not
    correctness.

    Examples
    --------
    >>> a, b = object(), object()
    >>> imgs, index = distinct_images([a, a, b, a])
    >>> len(imgs), index
    (2, [0, 0, 1, 0])
    """
    from ..chat.prefix_cache import group_rows

    index, firsts = group_rows([id(im) for im in images])
    return [images[i] for i in firsts], index


@contextmanager
def repeat_vision_outputs(vision_model, index: Sequence[int]):
    """While active, every output tensor of ``vision_model`` whose first dimension is the number of
    distinct images is repeated to ``len(index)`` rows (row ``i`` = image ``index[i]``).

    The model is then called with the distinct images' pixels and the full batch of questions.

    Raises
    ------
    ValueError
        The vision tower returned a batch of another size than ``max(index) + 1``.
    """
    import torch

    n_distinct = max(index) + 1 if len(index) else 0
    rows: dict[Any, torch.Tensor] = {}

    def take(v):
        if isinstance(v, torch.Tensor) and v.dim() > 0:
            if v.shape[0] != n_distinct:
                raise ValueError(f"expected the vision tower to return {n_distinct} images, got a batch of "
                                 f"{v.shape[0]}")
            if v.device not in rows:
                rows[v.device] = torch.as_tensor(list(index), dtype=torch.long, device=v.device)
            return v.index_select(0, rows[v.device])
        if isinstance(v, tuple):
            return tuple(take(x) for x in v)
        return v

    def hook(module, args, out):
        if hasattr(out, "keys"):  # a transformers ModelOutput: replace its fields in place
            for k in list(out.keys()):
                out[k] = take(out[k])
            return out
        return take(out)

    handle = vision_model.register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


def blip_question_states(net, inputs, index: Sequence[int]):
    """Yield ``(rows, states)`` for each group of questions of equal token length: the BLIP VQA
    question encoder's output for those rows of a batch, over their images' features.

    ``inputs`` are the processor's (``pixel_values`` of the distinct images, right-padded
    ``input_ids``/``attention_mask`` of every question); ``index`` maps each question to its image.
    Each distinct image goes through the vision tower once.

    Why groups: these are the steps of ``BlipForQuestionAnswering.generate``, whose answer decoder
    attends to every question position, padding included (transformers 5 drops the cross-attention
    mask in BLIP's text model), so a padded question is answered differently in a batch than alone.
    Questions of one length need no padding: each answer is the one ``generate`` gives for that
    question alone (tested), whatever the batch.
    """
    import torch

    img = net.vision_model(pixel_values=inputs["pixel_values"])[0]
    index = torch.as_tensor(list(index), device=img.device)
    lengths = inputs["attention_mask"].sum(dim=1)  # right padding: the first `length` ids are real
    for n in lengths.unique().tolist():
        rows = torch.nonzero(lengths == n).flatten()
        feats = img.index_select(0, index[rows.to(img.device)])
        ones = torch.ones(feats.shape[:-1], dtype=torch.long, device=feats.device)
        ids = inputs["input_ids"][rows, :n]
        q = net.text_encoder(input_ids=ids, attention_mask=torch.ones_like(ids), encoder_hidden_states=feats,
                             encoder_attention_mask=ones, return_dict=False)[0]
        yield rows.tolist(), q
