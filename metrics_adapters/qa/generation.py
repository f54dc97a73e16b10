"""Question generation: prompt -> TIFA-style or DSG-style question set, by a language model.

- Templates (:mod:`.templates`, or a file) hold in-context examples; the model completes them.
- Output is parsed **strictly** (:func:`parse_tifa`, :func:`parse_dsg`): anything outside the
  format raises :class:`ParseError`. A malformed answer is retried (``max_attempts``; retries
  sample at ``retry_temperature`` so a greedy model does not repeat itself), then recorded as a
  failure with every raw output, never silently turned into an empty set.
- Results, failures included, are cached per (style, template, generator fingerprint, prompt) in
  the QA cache (:mod:`.cache`), so a second run asks the model nothing.

LM backends: :class:`HFCausalLM` (transformers causal LM; a hub id or local folder, a GGUF file
through ``gguf_file``) and :class:`OpenAIChatLM` (any OpenAI-compatible chat endpoint, key from
an environment variable).
"""

from __future__ import annotations

import hashlib
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from seg_data.resolve import resolve

from ..model_part import ModelPart
from .qg_parsing import PARSER_VERSION, PARSERS, ParseError, parse_dsg, parse_tifa
from .questions import Question, QuestionError, QuestionSet
from .templates import TEMPLATES

__all__ = ["ParseError", "parse_tifa", "parse_dsg", "PARSERS", "LMBackend", "HFCausalLM", "OpenAIChatLM",
           "CallableLM", "QuestionGenerator", "GenerationResult", "load_template", "PARSER_VERSION"]

log = logging.getLogger(__name__)

def load_template(style: str, template_file: str | None = None) -> str:
    """The built-in template of ``style`` or the text of ``template_file`` (must contain ``{prompt}``).

    Raises
    ------
    ValueError
        Unknown style or a template without ``{prompt}``.
    """
    if style not in TEMPLATES:
        raise ValueError(f"expected a question style in {sorted(TEMPLATES)}, got {style!r}")
    text = TEMPLATES[style] if not template_file else Path(template_file).expanduser().read_text(encoding="utf-8")
    if "{prompt}" not in text:
        raise ValueError(f"expected the placeholder {{prompt}} in the template {template_file or style!r}, found none")
    return text


# -- language models -------------------------------------------------------------------------------------
class LMBackend(ModelPart, ABC):
    """Text completion by a language model (batched; failures per prompt).

    ``attempt`` > 0 marks a retry after malformed output: backends then sample at
    ``retry_temperature`` with a seed derived from the attempt, so a retry can differ from the
    first (greedy) answer yet stays reproducible.
    """

    fingerprint_key = "lm"

    def __init__(self, max_new_tokens: int = 512, temperature: float = 0.0, retry_temperature: float = 0.7,
                 seed: int = 0) -> None:
        self.max_new_tokens = int(max_new_tokens)
        self.temperature = float(temperature)
        self.retry_temperature = float(retry_temperature)
        self.seed = int(seed)
        self.n_calls = 0  # prompts sent to the model
        self.device, self.dtype = "cpu", None

    def prepare(self, device: str = "cpu", dtype: str | None = None) -> None:
        """Where :meth:`load` puts the model when the first completion needs it (lazy loading:
        a run whose questions are all cached never loads the model)."""
        self.device, self.dtype = device, dtype

    def settings(self) -> dict[str, Any]:
        return {"max_new_tokens": self.max_new_tokens, "temperature": self.temperature,
                "retry_temperature": self.retry_temperature, "seed": self.seed}

    def temperature_for(self, attempt: int) -> float:
        return self.temperature if attempt == 0 else self.retry_temperature

    def complete(self, prompts: Sequence[str], attempt: int = 0) -> list[str | Exception]:
        """Completions in prompt order; a prompt whose call failed gets the exception."""
        self.n_calls += len(prompts)
        return self._complete(list(prompts), attempt)

    @abstractmethod
    def _complete(self, prompts: list[str], attempt: int) -> list[str | Exception]: ...


