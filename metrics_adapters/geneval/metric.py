"""The GenEval-style metric: parse the prompt, detect objects, score the requirements met."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..base import Metric, MetricError, ScoreItem
from ..hub import under
from ..judges.records import AnswerLog, write_usage
from .detectors import Detector, build_detector
from .parser import PromptParseError, PromptSpec, TemplateParser
from .scoring import check_requirements, fraction_met

__all__ = ["GenEvalMetric"]

log = logging.getLogger(__name__)


class GenEvalMetric(Metric):
    """Fraction of the prompt's requirements (objects, colours, counts, position) an object
    detector finds met in the image (GenEval, Ghosh et al. 2023, scored as a fraction).

    Parameters
    ----------
    name : str
    detector : str, Detector or config
        ``"owlv2"`` (default: :class:`~metrics_adapters.geneval.detectors.OwlDetector`,
        transformers zero-shot detection) or ``"shapes"``
        (:class:`~metrics_adapters.geneval.detectors.ShapesDetector`: no weights, for the
        flat-coloured shape scenes of ``dataset=mini``); or a detector config/object.
    parser : TemplateParser, LMPromptParser or config, optional
        Prompt -> requirements; the template parser (default) reads GenEval's prompt forms, the
        LM parser any prompt.
    article_count : {"exact", "at_least"}
        Whether "a red circle" asks for exactly one (default; every wrong count is an error, as
        in semantic error graphs) or at least one (GenEval's reading outside its counting task).
    position_margin : float
        GenEval's minimum offset ``c`` (0.1) for relative positions.
    count_threshold : float
        Minimum detection score for counting (GenEval: 0.9 with its detector; the shapes
        backend's detections all score 1).
    answers_dir : str, optional
        Where ``answers.csv`` (requirements, detections per image) goes.

    Notes
    -----
    A prompt that cannot be parsed, or that names an object outside a closed-vocabulary
    detector's vocabulary (a "dog" for the shapes backend), fails its images with that reason
    instead of scoring them 0.
    """

    paper = "Ghosh et al. 2023, GenEval (arXiv:2310.11513)"

    higher_is_better = True
    score_range = (0.0, 1.0)
    needs_images = True

    _FIELDS = ["score", "n_met", "n_requirements", "task", "failed", "checks", "detections", "error"]

    def __init__(self, name: str = "geneval", detector: Detector | str | Any = "owlv2", parser: Any = None,
                 article_count: str = "exact", position_margin: float = 0.1, count_threshold: float = 0.0,
                 answers_dir: str | None = None) -> None:
        super().__init__(name)
        if article_count not in ("exact", "at_least"):
            raise ValueError(f"{name}: expected article_count 'exact' or 'at_least', got {article_count!r}")
        self.detector = build_detector(detector)
        self._detector_by_name = isinstance(detector, str)  # `detector: owlv2` has no keys to override
        if parser is not None and not hasattr(parser, "parse"):
            from hydra.utils import instantiate

            parser = instantiate(parser)
        self.parser = parser if parser is not None else TemplateParser()
        self.article_count = article_count
        self.position_margin = float(position_margin)
        self.count_threshold = float(count_threshold)
        self.answers_dir = answers_dir
        self._specs: dict[str, PromptSpec | PromptParseError] = {}
        self._log: AnswerLog | None = None
        self._written: set[tuple[str, str]] = set()  # a batch retried item by item logs each image once

    def settings(self) -> dict[str, Any]:
        return {"detector": self.detector.settings(), "parser": self.parser.settings(),
                "article_count": self.article_count, "position_margin": self.position_margin,
                "count_threshold": self.count_threshold, "scoring": "fraction-v1"}

    def model_ids(self) -> dict[str, Any]:
        return self.detector.model_ids()

    def hub_models(self) -> tuple[Any, ...]:
        if not self._detector_by_name:
            return under("detector", self.detector.hub_models())
        # A detector chosen by name has no `detector.model` key: the hint is the detector's config.
        cls = type(self.detector)
        return tuple(replace(m, key="detector", local=f"{{_target_:{cls.__module__}.{cls.__qualname__},{m.key}:{m.local}}}")
                     for m in self.detector.hub_models())

    def flops_per_image(self) -> float | None:
        return self.detector.flops_per_image()

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        self.detector.load(device, dtype)
        self.parser.load(device, dtype)
        self._log = AnswerLog(self.answers_dir, self.name, self._FIELDS)

    def unload(self) -> None:
        self.detector.unload()
        backend = getattr(self.parser, "backend", None)
        if backend is not None:
            backend.unload()

    def run_info(self) -> dict[str, Any]:
        return {"parser_usage": self.parser.usage()}

    def _spec_error(self, spec: PromptSpec | PromptParseError) -> str | None:
        if isinstance(spec, Exception):
            return f"prompt not parsed: {spec}"
        vocab = self.detector.vocabulary()
        if vocab is not None:
            unknown = [o.name for o in spec.objects if o.name not in vocab]
            if unknown:
                return (f"object(s) {unknown} outside the {self.detector.settings().get('detector')} detector's "
                        f"vocabulary {sorted(vocab)}")
        return None

    def _parse_new_prompts(self, items: Sequence[ScoreItem]) -> None:
        """Parse (in one call to the parser) the prompts of ``items`` not parsed before; a prompt's
        spec, or its parse error, is kept for the run."""
        new = [p for p in dict.fromkeys(it.prompt for it in items) if p not in self._specs]
        if new:
            self._specs.update(zip(new, self.parser.parse(new), strict=True))

    def _detections(self, items: Sequence[ScoreItem], images: Sequence[Any]) -> list[Any]:
        """Each image's detections of the objects its (parsed) prompt names."""
        return self.detector.detect(list(images), [[o.name for o in self._specs[it.prompt].objects] for it in items])

    def _log_once(self, rows: list[dict[str, Any]]) -> None:
        """Append the rows of (image, prompt) pairs not logged before: a batch retried item by
        item logs each pair once."""
        rows = [r for r in rows if (r["file_name"], r["prompt"]) not in self._written]
        self._written.update((r["file_name"], r["prompt"]) for r in rows)
        self._log.write(rows)

    def score_batch(self, items: Sequence[ScoreItem], images: Sequence[Any]) -> list[float]:
        if self._log is None:
            self._log = AnswerLog(self.answers_dir, self.name, self._FIELDS)
        self._parse_new_prompts(items)
        errors = {i: self._spec_error(self._specs[it.prompt]) for i, it in enumerate(items)}
        ok_idx = [i for i in range(len(items)) if errors[i] is None]
        dets = self._detections([items[i] for i in ok_idx], [images[i] for i in ok_idx])
        scores: dict[int, float] = {}
        rows = []
        for i, d in zip(ok_idx, dets, strict=True):
            spec = self._specs[items[i].prompt]
            checks = check_requirements(spec, d, self.article_count, self.position_margin, self.count_threshold)
            scores[i] = fraction_met(checks)
            rows.append(_scored_row(items[i], spec, checks, d, scores[i]))
        rows.extend(_identity(items[i]) | {"error": err} for i, err in errors.items() if err is not None)
        self._log_once(rows)
        if self.parser.usage():
            write_usage(self.answers_dir, self.name, self.parser.usage())
        bad = [(items[i].file_name, e) for i, e in errors.items() if e is not None]
        if bad:
            raise MetricError.for_items(bad)
        return [scores[i] for i in range(len(items))]


def _identity(it: ScoreItem) -> dict[str, Any]:
    """The columns that say which image and prompt an answers-log row is about."""
    return {"seg_id": it.seg_id, "node": it.node, "file_name": it.file_name, "prompt": it.prompt}


def _scored_row(it: ScoreItem, spec: PromptSpec, checks: Sequence[Any], detections: Sequence[Any],
                score: float) -> dict[str, Any]:
    """The answers-log row of a scored image: its requirements, which failed and what was detected."""
    return _identity(it) | {
        "score": score, "n_met": sum(c.ok for c in checks), "n_requirements": len(checks), "task": spec.task,
        "failed": "; ".join(f"{c.kind}: {c.target} ({c.found})" for c in checks if not c.ok),
        "checks": [[c.kind, c.target, c.ok, c.found] for c in checks],
        "detections": [x.to_dict() for x in detections], "error": ""}
