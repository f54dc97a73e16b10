"""Answer -> choice matching: normalisation, yes/no variants, embedding fallback, edge cases."""

from __future__ import annotations

import numpy as np
import pytest

from metrics_adapters.qa.matching import AnswerMatcher, normalize_answer, yes_no_variant


class VecEncoder:
    """Hand-made embeddings: each text maps to a fixed vector; counts what it was asked."""

    def __init__(self, table):
        self.table = {k: np.asarray(v, dtype=float) for k, v in table.items()}
        self.calls: list[list[str]] = []

    def __call__(self, texts):
        self.calls.append(list(texts))
        return np.stack([self.table[t] for t in texts])


def test_normalize_answer():
    assert normalize_answer("  Yes. ") == "yes"
    assert normalize_answer("Christmas\tTree!") == "christmas tree"
    assert normalize_answer("t-shirt") == "t-shirt"
    assert normalize_answer("\"Red\"") == "red"
    assert normalize_answer("ＹＥＳ") == "yes"  # full-width letters (NFKC)
    assert normalize_answer("...") == ""


def test_yes_no_variants():
    for a in ("yep", "Yeah", "TRUE", "sure", "yes, it is", "Yes."):
        assert yes_no_variant(a) == "yes", a
    for a in ("nope", "No, it is red", "false", "not at all", "none"):
        assert yes_no_variant(a) == "no", a
    for a in ("red", "yesterday", "nobody", "no dog"):
        assert yes_no_variant(a) is None, a


def test_exact_match_wins_before_embedding_and_keeps_the_choice_spelling():
    enc = VecEncoder({})
    m = AnswerMatcher(model="fake", encoder=enc)
    r = m.match(["christmas tree", "RED", "2"], [("Christmas tree", "pine tree"), ("red", "blue"), ("1", "2", "3")])
    assert [x.choice for x in r] == ["Christmas tree", "red", "2"]
    assert {x.method for x in r} == {"exact"}
    assert enc.calls == []  # no embedding needed


def test_yes_no_variants_only_for_yes_no_questions():
    enc = VecEncoder({"nope": [0.2, 1], "yes": [1, 0], "maybe": [0, 1]})
    m = AnswerMatcher(model="fake", encoder=enc)
    r = m.match(["nope", "nope"], [("yes", "no"), ("yes", "maybe")])
    assert (r[0].choice, r[0].method) == ("no", "yes_no")
    # Not a yes/no question: "nope" goes to the embedding, which picks "maybe" here.
    assert (r[1].choice, r[1].method) == ("maybe", "embedding")
    off = AnswerMatcher(model="fake", encoder=VecEncoder({"nope": [1, 0.2], "yes": [1, 0], "no": [0, 1]}),
                        yes_no_variants=False)
    assert off.match_one("nope", ("yes", "no")).choice == "yes"  # the encoder decides when variants are off


def test_embedding_picks_highest_cosine_not_dot_product():
    # "crimson" is closer in angle to "red" although "blue" has the larger dot product (longer vector).
    enc = VecEncoder({"crimson": [1.0, 0.1], "red": [1.0, 0.0], "blue": [5.0, 5.0]})
    r = AnswerMatcher(model="fake", encoder=enc).match_one("crimson", ("blue", "red"))
    assert (r.choice, r.method) == ("red", "embedding")
    assert r.similarity == pytest.approx(1 / np.sqrt(1.01))


def test_ties_go_to_the_first_choice_and_zero_vectors_do_not_crash():
    enc = VecEncoder({"x": [1, 0], "a": [0, 1], "b": [0, 1], "z": [0, 0]})
    m = AnswerMatcher(model="fake", encoder=enc)
    assert m.match_one("x", ("a", "b")).choice == "a"
    assert m.match_one("x", ("b", "a")).choice == "b"
    assert m.match_one("z", ("a", "b")).choice == "a"  # all cosines 0


def test_empty_answer_matches_nothing():
    m = AnswerMatcher(model="fake", encoder=VecEncoder({}))
    r = m.match_one("  ", ("yes", "no"))
    assert r.choice is None and r.method == "none"


def test_each_text_is_embedded_once():
    enc = VecEncoder({"crimson": [1, 0.1], "red": [1, 0], "blue": [0, 1]})
    m = AnswerMatcher(model="fake", encoder=enc)
    m.match(["crimson", "crimson"], [("red", "blue"), ("blue", "red")])
    m.match(["crimson"], [("red", "blue")])
    assert [sorted(c) for c in enc.calls] == [["blue", "crimson", "red"]]
    assert m.n_encoded == 3


def test_bad_input():
    m = AnswerMatcher(model="fake", encoder=VecEncoder({}))
    with pytest.raises(ValueError, match="one choice list per answer"):
        m.match(["a"], [])
    with pytest.raises(ValueError, match="at least one choice"):
        m.match(["a"], [()])


def test_settings_change_with_what_changes_a_match():
    a = AnswerMatcher(model="m1").settings()
    assert a != AnswerMatcher(model="m2").settings()
    assert a != AnswerMatcher(model="m1", yes_no_variants=False).settings()
    assert a == AnswerMatcher(model="m1", batch_size=7, device="cuda").settings()  # speed only


def test_real_minilm_maps_paraphrases():
    pytest.importorskip("sentence_transformers")
    from metrics_adapters.qa.models import ModelFetchError, minilm_path

    try:
        minilm_path()
    except ModelFetchError as e:
        pytest.skip(str(e))
    m = AnswerMatcher(model="pypi:all-MiniLM-L6-v2")
    r = m.match(["crimson", "two", "kitten", "yep"],
                [("red", "green", "blue"), ("1", "2", "3", "4"), ("dog", "cat", "horse"), ("yes", "no")])
    assert [x.choice for x in r] == ["red", "2", "cat", "yes"]
    # "two" states the choice "2" (number words equal their digits), so the embedding is not asked.
    assert [x.method for x in r] == ["embedding", "stated", "embedding", "yes_no"]


def test_unavailable_matcher_model_fails_at_check_and_load_once(tmp_path, monkeypatch):
    # issue 28: a missing local folder fails before any scoring, naming the model and the option
    from metrics_adapters.hub import ModelUnavailableError

    missing = tmp_path / "no-such-model"
    with pytest.raises(ModelUnavailableError, match=rf"'{missing}' to be a local folder, found none: point "
                                                    r"metric\.matcher\.model=DIR at a local copy"):
        AnswerMatcher(model=str(missing)).check()
    AnswerMatcher(model=str(tmp_path)).check()  # an existing folder passes (its contents are checked at load)
    AnswerMatcher(model="pypi:all-mpnet-base-v2").check()  # checked on use
    # a folder that is no model: the load fails once, then the same error without a second try
    st = pytest.importorskip("sentence_transformers")
    calls = []

    def broken(*args, **kwargs):
        calls.append(args)
        raise OSError("no config.json")

    monkeypatch.setattr(st, "SentenceTransformer", broken)
    m = AnswerMatcher(model=str(tmp_path))
    with pytest.raises(ModelUnavailableError, match=r"no config.json; point metric\.matcher\.model=DIR") as first:
        m.match(["a furry animal"], [["cat", "dog"]])  # states no choice: needs the embedding
    with pytest.raises(ModelUnavailableError) as second:
        m.match(["a furry animal"], [["cat", "dog"]])
    assert second.value is first.value and len(calls) == 1