class CallableLM(LMBackend):
    """An LM backend around a plain function ``(prompt, attempt) -> text`` (scripting and tests).

    ``name`` stands for the function in the fingerprint: give a new name when the function's
    behaviour changes, or stale cached questions are reused.
    """

    def __init__(self, fn: Callable[[str, int], str] | str, name: str = "callable", **kw: Any) -> None:
        super().__init__(**kw)
        if isinstance(fn, str):  # "module:function" from a config
            fn = resolve(fn)
        self.fn = fn
        self.name = str(name)

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "name": self.name}

    def _complete(self, prompts: list[str], attempt: int) -> list[str | Exception]:
        out: list[str | Exception] = []
        for p in prompts:
            try:
                out.append(str(self.fn(p, attempt)))
            except Exception as e:  # one failing prompt must not lose the others
                out.append(e)
        return out


class _ChatLM(LMBackend):
    """An LM backend over a :class:`~metrics_adapters.chat.ChatModel` (``self.chat``)."""

    chat: Any
    id_prefix = "qg"

    def model_ids(self) -> dict[str, Any]:
        return {f"{self.id_prefix}_{k}": v for k, v in self.chat.model_ids().items()}

    def hub_models(self) -> tuple[Any, ...]:
        return self.chat.hub_models()  # the chat model's `model` is this LM's `model` key

    def n_params(self) -> float | None:
        return self.chat.n_params()

    def usage(self) -> dict[str, Any]:
        return self.chat.usage()

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        self.chat.load(device, dtype)

    def unload(self) -> None:
        self.chat.unload()

    def _complete(self, prompts: list[str], attempt: int) -> list[str | Exception]:
        from ..chat import ChatRequest

        self.load(self.device, self.dtype)
        res = self.chat.generate([ChatRequest(p) for p in prompts], max_new_tokens=self.max_new_tokens,
                                 temperature=self.temperature_for(attempt),
                                 seed=self.seed + attempt if attempt else None)
        return [r.text if r.ok else RuntimeError(f"model call failed: {r.error}") for r in res]


class HFCausalLM(_ChatLM):
    """A transformers causal LM (a :class:`~metrics_adapters.chat.TransformersChatModel`, ``kind=lm``)
    completing the template.

    Parameters
    ----------
    model : str
        Hub id or local folder (for GGUF: the folder or repo holding ``gguf_file``).
    revision : str, optional
    gguf_file : str, optional
        A GGUF file name inside ``model`` (needs the ``gguf`` package); the weights are
        dequantised by transformers.
    use_chat_template : bool
        Wrap the filled template in the tokenizer's chat template as one user message (instruct
        models); ``False`` completes it as plain text (base models, few-shot).
    system_prompt : str, optional
        System message when ``use_chat_template``.
    max_new_tokens, temperature, retry_temperature, seed : decoding (in the fingerprint).
    batch_size : int
        Prompts per ``generate`` call.
    """

    def __init__(self, model: str | None = None, revision: str | None = None, gguf_file: str | None = None,
                 use_chat_template: bool = False, system_prompt: str | None = None, batch_size: int = 4,
                 trust_remote_code: bool = False, **kw: Any) -> None:
        super().__init__(**kw)
        if not model:
            raise ValueError("HFCausalLM: expected model=<hub id or local folder>, got none")
        from ..chat import TransformersChatModel

        self.model, self.revision, self.gguf_file = model, revision, gguf_file
        self.use_chat_template, self.system_prompt = bool(use_chat_template), system_prompt
        self.batch_size = int(batch_size)
        self.chat = TransformersChatModel(model, kind="lm", revision=revision, max_new_tokens=self.max_new_tokens,
                                          system_prompt=system_prompt, use_chat_template=self.use_chat_template,
                                          gguf_file=gguf_file, trust_remote_code=trust_remote_code,
                                          batch_size=self.batch_size, seed=self.seed)
        self.chat.option = "qa_lm.model"

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "model": self.model, "revision": self.revision, "gguf_file": self.gguf_file,
                "use_chat_template": self.use_chat_template, "system_prompt": self.system_prompt}


