"""Judge metrics: strict reply parsing, retries, recorded failures, answers.csv, token accounting
and no leaked secret, against a local fake OpenAI-compatible server (no network)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from PIL import Image
from test_api import SECRET, FakeChatServer

from metrics_adapters.base import MetricError, ScoreItem
from metrics_adapters.judges import (
    ChatRequest,
    HTTPChatBackend,
    LLMJudge,
    ParseError,
    VLMJudge,
    parse_judgement,
    parse_rating,
)
from metrics_adapters.judges.records import AnswerLog, read_answers


# -- parsing -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, score, reason, mode", [
    ('{"score": 7, "reason": "ok"}', 7.0, "ok", "json"),
    ('Sure!\n```json\n{"score": [8], "reasoning": "cat missing"}\n```', 8.0, "cat missing", "json"),
    ('{"Score": "6.5", "rationale": "r"} trailing words', 6.5, "r", "json"),
    ("7", 7.0, "", "number"),
    ("Score: 3/10", 3.0, "", "number"),
    ("9 out of 10.", 9.0, "", "number"),
    ('{"score": 0, "reason": "nothing matches"}', 0.0, "nothing matches", "json"),
])
def test_parse_rating_accepts(text, score, reason, mode):
    r = parse_rating(text, 0, 10)
    assert (r.score, r.reason, r.mode) == (score, reason, mode)


@pytest.mark.parametrize("text, msg", [
    ("I would rate it 7 because 2 objects are there", "expected JSON"),
    ('{"score": 11}', r"in \[0, 10\]"),
    ('{"score": -1}', r"in \[0, 10\]"),
    ('{"rating_of_image": 5}', "expected a 'score' key"),
    ('{"score": true}', "boolean"),
    ('{"score": "high"}', "expected a number"),
    ('{"score": [1, 2]}', "expected a number"),
    ("7/5", "out of 10"),
    ("   ", "empty"),
    (None, "empty"),
])
def test_parse_rating_rejects(text, msg):
    with pytest.raises(ParseError, match=msg):
        parse_rating(text, 0, 10)


def test_parse_rating_bare_number_can_be_disabled():
    with pytest.raises(ParseError):
        parse_rating("7", allow_bare_number=False)


def test_parse_judgement():
    j = parse_judgement('{"error_count": 2, "rating": 61.5, "rationale": "two wrong"}')
    assert (j.error_count, j.rating, j.reason) == (2.0, 61.5, "two wrong")
    j = parse_judgement("Error count: 1\nRating: 80/100\n")
    assert (j.error_count, j.rating, j.mode) == (1.0, 80.0, "lines")
    for bad, msg in [('{"error_count": 1.5, "rating": 50}', "whole"), ('{"error_count": -1, "rating": 50}', "whole"),
                     ('{"error_count": 1, "rating": 150}', r"in \[0, 100\]"), ('{"rating": 50}', "error_count"),
                     ("Rating: 50", "one 'Error count:'"), ("Error count: 1\nError count: 2\nRating: 5", "one")]:
        with pytest.raises(ParseError, match=msg):
            parse_judgement(bad)


# -- helpers --------------------------------------------------------------------------------------------
def _items(tmp_path, n, prompts=None):
    items = []
    for i in range(n):
        p = tmp_path / f"img{i}.png"
        Image.new("RGB", (8, 8), (30 * i, 10, 10)).save(p)
        items.append(ScoreItem(seg_id=str(i // 2), node=str(i % 2), file_name=f"img{i}.png",
                               prompt=(prompts or [f"prompt number {i}"] * n)[i], image_path=str(p)))
    return items


def _backend(url, **kw):
    kw = {"api_key_env": "TS2_FAKE_KEY", "timeout": 2.0, "max_retries": 2, "backoff_base": 0.001,
          "backoff_max": 0.002, "price_per_1k_prompt": 1.0, "price_per_1k_completion": 2.0, **kw}
    return HTTPChatBackend(url, "fake-vlm", **kw)


def _text(req) -> str:
    c = req["messages"][-1]["content"]
    return c if isinstance(c, str) else c[0]["text"]


_SEEN_429: set = set()


def _vie_responder(req, n):
    """prompt number 0: malformed once, then JSON; 1: 429 first; 2: bare number; 3: never readable;
    others: JSON with the score = the prompt number."""
    text = _text(req)
    k = int(re.search(r"prompt number (\d+)", text).group(1))
    retried = "could not be read" in text
    if k == 0:
        return ("ok", '{"score": 6, "reason": "the colours are right"}' if retried else "Looks good to me!", 100, 10)
    if k == 1:
        if "p1" not in _SEEN_429:  # the first request for this image, whatever the arrival order
            _SEEN_429.add("p1")
            return ("status", 429, None)
        return ("ok", '{"score": 4, "reason": "one missing"}', 100, 10)
    if k == 2:
        return ("ok", "8", 100, 1)
    if k == 3:
        return ("ok", "I cannot rate this image, sorry.", 100, 7)
    return ("ok", json.dumps({"score": k, "reason": f"r{k}"}), 100, 10)


# -- the VLM judge through the engine ----------------------------------------------------------------
def test_vlm_judge_parses_retries_and_records_failures(tmp_path, monkeypatch, caplog):
    from metrics_adapters.engine import EngineSettings, score_metric, write_outputs

    monkeypatch.setenv("TS2_FAKE_KEY", SECRET)
    _SEEN_429.clear()
    out = tmp_path / "run"
    items = _items(tmp_path, 6)
    with FakeChatServer(_vie_responder) as srv, caplog.at_level("DEBUG"):
        judge = VLMJudge(backend=_backend(srv.url), answers_dir=str(out), max_attempts=3)
        run = score_metric(judge, items, None, EngineSettings(device="cpu", batch_size=4, num_workers=0, progress=False))
        csv_path, json_path = write_outputs(out, items, [run], config={"note": "test"})
    scores = {it.file_name: (s[0] if s else None) for it, s in zip(items, run.scores, strict=True)}
    assert scores == {"img0.png": 6.0, "img1.png": 4.0, "img2.png": 8.0, "img3.png": None, "img4.png": 4.0,
                      "img5.png": 5.0}
    # the unreadable image is a recorded failure with the reason, never a 0
    assert [f.file_name for f in run.failures] == ["img3.png"]
    assert "unreadable reply" in run.failures[0].reason and "after 3 attempt" in run.failures[0].reason
    # the good ones were asked once (or re-asked for their own reasons), not again by the engine's
    # item-by-item retry of the failed batch: 0 twice, 1 twice (429), 3 thrice, the rest once
    asked = [int(re.search(r"prompt number (\d+)", _text(r["json"])).group(1)) for r in srv.requests]
    assert sorted(asked) == [0, 0, 1, 1, 2, 3, 3, 3, 4, 5]
    # images reach the model as PNG data URLs
    first = srv.requests[0]["json"]["messages"][-1]["content"]
    assert first[1]["image_url"]["url"].startswith("data:image/png;base64,")

    ans = read_answers(out / "answers.csv")
    assert list(ans.file_name) == [f"img{i}.png" for i in range(6)]
    row0 = ans.set_index("file_name").loc["img0.png"]
    assert (row0.score, row0.reason, int(row0.attempts)) == (6.0, "the colours are right", 2)
    row3 = ans.set_index("file_name").loc["img3.png"]
    assert np.isnan(row3.score) and "unreadable reply" in row3.error and "cannot rate" in row3.reply

    usage = json.loads((out / "usage_vlm_judge.json").read_text())
    # 9 answered requests (the 429 has no body tokens): 9 x 100 prompt tokens; completion 10 x 6 + 1 + 7 x 3 - ...
    completions = {0: [10, 10], 1: [10], 2: [1], 3: [7, 7, 7], 4: [10], 5: [10]}
    assert usage["prompt_tokens"] == 100 * 9
    assert usage["completion_tokens"] == sum(sum(v) for v in completions.values())
    assert usage["errors"] == {"429": 1} and usage["retries"] == 1
    assert usage["estimated_cost"] == pytest.approx(900 / 1000 * 1.0 + usage["completion_tokens"] / 1000 * 2.0)
    assert judge.run_info()["usage"]["prompt_tokens"] == 900

    for f in out.rglob("*"):
        if f.is_file():
            assert SECRET not in f.read_text(errors="replace"), f
    assert SECRET not in caplog.text


def test_vlm_judge_needs_a_vision_backend_and_its_placeholder():
    with pytest.raises(ValueError, match="vision"):
        VLMJudge(backend=HTTPChatBackend("http://127.0.0.1:9/v1", "m", api_key_env=None, vision=False))
    with pytest.raises(ValueError, match=r"\{prompt\}"):
        VLMJudge(backend=HTTPChatBackend("http://127.0.0.1:9/v1", "m", api_key_env=None), template="rate it")


def test_vlm_judge_fingerprint_tracks_template_and_decoding_not_the_key(monkeypatch):
    b = lambda **kw: HTTPChatBackend("http://127.0.0.1:9/v1", "m", api_key_env=None, **kw)  # noqa: E731
    base = VLMJudge(backend=b()).fingerprint_hash()
    assert VLMJudge(backend=b(), name="other").fingerprint_hash() == base
    assert VLMJudge(backend=b(temperature=0.7)).fingerprint_hash() != base
    assert VLMJudge(backend=b(), template="Rate {prompt} 0-10 as JSON").fingerprint_hash() != base
    assert VLMJudge(backend=HTTPChatBackend("http://127.0.0.1:9/v1", "m", api_key_env="OTHER_VAR")).fingerprint_hash() == base


# -- the LLM judge -------------------------------------------------------------------------------------------
def _llm_responder(req, n):
    text = _text(req)
    has_image = not isinstance(req["messages"][-1]["content"], str)
    if has_image and text.startswith("Describe"):
        return ("ok", "A red square on a white background.", 50, 8)
    if has_image:
        return ("ok", "square: red; left", 50, 5)
    prompt = re.search(r"Text prompt: (.*)", text).group(1)
    if prompt == "a blue square":
        return ("ok", '{"error_count": 1, "rating": 40, "rationale": "the square is red, not blue"}', 120, 20)
    if prompt == "gibberish":
        return ("ok", "no idea", 120, 2)
    return ("ok", "Error count: 0\nRating: 95", 120, 6)


def test_llm_judge_two_columns_directions_and_failures(tmp_path, monkeypatch):
    monkeypatch.setenv("TS2_FAKE_KEY", SECRET)
    items = _items(tmp_path, 3, prompts=["a red square", "a blue square", "gibberish"])
    with FakeChatServer(_llm_responder) as srv:
        judge = LLMJudge(captioner=_backend(srv.url), evaluator=_backend(srv.url, vision=False),
                         answers_dir=str(tmp_path / "out"), max_attempts=2)
        assert judge.output_columns() == ("llm_judge_error_count", "llm_judge_rating")
        assert judge.directions() == {"llm_judge_error_count": False, "llm_judge_rating": True}
        imgs = [Image.open(it.image_path).convert("RGB") for it in items]
        with pytest.raises(MetricError, match="img2.png: unreadable reply"):
            judge.score_batch(items, imgs)
        assert judge.score_batch(items[:2], imgs[:2]) == [(0.0, 95.0), (1.0, 40.0)]
    # captions are per image and reused across prompts: 3 images x 2 caption calls, + evaluator calls
    caption_calls = [r for r in srv.requests if not isinstance(r["json"]["messages"][-1]["content"], str)]
    assert len(caption_calls) == 6
    eval_text = [_text(r["json"]) for r in srv.requests if isinstance(r["json"]["messages"][-1]["content"], str)][0]
    assert "A red square on a white background." in eval_text and "square: red; left" in eval_text
    ans = read_answers(tmp_path / "out" / "answers.csv").set_index("file_name")
    assert ans.loc["img1.png", "rationale"] == "the square is red, not blue"
    assert ans.loc["img2.png", "error"].startswith("unreadable reply")
    u = judge.run_info()["usage"]
    assert u["captioner"]["prompt_tokens"] + u["evaluator"]["prompt_tokens"] == 6 * 50 + (1 + 1 + 2) * 120


def test_llm_judge_captioner_failure_fails_the_image(tmp_path):
    def responder(req, n):
        return ("status", 500) if not isinstance(req["messages"][-1]["content"], str) else ("ok", "{}", 1, 1)

    items = _items(tmp_path, 1)
    with FakeChatServer(responder) as srv:
        judge = LLMJudge(captioner=_backend(srv.url, api_key_env=None),
                         evaluator=_backend(srv.url, api_key_env=None, vision=False), max_attempts=1)
        with pytest.raises(MetricError, match="captioner failed: model call failed"):
            judge.score_batch(items, [Image.open(items[0].image_path)])
    assert all(not isinstance(r["json"]["messages"][-1]["content"], str) for r in srv.requests)


def test_answer_log_appends_and_moves_aside_for_other_headers(tmp_path):
    a = AnswerLog(tmp_path, "j1", ["score"])
    a.write([{"seg_id": "0", "node": "0", "file_name": "x", "prompt": "p", "score": 1}])
    a.write([{"seg_id": "0", "node": "0", "file_name": "x", "prompt": "p", "score": 2}])
    assert read_answers(tmp_path / "answers.csv").score.tolist() == [2]  # last row per image wins
    b = AnswerLog(tmp_path, "j2", ["other"])
    assert b.path.name == "answers_j2.csv"
    assert AnswerLog(None, "j3", ["x"]).path is None


# -- transformers backend on a tiny random chat LM ------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_chat_lm(tmp_path_factory):
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel()
    corpus = ["rate the image from 0 to 10", '{"score": 7, "reason": "ok"}', "a red circle left of a blue square"] * 20
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>", "<pad>"]))
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                                pad_token="<pad>", unk_token="<unk>")
    fast.chat_template = ("{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}</s>{% endfor %}"
                          "{% if add_generation_prompt %}<s>assistant:{% endif %}")
    cfg = transformers.LlamaConfig(vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512,
                                   bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id,
                                   pad_token_id=fast.pad_token_id)
    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("tiny-chat-lm")
    transformers.LlamaForCausalLM(cfg).save_pretrained(out)
    fast.save_pretrained(out)
    return str(out)


def test_transformers_backend_generates_and_counts_tokens(tiny_chat_lm):
    from metrics_adapters.judges import TransformersChatBackend

    be = TransformersChatBackend(tiny_chat_lm, kind="lm", max_new_tokens=5)
    res = be.generate([ChatRequest("rate the image"), ChatRequest("a red circle left of a blue square please")])
    assert all(r.ok and isinstance(r.text, str) for r in res)
    assert res[0].prompt_tokens < res[1].prompt_tokens  # left padding is not counted
    assert all(0 < r.completion_tokens <= 5 for r in res)
    u = be.usage()
    assert u["calls"] == 2 and u["prompt_tokens"] == res[0].prompt_tokens + res[1].prompt_tokens
    assert be.params() and be.params() > 1000
    with pytest.raises(ValueError, match="text-only"):
        be.generate([ChatRequest("x", images=(Image.new("RGB", (4, 4)),))])


def test_llm_judge_with_a_random_transformers_evaluator_records_failures(tiny_chat_lm, tmp_path):
    """A random LM cannot produce the JSON: every image fails with a reason, none is scored."""
    from metrics_adapters.engine import EngineSettings, score_metric
    from metrics_adapters.judges import TransformersChatBackend

    class FixedCaptioner(HTTPChatBackend):  # a captioner that needs no server
        def __init__(self):
            super().__init__("http://127.0.0.1:9/v1", "none", api_key_env=None)

        def generate(self, requests):
            from metrics_adapters.judges import ChatResult

            return [ChatResult("a red square", None, 3, 3) for _ in requests]

    judge = LLMJudge(captioner=FixedCaptioner(), evaluator=TransformersChatBackend(tiny_chat_lm, kind="lm",
                                                                                  max_new_tokens=4), max_attempts=2)
    items = _items(tmp_path, 2)
    run = score_metric(judge, items, None, EngineSettings(device="cpu", num_workers=0, progress=False))
    assert run.n_failed == 2 and all("unreadable reply" in f.reason for f in run.failures)


def test_transformers_vlm_backend_on_a_tiny_llava(tmp_path_factory, tmp_path):
    """The image-text-to-text path (chat template with an image) on a tiny random LLaVA; the VLM
    judge through it records unreadable replies as failures."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from qa_tiny import build_tiny_llava

    from metrics_adapters.judges import TransformersChatBackend

    path = build_tiny_llava(tmp_path_factory.mktemp("tiny-llava"))
    be = TransformersChatBackend(str(path), kind="vlm", max_new_tokens=4)
    img = Image.new("RGB", (40, 30), (200, 20, 20))
    res = be.generate([ChatRequest("Describe this image.", (img,)), ChatRequest("Is it red?", (img,))])
    assert all(r.ok for r in res) and all(0 < r.completion_tokens <= 4 for r in res)
    assert res[0].prompt_tokens > 0 and be.usage()["calls"] == 2
    judge = VLMJudge(backend=be, max_attempts=2, answers_dir=str(tmp_path))
    items = _items(tmp_path, 1)
    with pytest.raises(MetricError, match="unreadable reply"):
        judge.score_batch(items, [img])
    assert read_answers(tmp_path / "answers.csv").attempts.tolist() == [2]
