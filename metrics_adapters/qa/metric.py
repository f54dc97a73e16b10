"""The QG/A metric: questions -> VQA answers -> matched choices -> accumulated image score.

:class:`QAMetric` holds the parts and runs them; :class:`~.tifa.TIFAScore` and
:class:`~.dsg.DSGScore` only set the defaults (question file, generation style, accumulation).
Every part is swappable from the Hydra config: the question source (a released/generated CSV, or
generation on the fly by a language model), the VQA backend (``metric.vqa=blip|instructblip|
llava|openai|replay``), the matcher model and the accumulation (``tifa`` or ``dsg``, for either
question set: the paper's Table 3 ablation).

Per-question records (question, raw answer, matched choice, correct, satisfied after gating)
are kept for ``answers.csv`` (:meth:`QAMetric.write_answers`).
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from ..base import Metric, MetricError, ScoreItem
from ..hub import under
from .accumulate import ACCUMULATIONS, accumulate, dsg_gate
from .matching import AnswerMatcher
from .questions import QuestionError, QuestionSet, format_parents, load_question_csv
from .vqa import VQABackend, VQAError, VQARequest

__all__ = ["QAMetric", "ANSWER_COLUMNS", "PARENT_OVERRIDES"]

log = logging.getLogger(__name__)

ANSWER_COLUMNS = ("metric", "seg_id", "node", "file_name", "prompt", "question_id", "parent_question_id", "question",
                  "choices", "expected", "raw_answer", "matched", "match_method", "similarity", "correct", "satisfied", "match_rule")
# match_rule (the rule that decided, see matching.RULES) is last so that readers of the older
# 16-column answers.csv still find every column where it was.


#: Named DSG dependency edits that reproduce released runs (``parent_overrides=NAME``): SEG id ->
#: question id -> its parents. The TS2 release's DSG scores of SEG 65 (BLIP1, LLaVA, ...) were
#: computed with an older dsg_questions.csv in which question 3 ("Is there a bed?") was a root;
#: the released file makes it a child of question 0. See docs/qa.md.
PARENT_OVERRIDES: dict[str, dict[str, dict[str, tuple[str, ...]]]] = {
    "seg65_old": {"65": {"3": ()}},
}


class _NeedsImages:
    """``needs_images`` that is True on the class and follows the VQA backend on an instance."""

    def __get__(self, obj: Any, cls: type | None = None) -> bool:
        return True if obj is None else bool(obj.vqa.needs_images)


@dataclass
class _AskedQuestions:
    """The VQA requests of one batch, each with its owner ``(item index, question)`` and the
    image's answer-cache key (``None``: not cached)."""

    requests: list[VQARequest] = field(default_factory=list)
    owners: list[tuple[int, Any]] = field(default_factory=list)
    image_keys: list[str | None] = field(default_factory=list)


