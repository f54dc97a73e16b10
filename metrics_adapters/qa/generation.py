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
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..api.endpoint import EndpointBackend
from ..hub import require_model
from .questions import Question, QuestionError, QuestionSet, build_dependency_graph
from .templates import TEMPLATES

__all__ = ["ParseError", "parse_tifa", "parse_dsg", "PARSERS", "LMBackend", "HFCausalLM", "OpenAIChatLM",
           "CallableLM", "QuestionGenerator", "GenerationResult", "load_template", "PARSER_VERSION"]

log = logging.getLogger(__name__)

PARSER_VERSION = "1"  # bump when a parser changes what it accepts: it invalidates cached questions


class ParseError(QuestionError):
    """Language-model output that does not follow the expected question format."""


# -- parsing -------------------------------------------------------------------------------------------
_ABOUT = re.compile(r"^About\s+(?P<element>.+?)\s*\((?P<category>[^()]+)\)\s*:\s*$", re.IGNORECASE)
_Q = re.compile(r"^Q\s*:\s*(?P<text>.+?)\s*$", re.IGNORECASE)
_CHOICES = re.compile(r"^Choices\s*:\s*(?P<text>.+?)\s*$", re.IGNORECASE)
_A = re.compile(r"^A\s*:\s*(?P<text>.+?)\s*$", re.IGNORECASE)
_DESCRIPTION = re.compile(r"^Description\s*:", re.IGNORECASE)
_FENCE = re.compile(r"^```")


def _lines(text: str) -> list[tuple[int, str]]:
    return [(i, ln.strip()) for i, ln in enumerate(str(text).splitlines(), start=1)]


def parse_tifa(text: str, max_questions: int = 30) -> list[Question]:
    """Parse TIFA-style output (see :mod:`.templates`) into questions with choices and answers.

    Rules: text before the first ``About`` line is ignored (chat models' preambles), parsing
    stops at the next ``Description:`` line (a base model continuing the few-shot pattern);
    in between every non-empty line must be an ``About``, ``Q:``, ``Choices:`` or ``A:`` line, in
    the order About, then (Q, Choices, A) one or more times. Choices are comma-separated, at least
    two, distinct; the answer must be one of them (case-insensitive; the choice's spelling is
    kept). A question repeated word for word is dropped.

    Raises
    ------
    ParseError
        With the line number and what was expected.

    Examples
    --------
    >>> qs = parse_tifa("About dog (animal):\\nQ: is there a dog?\\nChoices: yes, no\\nA: Yes")
    >>> qs[0].question, qs[0].choices, qs[0].answer, qs[0].category
    ('is there a dog?', ('yes', 'no'), 'yes', 'animal')
    """
    out: list[Question] = []
    seen: set[str] = set()
    element = category = None
    state = "start"  # start -> about -> q -> choices -> answered -> (q | about)
    q_text: str | None = None
    choices: tuple[str, ...] = ()
    for n, line in _lines(text):
        if _DESCRIPTION.match(line):
            break
        if not line or _FENCE.match(line):
            continue
        m = _ABOUT.match(line)
        if m:
            if state in ("q", "choices"):
                raise ParseError(f"line {n}: expected {'Choices:' if state == 'q' else 'A:'} to finish the question "
                                 f"{q_text!r}, got {line!r}")
            if state == "about":
                raise ParseError(f"line {n}: expected a question (Q:) about {element!r}, got another About line")
            element, category = m.group("element").strip(), m.group("category").strip().lower()
            state = "about"
            continue
        if state == "start":
            continue  # preamble before the first element
        m = _Q.match(line)
        if m:
            if state in ("q", "choices"):
                raise ParseError(f"line {n}: expected {'Choices:' if state == 'q' else 'A:'}, got a new question {line!r}")
            q_text, state = m.group("text"), "q"
            continue
        m = _CHOICES.match(line)
        if m:
            if state != "q":
                raise ParseError(f"line {n}: expected Choices: right after a question (Q:), got {line!r}")
            choices = tuple(c.strip() for c in m.group("text").split(","))
            if len(choices) < 2 or any(not c for c in choices):
                raise ParseError(f"line {n}: expected at least two comma-separated choices, got {line!r}")
            if len({c.lower() for c in choices}) != len(choices):
                raise ParseError(f"line {n}: expected distinct choices, got {list(choices)}")
            state = "choices"
            continue
        m = _A.match(line)
        if m:
            if state != "choices":
                raise ParseError(f"line {n}: expected A: right after Choices:, got {line!r}")
            ans = m.group("text").strip().rstrip(".")
            lower = [c.lower() for c in choices]
            if ans.lower() not in lower:
                raise ParseError(f"line {n}: expected the answer to be one of the choices {list(choices)}, got {ans!r}")
            ans = choices[lower.index(ans.lower())]
            if q_text not in seen:
                seen.add(q_text)
                out.append(Question(str(len(out)), q_text, choices, ans, element=element, category=category))
                if len(out) > max_questions:
                    raise ParseError(f"expected at most {max_questions} questions, got more (runaway output?)")
            state = "answered"
            continue
        raise ParseError(f"line {n}: expected an 'About <element> (<category>):', 'Q:', 'Choices:' or 'A:' line, "
                         f"got {line[:120]!r}")
    if state in ("q", "choices"):
        raise ParseError(f"expected the question {q_text!r} to end with {'Choices: and A:' if state == 'q' else 'A:'}, "
                         "got the end of the output")
    if not out:
        raise ParseError("expected at least one 'About ...:' block with a question, got none")
    return out


