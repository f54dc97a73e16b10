"""VQAScore (Lin et al. 2024) as t2v_metrics computes it: the likelihood a generative VQA model
gives to the answer "Yes" (plus its end-of-sequence token) to a question about the prompt.

Default (``score="sequence"``), t2v_metrics' formula
-----------------------------------------------------
The answer labels are the tokens of ``answer`` followed by the end-of-sequence token (``[▁Yes,
</s>]``; :func:`.logprobs.answer_ids`); teacher-forced, the model gives each label a probability
``p_j`` (softmax over the full vocabulary), and

    score = exp(-mean_j CE_j) = exp(mean_j log p_j) = (prod_j p_j) ** (1 / n_labels)

which for a one-token "Yes" is ``sqrt(P(Yes) * P(</s> | Yes))``. This is
``exp(-CrossEntropyLoss(reduction="mean")(logits, labels))`` of
t2v_metrics/models/vqascore_models/instructblip_model.py:139-142, clip_t5_model.py:282-284 and
llava_model.py:293-301 (t2v-metrics 3.0 on PyPI).

``score="first_token"`` (ts2's earlier formula, kept as a named option): the probability of the
first answer token alone, summed over the spellings of ``yes_words`` (default ``[answer]``; for
each word ``w`` the first token of ``w`` and of ``" " + w``, kept when it decodes, stripped and
case-folded, to ``w``: :func:`yes_spellings`). With one spelling it is ``P(Yes)``, which is larger
than the default by the factor ``sqrt(P(Yes) / P(</s> | Yes))`` -- a factor that changes from
prompt to prompt, so the two can order a SEG's images differently.

Question, answer and prompt format per backend (``prompt_format="t2v_metrics"``)
---------------------------------------------------------------------------------
The defaults follow the t2v_metrics model of the same family (:data:`T2V_METRICS_FORMATS`):

- InstructBLIP: question ``Question: Does this figure show "{prompt}"? Please answer yes or no.``
  sent as is (no " Short answer:"), answer lowercase ``yes``
  (instructblip_model.py:11-12: "instruct-blip uses "yes" instead of "Yes"");
- LLaVA-style chat models (:class:`~.vqa.ChatVQA`): question ``Does this figure show
  "{prompt}"? Please answer yes or no.``, answer ``Yes``, the LLaVA-1.5 system message
  (llava_model.py:10-17, constants.py:5) through the model's chat template;
- BLIP and Fuyu, which t2v_metrics does not have: the same question and ``Yes`` in the backend's
  own prompt format.

The image goes through t2v_metrics' step for the family first (``image_prep="t2v_metrics"``):
InstructBLIP ``Resize(224)`` of the shortest side and ``CenterCrop(224)`` (instructblip_model.py:44-50;
the processor alone would squash a non-square image to 224 x 224), LLaVA ``expand2square`` with the
processor's mean colour (llava_model.py:214-215). ``image_prep="backend"`` skips it.

``prompt_format="backend"`` keeps the backend's own template and system prompt (ts2's earlier
InstructBLIP prompt was ``Question: {question} Short answer:``). ``template`` and ``answer`` set
the question and the answer explicitly.

CLIP-FlanT5, the VQAScore paper's recommended model, is not a backend: ``zhiqiulin/clip-flant5-xxl``
has ``model_type: clip_t5``, a class that only t2v_metrics' own code registers with transformers
(t2v_metrics/models/vqascore_models/clip_t5/model/language_model/clip_t5.py:41-47, 289-290), so
transformers alone cannot load it. The nearest backend is ``instructblip`` (t2v_metrics'
``instructblip-flant5-xl``: the same FlanT5 language model family and the same answer labels).

Backends: any with ``answer_logits(images, questions, prefix, template=, system=)``
(:mod:`.logprobs`: BLIP, InstructBLIP, LLaVA-style chat models, Fuyu). Models are loaded by the
backends' own ``load``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ..base import Metric, MetricError, ScoreItem, check_prompt_template
from ..embedding.base import local_signature
from ..hub import under
from .vqa import ChatVQA, InstructBlipVQA, VQABackend, VQARequest, check_choice, format_prompt

__all__ = ["DEFAULT_TEMPLATE", "SCORES", "T2V_METRICS_FORMATS", "VQAScore", "VQAScoreFormat", "yes_spellings",
           "yes_token_ids"]

log = logging.getLogger(__name__)

# t2v_metrics/models/vqascore_models/llava_model.py:10 and clip_t5_model.py:9
DEFAULT_TEMPLATE = 'Does this figure show "{prompt}"? Please answer yes or no.'
# t2v_metrics/constants.py:5 (the LLaVA-1.5 system message of llava_model.py:17)
LLAVA_SYSTEM = ("A chat between a curious user and an artificial intelligence assistant. The assistant gives "
                "helpful, detailed, and polite answers to the user's questions.")
SCORES = ("sequence", "first_token")
PROMPT_FORMATS = ("t2v_metrics", "backend")
# Backend settings that change generated answers but not a forward pass's logits.
_DECODING_KEYS = ("max_new_tokens", "num_beams", "decoding")
# Backend settings replaced by a t2v_metrics prompt format.
_PROMPT_KEYS = ("template", "system_prompt")


@dataclass(frozen=True)
class VQAScoreFormat:
    """How t2v_metrics asks one model family: the question (``{prompt}``), the answer, the backend
    prompt format (``{question}``) and the system message (chat models only)."""

    question: str
    answer: str
    template: str = "{question}"
    system: str | None = None
    image: str | None = None  # a key of IMAGE_PREPS: what t2v_metrics does to a PIL image first


def center_crop_224(image, backend: VQABackend):
    """t2v_metrics' InstructBLIP transform before ``ToTensor``: ``Resize(224, bicubic)`` of the
    shortest side, then ``CenterCrop(224)`` (instructblip_model.py:44-50). The processor's own
    224 x 224 resize then has nothing left to do; without this it squashes non-square images."""
    from torchvision.transforms import CenterCrop, InterpolationMode, Resize

    return CenterCrop(224)(Resize(224, interpolation=InterpolationMode.BICUBIC)(image))


def pad_to_square_mean(image, backend: VQABackend):
    """t2v_metrics' LLaVA ``expand2square`` (mm_utils.py:128-139, used at llava_model.py:214-215):
    the image centred on a square of the image processor's mean colour, ``int(m * 255)`` per
    channel, before the processor's resize and centre crop (which then keeps the whole image)."""
    from PIL import Image

    width, height = image.size
    if width == height:
        return image
    mean = getattr(getattr(backend._proc, "image_processor", None), "image_mean", None)
    if mean is None:
        raise MetricError(f"VQAScore: expected the image mean of {type(backend).__name__}'s processor, got none")
    side = max(width, height)
    out = Image.new(image.mode, (side, side), tuple(int(x * 255) for x in mean))
    out.paste(image, ((side - width) // 2, (side - height) // 2))
    return out


IMAGE_PREPS = {"center_crop_224": center_crop_224, "pad_to_square_mean": pad_to_square_mean}


# Backend class -> the t2v_metrics format of its model family (subclasses inherit it).
T2V_METRICS_FORMATS: dict[type, VQAScoreFormat] = {
    # instructblip_model.py:11-12 and :77-78 (the question goes to the Q-Former and T5 as is)
    InstructBlipVQA: VQAScoreFormat('Question: Does this figure show "{prompt}"? Please answer yes or no.', "yes",
                                    image="center_crop_224"),
    # llava_model.py:10-11, 13-17 (SYSTEM_MSG + " USER: <image>\n" + question + " ASSISTANT: ")
    ChatVQA: VQAScoreFormat(DEFAULT_TEMPLATE, "Yes", system=LLAVA_SYSTEM, image="pad_to_square_mean"),
}


def t2v_metrics_format(backend: VQABackend) -> VQAScoreFormat | None:
    """The t2v_metrics format of ``backend``'s model family, ``None`` where t2v_metrics has none."""
    for cls in type(backend).__mro__:
        if cls in T2V_METRICS_FORMATS:
            return T2V_METRICS_FORMATS[cls]
    return None


def yes_spellings(tokenizer, words: Sequence[str]) -> dict[str, int]:
    """Spelling -> token id of the tokens counted as "Yes" (see the module docstring for the rule).

    One spelling per distinct id (an uncased vocabulary maps "Yes" and " Yes" to one ``yes``), so
    no probability is counted twice.

    Raises
    ------
    ValueError
        If no spelling of any word is a single token of ``tokenizer``.

    Examples
    --------
    With an uncased WordPiece vocabulary "Yes" and " Yes" both give the token ``yes``;
    with a SentencePiece one, ``▁Yes``.
    """
    found: dict[str, int] = {}
    for w in words:
        for spelling in (w, " " + w):
            enc = tokenizer(spelling, add_special_tokens=False)["input_ids"]
            if not enc:
                continue
            first = int(enc[0])
            if tokenizer.decode([first]).strip().casefold() == w.strip().casefold() and first not in found.values():
                found[spelling] = first
    if not found:
        raise ValueError(f"expected at least one of {list(words)} to be a single token of "
                         f"{type(tokenizer).__name__}, got none")
    return found


def yes_token_ids(tokenizer, words: Sequence[str]) -> list[int]:
    """The token ids counted as "Yes" (:func:`yes_spellings`' values)."""
    return list(yes_spellings(tokenizer, words).values())


def _tokenizer_of(backend: VQABackend):
    chat = getattr(backend, "chat", None)  # backends on the shared chat-model layer
    tok = getattr(chat, "tokenizer", None) if chat is not None else None
    if tok is None:
        proc = getattr(backend, "_proc", None)
        tok = getattr(proc, "tokenizer", proc)
    if tok is None:
        raise TypeError(f"VQAScore: cannot find the tokenizer of {type(backend).__name__}")
    return tok


def _is_generative(backend: VQABackend) -> bool:
    return callable(getattr(backend, "answer_logits", None))


def _checked_yes_words(name: str, yes_words: Sequence[str] | None, answer: str) -> list[str]:
    """The words counted as "yes" by ``first_token`` scoring: the given non-empty list of
    non-blank words, or the answer alone."""
    if yes_words is None:
        yes_words = [answer]
    if isinstance(yes_words, str) or not yes_words or not all(isinstance(w, str) and w.strip() for w in yes_words):
        raise ValueError(f"{name}: expected yes_words as a non-empty list of words, got {yes_words!r}")
    return [str(w) for w in yes_words]


class VQAScore(Metric):
    """VQAScore of a generative VQA backend: the likelihood of ``answer`` to ``template.format(prompt=...)``.

    Parameters
    ----------
    name : str
        Column name.
    vqa : VQABackend or None
        A generative backend, one with ``answer_logits`` (``conf/metric.vqa``: ``blip``,
        ``instructblip``, ``llava``, ``llava_alt``, ``fuyu``); ``None``: InstructBLIP flan-t5-xl.
    template : str or None
        The question; must contain ``{prompt}``. ``None``: t2v_metrics' question for the backend's
        model family (module docstring).
    answer : str or None
        The answer scored; ``None``: t2v_metrics' (``yes`` for InstructBLIP, else ``Yes``).
    score : {"sequence", "first_token"}
        ``sequence`` (t2v_metrics): ``exp(-mean cross-entropy)`` over the answer's tokens and the
        end-of-sequence token. ``first_token``: the first answer token's probability summed over
        the ``yes_words`` spellings.
    prompt_format : {"t2v_metrics", "backend"}
        ``t2v_metrics``: the backend prompt format and system message of t2v_metrics' model of the
        backend's family (where it has one); ``backend``: the backend's own ``template`` and system
        prompt.
    image_prep : {"t2v_metrics", "backend"}
        ``t2v_metrics``: first what t2v_metrics does to the image for the backend's family
        (InstructBLIP: resize the shortest side to 224 and centre-crop; LLaVA: pad to a square of
        the mean colour), then the backend's processor; ``backend``: the processor alone.
    yes_words : list of str or None
        ``first_token`` only: the words whose first tokens are counted; ``None``: ``[answer]``.
    input_tokens : float or None
        Tokens per forward pass for the FLOPs estimate; ``None``: the mean number of text tokens
        of the backend-formatted questions asked (image tokens not counted, as TS2 A.3 prices
        VQA calls by their text; set this to include them).

    Raises
    ------
    ValueError
        An unknown ``score`` or ``prompt_format``, a template without ``{prompt}``, an empty answer
        or bad ``yes_words``.
    TypeError
        A backend that cannot give logits (e.g. replay).

    Examples
    --------
    With hand-set logits ``log 3`` for ``yes``, ``log 2`` for the end-of-sequence token and 0
    elsewhere over ``V = 30523`` tokens (``Z = 30526``): ``sequence`` gives
    ``sqrt(3/Z * 2/Z) = 8.024e-5`` and ``first_token`` ``3/Z = 9.828e-5`` (tests/test_vqascore.py).
    """

    higher_is_better: ClassVar[bool] = True
    score_range: ClassVar[tuple[float, float] | None] = (0.0, 1.0)
    family: ClassVar[str] = "vqascore"
    paper: ClassVar[str] = "Lin et al. 2024, Evaluating Text-to-Visual Generation with Image-to-Text Generation " \
                           "(VQAScore, arXiv:2404.01291)"

    def __init__(self, name: str = "vqascore", vqa: VQABackend | None = None, template: str | None = None,
                 answer: str | None = None, score: str = "sequence", prompt_format: str = "t2v_metrics",
                 image_prep: str = "t2v_metrics", yes_words: Sequence[str] | None = None,
                 input_tokens: float | None = None) -> None:
        super().__init__(name)
        check_choice(name, "score", score, SCORES)
        check_choice(name, "prompt_format", prompt_format, PROMPT_FORMATS)
        check_choice(name, "image_prep", image_prep, PROMPT_FORMATS)
        self.vqa = vqa if vqa is not None else InstructBlipVQA()
        if not _is_generative(self.vqa):
            raise TypeError(f"{name}: expected a generative VQA backend (one with answer_logits: BlipVQA, "
                            f"InstructBlipVQA, ChatVQA, FuyuVQA), got {type(self.vqa).__name__}")
        fmt = t2v_metrics_format(self.vqa)
        self.score = score
        self.prompt_format = prompt_format
        # None: the backend's own (template, system prompt) are used as they are.
        self._prompt = (fmt.template, fmt.system) if fmt is not None and prompt_format == "t2v_metrics" else None
        self.image_prep = image_prep
        # the t2v_metrics image step of the family (None: the backend's processor alone)
        self.image_step = fmt.image if fmt is not None and image_prep == "t2v_metrics" else None
        self.template = str(template if template is not None else (fmt.question if fmt else DEFAULT_TEMPLATE))
        check_prompt_template(name, self.template)
        self.answer = str(answer if answer is not None else (fmt.answer if fmt else "Yes"))
        if not self.answer.strip():
            raise ValueError(f"{name}: expected a non-empty answer, got {answer!r}")
        self.yes_words = _checked_yes_words(name, yes_words, self.answer)
        self.input_tokens = None if input_tokens is None else float(input_tokens)
        self.yes_ids: list[int] | None = None
        self.answer_ids: list[int] | None = None
        self._text_tokens = 0  # tokens of the (backend-formatted) questions asked so far
        self._forwards = 0

    @property
    def vqa_template(self) -> str:
        """The backend prompt format the questions are put in."""
        return self.vqa.template if self._prompt is None else self._prompt[0]

    @property
    def system(self) -> str | None:
        """The system message replacing the backend's (``None``: the backend's own)."""
        return None if self._prompt is None else self._prompt[1]

    def settings(self) -> dict[str, Any]:
        drop = _DECODING_KEYS + (_PROMPT_KEYS if self._prompt is not None else ())
        vqa = {k: v for k, v in self.vqa.fingerprint().items() if k not in drop}
        rule = {"sequence": "answer+eos/exp-mean-ce/v2", "first_token": "first-token/full-softmax/v1"}[self.score]
        out = {"template": self.template, "answer": self.answer, "score": self.score, "rule": rule,
               "prompt_format": self.prompt_format, "vqa_template": self.vqa_template, "system": self.system,
               "image_step": self.image_step,
               "vqa": vqa, "vqa_weights": local_signature(getattr(self.vqa, "model", None))}
        if self.score == "first_token":
            out["yes_words"] = self.yes_words
        return out

    def model_ids(self) -> dict[str, Any]:
        return self.vqa.model_ids()

    def hub_models(self) -> tuple[Any, ...]:
        return under("vqa", self.vqa.hub_models())

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        from .logprobs import answer_ids

        self.vqa.load(device, dtype)
        tok = _tokenizer_of(self.vqa)
        if self.score == "first_token":
            self.yes_ids = list(yes_spellings(tok, self.yes_words).values())
            log.info("%s: counting token ids %s (%s) as 'Yes'", self.name, self.yes_ids,
                     [tok.decode([i]) for i in self.yes_ids])
        else:
            self.answer_ids = answer_ids(tok, self.answer)
            log.info("%s: scoring the answer tokens %s (%s)", self.name, self.answer_ids,
                     [tok.decode([i]) for i in self.answer_ids])

    def unload(self) -> None:
        self.vqa.unload()

    def flops_per_image(self) -> float | None:
        """One forward pass: ``2 x N_vqa x tokens`` (TS2 A.3); ``None`` before the model or the
        questions are known (the engine asks again after scoring)."""
        n = self.vqa.n_params()
        tokens = self.input_tokens if self.input_tokens is not None else (
            self._text_tokens / self._forwards if self._forwards else None)
        if n is None or tokens is None:
            return None
        return 2.0 * float(n) * float(tokens)

    def answer_probabilities(self, requests: list[VQARequest]) -> list[float]:
        """The score of each request (``score``'s formula), in batches of the backend's ``batch_size``."""
        import torch

        if self.yes_ids is None and self.answer_ids is None:
            raise MetricError(f"{self.name}: call load(device) before scoring")
        out: list[float] = []
        bs = self.vqa.batch_size
        tok = _tokenizer_of(self.vqa)
        labels = self.answer_ids if self.score == "sequence" else []
        for i in range(0, len(requests), bs):
            chunk = requests[i:i + bs]
            questions = [r.question for r in chunk]
            with torch.inference_mode():
                logits = self.vqa.answer_logits([r.image for r in chunk], questions, labels[:-1],
                                                template=self.vqa_template, system=self.system)
            lp = torch.log_softmax(logits.detach().to(torch.float64), dim=-1)  # full vocabulary
            if self.score == "sequence":
                # exp(-CrossEntropyLoss(reduction="mean")(logits_k, labels_k)), instructblip_model.py:139-142
                idx = torch.tensor(labels, device=lp.device).expand(len(chunk), -1).unsqueeze(-1)
                scores = lp.gather(-1, idx).squeeze(-1).mean(dim=1).exp()
            else:
                scores = lp[:, 0, self.yes_ids].exp().sum(dim=1)
            out.extend(float(p) for p in scores.cpu().numpy())
            self._text_tokens += sum(len(ids) for ids in tok([format_prompt(self.vqa_template, q, None)
                                                                for q in questions])["input_ids"])
            self._forwards += len(chunk)
            self.vqa.n_model_calls += len(chunk)
        return out

    def score_batch(self, items: Sequence[ScoreItem], images: Sequence[Any]) -> list[float]:
        if images is None or len(images) != len(items):
            raise MetricError(f"{self.name}: expected one image per item ({len(items)}), "
                              f"got {None if images is None else len(images)}")
        if self.image_step is not None:
            step = IMAGE_PREPS[self.image_step]
            images = [step(im, self.vqa) for im in images]
        reqs = [VQARequest(question=self.template.format(prompt=it.prompt), image=im, image_id=it.file_name,
                           seg_id=it.seg_id) for it, im in zip(items, images, strict=True)]
        return self.answer_probabilities(reqs)

    def run_info(self) -> dict[str, Any]:
        return {"vqa_forwards": self._forwards, "score": self.score, "answer_token_ids": self.answer_ids,
                "yes_token_ids": self.yes_ids}
