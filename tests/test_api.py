"""The shared OpenAI-compatible client against a local fake server (127.0.0.1, random port).

The server injects 429s, 500s, slow answers (client timeouts), malformed bodies and final 4xx;
no test reaches the network.
"""

from __future__ import annotations

import json
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from metrics_adapters.api import APIError, ChatClient, MissingAPIKeyError, user_message

SECRET = "sk-test-DO-NOT-LEAK-4f9a2c"


class FakeChatServer:
    """An OpenAI-style ``/v1/chat/completions`` server in a thread.

    ``responder(request_json, n)`` decides each answer (``n`` counts requests so far) and returns
    one of: ``("ok", text, prompt_tokens, completion_tokens)``, ``("status", code, retry_after)``,
    ``("sleep", seconds, then)`` (answer ``then`` after a delay), ``("raw", body)`` (a 200 with that
    body), ``("raw_status", code, body)``. Every request is recorded (path, headers, JSON).
    """

    def __init__(self, responder):
        self.responder = responder
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # keep test output clean
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                req = json.loads(body)
                with server.lock:
                    server.requests.append({"path": self.path, "headers": dict(self.headers), "json": req})
                    n = len(server.requests)
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                self._counted = True
                try:
                    self._answer(server.responder(req, n))
                finally:
                    self._done()

            def _done(self):
                # A request stops counting before its reply is written: once the client has the
                # reply it may send the next one before this thread gets here again.
                if self._counted:
                    self._counted = False
                    with server.lock:
                        server.in_flight -= 1

            def _answer(self, action):
                kind = action[0]
                if kind == "sleep":
                    time.sleep(action[1])
                    return self._answer(action[2])
                if kind == "ok":
                    _, text, pt, ct = action
                    payload = {"id": "x", "object": "chat.completion", "model": "fake",
                               "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                            "finish_reason": "stop"}]}
                    if pt is not None:
                        payload["usage"] = {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct}
                    return self._send(200, json.dumps(payload).encode())
                if kind == "status":
                    extra = {"Retry-After": str(action[2])} if len(action) > 2 and action[2] is not None else {}
                    return self._send(action[1], b'{"error": {"message": "injected"}}', extra)
                if kind == "raw":
                    return self._send(200, action[1].encode())
                if kind == "raw_status":  # ("raw_status", code, body)
                    return self._send(action[1], action[2].encode())
                raise AssertionError(f"bad action {action!r}")

            def _send(self, code, body, headers=None):
                self._done()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                    pass

        class Server(ThreadingHTTPServer):
            request_queue_size = 64  # the default backlog of 5 would refuse concurrent clients

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def script(*actions):
    """A responder that plays ``actions`` in request order (then repeats the last)."""
    def responder(req, n):
        return actions[min(n, len(actions)) - 1]
    return responder


def fast_client(url, **kw):
    kw = {"api_key_env": None, "timeout": 2.0, "connect_timeout": 2.0, "max_retries": 3, "backoff_base": 0.001,
          "backoff_max": 0.01, **kw}
    return ChatClient(url, "fake-model", **kw)


def test_success_parses_text_and_counts_tokens_and_cost():
    with FakeChatServer(script(("ok", "hello", 12, 3))) as srv:
        c = fast_client(srv.url, price_per_1k_prompt=0.5, price_per_1k_completion=2.0)
        r = c.chat([user_message("hi")], max_tokens=5)
        r2 = c.chat([user_message("again")])
    assert (r.text, r.prompt_tokens, r.completion_tokens, r.attempts) == ("hello", 12, 3, 1)
    assert srv.requests[0]["path"] == "/v1/chat/completions"
    body = srv.requests[0]["json"]
    assert body["model"] == "fake-model" and body["max_tokens"] == 5
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    u = c.usage.to_dict()
    assert (u["calls"], u["requests"], u["succeeded"], u["prompt_tokens"], u["completion_tokens"]) == (2, 2, 2, 24, 6)
    # 24 prompt tokens at 0.5 per 1k + 6 completion tokens at 2.0 per 1k
    assert u["estimated_cost"] == pytest.approx(24 / 1000 * 0.5 + 6 / 1000 * 2.0)
    assert r2.text == "hello"


def test_retries_429_and_500_then_succeeds():
    with FakeChatServer(script(("status", 429, None), ("status", 500), ("status", 503), ("ok", "fine", 5, 1))) as srv:
        c = fast_client(srv.url)
        r = c.chat([user_message("q")])
    assert r.text == "fine" and r.attempts == 4
    u = c.usage.to_dict()
    assert u["retries"] == 3 and u["requests"] == 4 and u["failed"] == 0
    assert u["errors"] == {"429": 1, "500": 1, "503": 1}
    assert len(srv.requests) == 4


def test_timeout_is_retried():
    slow = ("sleep", 0.6, ("ok", "late", 1, 1))
    with FakeChatServer(script(slow, ("ok", "quick", 2, 1))) as srv:
        c = fast_client(srv.url, timeout=0.2)
        r = c.chat([user_message("q")])
    assert r.text == "quick" and r.attempts == 2
    assert c.usage.to_dict()["errors"] == {"timeout": 1}


@pytest.mark.parametrize("body", ["not json at all", '{"choices": []}', '{"no_choices": 1}',
                                  '{"choices": [{"message": {"content": null}}]}'])
def test_malformed_bodies_are_retried(body):
    with FakeChatServer(script(("raw", body), ("ok", "good", 1, 1))) as srv:
        c = fast_client(srv.url)
        r = c.chat([user_message("q")])
    assert r.text == "good" and r.attempts == 2
    assert c.usage.to_dict()["errors"] == {"malformed": 1}


def test_final_4xx_fails_at_once_and_exhausted_retries_fail():
    with FakeChatServer(script(("status", 400))) as srv:
        c = fast_client(srv.url)
        with pytest.raises(APIError) as e:
            c.chat([user_message("q")])
    assert e.value.status == 400 and e.value.attempts == 1 and not e.value.retryable
    assert len(srv.requests) == 1
    with FakeChatServer(script(("status", 500))) as srv:
        c = fast_client(srv.url, max_retries=2)
        with pytest.raises(APIError, match="after 3 attempts") as e:
            c.chat([user_message("q")])
    assert e.value.status == 500 and e.value.retryable and len(srv.requests) == 3
    assert c.usage.to_dict()["failed"] == 1


def test_backoff_is_exponential_with_jitter_and_honours_retry_after():
    waits: list[float] = []
    with FakeChatServer(script(("status", 500), ("status", 500), ("status", 500), ("ok", "x", 1, 1))) as srv:
        c = fast_client(srv.url, backoff_base=0.5, backoff_max=1.5, sleep=waits.append, rng=random.Random(3))
        c.chat([user_message("q")])
    # retry k waits in [d/2, d], d = min(1.5, 0.5 * 2**k): [0.25, 0.5], [0.5, 1.0], [0.75, 1.5]
    assert len(waits) == 3
    for w, d in zip(waits, (0.5, 1.0, 1.5), strict=True):
        assert d / 2 <= w <= d
    assert len(set(waits)) == 3  # jittered, not a fixed schedule
    waits.clear()
    with FakeChatServer(script(("status", 429, 0.7), ("status", 429, 99), ("ok", "x", 1, 1))) as srv:
        c = fast_client(srv.url, backoff_max=2.0, sleep=waits.append)
        c.chat([user_message("q")])
    assert waits == [0.7, 2.0]  # Retry-After seconds, capped at backoff_max


def test_concurrency_limit_and_order():
    def responder(req, n):
        time.sleep(0.05)
        return ("ok", "echo:" + req["messages"][0]["content"], 1, 1)

    with FakeChatServer(responder) as srv:
        c = fast_client(srv.url, max_concurrency=2)
        out = c.chat_many([[user_message(f"m{i}")] for i in range(8)])
    assert [o.text for o in out] == [f"echo:m{i}" for i in range(8)]
    assert srv.max_in_flight == 2


def test_chat_many_keeps_failures_apart():
    def responder(req, n):
        return ("status", 400) if req["messages"][0]["content"] == "bad" else ("ok", "good", 1, 1)

    with FakeChatServer(responder) as srv:
        out = fast_client(srv.url, max_concurrency=3).chat_many([[user_message(t)] for t in ("a", "bad", "b")])
    assert [type(o).__name__ for o in out] == ["ChatResponse", "APIError", "ChatResponse"]


def test_api_key_from_env_only_in_the_header(monkeypatch, caplog):
    monkeypatch.setenv("TS2_FAKE_KEY", SECRET)
    with FakeChatServer(script(("status", 500), ("status", 401))) as srv:
        c = ChatClient(srv.url, "m", api_key_env="TS2_FAKE_KEY", max_retries=2, backoff_base=0.001, backoff_max=0.001)
        with caplog.at_level("DEBUG"), pytest.raises(APIError) as e:
            c.chat([user_message("q")])
    assert srv.requests[0]["headers"]["Authorization"] == f"Bearer {SECRET}"
    for text in (str(e.value), repr(c), json.dumps(c.settings()), json.dumps(c.usage.to_dict()), caplog.text):
        assert SECRET not in text
    monkeypatch.delenv("TS2_FAKE_KEY")
    with pytest.raises(MissingAPIKeyError, match="TS2_FAKE_KEY"):
        ChatClient("http://127.0.0.1:9/v1", "m", api_key_env="TS2_FAKE_KEY")
    with pytest.raises(ValueError, match="api_key_env"):
        ChatClient("http://127.0.0.1:9/v1", "m", api_key_env=None, headers={"Authorization": "Bearer x"})


def test_error_bodies_are_redacted(monkeypatch):
    monkeypatch.setenv("TS2_FAKE_KEY", SECRET)

    def responder(req, n):  # a server that echoes the key back in its error body
        return ("raw", f"oops {SECRET}")

    with FakeChatServer(responder) as srv:
        c = ChatClient(srv.url, "m", api_key_env="TS2_FAKE_KEY", max_retries=0)
        with pytest.raises(APIError) as e:
            c.chat([user_message("q")])
    assert SECRET not in str(e.value) and "***" in str(e.value)


def test_images_are_sent_as_png_data_urls():
    from PIL import Image

    msg = user_message("what?", images=[Image.new("RGB", (4, 4), (255, 0, 0))])
    assert msg["content"][0] == {"type": "text", "text": "what?"}
    url = msg["content"][1]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    import base64
    import io

    img = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    assert img.getpixel((0, 0)) == (255, 0, 0)


@pytest.mark.parametrize("concurrency", [1, 8])
def test_vqa_backend_keeps_the_server_busy(concurrency):
    """OpenAIVQA sends ``max_concurrency`` requests at once even when ``batch_size`` is smaller, so a
    serving engine sees a full queue (the requests/s it reaches: benchmarks/api_concurrency.py)."""
    from PIL import Image

    from metrics_adapters.qa.vqa import OpenAIVQA, VQARequest

    def responder(req, n):
        time.sleep(0.05)
        return ("ok", "echo:" + req["messages"][-1]["content"][0]["text"], 1, 1)

    img = Image.new("RGB", (8, 8), (0, 0, 255))
    reqs = [VQARequest(f"q{i}", image=img, image_id=f"{i}.png") for i in range(24)]
    with FakeChatServer(responder) as srv:
        vqa = OpenAIVQA(srv.url, "m", api_key_env=None, max_concurrency=concurrency, batch_size=4,
                        template="{question}")
        out = vqa.answer(reqs)
    assert out == [f"echo:q{i}" for i in range(24)]
    assert srv.max_in_flight == concurrency and len(srv.requests) == 24
    assert vqa.usage()["requests"] == 24
