"""Question generation & answering metrics (TIFA, DSG) and their parts.

- :mod:`.questions`: question sets, the released CSV format, DSG dependency DAGs;
- :mod:`.generation`: LM question generation with retries and a cache (:mod:`.qg_parsing`: the strict parsers);
- :mod:`.vqa`: VQA backends (BLIP, InstructBLIP, LLaVA-style chat, OpenAI-compatible, replay);
  :mod:`.vqa_generative`: Fuyu, mPLUG-Owl2 (model: :mod:`.mplug_owl2`) and mPLUG-Owl v1; :mod:`.logprobs`: what
  ``answer_logprobs`` and ``answer_logits`` return; :mod:`.vqascore`: VQAScore as t2v_metrics computes it;
- :mod:`.matching`: free-form answer -> choice (exact, yes/no variants, SBERT);
- :mod:`.accumulate`: TIFA and DSG accumulation (pure functions);
- :mod:`.tifa`, :mod:`.dsg`: the metrics; :mod:`.cache`: the shared answer/question cache.

Nothing here imports torch until a model is loaded.
"""

from .accumulate import accumulate, dsg_accumulate, dsg_gate, tifa_accumulate
from .questions import DependencyError, Question, QuestionError, QuestionSet, load_question_csv, save_question_csv

__all__ = ["Question", "QuestionSet", "QuestionError", "DependencyError", "load_question_csv", "save_question_csv",
           "tifa_accumulate", "dsg_gate", "dsg_accumulate", "accumulate"]