class OpenAIChatLM(_ChatLM):
    """A language model behind an OpenAI-compatible ``/chat/completions`` endpoint
    (a :class:`~metrics_adapters.chat.HTTPChatModel`, text only).

    The filled template is sent as one user message. ``api_key_env`` names the environment
    variable with the key; ``n_params`` (assumed parameter count) feeds only the FLOPs estimate.
    """

    def __init__(self, base_url: str, model: str, api_key_env: str | None = "OPENAI_API_KEY",
                 system_prompt: str | None = None, timeout: float = 120.0, max_retries: int = 4,
                 max_concurrency: int = 4, n_params: float | None = None, **kw: Any) -> None:
        super().__init__(**kw)
        from ..chat import HTTPChatModel

        self.chat = HTTPChatModel(base_url, model, api_key_env=api_key_env, max_new_tokens=self.max_new_tokens,
                                  temperature=self.temperature, system_prompt=system_prompt, timeout=timeout,
                                  max_retries=max_retries, max_concurrency=max_concurrency, n_params=n_params,
                                  vision=False)

    def settings(self) -> dict[str, Any]:
        c = self.chat
        return {**super().settings(), "base_url": c.base_url, "model": c.model, "system_prompt": c.system_prompt}

    def model_ids(self) -> dict[str, Any]:
        return {"qg_model": self.chat.model, "qg_endpoint": self.chat.base_url}


# -- the generator ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GenerationResult:
    """Outcome of generating questions for one prompt.

    ``questions`` is ``None`` when every attempt failed; ``errors`` and ``raw`` hold each
    attempt's parse/call error and model output; ``cached`` tells whether it came from the cache.
    """

    prompt: str
    questions: tuple[Question, ...] | None
    attempts: int
    errors: tuple[str, ...] = ()
    raw: tuple[str, ...] = field(default=(), repr=False)
    cached: bool = False

    @property
    def ok(self) -> bool:
        return self.questions is not None

    def question_set(self, key: str | None = None, kind: str = "tifa") -> QuestionSet:
        """As a :class:`QuestionSet` keyed by ``key`` (default: the prompt).

        Raises
        ------
        QuestionError
            The generation failed (the message has the last error).
        """
        if self.questions is None:
            raise QuestionError(f"question generation failed for prompt {self.prompt!r} after {self.attempts} "
                                f"attempt(s): {self.errors[-1] if self.errors else 'no output'}")
        return QuestionSet(key if key is not None else self.prompt, self.prompt, self.questions, kind=kind)


def _q_to_json(q: Question) -> dict[str, Any]:
    return {"question_id": q.question_id, "question": q.question, "choices": list(q.choices), "answer": q.answer,
            "parents": list(q.parents), "element": q.element, "category": q.category}


def _q_from_json(d: dict[str, Any]) -> Question:
    return Question(d["question_id"], d["question"], tuple(d["choices"]), d["answer"], tuple(d["parents"]),
                    d.get("element"), d.get("category"))