class QAMetric(Metric):
    """A question-generation/answering faithfulness metric (TIFA, DSG).

    Parameters
    ----------
    name : str
        Score column name.
    vqa : VQABackend or mapping
        The answering backend (a mapping is instantiated with Hydra).
    questions : {"released", "file", "generate"}
        ``released``/``file``: read ``questions_file`` (questions keyed by SEG id); ``generate``:
        ask ``lm`` for questions about each prompt (cached).
    questions_file : str, optional
        A question CSV, or a folder holding the default file (``tifa_questions.csv`` /
        ``dsg_questions.csv``), e.g. the TS2 release folder. ``None``: look beside the dataset,
        inferring its root from the items' image paths (TS2 layout ``<root>/images/...``).
    lm : LMBackend or mapping, optional
        Question generator model (only for ``questions=generate``).
    generation : mapping, optional
        :class:`~.generation.QuestionGenerator` options: ``template_file``, ``max_attempts``,
        ``max_questions``, ``retry_failed``.
    accumulation : {"tifa", "dsg"}, optional
        Default: the class's own (TIFA: fraction correct; DSG: transitive parent gating).
    matcher : AnswerMatcher or mapping, optional
        Answer -> choice matcher (default all-mpnet-base-v2, as TIFA).
    cache : bool
        Use the shared QA cache for answers and generated questions.
    cache_dir : str, optional
        Folder of ``qa.sqlite`` (default: the score cache's folder).
    question_tokens, vqa_tokens : float
        Average tokens per generated question and per VQA call, for the FLOPs estimate (TS2 A.3:
        TIFA 40/20, DSG 40/15).
    generator_params : float, optional
        Parameter count of the model that wrote the questions, for the FLOPs estimate when the
        questions come from a file (the paper counts GPT-3's cost).
    dataset_root : str, optional
        Where the dataset lives (the configs pass ``${path}``): the default question file is
        looked for there first, so that its hash is part of the fingerprint from the start.
    parent_overrides : str or mapping, optional
        Replace the parents of some questions after loading a question file: a name of
        :data:`PARENT_OVERRIDES` (``seg65_old``: SEG 65's older DSG dependency file, to reproduce
        the released DSG columns bit for bit) or ``{seg_id: {question_id: [parent ids]}}``.
        Part of the fingerprint.
    answers_dir : str, optional
        The run's output folder (``${output_dir}`` in the configs): per-question rows are appended
        to ``answers.csv`` there as each batch finishes (``answers_<name>.csv`` if another kind of
        metric already wrote an ``answers.csv``). Only images computed in this run appear; images
        whose score came from the score cache were written by the run that computed them.
    """

    higher_is_better: ClassVar[bool] = True
    score_range: ClassVar[tuple[float, float] | None] = (0.0, 1.0)
    kind: ClassVar[str] = "tifa"
    default_accumulation: ClassVar[str] = "tifa"
    default_questions_file: ClassVar[str] = "tifa_questions.csv"
    default_question_tokens: ClassVar[float] = 40.0
    default_vqa_tokens: ClassVar[float] = 20.0

    def __init__(self, name: str, vqa: VQABackend | Mapping[str, Any], questions: str = "released",
                 questions_file: str | None = None, lm: Any = None, generation: Mapping[str, Any] | None = None,
                 accumulation: str | None = None, matcher: AnswerMatcher | Mapping[str, Any] | None = None,
                 cache: bool = True, cache_dir: str | None = None, question_tokens: float | None = None,
                 vqa_tokens: float | None = None, generator_params: float | None = None,
                 dataset_root: str | None = None, answers_dir: str | None = None,
                 parent_overrides: str | Mapping[str, Any] | None = None) -> None:
        super().__init__(name)
        self.parent_overrides = _parent_overrides(parent_overrides, name)
        self.vqa = _instantiate(vqa, "vqa")
        if not isinstance(self.vqa, VQABackend):
            raise TypeError(f"{name}: expected vqa to be a VQABackend, got {type(self.vqa).__name__}")
        self.role = getattr(self.vqa, "role", "metric")  # always_yes, blind_qa ...: the backend makes a control
        if questions not in ("released", "file", "generate"):
            raise ValueError(f"{name}: expected questions one of ['released', 'file', 'generate'], got {questions!r}")
        self.questions = questions
        self.accumulation = accumulation or self.default_accumulation
        if self.accumulation not in ACCUMULATIONS:
            raise ValueError(f"{name}: expected accumulation one of {sorted(ACCUMULATIONS)}, got {self.accumulation!r}")
        self.matcher = _build_matcher(matcher)
        self.use_cache = bool(cache)
        self.cache_dir = cache_dir
        self.question_tokens = float(question_tokens if question_tokens is not None else self.default_question_tokens)
        self.vqa_tokens = float(vqa_tokens if vqa_tokens is not None else self.default_vqa_tokens)
        self.generator_params = generator_params
        self.lm = None
        self.generator = None
        self._generation_opts = dict(generation or {})
        if questions == "generate":
            if lm is None:
                raise ValueError(f"{name}: questions=generate needs an lm (e.g. metric.lm.model=...), got none")
            self.lm = _instantiate(lm, "lm")
            from .generation import QuestionGenerator

            # The generator's cache is attached in load(); building it here validates the options.
            self.generator = QuestionGenerator(self.lm, style=self.kind, **self._generation_opts)
        self.questions_file: Path | None = None
        if questions in ("released", "file"):
            self.questions_file = self._question_file_of(questions_file, dataset_root)
        self.answers_dir = answers_dir
        self._log = None
        self._written: set[tuple[str, str, str]] = set()
        self._qsets: dict[str, QuestionSet] | None = None
        self._generated: dict[str, QuestionSet | QuestionError] = {}
        self._seg_of_prompt: dict[str, list[str]] = {}  # for writing generated sets by SEG id
        self._graphs: dict[str, Any] = {}
        self._cache = None
        self._records: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        self.stats = {"vqa_requests": 0, "vqa_cache_hits": 0, "vqa_model_calls": 0, "questions_generated": 0,
                      "question_cache_hits": 0, "question_failures": 0}

    # Whether the engine must decode images: on an instance, whatever its VQA backend says (replay
    # needs none); on the class, True (most backends look at pixels).
    needs_images = _NeedsImages()  # type: ignore[assignment]

    # -- identity ------------------------------------------------------------------------------------

    def _question_file_of(self, questions_file: str | None, dataset_root: str | None) -> Path | None:
        """The question file to read: the one named, else the one beside the dataset, else ``None``
        (then inferred from the items' image paths at score time)."""
        if questions_file:
            return self._resolve_file(Path(str(questions_file)).expanduser())
        if not dataset_root:
            return None
        root = Path(str(dataset_root)).expanduser()
        cand = (root.parent if root.is_file() else root) / self.default_questions_file
        return cand if cand.is_file() else None

    def _resolve_file(self, p: Path) -> Path:
        if p.is_dir():
            p = p / self.default_questions_file
        elif p.name == "metadata.csv":  # path=<release>/metadata.csv
            p = p.parent / self.default_questions_file
        if not p.is_file():
            raise FileNotFoundError(f"{self.name}: expected a question file at {p}, found none "
                                    f"(set metric.questions_file=FILE, or questions=generate)")
        return p

    def settings(self) -> dict[str, Any]:
        s: dict[str, Any] = {"questions": self.questions, "accumulation": self.accumulation,
                             "vqa": self.vqa.fingerprint(), "matcher": self.matcher.settings()}
        if self.questions == "generate":
            s["generator"] = self.generator.fingerprint()
        elif self.questions_file is not None:
            s["questions_sha256"] = hashlib.sha256(self.questions_file.read_bytes()).hexdigest()
        else:
            # Found at score time beside the dataset; its name is all that is known now.
            s["questions_file"] = f"<dataset>/{self.default_questions_file}"
        if self.parent_overrides:
            s["parent_overrides"] = self.parent_overrides
        return s

    def hub_models(self) -> tuple[Any, ...]:
        # The VQA backend only: the answer matcher loads on first use and only when an answer
        # needs embedding (docs/qa.md), so it is not required up front.
        return under("vqa", self.vqa.hub_models())

    def model_ids(self) -> dict[str, Any]:
        ids = {**self.vqa.model_ids(), "matcher_model": self.matcher.model, "accumulation": self.accumulation,
               "questions": str(self.questions_file) if self.questions_file else self.questions}
        if self.lm is not None:
            ids.update(self.lm.model_ids())
        return ids

    def run_info(self) -> dict[str, Any]:
        """Counters of this run: VQA requests, answer-cache hits, model calls, generated questions."""
        info: dict[str, Any] = {"qa_stats": dict(self.stats)}
        for part, obj in (("vqa_usage", self.vqa), ("lm_usage", self.lm)):
            fn = getattr(obj, "usage", None)
            if callable(fn) and fn() is not None:
                info[part] = fn()
        return info

    # -- cost --------------------------------------------------------------------------------------------
    def mean_questions(self) -> float | None:
        sets = list(self._qsets.values()) if self._qsets else [s for s in self._generated.values()
                                                             if isinstance(s, QuestionSet)]
        return sum(len(s) for s in sets) / len(sets) if sets else None

    def flops_per_image(self) -> float | None:
        """Questions per image x (2 N_gen x question tokens + 2 N_vqa x VQA tokens) (TS2 A.3).

        Parts whose parameter count is unknown (replayed answers without ``n_params``, a file of
        questions without ``generator_params``) count as zero; ``None`` if both are unknown.
        """
        nq = self.mean_questions()
        n_vqa = self.vqa.n_params()
        n_gen = self.lm.n_params() if self.lm is not None else self.generator_params
        if n_vqa is None and n_gen is None:
            return None
        if not n_vqa and not n_gen:  # e.g. always_yes with rule-written questions: free per question
            return 0.0
        if nq is None:
            return None
        return nq * (2.0 * float(n_gen or 0) * self.question_tokens + 2.0 * float(n_vqa or 0) * self.vqa_tokens)

    # -- lifecycle -----------------------------------------------------------------------------------------
    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        if self.questions_file is not None and self._qsets is None:
            self._qsets = self._load_questions(self.questions_file)
        # Models load on first use: a run whose answers are all cached never loads the VQA model,
        # one whose questions are cached never loads the generator, and exact matches (always_yes,
        # the paper's yes/no rule) need no SBERT, so the matcher model is not required up front. One
        # that cannot be loaded fails the metric once, on first use (AnswerMatcher.load remembers
        # the error; the engine stops the metric on ModelUnavailableError).
        self.matcher.device = device
        self._device, self._dtype = device, dtype
        self._vqa_loaded = False

    def _qa_cache(self):
        """The QA cache, opened on first use: after the engine's DataLoader workers have forked, so
        no SQLite connection is inherited by a child process."""
        if self.use_cache and self._cache is None:
            from .cache import QACache

            self._cache = QACache.at(self.cache_dir)
            if self.generator is not None:
                self.generator.cache = self._cache
        return self._cache

    def _ensure_vqa(self) -> None:
        """Load the VQA backend on first use; a failure is a :class:`ModelUnavailableError`, which
        stops the metric once (the engine) instead of failing batch after batch."""
        if not getattr(self, "_vqa_loaded", False):
            from ..hub import ModelUnavailableError

            try:
                self.vqa.load(getattr(self, "_device", "cpu"), getattr(self, "_dtype", None))
            except ModelUnavailableError:
                raise
            except Exception as e:
                ids = self.vqa.model_ids() or {}
                raise ModelUnavailableError(f"could not load the VQA backend {ids or type(self.vqa).__name__}: "
                                            f"{type(e).__name__}: {e}") from e
            self._vqa_loaded = True

    def unload(self) -> None:
        self.vqa.unload()
        self._vqa_loaded = False
        if self._cache is not None:
            self._cache.close()
            self._cache = None
            if self.generator is not None:
                self.generator.cache = None
        if self.lm is not None:
            self.lm.unload()
        # run.json has no channel for metric counters: they go beside answers.csv
        # (usage_<name>.json, the judges' convention).
        if self.answers_dir and str(self.answers_dir) not in ("None", "null"):
            from ..judges.records import write_usage

            write_usage(self.answers_dir, self.name, self.run_info())
            if self.questions == "generate":
                self.write_generated(self.answers_dir)

    def write_generated(self, directory: str | Path) -> tuple[Path, Path | None]:
        """Write this run's generated questions and failures into ``directory``.

        ``questions_<name>.csv`` has the released format with one set per SEG id (reusable as
        ``questions=file questions_file=...``); ``question_failures_<name>.csv`` lists the prompts
        whose generation failed, with the error.
        """
        import pandas as pd

        from .questions import save_question_csv

        d = Path(directory)
        by_seg = {seg: s for p, s in self._generated.items() if isinstance(s, QuestionSet)
                  for seg in self._seg_of_prompt.get(p, [p])}
        qpath = save_question_csv(by_seg, d / f"questions_{self.name}.csv", kind=self.kind)
        bad = [{"prompt": p, "error": str(e)} for p, e in self._generated.items() if not isinstance(e, QuestionSet)]
        fpath = None
        if bad:
            fpath = d / f"question_failures_{self.name}.csv"
            pd.DataFrame(bad, columns=["prompt", "error"]).to_csv(fpath, index=False)
        return qpath, fpath

    def prepare(self, items: Sequence[ScoreItem]) -> None:
        """Find the question file beside the dataset now, so its content hash keys the cache."""
        if self.questions != "generate" and self.questions_file is None and items:
            try:
                self._infer_file(items)
            except MetricError as e:  # reported per item when scoring, like before
                log.warning("%s", e)

    # -- questions -------------------------------------------------------------------------------------------
    def _infer_file(self, items: Sequence[ScoreItem]) -> None:
        """Find the question file beside the dataset from an item's image path (TS2 layout)."""
        for it in items:
            if not it.image_path:
                continue
            ip, fn = str(it.image_path).replace("\\", "/"), str(it.file_name).replace("\\", "/")
            root = Path(ip[: -len(fn)]) if fn and ip.endswith(fn) else Path(ip).parent.parent
            cand = root / self.default_questions_file
            if cand.is_file():
                self.questions_file = cand
                self._qsets = self._load_questions(cand)
                log.info("%s: questions from %s", self.name, cand)
                return
        raise MetricError(f"{self.name}: expected {self.default_questions_file} beside the dataset (no "
                          f"questions_file given), found none; set {self.config_key}.questions_file=FILE, or generate "
                          f"them: {self.config_key}.questions=generate (with a question LM; model-free, for prompts "
                          f"like the mini dataset's: {self.config_key}.questions=generate "
                          f"+qa_lm@{self.config_key}.lm=geneval_rules)")

    def _load_questions(self, path: Path) -> dict[str, QuestionSet]:
        """A question file, with :attr:`parent_overrides` applied (the new graph is validated)."""
        sets = load_question_csv(path, kind=self.kind)
        for seg, edits in self.parent_overrides.items():
            qs = sets.get(seg)
            unknown = sorted(set(edits) - set(qs.ids)) if qs is not None else sorted(edits)
            if qs is None or unknown:
                raise QuestionError(f"{self.name}: parent_overrides name SEG {seg}, question(s) {unknown}, "
                                    f"expected in {path}, found none")
            qs = replace(qs, questions=tuple(replace(q, parents=edits.get(q.question_id, q.parents))
                                             for q in qs.questions))
            qs.graph()  # raises DependencyError (naming the set) for an unknown parent or a cycle
            sets[seg] = qs
        return sets

    def question_sets(self, items: Sequence[ScoreItem]) -> list[QuestionSet | QuestionError]:
        """The question set of each item (SEG id from a file, or the prompt when generating)."""
        if self.questions == "generate":
            prompts = list(dict.fromkeys(it.prompt for it in items if it.prompt not in self._generated))
            if prompts:
                self._qa_cache()
                self.lm.prepare(getattr(self, "_device", "cpu"), getattr(self, "_dtype", None))
                calls0 = self.lm.n_calls
                for res in self.generator.generate(prompts):
                    self.stats["question_cache_hits" if res.cached else "questions_generated"] += 1
                    try:
                        self._generated[res.prompt] = res.question_set(kind=self.kind)
                    except QuestionError as e:
                        self.stats["question_failures"] += 1
                        self._generated[res.prompt] = e
                self.stats.setdefault("lm_calls", 0)
                self.stats["lm_calls"] += self.lm.n_calls - calls0
            for it in items:
                segs = self._seg_of_prompt.setdefault(it.prompt, [])
                if str(it.seg_id) not in segs:
                    segs.append(str(it.seg_id))
            return [self._generated[it.prompt] for it in items]
        if self._qsets is None:
            self._infer_file(items)
        out: list[QuestionSet | QuestionError] = []
        for it in items:
            qs = self._qsets.get(str(it.seg_id))
            out.append(qs if qs is not None else QuestionError(
                f"{self.questions_file}: expected questions for SEG {it.seg_id}, found none"))
        return out

    def _graph(self, qs: QuestionSet):
        key = (qs.key, id(qs))
        g = self._graphs.get(key)
        if g is None:
            g = self._graphs[key] = qs.graph()
        return g

    # -- answering ----------------------------------------------------------------------------------------
    def _answer(self, reqs: list[VQARequest], img_keys: list[str | None]) -> list[str | VQAError]:
        self.stats["vqa_requests"] += len(reqs)
        cache = self._qa_cache() if self.vqa.cacheable else None
        if cache is None:
            return self._ask_vqa(reqs)
        from .cache import answer_key, fingerprint_hash

        bh = fingerprint_hash(self.vqa.fingerprint())
        keys = [answer_key(bh, ik or "", r.question, r.choices if self.vqa.uses_choices else None)
                for r, ik in zip(reqs, img_keys, strict=True)]
        found = cache.get_answers(set(keys))
        self.stats["vqa_cache_hits"] += sum(k in found for k in keys)
        errors: dict[str, VQAError] = {}
        order = list(_first_uncached(keys, found).items())
        step = max(1, self.vqa.batch_size)
        for c in range(0, len(order), step):
            chunk = order[c:c + step]
            res = self._ask_vqa([reqs[j] for _, j in chunk])
            rows = []
            for (k, j), a in zip(chunk, res, strict=True):
                if isinstance(a, VQAError):
                    errors[k] = a
                else:
                    found[k] = a
                    rows.append((k, bh, img_keys[j] or "", reqs[j].question, a))
            cache.put_answers(rows)  # committed per chunk: a killed run keeps these answers
        return [found[k] if k in found else errors[k] for k in keys]

    def _ask_vqa(self, reqs: list[VQARequest]) -> list[str | VQAError]:
        """The VQA backend's answers (loaded on first use), counting its model calls."""
        self._ensure_vqa()
        before = self.vqa.n_model_calls
        out = self.vqa.answer(reqs)
        self.stats["vqa_model_calls"] += self.vqa.n_model_calls - before
        return out

    # -- scoring ------------------------------------------------------------------------------------------
    def score_batch(self, items: Sequence[ScoreItem], images: Sequence[Any] | None) -> list[float]:
        """TIFA/DSG score of each item (see the class docstring).

        Raises
        ------
        MetricError
            Some items could not be scored (no questions for the SEG, failed generation, missing
            recorded answer, API failure); the message names them. The engine then retries item
            by item, so the others are still scored (their answers come from the cache).
        """
        if not hasattr(self, "_device"):  # called without load() (direct Python use)
            self.load("cpu")
        n = len(items)
        fails: dict[int, str] = {}
        qsets = self.question_sets(items)
        asked = self._questions_to_ask(items, images, qsets, fails)
        answers = self._answer(asked.requests, asked.image_keys) if asked.requests else []
        for (i, q), a in zip(asked.owners, answers, strict=True):
            if isinstance(a, VQAError) and i not in fails:
                fails[i] = f"question {q.question_id} ({q.question!r}): {a}"
        good = [k for k, (i, _) in enumerate(asked.owners) if i not in fails]
        matches = self.matcher.match([answers[k] for k in good], [asked.owners[k][1].choices for k in good],
                                     [asked.owners[k][1].answer for k in good])
        per_item: dict[int, list[tuple[Any, str, Any]]] = {}
        for k, m in zip(good, matches, strict=True):
            i, q = asked.owners[k]
            per_item.setdefault(i, []).append((q, answers[k], m))
        scores: list[float] = [math.nan] * n
        for i, rows in per_item.items():
            scores[i] = self._score_item(items[i], qsets[i], rows)
        if fails:
            # Nothing is logged for a failing batch: the engine retries item by item, and the
            # items that succeed then are logged once.
            first = next(iter(fails.items()))
            if n == 1:
                raise MetricError(first[1])
            raise MetricError(f"{len(fails)} of {n} items failed; first {items[first[0]].file_name}: {first[1]}")
        self._write_log(items)
        return scores

    def _unaskable(self, it: ScoreItem, qs: QuestionSet | QuestionError, img: Any) -> str | None:
        """Why no question can be asked about ``it`` (no question set, an empty one, no image), or ``None``."""
        if isinstance(qs, QuestionError):
            return str(qs)
        if len(qs) == 0:
            return f"SEG {it.seg_id}: expected at least one question, got none"
        if self.vqa.needs_images and img is None:
            return f"{it.file_name}: expected a decoded image for the VQA backend, got none"
        return None

    def _questions_to_ask(self, items: Sequence[ScoreItem], images: Sequence[Any] | None,
                          qsets: Sequence[QuestionSet | QuestionError], fails: dict[int, str]) -> _AskedQuestions:
        """One VQA request per question of each askable item; the others get their reason in ``fails``."""
        from .cache import image_key

        asked = _AskedQuestions()
        for i, (it, qs) in enumerate(zip(items, qsets, strict=True)):
            img = images[i] if images is not None else None
            problem = self._unaskable(it, qs, img)
            if problem is not None:
                fails[i] = problem
                continue
            ik = image_key(img) if (img is not None and self.vqa.cacheable and self.use_cache) else None
            for q in qs.questions:
                asked.requests.append(VQARequest(q.question, q.choices, img, it.file_name, it.seg_id, q.question_id))
                asked.owners.append((i, q))
                asked.image_keys.append(ik)
        return asked

    def _score_item(self, it: ScoreItem, qs: QuestionSet, rows: list[tuple[Any, str, Any]]) -> float:
        """The accumulated score of one item from its (question, raw answer, match) rows; keeps
        the per-question records for ``answers.csv``."""
        correct = {q.question_id: (m.choice is not None and m.choice == q.answer) for q, _, m in rows}
        graph = self._graph(qs)
        score = accumulate(self.accumulation, correct, graph)
        gated = dsg_gate(correct, graph) if self.accumulation == "dsg" else correct
        self._records[(it.seg_id, it.file_name, it.prompt)] = [
            {"metric": self.name, "seg_id": it.seg_id, "node": it.node, "file_name": it.file_name,
             "prompt": it.prompt, "question_id": q.question_id, "parent_question_id": format_parents(q.parents),
             "question": q.question, "choices": "|".join(q.choices), "expected": q.answer, "raw_answer": a,
             "matched": m.choice, "match_method": m.method, "similarity": m.similarity,
             "correct": correct[q.question_id], "satisfied": gated[q.question_id], "match_rule": m.rule}
            for q, a, m in rows]
        return score

    def _write_log(self, items: Sequence[ScoreItem]) -> None:
        if not self.answers_dir or str(self.answers_dir) in ("None", "null"):
            return
        if self._log is None:
            from ..judges.records import AnswerLog

            self._log = AnswerLog(self.answers_dir, self.name, ANSWER_COLUMNS[5:])
        rows = []
        for it in items:
            key = (it.seg_id, it.file_name, it.prompt)
            if key not in self._written:
                self._written.add(key)
                rows.extend({k: v for k, v in r.items() if k != "metric"} for r in self._records.get(key, []))
        self._log.write(rows)

    # -- outputs ------------------------------------------------------------------------------------------
    def answer_records(self) -> list[dict[str, Any]]:
        """Per-question rows of every item scored by this instance (columns :data:`ANSWER_COLUMNS`)."""
        return [r for rows in self._records.values() for r in rows]


