"""Question generation: strict parsing of LM output, retries, recorded failures, the question cache."""

from __future__ import annotations

import pytest
from qa_tiny import garbage_then_good_tifa, good_dsg, good_tifa

from metrics_adapters.qa.cache import QACache
from metrics_adapters.qa.generation import (
    CallableLM,
    ParseError,
    QuestionGenerator,
    load_template,
    parse_dsg,
    parse_tifa,
)
from metrics_adapters.qa.templates import DSG_TEMPLATE, TIFA_TEMPLATE

TIFA_OK = """Sure, here you go.
About dog (animal):
Q: is there a dog?
Choices: yes, no
A: Yes
Q: what animal is this?
Choices: dog, cat, horse, cow
A: dog

About red (color):
Q: is the ball red?
Choices: yes, no
A: yes
Description: next example that must be ignored
About junk
"""


def test_parse_tifa_well_formed():
    qs = parse_tifa(TIFA_OK)
    assert [q.question for q in qs] == ["is there a dog?", "what animal is this?", "is the ball red?"]
    assert qs[0].answer == "yes"  # spelled as the choice
    assert qs[1].choices == ("dog", "cat", "horse", "cow") and qs[1].answer == "dog"
    assert [q.category for q in qs] == ["animal", "animal", "color"]
    assert [q.question_id for q in qs] == ["0", "1", "2"]


@pytest.mark.parametrize("text, message", [
    ("no questions at all", "at least one 'About"),
    ("About dog (animal):\nQ: is there a dog?\nA: yes", "A: right after Choices:"),
    ("About dog (animal):\nQ: is there a dog?\nChoices: yes, no\nA: maybe", "one of the choices"),
    ("About dog (animal):\nQ: is there a dog?\nChoices: yes\nA: yes", "at least two"),
    ("About dog (animal):\nQ: is there a dog?\nChoices: yes, Yes\nA: yes", "distinct choices"),
    ("About dog (animal):\nQ: is there a dog?\nChoices: yes, no", "end with A:"),
    ("About dog (animal):\nQ: a?\nChoices: yes, no\nA: yes\nrandom words here", "line 5: expected an 'About"),
    ("About dog (animal):\nAbout cat (animal):\nQ: a?\nChoices: yes, no\nA: yes", "line 2: expected a question"),
    ("About dog (animal):\nQ: a?\nQ: b?\nChoices: yes, no\nA: yes", "got a new question"),
])
def test_parse_tifa_malformed(text, message):
    with pytest.raises(ParseError, match=message):
        parse_tifa(text)


def test_parse_tifa_limits_runaway_output():
    block = "\n".join(f"About x{i} (object):\nQ: q{i}?\nChoices: yes, no\nA: yes" for i in range(5))
    assert len(parse_tifa(block, max_questions=5)) == 5
    with pytest.raises(ParseError, match="at most 4"):
        parse_tifa(block, max_questions=4)


def test_parse_dsg_well_formed_multi_parent():
    text = ("Here are the requirements:\n"
            "1 | entity - whole (boy) | Is there a boy? | 0\n"
            "2 | entity - whole (dog) | Is there a dog? | 0\n"
            "3 | relation - spatial (boy, dog, next to) | Is the boy next to the dog? | 1, 2\n"
            "\nDescription: ignored\n4 | x | y? | 0")
    qs = parse_dsg(text)
    assert [(q.question_id, q.parents) for q in qs] == [("0", ()), ("1", ()), ("2", ("0", "1"))]
    assert all(q.choices == ("yes", "no") and q.answer == "yes" for q in qs)
    assert qs[2].category == "relation"


@pytest.mark.parametrize("text, message", [
    ("", "at least one requirement"),
    ("1 | e (a) | Is there a? | 0\n3 | e (b) | Is there b? | 0", "expected requirement id 2, got 3"),
    ("1 | e (a) | Is there a? | 0\n2 | e (b) | Is there b? | 2", r"earlier ids 1..1, got \[2\]"),
    ("1 | e (a) | Is there a? | 0\n2 | e (b) | Is there b? | 3", r"earlier ids 1..1, got \[3\]"),
    ("1 | e (a) | Is there a? | 0\n2 | e (b) | Is there b? | 0,1", "'0' alone"),
    ("1 | e (a) | There is a. | 0", "ending with '\\?'"),
    ("1 | e (a) | Is there a? | 0\nnot a requirement line", "line 2: expected '<id> |"),
    ("1 | e (a) | Is there a? | 0\n2 | e (b) | Is b? | 1,1", "distinct parent ids"),
])
def test_parse_dsg_malformed(text, message):
    with pytest.raises(ParseError, match=message):
        parse_dsg(text)


def test_builtin_templates_parse_their_own_examples():
    # Each template's examples are in the format its parser accepts (the LM imitates them).
    for template, parser, n in ((TIFA_TEMPLATE, parse_tifa, 3), (DSG_TEMPLATE, parse_dsg, 3)):
        examples = template.split("Description: ")[1:-1]
        assert len(examples) == n
        for ex in examples:
            assert len(parser(ex.split("\n", 1)[1])) >= 4


