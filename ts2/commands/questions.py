"""``ts2 questions generate``: TIFA- or DSG-style questions for a dataset's prompts, by an LM.

Writes the released TS2 question format (``id, prompt, question_id, [parent_question_id,]
question, choices, answer``; one set per SEG id) and, when some prompts failed after every retry,
a failures file (``id, prompt, attempts, error, last_output``). Each finished prompt is cached
at once (QA cache), so a killed run started again asks the model only for the prompts left.
Exit code 0 when every prompt got questions, 1 when some failed (the others are still written),
2 for a configuration error.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from omegaconf import DictConfig

log = logging.getLogger(__name__)


def _prompts(cfg: DictConfig) -> list[tuple[str, str]]:
    """``(id, prompt)`` pairs: the dataset's SEGs, or the lines of ``prompts``."""
    if cfg.get("prompts"):
        p = Path(str(cfg.prompts)).expanduser()
        if not p.is_file():
            raise FileNotFoundError(f"expected a prompts file (one prompt per line) at {p}, found none")
        lines = [ln.strip() for ln in p.read_text(encoding="utf-8").splitlines()]
        pairs = [(str(i), ln) for i, ln in enumerate(ln for ln in lines if ln)]
    else:
        from ts2.common import load_dataset

        pairs = [(s.seg_id, s.prompt) for s in load_dataset(cfg)]
    if cfg.get("limit") is not None:
        pairs = pairs[: int(cfg.limit)]
    return pairs


def _generator(cfg: DictConfig, style: str):
    """The question generator a config describes, with its LM (not loaded yet) and its cache (or None)."""
    from hydra.utils import instantiate

    from metrics_adapters.qa.cache import QACache
    from metrics_adapters.qa.generation import QuestionGenerator

    lm = instantiate(cfg.qa_lm)
    cache = QACache.at(cfg.cache_dir) if cfg.cache else None
    gen = QuestionGenerator(lm, style=style, template_file=cfg.template_file, max_attempts=int(cfg.max_attempts),
                            max_questions=int(cfg.max_questions), cache=cache, retry_failed=bool(cfg.retry_failed),
                            chunk_size=int(cfg.chunk_size))
    return gen, lm, cache


FAILURE_COLUMNS = ["id", "prompt", "attempts", "error", "last_output"]


def _sets_and_failures(pairs, results, style: str) -> tuple[dict, list[dict]]:
    """The question set of every prompt that got one, and a failure row (``FAILURE_COLUMNS``) for every other."""
    from metrics_adapters.qa.questions import QuestionSet

    sets, failed = {}, []
    for (sid, prompt), res in zip(pairs, results, strict=True):
        if res.ok:
            sets[sid] = QuestionSet(sid, prompt, res.questions, kind=style)
        else:
            failed.append({"id": sid, "prompt": prompt, "attempts": res.attempts,
                           "error": res.errors[-1] if res.errors else "", "last_output": res.raw[-1] if res.raw else ""})
    return sets, failed


def _write_failures(failed: list[dict], path: Path, attempts: int) -> int:
    """The failure list beside the questions (exit code 1), or no list at all (0): a stale one would mislead."""
    if not failed:
        path.unlink(missing_ok=True)
        return 0
    import pandas as pd

    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(failed, columns=FAILURE_COLUMNS).to_csv(path, index=False)
    sys.stdout.write(f"failures (after {attempts} attempts each) in {path}\n")
    return 1


def generate(cfg: DictConfig) -> int:
    from metrics_adapters.qa.questions import save_question_csv

    style = str(cfg.style)
    try:
        pairs = _prompts(cfg)
        if not pairs:
            raise ValueError("expected at least one prompt, got none")
        gen, lm, cache = _generator(cfg, style)
    except (ValueError, TypeError, FileNotFoundError) as e:
        log.error("%s", e)
        return 2
    out = Path(str(cfg.out)).expanduser()
    failures = Path(str(cfg.failures)).expanduser() if cfg.get("failures") else out.with_name(out.stem + ".failures.csv")
    device = str(cfg.device)
    if device == "auto" or device.startswith("cuda"):
        from metrics_adapters.engine import resolve_device

        device = resolve_device(device)
    # The LM is loaded only if some prompt is not cached (on its first call).
    lm.prepare(device, None if str(cfg.precision) == "fp32" else str(cfg.precision))
    try:
        results = gen.generate([p for _, p in pairs], progress=bool(cfg.progress))
    finally:
        if cache is not None:
            cache.close()
    sets, failed = _sets_and_failures(pairs, results, style)
    save_question_csv(sets, out, kind=style)
    n_q = sum(len(s) for s in sets.values())
    n_cached = sum(r.cached for r in results)
    sys.stdout.write(f"{style}: {len(sets)} of {len(pairs)} prompts got questions ({n_q} questions, "
                     f"{n_cached} from the cache), {len(failed)} failed; wrote {out}\n")
    return _write_failures(failed, failures, gen.max_attempts)


ACTIONS = {"generate": generate}


def main(cfg: DictConfig) -> int:
    return ACTIONS[str(cfg.action)](cfg)