def _parent_overrides(value: Any, name: str) -> dict[str, dict[str, tuple[str, ...]]]:
    """``parent_overrides`` as ``{seg: {question id: parents}}`` (a preset name or a mapping)."""
    if value is None:
        return {}
    if isinstance(value, str):
        if value not in PARENT_OVERRIDES:
            raise ValueError(f"{name}: expected parent_overrides one of {sorted(PARENT_OVERRIDES)} or a mapping, "
                             f"got {value!r}")
        value = PARENT_OVERRIDES[value]
    if not (isinstance(value, Mapping) or type(value).__name__ == "DictConfig"):
        raise TypeError(f"{name}: expected parent_overrides to be a name or a mapping, got {type(value).__name__}")
    out: dict[str, dict[str, tuple[str, ...]]] = {}
    for seg, edits in value.items():
        if not (isinstance(edits, Mapping) or type(edits).__name__ == "DictConfig"):
            raise TypeError(f"{name}: expected parent_overrides[{seg!r}] to map question ids to parents, got {edits!r}")
        out[str(seg)] = {str(q): tuple(str(p) for p in (ps or ())) for q, ps in edits.items()}
    return out


def _first_uncached(keys: Sequence[str], found: Mapping[str, Any]) -> dict[str, int]:
    """Each answer key not in ``found`` once, with the index of its first request (asked for it)."""
    todo: dict[str, int] = {}
    for j, k in enumerate(keys):
        if k not in found and k not in todo:
            todo[k] = j
    return todo


def _build_matcher(matcher: AnswerMatcher | Mapping[str, Any] | None) -> Any:
    """The answer matcher: the default one, one from plain keyword settings, or a Hydra config/object."""
    if matcher is None:
        return AnswerMatcher()
    if isinstance(matcher, Mapping) and "_target_" not in matcher:
        return AnswerMatcher(**dict(matcher))
    return _instantiate(matcher, "matcher")


def _instantiate(obj: Any, what: str) -> Any:
    """Build a part from a Hydra-style mapping (``_target_``) or return it as is."""
    if isinstance(obj, Mapping) or type(obj).__name__ == "DictConfig":
        if "_target_" not in obj:
            raise ValueError(f"expected {what} to be an object or a config with _target_, got {dict(obj)}")
        from hydra.utils import instantiate

        return instantiate(obj)
    return obj