def test_template_file(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("Questions for: {prompt}\n")
    assert load_template("tifa", str(p)).startswith("Questions for")
    p.write_text("no placeholder")
    with pytest.raises(ValueError, match=r"\{prompt\}"):
        load_template("tifa", str(p))
    with pytest.raises(ValueError, match="question style"):
        load_template("vqa")


def _gen(fn, name, tmp_path=None, **kw):
    cache = QACache(tmp_path / "qa.sqlite") if tmp_path is not None else None
    lm = CallableLM(fn, name=name)
    return QuestionGenerator(lm, cache=cache, **kw), lm


def test_retry_after_malformed_output_then_success(tmp_path):
    gen, lm = _gen(garbage_then_good_tifa, "flaky", tmp_path, max_attempts=3)
    [res] = gen.generate(["A brown horse in a field"])
    assert res.ok and res.attempts == 2 and lm.n_calls == 2
    assert "attempt 1" in res.errors[0] and len(res.raw) == 2
    assert [q.question for q in res.questions][:2] == ["is there a brown?", "what is in the picture?"]


def test_failure_is_recorded_not_raised(tmp_path):
    gen, lm = _gen(lambda p, a: "I cannot help with that.", "refuser", tmp_path, max_attempts=3)
    [res] = gen.generate(["A cat"])
    assert not res.ok and res.questions is None and res.attempts == 3 and lm.n_calls == 3
    assert len(res.errors) == 3 and res.raw == ("I cannot help with that.",) * 3
    with pytest.raises(Exception, match="question generation failed for prompt 'A cat' after 3"):
        res.question_set()


def test_model_call_errors_are_retried_and_recorded(tmp_path):
    def boom(prompt, attempt):
        raise TimeoutError("endpoint timed out")
    gen, lm = _gen(boom, "boom", tmp_path, max_attempts=2)
    [res] = gen.generate(["A cat"])
    assert not res.ok and "model call failed: TimeoutError: endpoint timed out" in res.errors[-1]


def test_cache_second_run_makes_no_calls_and_keeps_failures(tmp_path):
    prompts = ["A red car", "A dog on a sofa", "A red car"]
    gen, lm = _gen(good_tifa, "good", tmp_path)
    first = gen.generate(prompts)
    assert lm.n_calls == 2  # duplicates generated once
    gen2, lm2 = _gen(good_tifa, "good", tmp_path)
    second = gen2.generate(prompts)
    assert lm2.n_calls == 0 and all(r.cached for r in second)
    assert [r.questions for r in second] == [r.questions for r in first]
    # Failures are cached too (a deterministic model would fail again) ...
    bad, lmb = _gen(lambda p, a: "junk", "junk", tmp_path, max_attempts=2)
    bad.generate(["A cat"])
    bad2, lmb2 = _gen(lambda p, a: "junk", "junk", tmp_path, max_attempts=2)
    assert not bad2.generate(["A cat"])[0].ok and lmb2.n_calls == 0
    # ... unless retry_failed asks again.
    bad3, lmb3 = _gen(lambda p, a: "junk", "junk", tmp_path, max_attempts=2, retry_failed=True)
    bad3.generate(["A cat"])
    assert lmb3.n_calls == 2


def test_cache_key_changes_with_generator_settings(tmp_path):
    gen, _ = _gen(good_tifa, "good", tmp_path)
    key = gen._key("A cat")[0]
    assert key == _gen(good_tifa, "good")[0]._key("A cat")[0]
    assert key != gen._key("A cat.")[0]  # prompt
    assert key != _gen(good_tifa, "good-v2")[0]._key("A cat")[0]  # generator identity
    assert key != _gen(good_tifa, "good", max_attempts=4)[0]._key("A cat")[0]
    assert key != _gen(good_dsg, "good", style="dsg")[0]._key("A cat")[0]  # style/template
    p = tmp_path / "t.txt"
    p.write_text(TIFA_TEMPLATE + "\n")
    assert key != _gen(good_tifa, "good", template_file=str(p))[0]._key("A cat")[0]
    lm = CallableLM(good_tifa, name="good", temperature=0.3)
    assert key != QuestionGenerator(lm)._key("A cat")[0]


def test_dsg_generation_builds_a_dag():
    gen, _ = _gen(good_dsg, "dsg", style="dsg")
    [res] = gen.generate(["A fluffy white kitten sleeping"])
    s = res.question_set(key="7", kind="dsg")
    assert s.key == "7" and s.kind == "dsg"
    assert sorted(s.graph().edges) == [("0", "1"), ("0", "2")]


def test_tiny_random_llama_output_is_recorded_as_failures(tmp_path):
    """A real transformers causal LM (random weights) through the whole path: garbage -> failure."""
    pytest.importorskip("transformers")
    from qa_tiny import build_tiny_llama

    from metrics_adapters.qa.generation import HFCausalLM

    d = build_tiny_llama(tmp_path / "llama")
    lm = HFCausalLM(str(d), max_new_tokens=6, batch_size=2)
    gen = QuestionGenerator(lm, style="tifa", max_attempts=2, cache=QACache(tmp_path / "qa.sqlite"))
    res = gen.generate(["A red car", "Two cats"])
    assert [r.ok for r in res] == [False, False]
    assert all(r.attempts == 2 and len(r.raw) == 2 and all(r.raw) for r in res)  # real (garbage) text
    assert lm.n_calls == 4
    # Greedy first attempt is reproducible; the retry samples with a seed.
    again = HFCausalLM(str(d), max_new_tokens=6).complete(["A red car".join(gen.template.split("{prompt}"))])
    assert again[0] == res[0].raw[0]