class QuestionGenerator:
    """Prompt -> questions with an LM, a template, a strict parser, retries and a cache.

    Parameters
    ----------
    lm : LMBackend
    style : {"tifa", "dsg"}
        Which template and parser.
    template_file : str, optional
        A custom template (must contain ``{prompt}``); its text is in the fingerprint.
    max_attempts : int
        Tries per prompt (1 + retries) before a failure is recorded.
    max_questions : int
        Upper bound on questions per prompt (longer output is malformed).
    cache : QACache or None
        Where results (and failures) are stored; ``None``: no cache.
    retry_failed : bool
        Ask again for prompts whose cached result is a failure.
    chunk_size : int
        Prompts sent to the LM together (each chunk finishes all its attempts and is cached
        before the next starts).
    """

    def __init__(self, lm: LMBackend, style: str = "tifa", template_file: str | None = None, max_attempts: int = 3,
                 max_questions: int = 30, cache=None, retry_failed: bool = False, chunk_size: int = 16) -> None:
        if style not in PARSERS:
            raise ValueError(f"expected a question style in {sorted(PARSERS)}, got {style!r}")
        if int(max_attempts) < 1:
            raise ValueError(f"expected max_attempts >= 1, got {max_attempts}")
        self.lm = lm
        self.style = style
        self.template_file = template_file
        self.template = load_template(style, template_file)
        self.max_attempts = int(max_attempts)
        self.max_questions = int(max_questions)
        self.cache = cache
        self.retry_failed = bool(retry_failed)
        self.chunk_size = max(1, int(chunk_size))

    def fingerprint(self) -> dict[str, Any]:
        return {"style": self.style, "template_sha256": hashlib.sha256(self.template.encode()).hexdigest(),
                "parser": PARSER_VERSION, "max_attempts": self.max_attempts, "max_questions": self.max_questions,
                "lm": self.lm.fingerprint()}

    def _key(self, prompt: str) -> tuple[str, str]:
        from .cache import fingerprint_hash, question_key

        fp = self.fingerprint()
        gh = fingerprint_hash(fp)
        return question_key(self.style, fp["template_sha256"], gh, prompt), gh

    def fill(self, prompt: str) -> str:
        return self.template.replace("{prompt}", str(prompt).strip())

    def generate(self, prompts: Sequence[str], progress: bool = False) -> list[GenerationResult]:
        """Questions for each prompt (same order); duplicates are generated once.

        Failures do not raise: they come back as results with ``questions=None`` and are logged.
        """
        from seg_data.progress import tqdm

        uniq = list(dict.fromkeys(str(p) for p in prompts))
        done: dict[str, GenerationResult] = {}
        keys = {p: self._key(p) for p in uniq}
        pending = []
        for p in uniq:
            hit = self._cached_result(p, keys[p][0])
            if hit is not None:
                done[p] = hit
            else:
                pending.append(p)
        state = {p: {"errors": [], "raw": []} for p in pending}
        bar = tqdm(total=len(pending), desc=f"{self.style} questions", unit="prompt", disable=not progress or not pending)
        try:
            # Chunks, each through all its attempts, so that finished prompts reach the cache early
            # (a killed run keeps them).
            for c in range(0, len(pending), self.chunk_size):
                chunk = pending[c:c + self.chunk_size]
                for attempt in range(self.max_attempts):
                    if not chunk:
                        break
                    chunk = self._attempt(chunk, attempt, keys, state, done, bar)
        finally:
            bar.close()
        return [done[str(p)] for p in prompts]

    def _cached_result(self, prompt: str, key: str) -> GenerationResult | None:
        """The cached generation of ``prompt``, or ``None`` to generate it: none cached, or a
        cached failure when ``retry_failed``."""
        hit = self.cache.get_question(key) if self.cache is not None else None
        if hit is None or (hit[0] != "ok" and self.retry_failed):
            return None
        status, payload = hit
        qs = tuple(_q_from_json(d) for d in payload["questions"]) if status == "ok" else None
        return GenerationResult(prompt, qs, payload["attempts"], tuple(payload["errors"]), tuple(payload["raw"]),
                                cached=True)

    def _attempt(self, pending, attempt, keys, state, done, bar) -> list[str]:
        outs = self.lm.complete([self.fill(p) for p in pending], attempt=attempt)
        if len(outs) != len(pending):
            raise RuntimeError(f"LM backend returned {len(outs)} completions for {len(pending)} prompts")
        still = []
        for p, out in zip(pending, outs, strict=True):
            st = state[p]
            if isinstance(out, Exception):
                st["errors"].append(f"attempt {attempt + 1}: model call failed: {type(out).__name__}: {out}")
                st["raw"].append("")
            else:
                st["raw"].append(out)
                try:
                    qs = PARSERS[self.style](out, max_questions=self.max_questions)
                except QuestionError as e:
                    st["errors"].append(f"attempt {attempt + 1}: {e}")
                else:
                    self._finish(p, keys[p], tuple(qs), attempt + 1, st, done)
                    bar.update(1)
                    continue
            if attempt + 1 == self.max_attempts:
                self._finish(p, keys[p], None, attempt + 1, st, done)
                bar.update(1)
            else:
                still.append(p)
        return still

    def _finish(self, prompt, key, questions, attempts, st, done) -> None:
        res = GenerationResult(prompt, questions, attempts, tuple(st["errors"]), tuple(st["raw"]))
        if questions is None:
            log.warning("question generation failed for %r after %d attempt(s): %s", prompt, attempts,
                        st["errors"][-1] if st["errors"] else "no output")
        if self.cache is not None:
            payload = {"questions": [_q_to_json(q) for q in questions] if questions else [], "attempts": attempts,
                       "errors": list(st["errors"]), "raw": list(st["raw"])}
            self.cache.put_question(key[0], key[1], prompt, "ok" if questions else "failed", payload)
        done[prompt] = res
