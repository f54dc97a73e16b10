"""End to end on dataset=mini with a tiny random BLIP VQA and question generation, through the CLI.

Question generation runs twice: with a tiny random Llama (its output is garbage, so every
generation fails, is retried and recorded) and with a fake LM that writes well-formed questions
(so the VQA model and the matcher run). The QA cache makes repeated runs ask no model anything.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from metrics_adapters.qa.questions import load_question_csv
from ts2.cli import main

pytestmark = pytest.mark.slow

MINI = ["dataset=mini", "dataset.n_segs=2", "device=cpu", "num_workers=0", "progress=false"]
FAKE_LM = "metric.lm={_target_:metrics_adapters.qa.generation.CallableLM,fn:'qa_tiny:good_tifa',name:fake-tifa-v1}"


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    pytest.importorskip("transformers")
    from qa_tiny import build_tiny_blip, build_tiny_llama

    d = tmp_path_factory.mktemp("qa_models")
    return {"blip": build_tiny_blip(d / "blip"), "llama": build_tiny_llama(d / "llama")}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("qa_e2e_cache")


def _score(models, cache_dir, out, *extra):
    return main(["score", *MINI, "metric=tifa", f"metric.vqa.model={models['blip']}", "metric.vqa.max_new_tokens=3",
                 "metric.matcher.model=pypi:all-MiniLM-L6-v2", "metric.questions=generate",
                 f"output_dir={out}", f"cache_dir={cache_dir}", *extra])


def _usage(out):
    return json.loads((out / "usage_tifa.json").read_text())["qa_stats"]


def test_tiny_random_lm_generation_failures_are_recorded_and_cached(models, cache_dir, tmp_path):
    lm = ["+qa_lm@metric.lm=hf", f"metric.lm.model={models['llama']}", "metric.lm.use_chat_template=false",
          "metric.lm.max_new_tokens=8"]
    rc = _score(models, cache_dir, tmp_path / "a", *lm)
    assert rc == 1  # every image failed: more than max_failure_share
    run = json.loads((tmp_path / "a" / "run.json").read_text())["metrics"][0]
    assert run["n_failed"] == run["n_items"] == 30
    assert "question generation failed for prompt" in run["failures"][0]["reason"]
    assert "after 3 attempt(s)" in run["failures"][0]["reason"]
    stats = _usage(tmp_path / "a")
    assert stats["lm_calls"] == 2 * 3 and stats["question_failures"] == 2 and stats["vqa_model_calls"] == 0
    fails = pd.read_csv(tmp_path / "a" / "question_failures_tifa.csv")
    assert len(fails) == 2
    # Started again: the failures come from the cache, the model is not asked again.
    assert _score(models, cache_dir, tmp_path / "b", *lm) == 1
    assert _usage(tmp_path / "b")["lm_calls"] == 0


def test_generated_questions_tiny_blip_and_the_answer_cache(models, cache_dir, tmp_path):
    first = tmp_path / "first"
    assert _score(models, cache_dir, first, FAKE_LM) == 0
    scores = pd.read_csv(first / "scores.csv")
    assert len(scores) == 30 and scores["tifa"].between(0, 1).all()
    s1 = _usage(first)
    assert s1["lm_calls"] == 2 and s1["vqa_model_calls"] > 0
    answers = pd.read_csv(first / "answers.csv", dtype=str, keep_default_na=False)
    assert len(answers) == s1["vqa_requests"]
    # The generated questions are written in the released format, keyed by SEG id: reusable as a file.
    qs = load_question_csv(first / "questions_tifa.csv")
    assert sorted(qs) == sorted(scores["seg_id"].astype(str).unique())
    # Second run with another accumulation: the score cache misses, but questions and answers are
    # cached, so neither the LM nor the VQA model is called; TIFA sets have no graph: same scores.
    second = tmp_path / "second"
    assert _score(models, cache_dir, second, FAKE_LM, "metric.accumulation=dsg") == 0
    s2 = _usage(second)
    assert s2["lm_calls"] == 0 and s2["vqa_model_calls"] == 0 and s2["vqa_cache_hits"] == s2["vqa_requests"] > 0
    pd.testing.assert_series_equal(pd.read_csv(second / "scores.csv")["tifa"], scores["tifa"])
    # The identical run again: every score from the score cache, no model even loaded.
    third = tmp_path / "third"
    assert _score(models, cache_dir, third, FAKE_LM) == 0
    run = json.loads((third / "run.json").read_text())["metrics"][0]
    assert run["cache_hits"] == 30 and run["n_scored"] == 0
    assert not (third / "usage_tifa.json").exists()
    # The generated file as the question source gives the same scores (questions keyed by SEG).
    fourth = tmp_path / "fourth"
    rc = main(["score", *MINI, "metric=tifa", f"metric.vqa.model={models['blip']}", "metric.vqa.max_new_tokens=3",
               "metric.matcher.model=pypi:all-MiniLM-L6-v2", "metric.questions=file",
               f"metric.questions_file={first / 'questions_tifa.csv'}", f"output_dir={fourth}", f"cache_dir={cache_dir}"])
    assert rc == 0 and _usage(fourth)["vqa_model_calls"] == 0
    pd.testing.assert_series_equal(pd.read_csv(fourth / "scores.csv")["tifa"], scores["tifa"])


def test_questions_generate_command(tmp_path, cache_dir):
    out = tmp_path / "dsg_questions.csv"
    args = ["questions", "generate", "dataset=mini", "dataset.n_segs=3", "style=dsg", "device=cpu",
            "progress=false", f"cache_dir={cache_dir}", f"out={out}",
            "~qa_lm", "+qa_lm={_target_:metrics_adapters.qa.generation.CallableLM,fn:'qa_tiny:good_dsg',name:fake-dsg-v1}"]
    assert main(args) == 0
    head = out.read_text().splitlines()[0]
    assert head == "id,prompt,question_id,parent_question_id,question,choices,answer"
    sets = load_question_csv(out)
    assert len(sets) == 3 and all(s.kind == "dsg" and len(s.graph().edges) >= 1 for s in sets.values())
    # A model that never writes the format: rc 1, the failures file names each prompt and error.
    bad = tmp_path / "bad.csv"
    args_bad = [a for a in args if not a.startswith(("+qa_lm=", "out="))] + [
        f"out={bad}", "max_attempts=2",
        "+qa_lm={_target_:metrics_adapters.qa.generation.CallableLM,fn:'qa_tiny:garbage_then_good_tifa',name:flaky}"]
    assert main(args_bad) == 1
    fails = pd.read_csv(tmp_path / "bad.failures.csv")
    assert len(fails) == 3 and (fails["attempts"] == 2).all()
    assert fails["error"].str.contains("expected at least one requirement line").all()


def test_every_qa_config_composes_and_instantiates(tmp_path):
    from hydra import compose, initialize_config_module
    from hydra.utils import instantiate

    from metrics_adapters.qa.generation import LMBackend
    from metrics_adapters.qa.metric import QAMetric
    from metrics_adapters.qa.vqa import VQABackend

    ans = tmp_path / "a.csv"
    ans.write_text("0,a.jpg,0,yes\n")
    with initialize_config_module(config_module="conf", version_base="1.3"):
        for metric in ("tifa", "dsg"):
            for vqa in ("blip", "instructblip", "llava", "llava_alt", "openai", "replay"):
                extra = [f"metric.vqa.answers={ans}"] if vqa == "replay" else []
                cfg = compose("score", overrides=[f"metric={metric}", f"metric.vqa={vqa}", *extra,
                                                  "metric.questions=generate", "+qa_lm@metric.lm=hf"])
                m = instantiate(cfg.metric, _convert_="all")
                assert isinstance(m, QAMetric) and isinstance(m.vqa, VQABackend) and isinstance(m.lm, LMBackend)
                assert m.needs_images == (vqa != "replay")
        cfg = compose("score", overrides=["metric=dsg", "metric.vqa=llava_alt"])
        assert "concise" in str(cfg.metric.vqa.system_prompt) or "single word" in str(cfg.metric.vqa.system_prompt)
        for lm in ("hf", "openai"):
            cfg = compose("questions", overrides=[f"qa_lm={lm}"])
            assert isinstance(instantiate(cfg.qa_lm), LMBackend)


def test_questions_generate_from_a_prompts_file(tmp_path, cache_dir):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("A wooden chair by a window\n\nThree green apples\nA red kite\n")
    out = tmp_path / "tifa_questions.csv"
    rc = main(["questions", "generate", f"prompts={prompts}", "limit=2", "style=tifa", "device=cpu", "progress=false",
               f"cache_dir={cache_dir}", f"out={out}", "~qa_lm",
               "+qa_lm={_target_:metrics_adapters.qa.generation.CallableLM,fn:'qa_tiny:good_tifa',name:fake-tifa-v1}"])
    assert rc == 0
    sets = load_question_csv(out)
    assert list(sets) == ["0", "1"]  # blank lines skipped, limit applied
    assert sets["1"].prompt == "Three green apples"
    assert sets["1"].questions[0].question == "is there a three?" and sets["1"].kind == "tifa"
    assert main(["questions", "generate", f"prompts={tmp_path / 'missing.txt'}", f"out={out}", "device=cpu"]) == 2