_DSG_LINE = re.compile(r"^(?P<id>\d+)\s*\|\s*(?P<tuple>[^|]+?)\s*\|\s*(?P<question>[^|]+?)\s*\|\s*(?P<parents>[\d,\s]+?)\s*$")


def parse_dsg(text: str, max_questions: int = 30) -> list[Question]:
    """Parse DSG-style output (``id | tuple | question | parents``) into a question DAG.

    Rules: lines before the first requirement line are ignored; parsing stops at a blank line
    after the first requirement or at a ``Description:`` line. Ids are 1, 2, 3, ... in order;
    parents are ``0`` (none) or comma-separated earlier ids; questions end with ``?``. Output ids
    are 0-based (``question_id = id - 1``) as in the released files; every question is yes/no with
    answer ``yes``; ``element`` holds the tuple, ``category`` its part before `` - ``.

    Raises
    ------
    ParseError
        A malformed line, an id out of sequence, a parent that is not an earlier id, ``0`` mixed
        with other parents, a question without ``?``, no requirement at all.

    Examples
    --------
    >>> qs = parse_dsg("1 | entity - whole (boy) | Is there a boy? | 0\\n2 | attribute - color (shirt, green) | Is the shirt green? | 1")
    >>> [(q.question_id, q.parents) for q in qs]
    [('0', ()), ('1', ('0',))]
    """
    out: list[Question] = []
    for n, line in _lines(text):
        if _DESCRIPTION.match(line):
            break
        if _FENCE.match(line):
            continue
        if not line:
            if out:
                break
            continue
        m = _DSG_LINE.match(line)
        if m is None:
            if not out:
                continue  # preamble
            raise ParseError(f"line {n}: expected '<id> | <tuple> | <question> | <parent ids or 0>', got {line[:120]!r}")
        rid = int(m.group("id"))
        if rid != len(out) + 1:
            raise ParseError(f"line {n}: expected requirement id {len(out) + 1}, got {rid}")
        question = m.group("question").strip()
        if not question.endswith("?"):
            raise ParseError(f"line {n}: expected a yes/no question ending with '?', got {question!r}")
        raw = [p.strip() for p in m.group("parents").split(",")]
        if any(not p for p in raw):
            raise ParseError(f"line {n}: expected parent ids like '0', '2' or '1,3', got {m.group('parents')!r}")
        ids = [int(p) for p in raw]
        if 0 in ids and len(ids) > 1:
            raise ParseError(f"line {n}: expected '0' alone (no parent) or parent ids, got {m.group('parents')!r}")
        ids = [i for i in ids if i != 0]
        bad = [i for i in ids if not 1 <= i < rid]
        if bad:
            raise ParseError(f"line {n}: expected parents among the earlier ids 1..{rid - 1}, got {bad}")
        if len(set(ids)) != len(ids):
            raise ParseError(f"line {n}: expected distinct parent ids, got {ids}")
        tup = m.group("tuple").strip()
        out.append(Question(str(rid - 1), question, ("yes", "no"), "yes", parents=tuple(str(i - 1) for i in ids),
                            element=tup, category=tup.split(" - ")[0].strip().lower()))
        if len(out) > max_questions:
            raise ParseError(f"expected at most {max_questions} requirements, got more (runaway output?)")
    if not out:
        raise ParseError("expected at least one requirement line '<id> | <tuple> | <question> | <parents>', got none")
    build_dependency_graph(out, where="generated DSG questions")  # cannot fail by construction; kept as a guard
    return out


