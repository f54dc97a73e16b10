"""No API key on disk, in a log or on stderr (issue 18): one test per way a key leaked.

Every case runs against a fake OpenAI-compatible server on 127.0.0.1 (port 0, stopped by the
context manager; its threads are daemons and it never outlives the test). The end-to-end cases
run ``ts2 score`` on the mini set with the VLM judge behind the OpenAI-compatible backend and
then search every file the run wrote (outputs, the score cache, ``ts2.log``, answers) and the
captured stderr/stdout for the key and for every 8-character piece of it.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from test_api import FakeChatServer

from metrics_adapters.api import APIError, ChatClient, InvalidAPIKeyError, user_message
from metrics_adapters.api.secrets import (
    MIN_PIECE,
    check_base_url,
    quote,
    read_api_key,
    scrub,
)

KEY = "sk-proj-7Hq2XvLm9RtB4wKe1NcZ8uPa3DsGf6JyQo5VbTn0MxWr2Ui9"  # 56 characters
assert len(KEY) == 56
ENV = "TS2_SECRET_TEST_KEY"


def pieces(secret: str = KEY, n: int = MIN_PIECE) -> list[str]:
    return [secret[i:i + n] for i in range(len(secret) - n + 1)]


def leaks(text: str) -> list[str]:
    return [p for p in pieces() if p in text]


def echo_body(at: int = 300 - 28) -> str:
    """A server error body echoing the request headers, the key starting at character ``at``."""
    head = '{"error": "unauthorised", "echo": "'
    pad = "h" * (at - len(head) - len("Authorization: Bearer "))
    body = head + pad + "Authorization: Bearer " + KEY + '"}'
    assert body.index(KEY) == at and at < 300 < at + len(KEY)  # straddles the 300-character cut
    return body


# -- the scrubbing functions -----------------------------------------------------------------------
def test_scrub_masks_the_key_and_every_piece_of_it():
    assert scrub(f"a {KEY} b", [KEY]) == "a *** b"
    assert scrub(f"x{KEY[:8]}y{KEY[-9:]}z", [KEY]) == "x***y***z"
    assert scrub(f"{KEY[10:17]}", [KEY]) == KEY[10:17]  # 7 characters: below the piece length
    assert scrub("nothing here", [KEY]) == "nothing here"
    assert scrub("short abc key", ["abc"]) == "short *** key"  # short secrets masked whole only


def test_quote_scrubs_before_the_cut_and_masks_a_piece_at_the_cut():
    body = echo_body()
    naive = body[:300].replace(KEY, "***")  # what the old client did: cut, then replace
    assert KEY[:28] in naive  # the leak this fixes
    q = quote(body, 300, [KEY])
    assert leaks(q) == [] and q.endswith('Bearer ***"}')
    # a key already cut short by the server, then cut again by us: the piece at the cut is masked
    partial = "x" * 290 + KEY[:20]
    q = quote(partial, 300, [KEY])
    assert leaks(q) == [] and q == "x" * 290 + "***"


def test_keys_are_validated_when_read_without_echoing_them(monkeypatch):
    for bad, what in ((KEY[:20] + "\n" + KEY[20:], "a newline at character 21"),
                      (KEY[:5] + "\x1b" + KEY[5:], "a control character at character 6"),
                      (KEY[:30] + " " + KEY[30:], "a space at character 31"),
                      (KEY[:3] + "é" + KEY[3:], "a non-ASCII character at character 4")):
        monkeypatch.setenv(ENV, bad)
        with pytest.raises(InvalidAPIKeyError, match=what) as e:
            read_api_key(ENV)
        assert ENV in str(e.value) and leaks(str(e.value)) == []
    monkeypatch.setenv(ENV, f"  {KEY}\n")  # surrounding whitespace from `$(cat keyfile)` is fine
    assert read_api_key(ENV) == KEY


@pytest.mark.parametrize("url", [f"http://user:{KEY}@127.0.0.1:9/v1", f"https://{KEY}@api.example.com/v1",
                                 f"http://{KEY}:@127.0.0.1/v1"])
def test_credentials_in_base_url_are_refused(url):
    with pytest.raises(ValueError, match="without credentials") as e:
        check_base_url(url)
    assert leaks(str(e.value)) == [] and "api_key_env" in str(e.value)
    with pytest.raises(ValueError, match="without credentials"):
        ChatClient(url, "m", api_key_env=None)
    assert check_base_url("http://127.0.0.1:8000/v1/") == "http://127.0.0.1:8000/v1"
    with pytest.raises(ValueError, match="expected a base_url like"):
        check_base_url("127.0.0.1:8000/v1")


# -- the client against the fake server --------------------------------------------------------------
@pytest.mark.parametrize("status", [401, 500])
def test_error_body_with_the_key_across_the_cut(monkeypatch, caplog, status):
    monkeypatch.setenv(ENV, KEY)
    with FakeChatServer(lambda req, n: ("raw_status", status, echo_body())) as srv, caplog.at_level("DEBUG"):
        c = ChatClient(srv.url, "m", api_key_env=ENV, max_retries=1, backoff_base=0.001, backoff_max=0.001)
        with pytest.raises(APIError) as e:
            c.chat([user_message("q")])
    assert srv.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"
    assert f"HTTP {status}" in str(e.value) and "Bearer ***" in str(e.value)
    assert leaks(str(e.value)) == [] and leaks(caplog.text) == []
    assert len(srv.requests) == (2 if status == 500 else 1)


def test_request_errors_are_reraised_without_headers(monkeypatch):
    # A header value requests refuses (a newline): its InvalidHeader error quotes the value.
    c = ChatClient("http://127.0.0.1:9/v1", "m", api_key_env=None, max_retries=0,
                   headers={"X-Trace": f"id\n{KEY}"})
    with pytest.raises(APIError, match="could not be sent: InvalidHeader") as e:
        c.chat([user_message("q")])
    assert KEY not in str(e.value)  # not a registered key, but never the raw header either
    assert e.value.__cause__ is None and e.value.__context__ is None
    # with the key registered, requests' message is scrubbed piece by piece
    monkeypatch.setenv(ENV, KEY)
    c = ChatClient("http://127.0.0.1:9/v1", "m", api_key_env=ENV, max_retries=0,
                   headers={"X-Echo": f"{KEY}\nx"})
    with pytest.raises(APIError) as e:
        c.chat([user_message("q")])
    assert leaks(str(e.value)) == [] and e.value.__context__ is None


def test_a_reply_that_echoes_the_key_is_masked(monkeypatch, caplog):
    monkeypatch.setenv(ENV, KEY)
    with FakeChatServer(lambda req, n: ("ok", f"Sure! Your header was Bearer {KEY[:40]}", 5, 5)) as srv, \
            caplog.at_level("WARNING"):
        c = ChatClient(srv.url, "m", api_key_env=ENV)
        r = c.chat([user_message("q")])
    assert r.text == "Sure! Your header was Bearer ***"
    assert c.usage.to_dict()["errors"] == {"reply_echoed_key": 1}
    assert "contained (part of) the API key" in caplog.text and leaks(caplog.text) == []


def test_log_records_are_scrubbed_whoever_logs_them(monkeypatch, caplog):
    monkeypatch.setenv(ENV, KEY)
    read_api_key(ENV)  # registers the key
    with caplog.at_level("INFO"):
        logging.getLogger("somebody.else").info("the header was %s", f"Bearer {KEY}")
        try:
            raise RuntimeError(f"boom {KEY[5:30]}")
        except RuntimeError:
            logging.getLogger("somebody.else").exception("failed")
    assert "the header was Bearer ***" in caplog.text and leaks(caplog.text) == []


def test_vqa_and_question_generation_backends_share_the_scrubbing(monkeypatch, caplog):
    """metric.vqa=openai and qa_lm=openai go through the same client: an echoed key in an error body
    and in a reply reaches neither their answers nor their errors."""
    from PIL import Image

    from metrics_adapters.qa.generation import OpenAIChatLM
    from metrics_adapters.qa.vqa import OpenAIVQA, VQAError, VQARequest

    monkeypatch.setenv(ENV, KEY)

    def responder(req, n):
        text = json.dumps(req["messages"][-1]["content"])
        return ("raw_status", 401, echo_body()) if "fail" in text else ("ok", f"yes {KEY}", 1, 1)

    img = Image.new("RGB", (4, 4))
    with FakeChatServer(responder) as srv, caplog.at_level("DEBUG"):
        vqa = OpenAIVQA(srv.url, "m", api_key_env=ENV, max_retries=0)
        out = vqa.answer([VQARequest("is it red?", image=img, image_id="a.png"),
                          VQARequest("please fail", image=img, image_id="b.png")])
        lm = OpenAIChatLM(srv.url, "m", api_key_env=ENV, max_retries=0)
        gen = lm.complete(["write questions", "fail now"])
    assert out[0] == "yes ***" and isinstance(out[1], VQAError) and "HTTP 401" in str(out[1])
    assert gen[0] == "yes ***" and isinstance(gen[1], Exception)
    for text in (*map(str, out), *map(str, gen), caplog.text, json.dumps(vqa.usage()), json.dumps(lm.usage())):
        assert leaks(text) == [], text
    assert vqa.usage()["errors"]["reply_echoed_key"] == 1


# -- end to end through `ts2 score` ---------------------------------------------------------------------
def _score(tmp_path: Path, url: str, *extra: str, share: str = "1.0") -> int:
    from ts2.cli import main

    return main(["score", "dataset=mini", "dataset.n_segs=1", "device=cpu", "num_workers=0", "progress=false",
                 "metric=vlm_judge", "judge_backend@metric.backend=openai", f"metric.backend.base_url={url}",
                 f"metric.backend.api_key_env={ENV}", "metric.backend.max_retries=1", "metric.backend.backoff_base=0.001",
                 "metric.backend.backoff_max=0.001", "metric.max_attempts=1", f"max_failure_share={share}",
                 f"output_dir={tmp_path / 'out'}", f"cache_dir={tmp_path / 'cache'}", *extra])


def _assert_no_key_written(tmp_path: Path, captured) -> list[Path]:
    files = [f for f in tmp_path.rglob("*") if f.is_file()]
    for f in files:
        text = f.read_bytes().decode("latin-1")
        assert leaks(text) == [], f"{f} holds part of the key: {leaks(text)[:3]}"
    assert leaks(captured.err) == [] and leaks(captured.out) == []
    return files


@pytest.fixture
def mini_env(tmp_path, monkeypatch):
    monkeypatch.setenv("TS2_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv(ENV, KEY)
    return tmp_path


@pytest.mark.slow
@pytest.mark.parametrize("status", [401, 500])
def test_ts2_score_with_an_echoing_error_body_writes_no_key(mini_env, capfd, status):
    with FakeChatServer(lambda req, n: ("raw_status", status, echo_body())) as srv:
        rc = _score(mini_env, srv.url)
    cap = capfd.readouterr()
    assert srv.requests and srv.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"
    files = _assert_no_key_written(mini_env, cap)
    answers = (mini_env / "out" / "answers.csv").read_text()
    assert f"HTTP {status}" in answers and "Bearer ***" in answers  # the failure is recorded, masked
    assert any(f.name == "run.json" for f in files) and rc in (0, 1)


@pytest.mark.slow
def test_ts2_score_with_a_reply_echoing_the_key_writes_no_key(mini_env, capfd):
    reply = json.dumps({"score": 7, "reason": f"header Authorization: Bearer {KEY}"})
    with FakeChatServer(lambda req, n: ("ok", reply, 10, 5)) as srv:
        rc = _score(mini_env, srv.url)
    cap = capfd.readouterr()
    assert rc == 0 and srv.requests
    _assert_no_key_written(mini_env, cap)
    answers = (mini_env / "out" / "answers.csv").read_text()
    assert "Bearer ***" in answers


@pytest.mark.slow
def test_ts2_score_refuses_a_newline_key_and_a_key_in_base_url(mini_env, capfd, monkeypatch):
    with FakeChatServer(lambda req, n: ("ok", '{"score": 5, "reason": "ok"}', 1, 1)) as srv:
        monkeypatch.setenv(ENV, KEY[:20] + "\n" + KEY[20:])
        rc = _score(mini_env, srv.url, share="0.5")  # the model cannot load: every image fails
        cap = capfd.readouterr()
        assert rc != 0 and "a newline at character 21" in cap.err and ENV in cap.err
        assert srv.requests == []  # refused before anything was sent
        _assert_no_key_written(mini_env, cap)

        monkeypatch.setenv(ENV, KEY)
        host = srv.url.split("//", 1)[1]
        rc = _score(mini_env, f"http://user:{KEY}@{host}")
        cap = capfd.readouterr()
        assert rc != 0 and "without credentials" in cap.err
        assert srv.requests == []
        _assert_no_key_written(mini_env, cap)


def test_short_placeholder_keys_do_not_garble_the_logs(monkeypatch, caplog):
    from metrics_adapters.api.secrets import registered_secrets

    monkeypatch.setenv(ENV, "EMPTY")  # what vLLM users often export
    assert read_api_key(ENV) == "EMPTY" and "EMPTY" not in registered_secrets()
    with caplog.at_level("INFO"):
        logging.getLogger("somebody.else").info("the queue is EMPTY")
    assert "the queue is EMPTY" in caplog.text
    c = ChatClient("http://127.0.0.1:9/v1", "m", api_key_env=ENV)
    assert c._quote("key EMPTY echoed") == "key *** echoed"  # the client still masks its own key


@pytest.mark.slow
@pytest.mark.parametrize("how", ["typed", "environment"])
def test_a_key_in_a_url_query_never_lands_on_disk(mini_env, capfd, monkeypatch, how):
    """Issue 42: ``?api-key=KEY`` (as Azure and proxies take it), typed or from ``${oc.env:...}``, is
    refused before any request, and no file written (cache, run.json, .hydra/*.yaml, logs) and no
    output holds any piece of it."""
    with FakeChatServer(lambda req, n: ("ok", '{"score": 5, "reason": "ok"}', 1, 1)) as srv:
        url = f"{srv.url}?api-version=2024-06-01&api-key={KEY}"
        if how == "environment":
            monkeypatch.setenv("JUDGE_URL", url)
            url = "${oc.env:JUDGE_URL}"
        rc = _score(mini_env, url)
        cap = capfd.readouterr()
        assert rc != 0 and "without credentials" in cap.err
        assert srv.requests == []
        _assert_no_key_written(mini_env, cap)


@pytest.mark.parametrize("url, masked", [
    ("https://h.azure.com/openai?api-version=1&api-key=SECRETKEY123", "https://h.azure.com/openai?api-version=1&api-key=***"),
    ("http://u:SECRETKEY123@h/v1?token=abc", "http://***@h/v1?token=***"),
    ("https://h/v1?sig=zzz&x=1", "https://h/v1?sig=***&x=1"),
])
def test_credentials_in_urls_are_found_and_masked(url, masked):
    from metrics_adapters.api.secrets import has_url_credentials, mask_url_credentials

    assert has_url_credentials(url) and mask_url_credentials(url) == masked
    with pytest.raises(ValueError, match="without credentials") as e:
        check_base_url(url)
    assert "SECRETKEY123" not in str(e.value) and "zzz" not in str(e.value)
    assert not has_url_credentials("https://h/v1?api-version=2024-06-01&model=gpt")