PARSERS: dict[str, Callable[..., list[Question]]] = {"tifa": parse_tifa, "dsg": parse_dsg}


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
class LMBackend(ABC):
    """Text completion by a language model (batched; failures per prompt).

    ``attempt`` > 0 marks a retry after malformed output: backends then sample at
    ``retry_temperature`` with a seed derived from the attempt, so a retry can differ from the
    first (greedy) answer yet stays reproducible.
    """

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

    def fingerprint(self) -> dict[str, Any]:
        cls = type(self)
        return {"lm": f"{cls.__module__}:{cls.__qualname__}", **self.settings()}

    def model_ids(self) -> dict[str, Any]:
        return {}

    def n_params(self) -> float | None:
        return None

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:  # noqa: B027 - optional hook
        pass

    def unload(self) -> None:  # noqa: B027 - optional hook
        pass

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
            from importlib import import_module

            mod, _, attr = fn.partition(":")
            fn = getattr(import_module(mod), attr)
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


class HFCausalLM(LMBackend):
    """A transformers causal LM (``AutoModelForCausalLM``) completing the template.

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
                 **kw: Any) -> None:
        super().__init__(**kw)
        self.model = model
        self.revision = revision
        self.gguf_file = gguf_file
        self.use_chat_template = bool(use_chat_template)
        self.system_prompt = system_prompt
        self.batch_size = int(batch_size)
        self._tok = None
        self._net = None

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "model": self.model, "revision": self.revision, "gguf_file": self.gguf_file,
                "use_chat_template": self.use_chat_template, "system_prompt": self.system_prompt}

    def model_ids(self) -> dict[str, Any]:
        return {"qg_model": self.model, "qg_revision": self.revision, "qg_gguf_file": self.gguf_file}

    def n_params(self) -> float | None:
        return None if self._net is None else float(sum(p.numel() for p in self._net.parameters()))

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        if self._net is not None:
            return
        if not self.model:
            raise ValueError("HFCausalLM: expected model=<hub id or local folder>, got none")
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from .vqa import _torch_dtype

        kw: dict[str, Any] = {}
        if self.revision:
            kw["revision"] = self.revision
        if self.gguf_file:
            kw["gguf_file"] = self.gguf_file
        try:
            require_model(self.model, self.revision, option="qa_lm.model")
            self._tok = AutoTokenizer.from_pretrained(self.model, **kw)
            td = _torch_dtype(dtype)
            self._net = AutoModelForCausalLM.from_pretrained(self.model, **kw, **({"dtype": td} if td else {}))
        except Exception as e:
            raise RuntimeError(f"HFCausalLM: could not load {self.model!r}"
                               f"{' (' + self.gguf_file + ')' if self.gguf_file else ''}: {type(e).__name__}: {e}") from e
        if self.gguf_file:
            # Dequantised GGUF tensors can be views into one buffer; contiguous copies run ~6x faster.
            for p in self._net.parameters():
                p.data = p.data.clone()
        self._net.to(device).eval()
        self.device = device
        self._tok.padding_side = "left"  # generation continues right after each prompt
        if self._tok.pad_token is None:
            self._tok.pad_token = self._tok.eos_token

    def unload(self) -> None:
        self._net = None
        self._tok = None

    def _render(self, prompt: str) -> str:
        if not self.use_chat_template:
            return prompt
        msgs = ([{"role": "system", "content": self.system_prompt}] if self.system_prompt else []) + [
            {"role": "user", "content": prompt}]
        return self._tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)

    def _complete(self, prompts: list[str], attempt: int) -> list[str | Exception]:
        import torch

        if self._net is None:
            self.load(self.device, self.dtype)
        temp = self.temperature_for(attempt)
        out: list[str | Exception] = []
        for i in range(0, len(prompts), self.batch_size):
            chunk = [self._render(p) for p in prompts[i:i + self.batch_size]]
            enc = self._tok(chunk, return_tensors="pt", padding=True, add_special_tokens=not self.use_chat_template)
            enc = {k: v.to(self.device) for k, v in enc.items() if k in ("input_ids", "attention_mask")}
            gen_kw: dict[str, Any] = {"max_new_tokens": self.max_new_tokens, "pad_token_id": self._tok.pad_token_id}
            if temp > 0:
                gen_kw.update(do_sample=True, temperature=temp)
                torch.manual_seed(self.seed + attempt)
            else:
                gen_kw.update(do_sample=False)
            try:
                with torch.inference_mode():
                    ids = self._net.generate(**enc, **gen_kw)
            except Exception as e:  # OOM or a model error fails this chunk only
                out.extend([RuntimeError(f"generate failed: {type(e).__name__}: {e}")] * len(chunk))
                continue
            n_in = enc["input_ids"].shape[1]
            out.extend(self._tok.batch_decode(ids[:, n_in:], skip_special_tokens=True))
        return out


class OpenAIChatLM(EndpointBackend, LMBackend):
    """A language model behind an OpenAI-compatible ``/chat/completions`` endpoint.

    The filled template is sent as one user message. ``api_key_env`` names the environment
    variable with the key; ``n_params`` (assumed parameter count) feeds only the FLOPs estimate.
    """

    id_prefix = "qg"

    def __init__(self, base_url: str, model: str, api_key_env: str | None = "OPENAI_API_KEY",
                 system_prompt: str | None = None, timeout: float = 120.0, max_retries: int = 4,
                 max_concurrency: int = 4, n_params: float | None = None, **kw: Any) -> None:
        super().__init__(**kw)
        self._init_endpoint(base_url, model, api_key_env, system_prompt, timeout, max_retries, max_concurrency,
                            n_params)

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), **self._endpoint_settings()}

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        self._ensure_client()

    def _complete(self, prompts: list[str], attempt: int) -> list[str | Exception]:
        from ..api import APIError

        if self._client is None:
            self.load()
        convs = [([{"role": "system", "content": self.system_prompt}] if self.system_prompt else [])
                 + [{"role": "user", "content": p}] for p in prompts]
        params: dict[str, Any] = {"max_tokens": self.max_new_tokens, "temperature": self.temperature_for(attempt)}
        if attempt:
            params["seed"] = self.seed + attempt
        res = self._client.chat_many(convs, **params)
        return [x if isinstance(x, APIError) else x.text for x in res]


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
        from tqdm.auto import tqdm

        uniq = list(dict.fromkeys(str(p) for p in prompts))
        done: dict[str, GenerationResult] = {}
        keys = {p: self._key(p) for p in uniq}
        pending = []
        for p in uniq:
            hit = self.cache.get_question(keys[p][0]) if self.cache is not None else None
            if hit is not None and (hit[0] == "ok" or not self.retry_failed):
                status, payload = hit
                qs = tuple(_q_from_json(d) for d in payload["questions"]) if status == "ok" else None
                done[p] = GenerationResult(p, qs, payload["attempts"], tuple(payload["errors"]), tuple(payload["raw"]),
                                           cached=True)
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

    def _attempt(self, pending, attempt, keys, state, done, bar) -> list[str]:
        outs = self.lm.complete([self.fill(p) for p in pending], attempt=attempt)
        if len(outs) != len(pending):
            raise RuntimeError(f"LM backend returned {len(outs)} completions for {len(pending)} prompts")
        still = []
        for p, out in zip(pending, outs):
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
